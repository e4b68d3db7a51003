// Removing an entry (I4): the file is first renamed aside into `tmp/` (so exactly one remover or replacing
// publisher ever owns a given file, I9), then unlinked: pages a reader already opened stay readable and trim
// may remove what others are reading. A remover that judged one file (trim, expiry, a corrupt read) removes
// that file only: anything else it took aside goes back. The bytes moved come off the counters (I9).

import Synchronization

/// How `EntryFile.remove` learns the payload bytes it takes off the payload counter (I9).
enum PayloadCharge: Sendable {
    /// The file's size minus this header size: the entry's key and codec are known, so its header size is
    /// (any file at an entry path has that key and codec, or is debris and charged its whole size).
    case headerSize(Int)
    /// Unknown: read the entry's fixed header first.
    case readHeader
}

/// The charges a removal or a replacing publish took off the counters (I9).
struct RemovedCharge: Sendable, Equatable {
    var allocatedBytes: Int64
    var payloadBytes: Int64

    static let none = RemovedCharge(allocatedBytes: 0, payloadBytes: 0)
}

/// The file a remover judged (read, stat'ed) and means to remove, and nothing else: a file another process
/// published at the path since is not the remover's to take.
struct JudgedFile: Sendable {
    let status: FileStatus
    /// Also leave the file when its mtime moved since it was judged (a hit used it: trim's victims, I11).
    let unlessTouched: Bool
    /// The key's epoch slots, for the write window that guards moving another file back (I10); nil when
    /// the key is unknown (a file that is not a sound entry): then another file is not moved back either.
    var slots: SharedState.Slots?
    /// Write windows of the caller's own open on those slots (a publish placing its entry: 1).
    var ownOpenWindows: UInt64 = 0

    init(status: FileStatus, unlessTouched: Bool, slots: SharedState.Slots?, ownOpenWindows: UInt64 = 0) {
        self.status = status
        self.unlessTouched = unlessTouched
        self.slots = slots
        self.ownOpenWindows = ownOpenWindows
    }

    /// Whether `found` (what the path named when the remover took it aside) is the file judged.
    func isJudged(_ found: FileStatus) -> Bool {
        found.isSameFile(as: status) && (!unlessTouched || found.modifiedNanoseconds == status.modifiedNanoseconds)
    }
}

extension EntryFile {
    /// Unlinks the entry at `relative` and subtracts its allocated and payload bytes from the counters (I9).
    /// The file is renamed aside first and charged from what was moved, so a publish that replaces it at the
    /// same moment (which owns what it replaces, `commit`) never has it subtracted twice. A missing file is
    /// fine: `.success(nil)`.
    ///
    /// With `judged`, only that file goes: when the path named another one by the time it was taken aside
    /// (a publish since the remover's look), that one is moved back where nothing is (`RENAME_NOREPLACE`:
    /// the path was empty meanwhile, a miss, which a cache may always give) and the result is nil; when a
    /// publish filled the path meanwhile too, the file taken aside was replaced by then and is unlinked.
    @discardableResult
    func remove(_ relative: String, payload charge: PayloadCharge, judged: JudgedFile? = nil) -> Result<
        RemovedCharge?, SystemCallError
    > {
        switch takeAside(relative, judged: judged) {
        case .success(let (aside, status)?):
            let removed = dispose(aside, status: status, charge: charge)
            directory.state.adjustUsage(by: -removed.allocatedBytes)
            directory.state.adjustPayloadBytes(by: -removed.payloadBytes)
            return .success(removed)
        case .success(nil): return .success(nil)
        case .failure(let error): return .failure(error)
        }
    }

    /// `takeAside(_:)`, and with `judged` the check that what was taken is the file judged: another file is
    /// moved back where nothing is (`RENAME_NOREPLACE`; the path was empty meanwhile, a miss, which a cache
    /// may always give) and the result is nil; when a publish filled the path meanwhile too (or the folder
    /// went), the file taken aside was replaced by then and is the caller's to dispose like the one judged.
    /// Returns the name taken aside and its status (nil when it could not be had).
    ///
    /// Moving back is guarded by a write window on the key's slots, open from before the take-aside until
    /// after the move (I10): a write or removal of the key that came meanwhile saw the path empty and may
    /// have finished (a removal found nothing to unlink; a store's entry was removed again), so the file
    /// put back could be older than it, or removed. When any other window opened or closed in that span
    /// (or the namespace or global word moved or is open: a `removeAll` holds it open for its scan), the file goes
    /// again and the window closes with a bump; otherwise nothing visible changed and it is cancelled.
    func takeAside(_ relative: String, judged: JudgedFile?) -> Result<(String, FileStatus?)?, SystemCallError> {
        let state = directory.state
        let window = judged?.slots.flatMap { slots in try? state.openKeyWindow(slots) }
        let aside: String
        switch takeAside(relative) {
        case .success(let moved?): aside = moved
        case .success(nil):
            window?.cancel()
            return .success(nil)
        case .failure(let error):
            window?.cancel()
            return .failure(error)
        }
        let root = directory.descriptor
        let status = try? Syscall.status(of: aside, in: root).get()
        guard let judged, let status, !judged.isJudged(status) else {
            window?.cancel()  // the file judged: an eviction or a dead entry, no value changed (I10)
            return .success((aside, status))
        }
        guard let window else { return .success((aside, status)) }  // no window, no move back: a miss
        if let hook = Self.beforeMoveBack.withLock({ $0[relative] }) { hook() }
        // Disturbed already (a write or removal of the key came, or a `removeAll` of its namespace is
        // scanning): the file stays aside, a miss, and is never visible again; the window's close
        // invalidates every memory item stamped before it. Checked again after the move back, for what comes
        // between this look and the rename.
        if let slots = judged.slots,
            !window.isUndisturbed(state.stamp(slots), own: [0], openWindows: 1 + judged.ownOpenWindows)
        {
            _ = window.close()
            return .success((aside, status))
        }
        guard case .success = Syscall.renameWithoutReplacing(aside, in: root, to: relative, in: root) else {
            window.cancel()  // a publish filled the path: the file taken aside is the caller's to dispose
            return .success((aside, status))
        }
        if let slots = judged.slots,
            window.isUndisturbed(state.stamp(slots), own: [0], openWindows: 1 + judged.ownOpenWindows)
        {
            window.cancel()
            return .success(nil)
        }
        // Disturbed: what is at the path now goes (a miss), and the window's close invalidates every memory
        // item stamped before it (I10).
        let again = takeAside(relative)
        _ = window.close()
        switch again {
        case .success(let moved?): return .success((moved, try? Syscall.status(of: moved, in: root).get()))
        case .success(nil): return .success(nil)
        case .failure(let error): return .failure(error)
        }
    }

    /// Tests only: what runs between a judged remover's take-aside and its move back, by relative path
    /// (another process's removal in that gap, deterministically). Empty in real use.
    static let beforeMoveBack = Mutex<[String: @Sendable () -> Void]>([:])

    /// The epoch slots of the key whose entry is at `relative`, from its header (every file at an entry
    /// path has that path's key, or is not a sound entry: nil).
    func slots(ofEntryAt relative: String) -> SharedState.Slots? {
        guard case .success(let (header, bytes, _)) = readHeader(relative),
            let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset])
        else { return nil }
        return SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
    }

    /// Renames the file at `relative` to a new name in `tmp/` (repairing `tmp/` when it was removed or
    /// replaced, I13) and returns that name; `nil` when nothing is at `relative`. A folder planted at an
    /// entry path is not the cache's to move: it goes back, and the call fails as an unlink would (EISDIR).
    /// The name ends in `.aside`, and the rename sets the file's ctime, which the debris sweep goes by for
    /// such names (I2): a file taken aside keeps its entry's old mtime, but is never swept before its
    /// remover charges it off.
    func takeAside(_ relative: String) -> Result<String?, SystemCallError> {
        let root = directory.descriptor
        let aside = directory.newAsidePath()
        var moved = Syscall.rename(relative, in: root, to: aside, in: root)
        if case .failure(let error) = moved, error.errno.isFolderMissingOrReplaced {
            // The entry is gone, or `tmp/` is: tell them apart before repairing anything.
            guard case .success = Syscall.status(of: relative, in: root) else { return .success(nil) }
            if case .failure(let repairError) = directory.repairStagingFolder() { return .failure(repairError) }
            moved = Syscall.rename(relative, in: root, to: aside, in: root)
        }
        switch moved {
        case .success: break
        case .failure(let error) where error.errno == .noSuchFile: return .success(nil)
        case .failure(let error): return .failure(error)
        }
        if case .success(let status) = Syscall.status(of: aside, in: root), status.isDirectory {
            _ = Syscall.renameWithoutReplacing(aside, in: root, to: relative, in: root)
            return .failure(SystemCallError(operation: "renameat", path: relative, errno: .isDirectory))
        }
        return .success(aside)
    }

    /// Charges and unlinks a file this process moved aside (nobody else names it). Anything but a regular
    /// file is charged nothing.
    func dispose(_ aside: String, charge: PayloadCharge) -> RemovedCharge {
        dispose(aside, status: try? Syscall.status(of: aside, in: directory.descriptor).get(), charge: charge)
    }

    /// `dispose(_:charge:)` with the file's status already at hand (nil: it could not be had).
    func dispose(_ aside: String, status: FileStatus?, charge: PayloadCharge) -> RemovedCharge {
        let root = directory.descriptor
        guard let status else { return .none }
        guard status.isRegularFile else {
            _ = Syscall.unlink(aside, in: root)  // a symlink or special file planted at an entry path
            return .none
        }
        let payload: Int64
        switch charge {
        case .headerSize(let size): payload = Self.payloadBytes(fileSize: status.size, headerSize: size)
        case .readHeader: payload = chargedPayloadBytes(aside, status: status)
        }
        _ = Syscall.unlink(aside, in: root)
        return RemovedCharge(allocatedBytes: status.allocatedBytes, payloadBytes: payload)
    }
}
