// Placing a filled staging file at its entry path, the rename of a publish (I1, I9): replacing what is
// there (`RENAME_EXCHANGE`, so the old file lands where only this process names it) or adding where no live
// entry is (`RENAME_NOREPLACE`, first wins); a held lock file (I6) keeps the entry path named throughout.

/// What a placement did.
struct Placement: Sendable {
    /// False when an `.adding` placement left a live entry where it was (the staging file was not moved).
    var placed: Bool
    /// The charge of what it took from the entry path (unlinked here): the caller takes it off (I9).
    var replaced: RemovedCharge
}

extension EntryFile {
    /// Moves the staging file (new in `tmp/`, or the held lock file when `held`) to `path` by `mode`.
    func place(
        _ staging: String, held: Bool, at path: EntryPath, headerSize: Int, mode: PublishMode,
        expectation: EntryExpectation
    ) -> Result<Placement, SystemCallError> {
        switch mode {
        case .adding, .addingUnlessWrittenSince:
            return placeAdding(staging, at: path, headerSize: headerSize, expectation: expectation)
        case .replacing:
            let placed =
                held
                ? placeHeldReplacing(staging, at: path, headerSize: headerSize)
                : placeExchanging(staging, at: path, headerSize: headerSize)
            return placed.map { Placement(placed: true, replaced: $0) }
        }
    }

    // MARK: Adding (first wins)

    /// Moves the staging file to `path` where nothing is. A live entry there stays (`placed` false); a dead
    /// one (corrupt, expired, not an entry of this key) is taken aside, that file and no other (a remover's
    /// rule, `JudgedFile`), and the move tried again.
    private func placeAdding(
        _ staging: String, at path: EntryPath, headerSize: Int, expectation: EntryExpectation
    ) -> Result<Placement, SystemCallError> {
        var replaced = RemovedCharge.none
        for _ in 0..<Self.placementAttempts {
            switch moveInWithoutReplacing(staging, at: path) {
            case .success(true): return .success(Placement(placed: true, replaced: replaced))
            case .success(false):
                switch judge(path, expecting: expectation) {
                case .live: return .success(Placement(placed: false, replaced: replaced))
                case .gone: continue
                case .dead(let status):
                    switch takeAside(path.relative, judged: judgedInPublish(status, expectation)) {
                    case .success(let (aside, found)?):
                        let charge = dispose(aside, status: found, charge: .headerSize(headerSize))
                        replaced.allocatedBytes += charge.allocatedBytes
                        replaced.payloadBytes += charge.payloadBytes
                    case .success(nil): continue
                    case .failure(let error): return .failure(error)
                    }
                }
            case .failure(let error) where error.errno.cannotSwap:
                // No `RENAME_NOREPLACE` here: a look, then a rename over a dead entry or none.
                if case .live = judge(path, expecting: expectation) {
                    return .success(Placement(placed: false, replaced: replaced))
                }
                return renameOver(staging, at: path, headerSize: headerSize).map {
                    Placement(
                        placed: true,
                        replaced: RemovedCharge(
                            allocatedBytes: replaced.allocatedBytes + $0.allocatedBytes,
                            payloadBytes: replaced.payloadBytes + $0.payloadBytes))
                }
            case .failure(let error): return .failure(error)
            }
        }
        // The path kept filling and emptying under us: another writer's entry is as good as ours.
        return .success(Placement(placed: false, replaced: replaced))
    }

    /// What is at an entry path, for an `.adding` publish.
    private enum Judged {
        /// A sound entry of the key (header checksum, identity) that has not expired.
        case live
        /// Something else: the file, as stat'ed before its header was read.
        case dead(FileStatus)
        case gone
    }

    /// Looks at the file at `path` (a stat, then its header).
    private func judge(_ path: EntryPath, expecting expectation: EntryExpectation) -> Judged {
        guard case .success(let status) = Syscall.status(of: path.relative, in: directory.descriptor) else {
            return .gone
        }
        guard case .success(let (header, bytes, read)) = readHeader(path.relative), read.isSameFile(as: status) else {
            return .dead(status)  // (if another file was read, taking aside this one finds the other: put back)
        }
        let sound = bytes.withUnsafeBytes {
            EntryFormat.validateIdentity(
                header, bytes: $0, expectedIdentity: expectation.identity.digest, keyBytes: expectation.keyBytes,
                codecBytes: expectation.codecBytes)
        }
        guard case .success = sound, !header.isExpired(atNanoseconds: Syscall.realtimeNanoseconds) else {
            return .dead(status)
        }
        return .live
    }

    // MARK: Replacing

    /// A held lock file (I6) replacing the entry at `path` with no moment where the path names nothing: a
    /// second name for it in `tmp/` is swapped with the entry (`RENAME_EXCHANGE`), then the lock path is
    /// unlinked (its holder's to unlink, I6; waiters then find it gone and read the entry). Where a second
    /// name cannot be made (a lock file another user made, in group-shared mode), or the filesystem cannot
    /// swap: the entry taken aside, then the lock file moved in (`placeWithoutReplacing`).
    private func placeHeldReplacing(_ staging: String, at path: EntryPath, headerSize: Int) -> Result<
        RemovedCharge, SystemCallError
    > {
        let root = directory.descriptor
        let second = directory.newStagingPath()
        guard case .success = Syscall.link(staging, in: root, to: second, in: root) else {
            return placeWithoutReplacing(staging, at: path, headerSize: headerSize)
        }
        attempts: for _ in 0..<Self.placementAttempts {
            switch Syscall.exchange(second, in: root, with: path.relative, in: root) {
            case .success:
                if case .success(let moved) = Syscall.status(of: second, in: root), moved.isDirectory {
                    _ = Syscall.exchange(second, in: root, with: path.relative, in: root)
                    _ = Syscall.unlink(second, in: root)
                    return .failure(
                        SystemCallError(operation: "renameat2", path: path.relative, errno: .isDirectory))
                }
                let charge = dispose(second, charge: .headerSize(headerSize))
                _ = Syscall.unlink(staging, in: root)
                return .success(charge)
            case .failure(let error) where error.errno.isFolderMissingOrReplaced:
                switch moveInWithoutReplacing(second, at: path) {
                case .success(true):
                    _ = Syscall.unlink(staging, in: root)
                    return .success(.none)
                case .success(false): continue attempts
                case .failure(let error) where error.errno.cannotSwap: break attempts
                case .failure(let error):
                    _ = Syscall.unlink(second, in: root)
                    return .failure(error)
                }
            case .failure(let error) where error.errno.cannotSwap: break attempts
            case .failure(let error):
                _ = Syscall.unlink(second, in: root)
                return .failure(error)
            }
        }
        _ = Syscall.unlink(second, in: root)
        return placeWithoutReplacing(staging, at: path, headerSize: headerSize)
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
                case .success(true): return .success(.none)
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
    /// and unlinked like a removal); returns the charge of what was taken aside. The path names nothing
    /// between the two renames: a lookup then misses.
    private func placeWithoutReplacing(_ staging: String, at path: EntryPath, headerSize: Int) -> Result<
        RemovedCharge, SystemCallError
    > {
        var replaced = RemovedCharge.none
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

    // MARK: The renames

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
        var replaced = RemovedCharge.none
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

    /// How many times a placement swaps or moves before falling back: each retry means another process
    /// published or removed this very entry in the last microseconds.
    private static let placementAttempts = 8
}

extension EntryFile {
    /// A dead entry judged by a publish that is placing its own (inside its own write window, I10).
    fileprivate func judgedInPublish(_ status: FileStatus, _ expectation: EntryExpectation) -> JudgedFile {
        JudgedFile(status: status, unlessTouched: false, slots: expectation.slots, ownOpenWindows: 1)
    }
}
