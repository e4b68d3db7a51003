// Reading, publishing and unlinking entry files. Reads take no lock (I3), publish is staging file +
// rename (I1, I2), removal only unlinks (I4). Every call here is a short, local syscall sequence (no
// waiting on other processes), so callers may run it inline; scans live in Trim.swift.

import Foundation
import Synchronization

/// What a lookup asks for: the entry's identity, the exact key and codec bytes it must hold.
struct EntryExpectation: Sendable {
    let identity: EntryIdentity
    let keyBytes: [UInt8]
    let codecBytes: [UInt8]
    let keyDigest: SHA256Digest

    /// The size of the entry's header (fixed part, key and codec identifier): its file size minus the payload.
    var headerSize: Int { EntryFormat.fixedHeaderSize + keyBytes.count + codecBytes.count }

    init(key: CacheKey, codecIdentifier: String) {
        let keyBytes = key.canonicalBytes
        self.keyBytes = keyBytes
        self.codecBytes = Array(codecIdentifier.utf8)
        self.identity = EntryIdentity(key: key, codecIdentifier: codecIdentifier)
        self.keyDigest = key.stableDigest
    }
}

/// Which publish of an entry a file is: the header fields every publish sets anew. The created time is
/// the writer's clock in nanoseconds, so two publishes of one entry share all three only if they were made
/// in the same nanosecond with the same payload length and CRC32C, that is with the same bytes (and then
/// either is the right value).
struct EntryVersion: Sendable, Equatable {
    let createdAtNanoseconds: Int64
    let payloadByteCount: Int64
    let payloadChecksum: UInt32

    init(_ header: EntryFormat.Header) {
        createdAtNanoseconds = header.createdAtNanoseconds
        payloadByteCount = header.payloadByteCount
        payloadChecksum = header.payloadChecksum
    }
}

/// An entry read from storage.
struct StoredEntry: Sendable {
    let header: EntryFormat.Header
    /// The payload; backed by a private mapping (large) or a heap buffer (small), startIndex 0.
    let payload: Data
    /// Allocated bytes of the file (st_blocks × 512).
    let allocatedBytes: Int64
    /// The file's mtime: the LRU signal (I11).
    let modifiedNanoseconds: Int64
}

/// Why a read produced no entry.
enum EntryReadFailure: Error, Sendable {
    case missing
    case expired(allocatedBytes: Int64)
    case corrupt(EntryFormat.Corruption, allocatedBytes: Int64)
    case system(SystemCallError)
}

/// What a publish did, for usage accounting.
struct PublishOutcome: Sendable {
    let header: EntryFormat.Header
    let allocatedBytes: Int64
    let replacedAllocatedBytes: Int64
    let replacedPayloadBytes: Int64
    /// The mtime the publish gave the entry (its first use, I11).
    let modifiedNanoseconds: Int64
}

/// How `EntryFile.remove` learns the payload bytes it takes off the payload counter (I9).
enum PayloadCharge: Sendable {
    /// Known from a header read just before (a scan, a namespace removal).
    case known(Int64)
    /// The file's size minus this header size: the entry's key and codec are known, so its header size is.
    case headerSize(Int)
    /// Unknown: read the entry's fixed header first.
    case readHeader
}

/// Entry-file operations relative to one storage root.
struct EntryFile {
    let directory: Directory

    // MARK: Read (I3)

    /// Reads and fully validates the entry at `path`: header, identity, expiry and payload checksum.
    /// Large payloads are mapped privately (copy-on-write), small ones read into a heap buffer.
    func read(_ path: EntryPath, expecting expectation: EntryExpectation, now: Int64, useMapping: Bool)
        -> Result<StoredEntry, EntryReadFailure>
    {
        let fd: Int32
        let status: FileStatus
        switch openEntry(path.relative) {
        case .success(let opened): (fd, status) = opened
        case .failure(let failure): return .failure(failure)
        }
        defer { Syscall.close(fd) }
        guard status.size >= Int64(EntryFormat.fixedHeaderSize), status.size <= Int64(Int.max / 2) else {
            return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
        }
        let size = Int(status.size)
        if useMapping && size >= Policy.mapThreshold {
            return readMapped(fd, status: status, size: size, expecting: expectation, now: now)
        }
        return readBuffered(fd, status: status, size: size, expecting: expectation, now: now)
    }

    private func readBuffered(
        _ fd: Int32, status: FileStatus, size: Int, expecting expectation: EntryExpectation, now: Int64
    ) -> Result<StoredEntry, EntryReadFailure> {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        var handedOff = false
        defer { if !handedOff { buffer.deallocate() } }
        switch Syscall.read(fd, into: UnsafeMutableRawBufferPointer(start: buffer, count: size), at: 0) {
        case .success(let count) where count == size: break
        case .success:  // shorter than fstat said: a writer broke I1, or the file was replaced; a miss.
            return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
        case .failure(let error): return .failure(.system(error))
        }
        let bytes = UnsafeRawBufferPointer(start: buffer, count: size)
        let header: EntryFormat.Header
        switch validate(bytes, status: status, expecting: expectation, now: now, verifyPayload: true) {
        case .success(let value): header = value
        case .failure(let failure): return .failure(failure)
        }
        let baseBits = UInt(bitPattern: buffer)
        let payload = Data(
            bytesNoCopy: buffer + header.payloadOffset, count: Int(header.payloadByteCount),
            deallocator: .custom { _, _ in
                // Captures only an integer: safe whichever thread frees the Data.
                UnsafeMutableRawPointer(bitPattern: baseBits)?.deallocate()
            })
        handedOff = true
        return .success(
            StoredEntry(
                header: header, payload: payload, allocatedBytes: status.allocatedBytes,
                modifiedNanoseconds: status.modifiedNanoseconds))
    }

    private func readMapped(
        _ fd: Int32, status: FileStatus, size: Int, expecting expectation: EntryExpectation, now: Int64
    ) -> Result<StoredEntry, EntryReadFailure> {
        let base: UnsafeMutableRawPointer
        switch Syscall.mapPrivate(fd, length: size) {
        case .success(let pointer): base = pointer
        case .failure(let error): return .failure(.system(error))
        }
        var handedOff = false
        defer { if !handedOff { Syscall.unmap(base, length: size) } }
        let bytes = UnsafeRawBufferPointer(start: base, count: size)
        let verified = VerifiedInodes.shared.contains(status)
        let header: EntryFormat.Header
        switch validate(bytes, status: status, expecting: expectation, now: now, verifyPayload: !verified) {
        case .success(let value): header = value
        case .failure(let failure): return .failure(failure)
        }
        if !verified { VerifiedInodes.shared.insert(status, now: now) }
        let baseBits = UInt(bitPattern: base)
        let length = size
        let payload = Data(
            bytesNoCopy: base + header.payloadOffset, count: Int(header.payloadByteCount),
            deallocator: .custom { _, _ in
                // Captures only integers: safe whichever thread frees the Data. The mapping is
                // MAP_PRIVATE and writable, so a caller mutating the bytes gets copy-on-write pages.
                if let pointer = UnsafeMutableRawPointer(bitPattern: baseBits) {
                    Syscall.unmap(pointer, length: length)
                }
            })
        handedOff = true
        return .success(
            StoredEntry(
                header: header, payload: payload, allocatedBytes: status.allocatedBytes,
                modifiedNanoseconds: status.modifiedNanoseconds))
    }

    private func validate(
        _ bytes: UnsafeRawBufferPointer, status: FileStatus, expecting expectation: EntryExpectation, now: Int64,
        verifyPayload: Bool
    ) -> Result<EntryFormat.Header, EntryReadFailure> {
        let allocated = status.allocatedBytes
        let header: EntryFormat.Header
        switch EntryFormat.parseFixedHeader(bytes, fileSize: status.size) {
        case .success(let value): header = value
        case .failure(let corruption): return .failure(.corrupt(corruption, allocatedBytes: allocated))
        }
        if case .failure(let corruption) = EntryFormat.validateHeaderChecksum(header, bytes: bytes) {
            return .failure(.corrupt(corruption, allocatedBytes: allocated))
        }
        if case .failure(let corruption) = EntryFormat.validateIdentity(
            header, bytes: bytes, expectedIdentity: expectation.identity.digest, keyBytes: expectation.keyBytes,
            codecBytes: expectation.codecBytes)
        {
            return .failure(.corrupt(corruption, allocatedBytes: allocated))
        }
        if header.isExpired(atNanoseconds: now) { return .failure(.expired(allocatedBytes: allocated)) }
        if verifyPayload {
            let payload = UnsafeRawBufferPointer(
                rebasing: bytes[header.payloadOffset..<(header.payloadOffset + Int(header.payloadByteCount))])
            if CRC32C.checksum(payload) != header.payloadChecksum {
                return .failure(.corrupt(.payloadChecksumMismatch, allocatedBytes: allocated))
            }
        }
        return .success(header)
    }

    /// Reads only the header (fixed part, key and codec bytes) and checks its checksum; the payload is
    /// not read. For `metadata`, `contains`, listing and namespace removal.
    func readHeader(_ relative: String) -> Result<(EntryFormat.Header, [UInt8], FileStatus), EntryReadFailure> {
        let fd: Int32
        let status: FileStatus
        switch openEntry(relative) {
        case .success(let opened): (fd, status) = opened
        case .failure(let failure): return .failure(failure)
        }
        defer { Syscall.close(fd) }
        var buffer = [UInt8](repeating: 0, count: min(Int(max(status.size, 0)), EntryFormat.typicalHeaderReadSize))
        guard buffer.count >= EntryFormat.fixedHeaderSize else {
            return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
        }
        if case .failure(let error) = buffer.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }) {
            return .failure(.system(error))
        }
        let header: EntryFormat.Header
        switch buffer.withUnsafeBytes({ EntryFormat.parseFixedHeader($0, fileSize: status.size) }) {
        case .success(let value): header = value
        case .failure(let corruption): return .failure(.corrupt(corruption, allocatedBytes: status.allocatedBytes))
        }
        if buffer.count < header.payloadOffset {
            buffer = [UInt8](repeating: 0, count: header.payloadOffset)
            if case .failure(let error) = buffer.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }) {
                return .failure(.system(error))
            }
        }
        let checked = buffer.withUnsafeBytes { EntryFormat.validateHeaderChecksum(header, bytes: $0) }
        if case .failure(let corruption) = checked {
            return .failure(.corrupt(corruption, allocatedBytes: status.allocatedBytes))
        }
        return .success((header, Array(buffer[0..<header.payloadOffset]), status))
    }

    /// Which publish the entry file at `path` is, from its fixed header (one open, fstat and 128-byte
    /// read); nil when there is no file or it is not a sound entry. For revalidating memory items (I10).
    func publishedVersion(_ path: EntryPath) -> EntryVersion? {
        guard case .success(let (fd, status)) = openEntry(path.relative) else { return nil }
        defer { Syscall.close(fd) }
        var prefix = [UInt8](repeating: 0, count: EntryFormat.fixedHeaderSize)
        guard case .success(let count) = prefix.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }),
            count == prefix.count,
            case .success(let header) = prefix.withUnsafeBytes({
                EntryFormat.parseFixedHeader($0, fileSize: status.size)
            })
        else { return nil }
        return EntryVersion(header)
    }

    /// Opens an entry file for reading: its descriptor and status, or why it is not a readable entry
    /// (missing; a planted symlink, never followed; not a regular file). The caller closes the descriptor.
    private func openEntry(_ relative: String) -> Result<(Int32, FileStatus), EntryReadFailure> {
        let fd: Int32
        switch Syscall.open(relative, in: directory.descriptor, flags: [.readOnly]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .failure(.missing)
        case .failure(let error) where error.errno == .symlinkLoop:
            return .failure(.corrupt(.badMagic, allocatedBytes: 0))
        case .failure(let error): return .failure(.system(error))
        }
        switch Syscall.status(of: fd) {
        case .success(let status) where status.isRegularFile: return .success((fd, status))
        case .success:
            Syscall.close(fd)
            return .failure(.corrupt(.badMagic, allocatedBytes: 0))
        case .failure(let error):
            Syscall.close(fd)
            return .failure(.system(error))
        }
    }

    // MARK: Publish (I1, I2)

    /// Writes `payload` to a staging file and renames it over `path`: the commit point.
    ///
    /// With `lock` (the key's held lock file), the lock file itself is the staging file: it is filled
    /// and renamed into place, so a generation creates one file, not two (I2, I6). Waiters blocked on it
    /// wake to find the lock path gone and read the entry. On failure the lock file is left to its holder.
    func publish(
        _ payload: Data, to path: EntryPath, expectation: EntryExpectation, codecIdentifier: String,
        createdAt: Int64, expiresAt: Int64, lock: HeldLock? = nil, knownAbsent: Bool = false
    ) -> Result<PublishOutcome, SystemCallError> {
        let checksum = payload.withUnsafeBytes { CRC32C.checksum($0) }
        let headerBytes = EntryFormat.encodeHeader(
            keyBytes: expectation.keyBytes, codecIdentifier: codecIdentifier,
            entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest,
            payloadByteCount: payload.count, payloadChecksum: checksum, createdAtNanoseconds: createdAt,
            expiresAtNanoseconds: expiresAt)
        let root = directory.descriptor
        let staging: String
        let fd: Int32
        var result: Result<Void, SystemCallError> = .success(())
        if let lock {
            staging = lock.path.relative
            fd = lock.descriptor
            // A lock file left by a killed holder may hold a partial write. It was never published
            // (I1 does not cover it) and nobody maps lock files, so emptying it is safe.
            if lock.sizeWhenLocked > 0 { result = Syscall.truncate(fd, length: 0) }
        } else {
            staging = directory.newStagingPath()
            var opened = Syscall.open(
                staging, in: root, flags: [.writeOnly, .create, .exclusive], mode: directory.fileMode)
            if case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced {
                // tmp/ was removed, or replaced by a symlink (never followed): make it a real folder again (I13).
                if case .failure(let repairError) = directory.repairStagingFolder() { return .failure(repairError) }
                opened = Syscall.open(
                    staging, in: root, flags: [.writeOnly, .create, .exclusive], mode: directory.fileMode)
            }
            switch opened {
            case .success(let value): fd = value
            case .failure(let error): return .failure(error)
            }
            result = Syscall.setMode(fd, directory.fileMode)
        }
        if case .success = result {
            result = headerBytes.withUnsafeBytes { header in
                payload.withUnsafeBytes { Syscall.write(fd, header, $0) }
            }
        }
        // The entry's first use, to the nanosecond (I11): the kernel's own mtime comes from a coarse clock, so
        // entries published within one tick would tie in trim's order, and a hit's touch could land before
        // it. Best effort: a lock file another user made (a takeover in group-shared mode) keeps the
        // kernel's time.
        let publishedAt = Syscall.realtimeNanoseconds
        if case .success = result { _ = Syscall.setTimes(fd, nanoseconds: publishedAt) }
        if lock == nil { Syscall.close(fd) }
        if case .failure(let error) = result {
            if lock == nil {
                _ = Syscall.unlink(staging, in: root)  // no partial file ever becomes visible
            } else {
                _ = Syscall.truncate(fd, length: 0)  // give the space back; the holder unlinks it
            }
            return .failure(error)
        }
        // A coordinated generation (holding the lock) just saw no entry; others may replace one. The entry
        // it replaces has the same key and codec, so the same header size.
        var replaced: Int64 = 0
        var replacedPayload: Int64 = 0
        if !knownAbsent, case .success(let old) = Syscall.status(of: path.relative, in: root), old.isRegularFile {
            replaced = old.allocatedBytes
            replacedPayload = Self.payloadBytes(fileSize: old.size, headerSize: headerBytes.count)
        }
        var renamed = Syscall.rename(staging, in: root, to: path.relative, in: root)
        if case .failure(let error) = renamed, error.errno.isFolderMissingOrReplaced {
            // The fan-out folder is missing, or a symlink or file (never followed): make it a real one (I13).
            if case .failure(let mkdirError) = directory.ensureFanOut(path.fanOut) {
                if lock == nil { _ = Syscall.unlink(staging, in: root) }
                return .failure(mkdirError)
            }
            renamed = Syscall.rename(staging, in: root, to: path.relative, in: root)
        }
        if case .failure(let error) = renamed {
            if lock == nil { _ = Syscall.unlink(staging, in: root) }
            return .failure(error)
        }
        // The charges (I9): the payload bytes, which the budget counts, and the file size in 4 KiB blocks
        // (what ext4 allocates; trim recounts st_blocks).
        let allocated = roundUpToBlock(Int64(headerBytes.count + payload.count))
        directory.state.adjustUsage(by: allocated - replaced)
        directory.state.adjustPayloadBytes(by: Int64(payload.count) - replacedPayload)
        directory.state.notePublish(atNanoseconds: publishedAt)
        let header = EntryFormat.Header(
            keyByteCount: expectation.keyBytes.count, codecByteCount: expectation.codecBytes.count,
            payloadByteCount: Int64(payload.count), createdAtNanoseconds: createdAt, expiresAtNanoseconds: expiresAt,
            payloadChecksum: checksum, entryIdentity: expectation.identity.digest,
            keyStableDigest: expectation.keyDigest)
        return .success(
            PublishOutcome(
                header: header, allocatedBytes: allocated, replacedAllocatedBytes: replaced,
                replacedPayloadBytes: replacedPayload, modifiedNanoseconds: publishedAt))
    }

    /// The payload bytes a file of `fileSize` bytes with a header of `headerSize` bytes holds. A file too
    /// short for its header is not an entry and is charged its whole size, as a scan charges it.
    static func payloadBytes(fileSize: Int64, headerSize: Int) -> Int64 {
        fileSize >= Int64(headerSize) ? fileSize - Int64(headerSize) : max(0, fileSize)
    }

    /// The payload bytes the payload counter holds for the file at `relative` (status `status`): its
    /// header's payload count when the fixed header is sound, else its whole size (debris in `entries/`
    /// counts against the budget until trim removes it). One open and one 128-byte read.
    func chargedPayloadBytes(_ relative: String, status: FileStatus) -> Int64 {
        guard case .success(let fd) = Syscall.open(relative, in: directory.descriptor, flags: [.readOnly]) else {
            return max(0, status.size)
        }
        defer { Syscall.close(fd) }
        var prefix = [UInt8](repeating: 0, count: EntryFormat.fixedHeaderSize)
        guard case .success(let count) = prefix.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }),
            count == prefix.count,
            case .success(let header) = prefix.withUnsafeBytes({
                EntryFormat.parseFixedHeader($0, fileSize: status.size)
            })
        else { return max(0, status.size) }
        return header.payloadByteCount
    }

    /// The bytes an entry with this payload will be charged: its file size rounded up to 4 KiB blocks.
    static func chargedBytes(payloadByteCount: Int, keyByteCount: Int, codecByteCount: Int) -> Int64 {
        roundUpToBlock(Int64(EntryFormat.fixedHeaderSize + keyByteCount + codecByteCount + payloadByteCount))
    }

    // MARK: Remove (I4)

    /// Unlinks `relative` and subtracts its allocated and payload bytes from the counters (I9). A missing
    /// file is fine.
    @discardableResult
    func remove(_ relative: String, payload charge: PayloadCharge) -> Result<Bool, SystemCallError> {
        let root = directory.descriptor
        let allocated: Int64
        var payload: Int64 = 0
        switch Syscall.status(of: relative, in: root) {
        case .success(let status):
            allocated = status.isRegularFile ? status.allocatedBytes : 0
            if status.isRegularFile {
                switch charge {
                case .known(let bytes): payload = bytes
                case .headerSize(let size): payload = Self.payloadBytes(fileSize: status.size, headerSize: size)
                case .readHeader: payload = chargedPayloadBytes(relative, status: status)
                }
            }
        case .failure(let error) where error.errno == .noSuchFile: return .success(false)
        case .failure(let error): return .failure(error)
        }
        switch Syscall.unlink(relative, in: root) {
        case .success:
            directory.state.adjustUsage(by: -allocated)
            directory.state.adjustPayloadBytes(by: -payload)
            return .success(true)
        case .failure(let error) where error.errno == .noSuchFile: return .success(false)
        case .failure(let error): return .failure(error)
        }
    }

    /// `nanoseconds`, or the next value after it that carries the touch mark (`Policy.touchMark`).
    static func marked(_ nanoseconds: Int64) -> Int64 {
        let modulus = Policy.touchMark.modulus
        let marked = nanoseconds - nanoseconds % modulus + Policy.touchMark.remainder
        return marked >= nanoseconds ? marked : marked + modulus
    }

    /// Whether an mtime was set by a cache touch (its nanoseconds carry the touch mark).
    static func isTouchMark(_ nanoseconds: Int64) -> Bool {
        nanoseconds % Policy.touchMark.modulus == Policy.touchMark.remainder
    }

    /// Whether a hit on an entry last used at `lastUse` touches it (I11): when anything was published
    /// after that use (or trim would take it for older than what was published since), when the use is
    /// at least the touch interval old, or when it lies that far in the future (a clock that jumped back).
    /// Otherwise nothing is written: a read-only workload does not write.
    static func shouldTouch(lastUse: Int64, now: Int64, lastPublish: Int64) -> Bool {
        lastPublish > lastUse || now - lastUse >= Policy.touchInterval || lastUse - now >= Policy.touchInterval
    }

    /// Marks an entry used (I11) if `shouldTouch` says so, and returns its new last use (nil when it was
    /// not touched). The mtime becomes now, and at least one nanosecond after the last publish, so the
    /// entry is newer than everything published before the hit; a file of another user (group-shared
    /// mode) only allows the kernel's now, exact to within a clock tick.
    @discardableResult
    func touchIfStale(_ path: EntryPath, lastUse: Int64, now: Int64) -> Int64? {
        // A last publish far ahead of now was left by a clock that jumped back: it says nothing about order.
        let recorded = directory.state.lastPublishNanoseconds
        let lastPublish = recorded - now >= Policy.touchInterval ? 0 : recorded
        guard Self.shouldTouch(lastUse: lastUse, now: now, lastPublish: lastPublish) else { return nil }
        let target = Self.marked(max(now, lastPublish &+ 1))
        // Best effort: a failed touch only makes LRU order a little less exact.
        switch Syscall.setTimes(path.relative, in: directory.descriptor, nanoseconds: target) {
        case .success:
            return target
        case .failure(let error) where error.errno == .operationNotPermitted:
            _ = Syscall.touch(path.relative, in: directory.descriptor)
            return now
        case .failure:
            return nil
        }
    }
}

private func roundUpToBlock(_ size: Int64) -> Int64 { (size + 4095) / 4096 * 4096 }

/// The (inode, ctime, size) of mapped files whose payload checksum this process already verified.
/// Any write to a file changes its ctime, so a match proves the bytes are the verified ones; only ctimes
/// older than `Policy.verifiedCtimeMinimumAge` are remembered (coarse timestamps, see Policy).
///
/// A touch (I11) changes the ctime too, without changing a byte, and touches follow publishes: were every
/// changed ctime a new file version, a large entry touched after each write somewhere in the directory
/// would have its payload checksummed on every hit. So a ctime that moved on since the verification still
/// counts as the verified version when the file's last change was a cache touch: its mtime carries the
/// touch mark (`Policy.touchMark`) and differs from its ctime, which a write never leaves (a write sets
/// both to the kernel's one "now"; a touch sets an explicit mtime). The record keeps the verified ctime,
/// so a write after the touch, even within one coarse clock tick, is caught again. What this cannot see,
/// like any check of metadata, is a foreign process rewriting an entry in place (which I1 rules out for
/// every conforming writer) and a cache touch after it.
final class VerifiedInodes: Sendable {
    static let shared = VerifiedInodes()

    private struct Identity: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    private struct Seen: Equatable {
        let changed: Int64
        let size: Int64
    }

    private let table = Mutex<[Identity: Seen]>([:])

    func contains(_ status: FileStatus) -> Bool {
        guard let seen = table.withLock({ $0[Identity(device: status.device, inode: status.inode)] }),
            seen.size == status.size
        else { return false }
        if seen.changed == status.changedNanoseconds { return true }
        return status.changedNanoseconds > seen.changed && EntryFile.isTouchMark(status.modifiedNanoseconds)
            && status.modifiedNanoseconds != status.changedNanoseconds
    }

    func insert(_ status: FileStatus, now: Int64) {
        guard now - status.changedNanoseconds >= Policy.verifiedCtimeMinimumAge else { return }
        table.withLock { table in
            if table.count >= Policy.verifiedInodeCapacity { table.removeAll(keepingCapacity: true) }
            table[Identity(device: status.device, inode: status.inode)] = Seen(
                changed: status.changedNanoseconds, size: status.size)
        }
    }
}
