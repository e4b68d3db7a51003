// Publishing an entry (I1, I2): the whole file written to a staging file (new in `tmp/`, or the key's lock
// file, I6) moved to the entry path, the commit point, inside a write window on the key's epochs (I10),
// owning what it replaces; usage (I9) and last publish (I11) raised. Placement: EntryPlacement.swift.

import Foundation
import Synchronization

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

/// How a publish treats an entry already at its path.
enum PublishMode: Sendable {
    /// A lookup's publish (a generation, a remote hit, a wait that timed out): adds the entry where none is
    /// live. A live entry there (sound and unexpired: another writer published it after this lookup missed)
    /// stays, and this file is discarded: first wins, so a generation never undoes a `store` made while it
    /// ran.
    case adding
    /// `.adding`, and only while no write of the key's slot came after `since` (the epochs a remote hit's
    /// production took before it fetched the value): a removal meanwhile deleted that value from the remote
    /// tier and from storage, and it must not come back (I10, I16).
    case addingUnlessWrittenSince(SharedState.Stamp)
    /// `store` and `refresh`: replaces whatever is there.
    case replacing
}

/// What a publish did, for usage accounting and the writer's memory item (I10).
struct PublishOutcome: Sendable {
    let header: EntryFormat.Header
    let allocatedBytes: Int64
    let replacedAllocatedBytes: Int64
    let replacedPayloadBytes: Int64
    /// The mtime the publish gave the entry (its first use, I11).
    let modifiedNanoseconds: Int64
    /// False when an `.adding` publish found a live entry and left it (nothing of this publish is visible).
    var placed = true
    /// The key's epochs right after the publish's write window closed, when nothing else wrote the slot
    /// meanwhile: what the writer's memory item is valid under. Nil: stamp it with nothing that matches.
    var stamp: SharedState.Stamp?
    /// The key's epochs just before the window opened.
    var before: SharedState.Stamp = .unavailable
}

extension EntryFile {
    /// `publish(_:to:through:)`, on a thread of its own when the payload has at least
    /// `Policy.offPoolWriteThreshold` bytes: its checksum and write hold a thread for milliseconds (far
    /// longer when the kernel throttles dirty pages), which must not be one of the cooperative pool's.
    func publishOffPoolWhenLarge(
        _ content: EntryContent, to path: EntryPath, through staging: Staging, mode: PublishMode
    ) async -> Result<PublishOutcome, SystemCallError> {
        guard content.payload.count >= Policy.offPoolWriteThreshold else {
            return publish(content, to: path, through: staging, mode: mode)
        }
        let files = self
        return await BlockingWork.run { files.publish(content, to: path, through: staging, mode: mode) }
    }

    /// Writes `content` to the staging file and renames it over `path`: the commit point. Waiters blocked
    /// on a held lock file wake to find the lock path gone and read the entry.
    func publish(
        _ content: EntryContent, to path: EntryPath, through staging: Staging = .newFile,
        mode: PublishMode = .replacing
    ) -> Result<PublishOutcome, SystemCallError> {
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
        switch commit(
            stagingPath, held: held, as: header, to: path, publishedAt: publishedAt, mode: mode,
            expectation: expectation)
        {
        case .success(let outcome):
            // Left for a live entry: a new staging file goes; a held one stays its holder's to abandon.
            if !outcome.placed, !held { _ = Syscall.unlink(stagingPath, in: root) }
            return .success(outcome)
        case .failure(let error): return fail(error)
        }
    }

    /// Publishes a staging file already laid out as the entry (header, then payload: a remote value
    /// streamed into it, RemoteStaging.swift) by renaming it over `path`; the caller holds the key's lock
    /// and abandons it afterwards. On failure the file stays, for the caller to unlink.
    func publishStaged(
        _ stagingPath: String, descriptor: Int32, header: EntryFormat.Header, to path: EntryPath,
        expectation: EntryExpectation, mode: PublishMode = .adding
    ) -> Result<PublishOutcome, SystemCallError> {
        let publishedAt = Syscall.realtimeNanoseconds
        _ = Syscall.setTimes(descriptor, nanoseconds: publishedAt)  // best effort, as in `publish`
        return commit(
            stagingPath, held: false, as: header, to: path, publishedAt: publishedAt, mode: mode,
            expectation: expectation)
    }

    /// The commit point of a publish: moves the filled staging file to `path` (making the fan-out folder a
    /// real one when needed, I13) inside a write window on the key's epochs (I10: no memory anywhere serves
    /// or confirms a value of the slot without a look at storage until the window closes after the rename),
    /// and charges the usage counters (I9, I11). Whatever it replaces it owns (I9, EntryPlacement.swift). A
    /// remover racing it moves a given file at most once, so no file is ever subtracted twice (or never).
    private func commit(
        _ stagingPath: String, held: Bool, as header: EntryFormat.Header, to path: EntryPath, publishedAt: Int64,
        mode: PublishMode, expectation: EntryExpectation
    ) -> Result<PublishOutcome, SystemCallError> {
        let headerSize = header.payloadOffset
        let payloadCount = Int(header.payloadByteCount)
        // The charges (I9): the payload bytes, which the budget counts, and the file size in 4 KiB blocks
        // (what ext4 allocates; trim recounts st_blocks). Added before the file can be seen, so a removal
        // that takes it the next instant never drives the counters below zero (they clamp there).
        let allocated = roundUpToBlock(Int64(headerSize + payloadCount))
        let state = directory.state
        func uncharge() {
            state.adjustUsage(by: -allocated)
            state.adjustPayloadBytes(by: -Int64(payloadCount))
        }
        state.adjustUsage(by: allocated)
        state.adjustPayloadBytes(by: Int64(payloadCount))
        if Injection.publishNoBump || Injection.publishBumpAfter {
            return injectedCommit(
                stagingPath, held: held, as: header, to: path, publishedAt: publishedAt, mode: mode,
                expectation: expectation, charge: allocated)
        }
        let window: SharedState.KeyWindow
        do {
            window = try state.openKeyWindow(expectation.slots)
        } catch {
            // No state file: the write could not be announced to other processes' memory (I10).
            uncharge()
            return .failure(SystemCallError(operation: "openat", path: Directory.stateFile, errno: .ioError))
        }
        let before = window.before
        if case .addingUnlessWrittenSince(let since) = mode, !since.matches(before) {
            window.cancel()
            uncharge()
            return .success(
                PublishOutcome(
                    header: header, allocatedBytes: 0, replacedAllocatedBytes: 0, replacedPayloadBytes: 0,
                    modifiedNanoseconds: publishedAt, placed: false, stamp: nil, before: before))
        }
        // A remote value's publish: the file it places, to take out again if the key was written meanwhile.
        var remoteFile: FileStatus?
        if case .addingUnlessWrittenSince = mode {
            remoteFile = try? Syscall.status(of: stagingPath, in: directory.descriptor).get()
            if let hook = Self.beforeRemotePlacement.withLock({ $0[path.relative] }) { hook() }
        }
        // The entry replaced has the same key and codec, so the same header size.
        let placed = place(
            stagingPath, held: held, at: path, headerSize: headerSize, mode: mode, expectation: expectation)
        let placement: Placement
        switch placed {
        case .success(let value): placement = value
        case .failure(let error):
            // An `.adding` placement that failed moved nothing anyone could read (at most a dead entry
            // aside); a replacing one may have taken the old entry away (`placeWithoutReplacing`).
            if case .replacing = mode { _ = window.close() } else { window.cancel() }
            uncharge()
            return .failure(error)
        }
        state.adjustUsage(by: -placement.replaced.allocatedBytes)
        state.adjustPayloadBytes(by: -placement.replaced.payloadBytes)
        guard placement.placed else {
            window.cancel()
            uncharge()
            return .success(
                PublishOutcome(
                    header: header, allocatedBytes: 0, replacedAllocatedBytes: placement.replaced.allocatedBytes,
                    replacedPayloadBytes: placement.replaced.payloadBytes, modifiedNanoseconds: publishedAt,
                    placed: false, stamp: nil, before: before))
        }
        if let remoteFile, !window.isUndisturbed(state.stamp(expectation.slots), own: [0]) {
            // A write or removal of the key opened or closed a window since this one opened: a removal may
            // have run whole between the check above and the rename (deleting this value everywhere and
            // returning), and must not see it come back. The file goes again at once, before this window
            // closes (its close invalidates every memory item stamped before), and the value is refused.
            let judged = JudgedFile(
                status: remoteFile, unlessTouched: false, slots: expectation.slots, ownOpenWindows: 1)
            _ = remove(path.relative, payload: .headerSize(headerSize), judged: judged)
            _ = window.close()
            return .success(
                PublishOutcome(
                    header: header, allocatedBytes: 0, replacedAllocatedBytes: placement.replaced.allocatedBytes,
                    replacedPayloadBytes: placement.replaced.payloadBytes, modifiedNanoseconds: publishedAt,
                    placed: false, stamp: nil, before: before))
        }
        let stamp = window.close()
        state.notePublish(atNanoseconds: publishedAt)
        return .success(
            PublishOutcome(
                header: header, allocatedBytes: allocated, replacedAllocatedBytes: placement.replaced.allocatedBytes,
                replacedPayloadBytes: placement.replaced.payloadBytes, modifiedNanoseconds: publishedAt,
                placed: true, stamp: stamp, before: before))
    }

    /// Tests only: what runs between a remote value's publish check and its rename, by relative path
    /// (another process's removal of the key in that gap, deterministically). Empty in real use.
    static let beforeRemotePlacement = Mutex<[String: @Sendable () -> Void]>([:])

    /// `commit` with a defect turned on (`Injection`, for the history checker's proofs only): no write
    /// window; with `publish-bump-after`, one bump of the key's epoch after the rename (the old rule).
    private func injectedCommit(
        _ stagingPath: String, held: Bool, as header: EntryFormat.Header, to path: EntryPath, publishedAt: Int64,
        mode: PublishMode, expectation: EntryExpectation, charge allocated: Int64
    ) -> Result<PublishOutcome, SystemCallError> {
        let state = directory.state
        let payloadCount = Int64(header.payloadByteCount)
        let before = state.stamp(expectation.slots)
        let placed = place(
            stagingPath, held: held, at: path, headerSize: header.payloadOffset, mode: mode, expectation: expectation)
        guard case .success(let placement) = placed, placement.placed else {
            state.adjustUsage(by: -allocated)
            state.adjustPayloadBytes(by: -payloadCount)
            return placed.map { _ in
                PublishOutcome(
                    header: header, allocatedBytes: 0, replacedAllocatedBytes: 0, replacedPayloadBytes: 0,
                    modifiedNanoseconds: publishedAt, placed: false, stamp: nil, before: before)
            }
        }
        if Injection.publishBumpAfter {
            // The old rule's gap between the rename and the bump, held open for 2 ms so that a quiet machine
            // runs into it as often as a busy one does (the checker's proof must not depend on the load).
            usleep(2_000)
            try? state.bumpKey(expectation.slots)
        }
        state.adjustUsage(by: -placement.replaced.allocatedBytes)
        state.adjustPayloadBytes(by: -placement.replaced.payloadBytes)
        state.notePublish(atNanoseconds: publishedAt)
        return .success(
            PublishOutcome(
                header: header, allocatedBytes: allocated, replacedAllocatedBytes: placement.replaced.allocatedBytes,
                replacedPayloadBytes: placement.replaced.payloadBytes, modifiedNanoseconds: publishedAt,
                placed: true, stamp: state.stamp(expectation.slots), before: before))
    }

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
