// A write window held across a write's local rename and its remote store, or across a removal's walk of the
// tiers (I10, I16): before it closes, when any other write or removal of the slot opened or closed a window
// meanwhile, the key's remote copy is deleted, so on one machine the remote tier never keeps a value that
// the local directory replaced or removed. A delete that fails is owed: recorded in the directory, and no
// lookup on this machine takes the key from the remote tier until one succeeds. Docs/Internals.md
// (Consistency) has the argument.

/// A write window whose owner also writes the remote tier (see the file's header). Noncopyable: closed once.
///
/// Why the remote tier never outlives a local write or removal on one machine: take any set of windows of
/// one slot that overlap in time. The one that closes last saw the others: each opened after it (the key
/// word moved) or was open when it opened and is no longer (the word moved again), or is still open (more
/// than one window open). So before it closes it deletes the key's remote value, after every remote store
/// the others made inside their windows; and a remote value a later lookup fetches was stored by a write
/// whose window overlapped no other, so it is the local directory's latest. Deletes are bounded
/// (`Policy.remoteCleanupRounds`, each a guarded remote call): a window still open after them closes later
/// and cleans itself. A delete that fails (the server down, its breaker open), and a write whose own
/// remote store did not land, leave the remote copy possibly older: the key is then owed
/// (`Directory.oweRemoteDelete`) before the window closes, so every lookup that starts later sees the debt
/// (and one that fetched earlier took its epochs before this window closed, I10: its value is refused).
struct RemoteWriteWindow: ~Copyable {
    private let directory: Directory
    private let slots: SharedState.Slots
    private let identity: EntryIdentity
    private let window: SharedState.KeyWindow

    /// Opens the window on `slots` in `directory`'s state file; nil when no state file can be had (then
    /// nothing can announce the write either, and the caller's own write fails or goes on as it would).
    init?(_ directory: Directory, slots: SharedState.Slots, identity: EntryIdentity) {
        guard let window = try? directory.state.openKeyWindow(slots) else { return nil }
        self.directory = directory
        self.slots = slots
        self.identity = identity
        self.window = window
    }

    /// The window of a write or removal that `deleteRemote` cleans up after (nil: it does not write the
    /// remote tier, or there is no storage): opened in `storage`'s state file.
    static func opened(
        in storage: StorageContext?, slots: SharedState.Slots, identity: EntryIdentity,
        for deleteRemote: RemoteTier.Delete?
    ) -> RemoteWriteWindow? {
        guard deleteRemote != nil, let storage, !Injection.remoteWindowSkip else { return nil }
        return RemoteWriteWindow(storage.directory, slots: slots, identity: identity)
    }

    /// Closes `window`, if any, with `deleteRemote` as the cleanup (`close(own:deleteRemote:)`; the caller's
    /// own windows inside it are one publish or removal, closed or undone).
    static func close(_ window: consuming RemoteWriteWindow?, deleteRemote: RemoteTier.Delete?) async {
        guard let window = consume window, let deleteRemote else { return }
        await window.close(own: [0, 2], deleteRemote: deleteRemote)
    }

    /// Closes the window, first deleting the key's remote value (`deleteRemote`) whenever another window of
    /// the slot opened or closed since this one opened, again after each delete while that goes on, at most
    /// `Policy.remoteCleanupRounds` times. A delete that fails makes the key owed and ends the rounds.
    /// - Parameter own: What the caller's own windows inside this one added to the key word (0 for one that
    ///   was undone, 2 for one that closed).
    consuming func close(own: [UInt64], deleteRemote: RemoteTier.Delete) async {
        var own = own
        for _ in 0..<Policy.remoteCleanupRounds {
            let current = directory.state.stamp(slots)
            if window.isUndisturbed(current, own: own) { break }
            guard await deleteRemote() else {
                directory.oweRemoteDelete(identity)
                break
            }
            // What is there now counts as the baseline: only further openings and closings call for another.
            let moved = current.key &- window.opened
            own = [moved]
        }
        _ = window.close()
    }

    /// Pays the remote delete `directory` owes for `identity`, if it owes one, inside a window of its own
    /// (so that a write or removal racing with it, whose own delete fails, leaves the key owed again: the
    /// window's closer cleans up after the other, or owes). True when nothing is owed afterwards: the
    /// remote tier may be asked for the key again.
    static func settle(
        _ identity: EntryIdentity, slots: SharedState.Slots, in directory: Directory, deleteRemote: RemoteTier.Delete
    ) async -> Bool {
        guard directory.owesRemoteDelete(identity) else { return true }
        guard let window = RemoteWriteWindow(directory, slots: slots, identity: identity) else { return false }
        if await deleteRemote() { directory.forgiveRemoteDelete(identity) }
        await window.close(own: [0], deleteRemote: deleteRemote)
        return !directory.owesRemoteDelete(identity)
    }
}

extension Directory {
    /// The file that records a remote delete owed for `identity` (Docs/Format.md §7.6).
    private static func owedDeletePath(_ identity: EntryIdentity) -> String {
        Directory.owedDeletesFolder + "/" + identity.hex + Directory.owedDeleteSuffix
    }

    /// Records that the remote tier may hold a value of `identity` older than this directory's, or one it
    /// removed (a delete that failed, a store that did not land): until `forgiveRemoteDelete`, no lookup
    /// of this machine takes the key from the remote tier (I16). The folder is made (or repaired) first.
    /// A record that cannot be made (the folder unwritable) is not reported: the key is then as it was
    /// before this cache kept records (a possible stale remote hit, never another key's value). Two or
    /// three short syscalls, on the caller's thread like the publish beside it.
    func oweRemoteDelete(_ identity: EntryIdentity) {
        _ = Directory.ensureDirectory(
            Directory.owedDeletesFolder, in: descriptor, mode: directoryMode, replacingFiles: true)
        let path = Directory.owedDeletePath(identity)
        for _ in 0..<2 {
            switch Syscall.open(path, in: descriptor, flags: [.writeOnly, .create], mode: fileMode) {
            case .success(let fd):
                Syscall.close(fd)
                return
            case .failure:
                _ = Syscall.unlink(path, in: descriptor)  // a symlink or FIFO planted there (never followed)
            }
        }
    }

    /// Whether a remote delete is owed for `identity` (one `fstatat`; a record that cannot be looked at
    /// counts as none).
    func owesRemoteDelete(_ identity: EntryIdentity) -> Bool {
        if case .success = Syscall.status(of: Directory.owedDeletePath(identity), in: descriptor) { return true }
        return false
    }

    /// Drops the record of a remote delete owed for `identity`, once one succeeded.
    func forgiveRemoteDelete(_ identity: EntryIdentity) {
        _ = Syscall.unlink(Directory.owedDeletePath(identity), in: descriptor)
    }
}
