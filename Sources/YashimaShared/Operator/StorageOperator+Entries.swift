// The operator's view of entries: listing from headers with the last-use time (mtime, I11) and codec,
// without reading payloads, and the census by namespace. One fan-out folder at a time (memory: one
// folder's names), each file opened relative to its folder and one 4 KiB header read into a reused buffer
// (no stat of the listing, no sort): a million entries list at header-read speed and in constant memory.
// Verification is StorageOperator+Verify.swift. Blocking: call off the cooperative pool. Reads take no
// lock and touch nothing (I3: a listing is not a use).

import Foundation

/// One stored entry as an operator sees it, read from its header (the payload is not read).
@_spi(Operator)
public struct OperatorEntry: Sendable, Equatable {
    /// The entry's key, read back from its header.
    public let key: CacheKey
    /// The codec identifier the value was encoded with.
    public let codecIdentifier: String
    /// The encoded payload's size in bytes.
    public let payloadByteCount: Int64
    /// Allocated bytes of the entry file (`st_blocks × 512`).
    public let allocatedByteCount: Int64
    /// When the value was stored.
    public let createdAt: Date
    /// When it expires; nil if never.
    public let expiresAt: Date?
    /// When it was last used: the file's mtime, which hits set at most once a minute (I11) and trim
    /// orders by.
    public let lastUsedAt: Date
    /// Whether it has expired (it is never returned; `removeExpired()` or a lookup unlinks it).
    public let isExpired: Bool
    /// The entry file's path relative to the storage directory.
    public let relativePath: String
    /// The key's stable identifier (`CacheKey.stableIdentifier`), as the header records it.
    public let stableIdentifier: String
}

/// How far a listing has got.
@_spi(Operator)
public struct ListingProgress: Sendable {
    /// Entry files read so far.
    public let entries: Int
    /// Fan-out folders listed so far, of `folders`.
    public let foldersDone: Int
    /// Fan-out folders in all.
    public let folders: Int
}

/// What a census of every entry's header found, per namespace and in all.
@_spi(Operator)
public struct EntryCensus: Sendable {
    /// Entries and allocated bytes per namespace.
    public var namespaces: [String: (entries: Int, bytes: Int64)] = [:]
    /// Readable entries in all.
    public var entries = 0
    /// Allocated bytes of the readable entries.
    public var bytes: Int64 = 0
    /// The oldest last use (entry mtimes); nil without entries.
    public var oldestUse: Date?
    /// The newest last use (entry mtimes); nil without entries.
    public var newestUse: Date?
    /// Valid entries that have expired.
    public var expiredEntries = 0
    /// Entry files whose header could not be read or is damaged.
    public var unreadableEntries = 0
}

/// What a listing found.
@_spi(Operator)
public struct OperatorListing: Sendable {
    /// The readable entries (of the namespace asked for), in no particular order.
    public let entries: [OperatorEntry]
    /// Entry files whose header could not be read or is damaged (see `StorageOperator.verify`).
    public let unreadableCount: Int
}

extension StorageOperator {
    /// Lists entries (of `namespace`, when given) from their headers, expired ones included, into one
    /// array (for small directories and tests; `forEachEntry` streams).
    /// - Parameter namespace: Only entries whose key has this namespace; nil for all.
    /// - Returns: The entries, and how many files could not be read as entries.
    public func entries(inNamespace namespace: String?) -> OperatorListing {
        var found: [OperatorEntry] = []
        let unreadable = forEachEntry(inNamespace: namespace) {
            found.append($0)
            return true
        }
        return OperatorListing(entries: found, unreadableCount: unreadable)
    }

    /// Calls `body` with every entry (of `namespace`, when given), read from its header, expired ones
    /// included, in storage order (not sorted), one fan-out folder at a time.
    /// - Parameters:
    ///   - namespace: Only entries whose key has this namespace; nil for all.
    ///   - progress: Called after each fan-out folder.
    ///   - body: Called with each entry; returns false to stop the listing.
    /// - Returns: How many files could not be read as entries.
    @discardableResult
    public func forEachEntry(
        inNamespace namespace: String?, progress: (ListingProgress) -> Void = { _ in },
        _ body: (OperatorEntry) -> Bool
    ) -> Int {
        let now = Syscall.realtimeNanoseconds
        var unreadable = 0
        var listed = 0
        forEachHeader(progress: { folders, done in
            progress(ListingProgress(entries: listed, foldersDone: done, folders: folders))
        }) { relative, read in
            guard case .success(let (header, bytes, status)) = read,
                let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]),
                let codec = String(validating: bytes[header.codecOffset..<header.payloadOffset], as: UTF8.self)
            else {
                if case .failure(.missing) = read { return true }  // removed since the listing
                unreadable += 1
                return true
            }
            listed += 1
            guard namespace == nil || key.namespace == namespace else { return true }
            return body(
                OperatorEntry(
                    key: key, codecIdentifier: codec, payloadByteCount: header.payloadByteCount,
                    allocatedByteCount: status.allocatedBytes, createdAt: date(header.createdAtNanoseconds),
                    expiresAt: header.expiresAtNanoseconds == 0 ? nil : date(header.expiresAtNanoseconds),
                    lastUsedAt: date(status.modifiedNanoseconds), isExpired: header.isExpired(atNanoseconds: now),
                    relativePath: relative, stableIdentifier: header.keyStableDigest.hex))
        }
        return unreadable
    }

    /// Counts the entry files from the fan-out folders' names alone (no stat, no read): what `stats`
    /// reports without a census. Files another process adds or removes meanwhile may or may not count.
    /// - Parameter limit: Stop listing folders after this long and scale the count up from the folders
    ///   listed (keys spread evenly over them); nil lists every folder.
    /// - Returns: The count, and whether it is exact (every folder listed).
    public func countEntryFiles(within limit: Duration? = nil) -> (count: Int, exact: Bool) {
        let folders = files.entryFolders()
        let deadline = limit.map { ContinuousClock.now.advanced(by: $0) }
        var count = 0
        for (index, folder) in folders.enumerated() {
            if let deadline, index > 0, ContinuousClock.now >= deadline {
                return (Int((Double(count) * Double(folders.count) / Double(index)).rounded()), false)
            }
            let path = Directory.entriesFolder + "/" + folder
            count += Syscall.countNames(in: path, under: directory.descriptor, suffix: Directory.entrySuffix)
        }
        return (count, true)
    }

    /// Reads every entry's header once: entries and allocated bytes per namespace, in all, the oldest and
    /// newest use, expired and unreadable entries.
    /// - Parameter progress: Called after each fan-out folder.
    /// - Returns: The census.
    public func entryCensus(progress: (ListingProgress) -> Void = { _ in }) -> EntryCensus {
        let now = Syscall.realtimeNanoseconds
        var census = EntryCensus()
        var oldest = Int64.max
        var newest = Int64.min
        forEachHeader(progress: { folders, done in
            progress(ListingProgress(entries: census.entries, foldersDone: done, folders: folders))
        }) { _, read in
            guard case .success(let (header, bytes, status)) = read,
                let namespace = namespace(
                    ofCanonicalKey: UnsafeRawBufferPointer(rebasing: bytes[header.keyOffset..<header.codecOffset]))
            else {
                if case .failure(.missing) = read { return true }
                census.unreadableEntries += 1
                return true
            }
            census.entries += 1
            census.bytes += status.allocatedBytes
            census.namespaces[namespace, default: (0, 0)].entries += 1
            census.namespaces[namespace, default: (0, 0)].bytes += status.allocatedBytes
            oldest = min(oldest, status.modifiedNanoseconds)
            newest = max(newest, status.modifiedNanoseconds)
            if header.isExpired(atNanoseconds: now) { census.expiredEntries += 1 }
            return true
        }
        if census.entries > 0 {
            census.oldestUse = date(oldest)
            census.newestUse = date(newest)
        }
        return census
    }

    /// Calls `body` with every entry file's relative path and its header (fixed part, key and codec,
    /// checksum checked) and status, or why it is not one; one fan-out folder at a time, each file opened
    /// relative to its folder (never through a symlink) into one reused buffer.
    private func forEachHeader(
        progress: (_ folders: Int, _ done: Int) -> Void,
        _ body: (String, Result<(EntryFormat.Header, UnsafeRawBufferPointer, FileStatus), EntryReadFailure>) -> Bool
    ) {
        let folders = files.entryFolders()
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: EntryFormat.typicalHeaderReadSize, alignment: 16)
        defer { buffer.deallocate() }
        for (index, folder) in folders.enumerated() {
            let folderPath = Directory.entriesFolder + "/" + folder
            guard case .success(let folderFD) = Syscall.open(folderPath, in: directory.descriptor, flags: [.directory]),
                case .success(let names) = Syscall.listDirectory(".", in: folderFD)
            else {
                progress(folders.count, index + 1)
                continue
            }
            var going = true
            for name in names where going && name.isDirectory != true && name.name.hasSuffix(Directory.entrySuffix) {
                going = body(folderPath + "/" + name.name, readHeader(name.name, in: folderFD, into: &buffer))
            }
            Syscall.close(folderFD)
            progress(folders.count, index + 1)
            if !going { return }
        }
    }

    /// One entry file's header, read into `buffer` (grown when a key is larger than it).
    private func readHeader(_ name: String, in folder: Int32, into buffer: inout UnsafeMutableRawBufferPointer)
        -> Result<(EntryFormat.Header, UnsafeRawBufferPointer, FileStatus), EntryReadFailure>
    {
        let fd: Int32
        switch Syscall.open(name, in: folder, flags: [.readOnly, .nonBlocking]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .failure(.missing)
        case .failure(let error): return .failure(.system(error))
        }
        defer { Syscall.close(fd) }
        guard case .success(let status) = Syscall.status(of: fd) else { return .failure(.missing) }
        guard status.isRegularFile else { return .failure(.corrupt(.badMagic, allocatedBytes: status.allocatedBytes)) }
        func read(_ count: Int) -> Int? {
            guard
                case .success(let got) = Syscall.read(
                    fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: 0)
            else { return nil }
            return got
        }
        let wanted = Int(min(max(status.size, 0), Int64(buffer.count)))
        guard let got = read(wanted), got >= EntryFormat.fixedHeaderSize else {
            return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
        }
        let header: EntryFormat.Header
        switch EntryFormat.parseFixedHeader(UnsafeRawBufferPointer(rebasing: buffer[0..<got]), fileSize: status.size) {
        case .success(let value): header = value
        case .failure(let corruption): return .failure(.corrupt(corruption, allocatedBytes: status.allocatedBytes))
        }
        if header.payloadOffset > got {
            // A key larger than the buffer: grow it (parseFixedHeader bounded the lengths by the file size).
            buffer.deallocate()
            buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: header.payloadOffset, alignment: 16)
            guard let again = read(header.payloadOffset), again == header.payloadOffset else {
                return .failure(.corrupt(.tooShort, allocatedBytes: status.allocatedBytes))
            }
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<header.payloadOffset])
        if case .failure(let corruption) = EntryFormat.validateHeaderChecksum(header, bytes: bytes) {
            return .failure(.corrupt(corruption, allocatedBytes: status.allocatedBytes))
        }
        return .success((header, bytes, status))
    }
}

/// The namespace of a canonical key (its first fields), without parsing the rest: the census only counts
/// by namespace, and the header checksum already vouched for the bytes.
private func namespace(ofCanonicalKey bytes: UnsafeRawBufferPointer) -> String? {
    bytes.withMemoryRebound(to: UInt8.self) { buffer in
        var reader = CanonicalFieldReader(buffer: buffer)
        guard reader.expect(CanonicalLabel.keyMagic), reader.expect(CanonicalLabel.namespace) else { return nil }
        return reader.string()
    }
}

private func date(_ nanoseconds: Int64) -> Date {
    Date(timeIntervalSince1970: Double(nanoseconds) / 1e9)
}
