// Publishing an entry (I1, I2): the whole file written to a staging file (new in `tmp/`, or the key's lock
// file, I6) moved to the entry path, the commit point, owning what it replaces; usage (I9) and last publish
// (I11) raised.

import Foundation

/// What a publish writes: the payload and the header fields it is published with.
struct EntryContent: Sendable {
    let payload: Data
    let expectation: EntryExpectation
    let codecIdentifier: String
    /// Nanoseconds since 1970.
    let createdAt: Int64
    /// Nanoseconds since 1970; 0: never expires.
    let expiresAt: Int64
}

/// A file the caller holds open and hands to a publish as its staging file (a key's lock file, I6). The
/// caller keeps the descriptor (closing it is its business) and learns from the result whether the file
/// was renamed into place.
struct HeldStagingFile: Sendable {
    let descriptor: Int32
    /// Its path relative to the root.
    let relative: String
    /// Bytes already in it (a lock file left by a killed holder mid-write): emptied before writing. It was
    /// never published (I1 does not cover it) and nobody maps lock files, so emptying it is safe.
    let leftoverBytes: Int64
}

/// Where a publish writes the entry before renaming it into place (I2).
enum Staging: Sendable {
    /// A new file `tmp/<random>.staging` (created `O_CREAT|O_EXCL`), unlinked when the publish fails.
    case newFile
    /// A file the caller holds: filled and renamed into place; emptied (its space given back) when the
    /// publish fails, and left to the caller.
    case held(HeldStagingFile)
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

extension EntryFile {
    /// `publish(_:to:through:)`, on a thread of its own when the payload has at least
    /// `Policy.offPoolWriteThreshold` bytes: its checksum and write hold a thread for milliseconds (far
    /// longer when the kernel throttles dirty pages), which must not be one of the cooperative pool's.
    func publishOffPoolWhenLarge(_ content: EntryContent, to path: EntryPath, through staging: Staging) async
        -> Result<PublishOutcome, SystemCallError>
    {
        guard content.payload.count >= Policy.offPoolWriteThreshold else {
            return publish(content, to: path, through: staging)
        }
        let files = self
        return await BlockingWork.run { files.publish(content, to: path, through: staging) }
    }

    /// Writes `content` to the staging file and renames it over `path`: the commit point. Waiters blocked
    /// on a held lock file wake to find the lock path gone and read the entry.
    func publish(_ content: EntryContent, to path: EntryPath, through staging: Staging = .newFile)
        -> Result<PublishOutcome, SystemCallError>
    {
        let (payload, expectation) = (content.payload, content.expectation)
        let checksum = payload.withUnsafeBytes { CRC32C.checksum($0) }
        let headerBytes = EntryFormat.encodeHeader(
            keyBytes: expectation.keyBytes, codecIdentifier: content.codecIdentifier,
            entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest,
            payloadByteCount: payload.count, payloadChecksum: checksum, createdAtNanoseconds: content.createdAt,
            expiresAtNanoseconds: content.expiresAt)
        let root = directory.descriptor
        let stagingPath: String
        let fd: Int32
        var result: Result<Void, SystemCallError> = .success(())
        switch staging {
        case .held(let held):
            (stagingPath, fd) = (held.relative, held.descriptor)
            if held.leftoverBytes > 0 { result = Syscall.truncate(fd, length: 0) }
        case .newFile:
            stagingPath = directory.newStagingPath()
            switch openNewStagingFile(stagingPath) {
            case .success(let value): fd = value
            case .failure(let error): return .failure(error)
            }
            result = Syscall.setMode(fd, directory.fileMode)
        }
        /// Cleans up after a failure: a new file is unlinked (no partial file ever becomes visible); a held
        /// one is emptied to give the space back, and stays its holder's, rewound for a write once more.
        func fail(_ error: SystemCallError) -> Result<PublishOutcome, SystemCallError> {
            if case .held = staging {
                _ = Syscall.truncate(fd, length: 0)
                _ = Syscall.rewind(fd)
            } else {
                _ = Syscall.unlink(stagingPath, in: root)
            }
            return .failure(error)
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
        if case .newFile = staging { Syscall.close(fd) }
        if case .failure(let error) = result { return fail(error) }
        let header = EntryFormat.Header(
            keyByteCount: expectation.keyBytes.count, codecByteCount: expectation.codecBytes.count,
            payloadByteCount: Int64(payload.count), createdAtNanoseconds: content.createdAt,
            expiresAtNanoseconds: content.expiresAt, payloadChecksum: checksum,
            entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest)
        let held: Bool
        if case .held = staging { held = true } else { held = false }
        switch commit(stagingPath, held: held, as: header, to: path, publishedAt: publishedAt) {
        case .success(let outcome): return .success(outcome)
        case .failure(let error): return fail(error)
        }
    }

    /// Publishes a staging file already laid out as the entry (header, then payload: a remote value
    /// streamed into it, RemoteStaging.swift) by renaming it over `path`; the caller holds the key's lock
    /// and abandons it afterwards. On failure the file stays, for the caller to unlink.
    func publishStaged(_ stagingPath: String, descriptor: Int32, header: EntryFormat.Header, to path: EntryPath)
        -> Result<PublishOutcome, SystemCallError>
    {
        let publishedAt = Syscall.realtimeNanoseconds
        _ = Syscall.setTimes(descriptor, nanoseconds: publishedAt)  // best effort, as in `publish`
        return commit(stagingPath, held: false, as: header, to: path, publishedAt: publishedAt)
    }

    /// The commit point of a publish: moves the filled staging file to `path` (making the fan-out folder a
    /// real one when needed, I13) and charges the usage counters (I9, I11). Whatever it replaces it owns
    /// (I9): a file of `tmp/` is swapped with the entry (`RENAME_EXCHANGE`), so the old entry lands at the
    /// staging path, where this process alone charges and unlinks it; a held lock file (which must stay
    /// the only file waiters lock, I6) moves in only where nothing is (`RENAME_NOREPLACE`), an entry there
    /// being first renamed aside like a removal. A remover racing either way moves a given file at most
    /// once, so no file is ever subtracted twice (or never).
    private func commit(
        _ stagingPath: String, held: Bool, as header: EntryFormat.Header, to path: EntryPath, publishedAt: Int64
    ) -> Result<PublishOutcome, SystemCallError> {
        let headerSize = header.payloadOffset
        let payloadCount = Int(header.payloadByteCount)
        // The charges (I9): the payload bytes, which the budget counts, and the file size in 4 KiB blocks
        // (what ext4 allocates; trim recounts st_blocks). Added before the file can be seen, so a removal
        // that takes it the next instant never drives the counters below zero (they clamp there).
        let allocated = roundUpToBlock(Int64(headerSize + payloadCount))
        directory.state.adjustUsage(by: allocated)
        directory.state.adjustPayloadBytes(by: Int64(payloadCount))
        // The entry replaced has the same key and codec, so the same header size.
        let placed =
            held
            ? placeWithoutReplacing(stagingPath, at: path, headerSize: headerSize)
            : placeExchanging(stagingPath, at: path, headerSize: headerSize)
        let replaced: RemovedCharge
        switch placed {
        case .success(let charge): replaced = charge
        case .failure(let error):
            directory.state.adjustUsage(by: -allocated)
            directory.state.adjustPayloadBytes(by: -Int64(payloadCount))
            return .failure(error)
        }
        directory.state.adjustUsage(by: -replaced.allocatedBytes)
        directory.state.adjustPayloadBytes(by: -replaced.payloadBytes)
        directory.state.notePublish(atNanoseconds: publishedAt)
        return .success(
            PublishOutcome(
                header: header, allocatedBytes: allocated, replacedAllocatedBytes: replaced.allocatedBytes,
                replacedPayloadBytes: replaced.payloadBytes, modifiedNanoseconds: publishedAt))
    }

    /// Swaps a `tmp/` staging file with the entry at `path`, or moves it there when no entry is; returns
    /// the charge of the entry replaced (unlinked here). Where the filesystem cannot swap, or the entry
    /// keeps changing, it falls back to a plain rename charged from a prior look.
    private func placeExchanging(_ staging: String, at path: EntryPath, headerSize: Int) -> Result<
        RemovedCharge, SystemCallError
    > {
        let root = directory.descriptor
        attempts: for _ in 0..<Self.placementAttempts {
            switch Syscall.exchange(staging, in: root, with: path.relative, in: root) {
            case .success:
                // The old entry, ours alone; a folder planted at the entry path is not ours to move: it goes
                // back, and the publish fails as a rename over it would.
                if case .success(let moved) = Syscall.status(of: staging, in: root), moved.isDirectory {
                    _ = Syscall.exchange(staging, in: root, with: path.relative, in: root)
                    return .failure(
                        SystemCallError(operation: "renameat2", path: path.relative, errno: .isDirectory))
                }
                return .success(dispose(staging, charge: .headerSize(headerSize)))
            case .failure(let error) where error.errno.isFolderMissingOrReplaced:
                // No entry there (or no real fan-out folder): move in, unless one was published meanwhile.
                switch moveInWithoutReplacing(staging, at: path) {
                case .success(true): return .success(RemovedCharge(allocatedBytes: 0, payloadBytes: 0))
                case .success(false): continue attempts
                case .failure(let error) where error.errno.cannotSwap: break attempts
                case .failure(let error): return .failure(error)
                }
            case .failure(let error) where error.errno.cannotSwap: break attempts
            case .failure(let error): return .failure(error)
            }
        }
        return renameOver(staging, at: path, headerSize: headerSize)
    }

    /// Moves a held lock file to `path` where no entry is, renaming any entry there aside first (charged
    /// and unlinked like a removal); returns the charge of what was taken aside.
    private func placeWithoutReplacing(_ staging: String, at path: EntryPath, headerSize: Int) -> Result<
        RemovedCharge, SystemCallError
    > {
        var replaced = RemovedCharge(allocatedBytes: 0, payloadBytes: 0)
        /// A failure, with what was taken aside already charged off (the caller only undoes its own charge).
        func fail(_ error: SystemCallError) -> Result<RemovedCharge, SystemCallError> {
            directory.state.adjustUsage(by: -replaced.allocatedBytes)
            directory.state.adjustPayloadBytes(by: -replaced.payloadBytes)
            return .failure(error)
        }
        attempts: for _ in 0..<Self.placementAttempts {
            switch moveInWithoutReplacing(staging, at: path) {
            case .success(true): return .success(replaced)
            case .success(false):
                switch takeAside(path.relative) {
                case .success(let aside?):
                    let charge = dispose(aside, charge: .headerSize(headerSize))
                    replaced.allocatedBytes += charge.allocatedBytes
                    replaced.payloadBytes += charge.payloadBytes
                case .success(nil): continue attempts
                case .failure(let error): return fail(error)
                }
            case .failure(let error) where error.errno.cannotSwap: break attempts
            case .failure(let error): return fail(error)
            }
        }
        switch renameOver(staging, at: path, headerSize: headerSize) {
        case .success(let charge):
            return .success(
                RemovedCharge(
                    allocatedBytes: replaced.allocatedBytes + charge.allocatedBytes,
                    payloadBytes: replaced.payloadBytes + charge.payloadBytes))
        case .failure(let error): return fail(error)
        }
    }

    /// `RENAME_NOREPLACE` from `staging` to `path`, making the fan-out folder a real one when it is missing
    /// or replaced (I13): `true` when moved, `false` when an entry is there.
    private func moveInWithoutReplacing(_ staging: String, at path: EntryPath) -> Result<Bool, SystemCallError> {
        let root = directory.descriptor
        var moved = Syscall.renameWithoutReplacing(staging, in: root, to: path.relative, in: root)
        if case .failure(let error) = moved, error.errno.isFolderMissingOrReplaced {
            if case .failure(let mkdirError) = directory.ensureFanOut(path.fanOut) { return .failure(mkdirError) }
            moved = Syscall.renameWithoutReplacing(staging, in: root, to: path.relative, in: root)
        }
        switch moved {
        case .success: return .success(true)
        case .failure(let error) where error.errno == .fileExists: return .success(false)
        case .failure(let error): return .failure(error)
        }
    }

    /// The fallback where `renameat2` cannot swap or refuse to replace (or the entry kept changing under
    /// the publish): a look at the entry, then a rename over it. A remover unlinking it in between makes
    /// the counters undercount until a recount (the drift check, I9).
    private func renameOver(_ staging: String, at path: EntryPath, headerSize: Int) -> Result<
        RemovedCharge, SystemCallError
    > {
        let root = directory.descriptor
        var replaced = RemovedCharge(allocatedBytes: 0, payloadBytes: 0)
        if case .success(let old) = Syscall.status(of: path.relative, in: root), old.isRegularFile {
            replaced = RemovedCharge(
                allocatedBytes: old.allocatedBytes,
                payloadBytes: Self.payloadBytes(fileSize: old.size, headerSize: headerSize))
        }
        var renamed = Syscall.rename(staging, in: root, to: path.relative, in: root)
        if case .failure(let error) = renamed, error.errno.isFolderMissingOrReplaced {
            if case .failure(let mkdirError) = directory.ensureFanOut(path.fanOut) { return .failure(mkdirError) }
            renamed = Syscall.rename(staging, in: root, to: path.relative, in: root)
        }
        return renamed.map { replaced }
    }

    /// How many times a placement swaps or moves before falling back to `renameOver`: each retry means
    /// another process published or removed this very entry in the last microseconds.
    private static let placementAttempts = 8

    /// A new, empty staging file `tmp/<random>.staging` open for reading and writing, with the directory's
    /// file mode: its path and descriptor. The caller fills it, then publishes it (`publishStaged`) or
    /// unlinks it, and closes the descriptor.
    func createStagingFile() -> Result<(String, Int32), SystemCallError> {
        let relative = directory.newStagingPath()
        switch openNewStagingFile(relative, flags: [.readWrite, .create, .exclusive]) {
        case .success(let fd):
            if case .failure(let error) = Syscall.setMode(fd, directory.fileMode) {
                Syscall.close(fd)
                _ = Syscall.unlink(relative, in: directory.descriptor)
                return .failure(error)
            }
            return .success((relative, fd))
        case .failure(let error): return .failure(error)
        }
    }

    /// Creates a new staging file in `tmp/`, making `tmp/` a real folder again when it was removed or
    /// replaced by a symlink (never followed, I13).
    private func openNewStagingFile(
        _ relative: String, flags: OpenFlags = [.writeOnly, .create, .exclusive]
    ) -> Result<Int32, SystemCallError> {
        let root = directory.descriptor
        let opened = Syscall.open(relative, in: root, flags: flags, mode: directory.fileMode)
        guard case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced else { return opened }
        if case .failure(let repairError) = directory.repairStagingFolder() { return .failure(repairError) }
        return Syscall.open(relative, in: root, flags: flags, mode: directory.fileMode)
    }

    // MARK: Charges (I9)

    /// The payload bytes a file of `fileSize` bytes with a header of `headerSize` bytes holds. A file too
    /// short for its header is not an entry and is charged its whole size, as a scan charges it.
    static func payloadBytes(fileSize: Int64, headerSize: Int) -> Int64 {
        fileSize >= Int64(headerSize) ? fileSize - Int64(headerSize) : max(0, fileSize)
    }

    /// The bytes an entry with this payload will be charged: its file size rounded up to 4 KiB blocks.
    static func chargedBytes(payloadByteCount: Int, keyByteCount: Int, codecByteCount: Int) -> Int64 {
        roundUpToBlock(Int64(EntryFormat.fixedHeaderSize + keyByteCount + codecByteCount + payloadByteCount))
    }
}

/// A size rounded up to whole 4 KiB blocks: what ext4 allocates for a file of that size.
private func roundUpToBlock(_ size: Int64) -> Int64 { (size + 4095) / 4096 * 4096 }
