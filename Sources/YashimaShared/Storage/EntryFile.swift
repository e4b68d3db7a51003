// Entry files of one storage root, and reading them (I3): no lock; accepted only once the header, key,
// codec, expiry and payload checksum check out (skipped for an inode already verified: VerifiedInodes);
// anything else is a miss. Read into memory of the cache's own, never mapped: nothing handed to a caller
// depends on the file staying intact (a file truncated under a reader is a short read, a miss). Also here:
// VerifiedInodes, the files this process checksummed already.

import Foundation
import Synchronization

/// What a lookup asks for: the entry's identity, the exact key and codec bytes it must hold.
///
/// A class (immutable, so `Sendable`): the expectation cache hands one out per lookup, and one retain is
/// cheaper than copying its arrays, digests and path strings (several retains and releases per hit).
final class EntryExpectation: Sendable {
    let identity: EntryIdentity
    let keyBytes: [UInt8]
    let codecBytes: [UInt8]
    let keyDigest: SHA256Digest
    /// The entry file's path relative to any root (a function of the identity alone), made once here so a
    /// lookup does not format the identity's hex again.
    let path: EntryPath
    /// The key's epoch slots in the state file (I10), made once here (a CRC32C of the namespace).
    let slots: SharedState.Slots

    /// The size of the entry's header (fixed part, key and codec identifier): its file size minus the payload.
    var headerSize: Int { EntryFormat.fixedHeaderSize + keyBytes.count + codecBytes.count }

    init(key: CacheKey, codecIdentifier: String) {
        // The key is encoded once: the identity and the key's digest are both hashes over these bytes.
        let keyBytes = key.canonicalBytes
        self.keyBytes = keyBytes
        self.codecBytes = Array(codecIdentifier.utf8)
        (self.identity, self.keyDigest) = keyBytes.withUnsafeBytes {
            (EntryIdentity(canonicalKey: $0, codecIdentifier: codecIdentifier), SHA256.hash($0))
        }
        self.path = Directory.entryPath(for: identity)
        self.slots = SharedState.slots(namespace: key.namespace, keyDigest: keyDigest)
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

    init(createdAtNanoseconds: Int64, payloadByteCount: Int64, payloadChecksum: UInt32) {
        self.createdAtNanoseconds = createdAtNanoseconds
        self.payloadByteCount = payloadByteCount
        self.payloadChecksum = payloadChecksum
    }

    init(_ header: EntryFormat.Header) {
        createdAtNanoseconds = header.createdAtNanoseconds
        payloadByteCount = header.payloadByteCount
        payloadChecksum = header.payloadChecksum
    }
}

/// An entry read from storage.
struct StoredEntry: Sendable {
    let header: EntryFormat.Header
    /// The payload, in a heap buffer of its own (startIndex 0): never a mapping of the file.
    let payload: Data
    /// Allocated bytes of the file (st_blocks × 512).
    let allocatedBytes: Int64
    /// The file's mtime, the LRU signal (I11), after the read's touch when it touched.
    let lastUse: Int64
}

/// Why a read produced no entry.
enum EntryReadFailure: Error, Sendable {
    case missing
    case expired(allocatedBytes: Int64)
    case corrupt(EntryFormat.Corruption, allocatedBytes: Int64)
    case system(SystemCallError)
    /// The file is larger than the reader's limit: nothing was read (a lookup on its caller's executor
    /// leaves large reads to the cooperative pool, Engine/Lookup.swift).
    case overLimit
}

/// Entry-file operations relative to one storage root.
struct EntryFile {
    let directory: Directory

    // MARK: Read (I3)

    /// Reads and fully validates the entry at `path`: header, identity, expiry and payload checksum.
    /// With `limit`, a file larger than `limit` bytes is not read (`.overLimit`). `opened` is set to the
    /// status of the file read, when one was opened (what a remover that judged it removes, `JudgedFile`).
    ///
    /// Read with `pread(2)` into a buffer of its own whatever its size: on this kind of machine twice as
    /// fast as a mapping copied out (1 MiB: 41-43 µs against 78-85 µs), and a file someone truncates
    /// under the read makes a short read (a miss), where a mapping handed out would kill the process
    /// with SIGBUS at its next access.
    ///
    /// A read is a use: a sound entry is touched (I11, `touchIfStale`) through the descriptor it was read
    /// from, before that is closed, so the touch is one `futimens` of the very file read, with no path
    /// walked again.
    func read(
        _ path: EntryPath, expecting expectation: EntryExpectation, now: Int64, limit: Int? = nil,
        opened: inout FileStatus?
    ) -> Result<StoredEntry, EntryReadFailure> {
        let fd: Int32
        let status: FileStatus
        switch openEntry(path.relative) {
        case .success(let value): (fd, status) = value
        case .failure(let failure): return .failure(failure)
        }
        defer { Syscall.close(fd) }
        opened = status
        guard status.size >= Int64(EntryFormat.fixedHeaderSize), status.size <= Int64(Int.max / 2) else {
            return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
        }
        let size = Int(status.size)
        if let limit, size > limit { return .failure(.overLimit) }
        return readBuffered(fd, path, status: status, size: size, expecting: expectation, now: now)
    }

    private func readBuffered(
        _ fd: Int32, _ path: EntryPath, status: FileStatus, size: Int, expecting expectation: EntryExpectation,
        now: Int64
    ) -> Result<StoredEntry, EntryReadFailure> {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        var handedOff = false
        defer { if !handedOff { buffer.deallocate() } }
        switch Syscall.read(fd, into: UnsafeMutableRawBufferPointer(start: buffer, count: size), at: 0) {
        case .success(let count) where count == size: break
        case .success:  // shorter than fstat said: truncated under the read, or a writer broke I1; a miss.
            return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
        case .failure(let error): return .failure(.system(error))
        }
        let bytes = UnsafeRawBufferPointer(start: buffer, count: size)
        let header: EntryFormat.Header
        switch validate(bytes, status: status, expecting: expectation, now: now) {
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
        // A sound entry read is used (I11): touched through this descriptor, before the caller closes it.
        let lastUse =
            touchIfStale(fd, path, lastUse: status.modifiedNanoseconds, now: now) ?? status.modifiedNanoseconds
        return .success(
            StoredEntry(header: header, payload: payload, allocatedBytes: status.allocatedBytes, lastUse: lastUse))
    }

    /// Validates the bytes of a whole entry file. The payload checksum is skipped for a file this process
    /// verified before, when its inode, size, ctime and header's publish (VerifiedInodes) are the ones
    /// verified; a file verified now is remembered.
    private func validate(
        _ bytes: UnsafeRawBufferPointer, status: FileStatus, expecting expectation: EntryExpectation, now: Int64
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
        let version = EntryVersion(header)
        if !VerifiedInodes.shared.contains(status, version: version) {
            let payload = UnsafeRawBufferPointer(
                rebasing: bytes[header.payloadOffset..<(header.payloadOffset + Int(header.payloadByteCount))])
            if CRC32C.checksum(payload) != header.payloadChecksum {
                return .failure(.corrupt(.payloadChecksumMismatch, allocatedBytes: allocated))
            }
            VerifiedInodes.shared.insert(status, version: version, now: now)
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

    /// Opens the published entry at `path` for reading when it is the one `header` describes (same
    /// identity, payload size, checksum and creation time): a published file is immutable (I1), so its
    /// payload can be streamed from the descriptor. Nil when it is gone or was replaced. The caller
    /// closes the descriptor.
    func openPublished(_ path: EntryPath, matching header: EntryFormat.Header) -> Int32? {
        guard case .success(let (fd, status)) = openEntry(path.relative) else { return nil }
        var prefix = [UInt8](repeating: 0, count: EntryFormat.fixedHeaderSize)
        guard case .success(let count) = prefix.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }),
            count == prefix.count,
            case .success(let found) = prefix.withUnsafeBytes({
                EntryFormat.parseFixedHeader($0, fileSize: status.size)
            }),
            found == header
        else {
            Syscall.close(fd)
            return nil
        }
        return fd
    }

    /// Opens an entry file for reading: its descriptor and status, or why it is not a readable entry
    /// (missing; a planted symlink, never followed; not a regular file). The caller closes the descriptor.
    /// In the private mode without touching its access time (O_NOATIME, which only the owner may; a file
    /// that is not ours after all is opened again without it; the group-shared mode, where most files are
    /// another user's, does not ask): ext4 otherwise writes the inode on the first read after each change,
    /// which at random access over a million entries was 13% of a hit's time.
    private func openEntry(_ relative: String) -> Result<(Int32, FileStatus), EntryReadFailure> {
        let fd: Int32
        let privateMode = directory.sharing == .privateToUser
        var opened = Syscall.open(
            relative, in: directory.descriptor, flags: privateMode ? [.readOnly, .noAccessTime] : [.readOnly])
        if privateMode, case .failure(let error) = opened, error.errno == .operationNotPermitted {
            opened = Syscall.open(relative, in: directory.descriptor, flags: [.readOnly])
        }
        switch opened {
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

}

// MARK: Verified inodes

// Which entry files this process has already verified (payload checksum), so a hit on an entry does not
// checksum it again: keyed by inode, trusted only while the file's ctime says nothing wrote it since (I1
// rules out in-place writes by conforming processes) and its header names the same publish (an inode number
// reused by a new file). A fixed table (FixedTable): past its capacity a hit costs one checksum more.
/// The (inode, ctime, size, publish) of entry files whose payload checksum this process already verified.
/// Any write to a file changes its ctime, so a match proves the bytes are the verified ones; only ctimes
/// at least `Policy.verifiedCtimeMinimumAge` old are remembered (coarse timestamps, see Policy). A new file
/// that gets a freed inode number, the size and (on a coarse clock) the ctime of a verified one still has
/// its own publish in its header (`EntryVersion`: creation time to the nanosecond, payload size and
/// checksum), so it is checksummed like any file never seen.
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

    private struct Identity: TableKey {
        let device: UInt64
        let inode: UInt64

        var tableHash: Int { mixedTableHash(inode ^ (device &* 0x9e37_79b9_7f4a_7c15)) }
    }

    private struct Seen: Equatable {
        let changed: Int64
        let size: Int64
        let version: EntryVersion
    }

    private let table = Mutex(FixedTable<Identity, Seen>(capacity: Policy.verifiedInodeCapacity))

    /// Whether the file of `status`, whose header names the publish `version`, was verified.
    func contains(_ status: FileStatus, version: EntryVersion) -> Bool {
        guard let seen = table.withLock({ $0.value(for: Identity(device: status.device, inode: status.inode)) }),
            seen.size == status.size, seen.version == version
        else { return false }
        if seen.changed == status.changedNanoseconds { return true }
        return status.changedNanoseconds > seen.changed && EntryFile.isTouchMark(status.modifiedNanoseconds)
            && status.modifiedNanoseconds != status.changedNanoseconds
    }

    /// Stores a record in a scratch table, not this one: the type metadata a process makes on its first
    /// insert made ahead of time (`CacheEngine.rehearseWake`). Returns the scratch table's count (1).
    static func rehearseInsert() -> Int {
        var scratch = FixedTable<Identity, Seen>(capacity: 2)
        let version = EntryVersion(createdAtNanoseconds: 0, payloadByteCount: 0, payloadChecksum: 0)
        scratch.insert(Seen(changed: 0, size: 0, version: version), for: Identity(device: 0, inode: 0))
        return scratch.count
    }

    func insert(_ status: FileStatus, version: EntryVersion, now: Int64) {
        guard now - status.changedNanoseconds >= verifiedCtimeMinimumAge else { return }
        table.withLock { table in
            table.insert(
                Seen(changed: status.changedNanoseconds, size: status.size, version: version),
                for: Identity(device: status.device, inode: status.inode))
        }
    }
}

/// `Policy.verifiedCtimeMinimumAge` in nanoseconds, read once.
private let verifiedCtimeMinimumAge = Policy.verifiedCtimeMinimumAge.nanoseconds
