// The operator's verification of entries: every entry read in full and checked (header, identity, payload
// checksum), streaming payloads in 1 MiB chunks, one fan-out folder at a time; and the removal of the
// damaged ones, unless replaced meanwhile (I13). Blocking: call off the cooperative pool. Reads take no lock
// and touch nothing (I3: a verification is not a use).

import Foundation

/// An entry file that failed verification.
@_spi(Operator)
public struct DamagedEntry: Sendable, Equatable {
    /// The file's path relative to the storage directory.
    public let relativePath: String
    /// What is wrong with it, in words.
    public let reason: String
    /// Allocated bytes of the file.
    public let allocatedByteCount: Int64
    let device: UInt64
    let inode: UInt64
}

/// How far a verification has got.
@_spi(Operator)
public struct VerifyProgress: Sendable {
    /// Entry files checked so far.
    public let checkedEntries: Int
    /// Entry files counted by name before the verification began.
    public let totalEntries: Int
    /// Bytes read so far.
    public let checkedBytes: Int64
    /// The usage counter's allocated bytes (an estimate of the bytes to read).
    public let totalBytes: Int64
}

/// The result of verifying every entry.
@_spi(Operator)
public struct VerifyReport: Sendable {
    /// Entry files checked (files removed by another process meanwhile are not counted).
    public let checkedEntries: Int
    /// Bytes read.
    public let checkedBytes: Int64
    /// Files that failed a check.
    public let damaged: [DamagedEntry]
    /// Valid entries that have expired.
    public let expiredEntries: Int
}

@_spi(Operator)
extension StorageOperator {
    /// Reads every entry file in full and checks it: the header (magic, version, lengths against the
    /// file size, header checksum), that the key bytes parse, that the entry identity recomputed from
    /// the key and codec bytes is the one in the header and in the file name, that the key's stable
    /// identifier matches its bytes, and the payload checksum. Payloads are read in 1 MiB chunks.
    /// Touches nothing: a verification is not a use.
    /// - Parameter progress: Called after each file with how far the verification has got.
    /// - Returns: What was checked and what failed.
    public func verify(progress: (VerifyProgress) -> Void = { _ in }) -> VerifyReport {
        // Totals for the progress line, without a scan: file names, and the usage counter (a hint, I9).
        let totalEntries = countEntryFiles().count
        let totalBytes = directory.state.usage
        let now = Syscall.realtimeNanoseconds
        var checked = 0
        var checkedBytes: Int64 = 0
        var damaged: [DamagedEntry] = []
        var expired = 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        for folder in files.entryFolders() {
            let folderPath = Directory.entriesFolder + "/" + folder
            guard case .success(let names) = Syscall.listDirectory(folderPath, in: directory.descriptor) else {
                continue
            }
            for name in names where name.isDirectory != true && name.name.hasSuffix(Directory.entrySuffix) {
                switch check(folderPath + "/" + name.name, chunk: chunk) {
                case .missing:
                    break
                case .valid(let header, let bytes):
                    checked += 1
                    checkedBytes += bytes
                    if header.isExpired(atNanoseconds: now) { expired += 1 }
                case .damaged(let found, let bytes):
                    checked += 1
                    checkedBytes += bytes
                    damaged.append(found)
                }
                progress(
                    VerifyProgress(
                        checkedEntries: checked, totalEntries: max(totalEntries, checked), checkedBytes: checkedBytes,
                        totalBytes: max(totalBytes, checkedBytes)))
            }
        }
        return VerifyReport(
            checkedEntries: checked, checkedBytes: checkedBytes, damaged: damaged, expiredEntries: expired)
    }

    /// Unlinks a damaged entry file, unless it has been replaced since it was verified (a writer may
    /// have renamed a new entry over it) or the root path no longer names this directory (I13).
    /// - Parameter entry: A file `verify` reported.
    /// - Returns: Whether the file was unlinked.
    @discardableResult
    public func remove(_ entry: DamagedEntry) -> Bool {
        guard directory.isStillNamedByPath(),
            case .success(let status) = Syscall.status(of: entry.relativePath, in: directory.descriptor),
            status.device == entry.device, status.inode == entry.inode
        else { return false }
        if case .success(_?) = files.remove(entry.relativePath, payload: .readHeader) { return true }
        return false
    }

    private enum Check {
        case missing
        case valid(EntryFormat.Header, bytes: Int64)
        case damaged(DamagedEntry, bytes: Int64)
    }

    private func check(_ relative: String, chunk: UnsafeMutableRawBufferPointer) -> Check {
        let fd: Int32
        switch Syscall.open(relative, in: directory.descriptor, flags: [.readOnly]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .missing
        case .failure(let error):
            return .damaged(
                DamagedEntry(
                    relativePath: relative, reason: "cannot open: \(error)", allocatedByteCount: 0, device: 0, inode: 0),
                bytes: 0)
        }
        defer { Syscall.close(fd) }
        guard case .success(let status) = Syscall.status(of: fd) else { return .missing }
        func damage(_ reason: String, _ bytes: Int64) -> Check {
            .damaged(
                DamagedEntry(
                    relativePath: relative, reason: reason, allocatedByteCount: status.allocatedBytes,
                    device: status.device, inode: status.inode),
                bytes: bytes)
        }
        guard status.isRegularFile else { return damage("not a regular file", 0) }
        // The fixed header, then the whole header (key and codec bytes).
        let prefixCount = Int(min(max(status.size, 0), Int64(EntryFormat.typicalHeaderReadSize)))
        var prefix = [UInt8](repeating: 0, count: prefixCount)
        guard case .success(let read) = prefix.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }),
            read == prefixCount
        else { return damage("cannot read the header", 0) }
        let header: EntryFormat.Header
        switch prefix.withUnsafeBytes({ EntryFormat.parseFixedHeader($0, fileSize: status.size) }) {
        case .success(let value): header = value
        case .failure(let corruption): return damage(corruption.description, Int64(read))
        }
        if prefix.count < header.payloadOffset {
            prefix = [UInt8](repeating: 0, count: header.payloadOffset)
            guard case .success(let count) = prefix.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }),
                count == header.payloadOffset
            else { return damage("cannot read the header", 0) }
        }
        let headerBytes = Array(prefix[0..<header.payloadOffset])
        if case .failure(let corruption) = headerBytes.withUnsafeBytes({
            EntryFormat.validateHeaderChecksum(header, bytes: $0)
        }) {
            return damage(corruption.description, Int64(headerBytes.count))
        }
        let keyBytes = headerBytes[header.keyOffset..<header.codecOffset]
        guard let key = CacheKey(canonicalBytes: keyBytes) else {
            return damage("the key bytes are not a canonical key", Int64(headerBytes.count))
        }
        guard let codec = String(validating: headerBytes[header.codecOffset..<header.payloadOffset], as: UTF8.self)
        else { return damage("the codec identifier is not UTF-8", Int64(headerBytes.count)) }
        let identity = EntryIdentity(key: key, codecIdentifier: codec)
        guard identity.digest == header.entryIdentity else {
            return damage("the entry identity does not match its key and codec", Int64(headerBytes.count))
        }
        guard directory.entryPath(for: identity).relative == relative else {
            return damage("the file is not at its entry identity's path", Int64(headerBytes.count))
        }
        guard key.stableDigest == header.keyStableDigest else {
            return damage("the key's stable identifier does not match its bytes", Int64(headerBytes.count))
        }
        // The payload, streamed.
        var crc: UInt32 = 0
        var offset = Int64(header.payloadOffset)
        let end = header.fileSize
        while offset < end {
            let count = Int(min(Int64(chunk.count), end - offset))
            let slice = UnsafeMutableRawBufferPointer(rebasing: chunk[0..<count])
            guard case .success(let got) = Syscall.read(fd, into: slice, at: offset), got == count else {
                return damage("the file ended early", offset)
            }
            crc = CRC32C.checksum(UnsafeRawBufferPointer(slice), continuing: crc)
            offset += Int64(count)
        }
        guard crc == header.payloadChecksum else {
            return damage(EntryFormat.Corruption.payloadChecksumMismatch.description, end)
        }
        return .valid(header, bytes: end)
    }
}
