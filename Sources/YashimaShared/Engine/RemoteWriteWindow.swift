// A write window held across a write's local rename and its remote store, or across a removal's walk of the
// tiers (I10, I16): before it closes, when any other write or removal of the slot opened or closed a window
// meanwhile, the key's remote copy is deleted, so on one machine the remote tier never keeps a value that
// the local directory replaced or removed. The argument: Docs/Internals.md (Consistency).

/// A write window whose owner also writes the remote tier (see the file's header). Noncopyable: closed once.
///
/// Why the remote tier never outlives a local write or removal on one machine: take any set of windows of
/// one slot that overlap in time. The one that closes last saw the others: each opened after it (the key
/// word moved) or was open when it opened and is no longer (the word moved again), or is still open (more
/// than one window open). So before it closes it deletes the key's remote value, after every remote store
/// the others made inside their windows; and a remote value a later lookup fetches was stored by a write
/// whose window overlapped no other, so it is the local directory's latest. Deletes are bounded
/// (`Policy.remoteCleanupRounds`, each a guarded remote call): a window still open after them closes later
/// and cleans itself.
struct RemoteWriteWindow: ~Copyable {
    private let state: SharedState
    private let slots: SharedState.Slots
    private let window: SharedState.KeyWindow

    /// Opens the window on `slots` in `state`; nil when no state file can be had (then nothing can announce
    /// the write either, and the caller's own write fails or goes on as it would).
    init?(_ state: SharedState, slots: SharedState.Slots) {
        guard let window = try? state.openKeyWindow(slots) else { return nil }
        self.state = state
        self.slots = slots
        self.window = window
    }

    /// The window of a write or removal that `deleteRemote` cleans up after (nil: it does not write the
    /// remote tier, or there is no storage): opened in `storage`'s state file.
    static func opened(
        in storage: StorageContext?, slots: SharedState.Slots, for deleteRemote: (@Sendable () async -> Void)?
    ) -> RemoteWriteWindow? {
        guard deleteRemote != nil, let storage, !Injection.remoteWindowSkip else { return nil }
        return RemoteWriteWindow(storage.directory.state, slots: slots)
    }

    /// Closes `window`, if any, with `deleteRemote` as the cleanup (`close(own:deleteRemote:)`; the caller's
    /// own windows inside it are one publish or removal, closed or undone).
    static func close(_ window: consuming RemoteWriteWindow?, deleteRemote: (@Sendable () async -> Void)?) async {
        guard let window = consume window, let deleteRemote else { return }
        await window.close(own: [0, 2], deleteRemote: deleteRemote)
    }

    /// Closes the window, first deleting the key's remote value (`deleteRemote`) whenever another window of
    /// the slot opened or closed since this one opened, again after each delete while that goes on, at most
    /// `Policy.remoteCleanupRounds` times.
    /// - Parameter own: What the caller's own windows inside this one added to the key word (0 for one that
    ///   was undone, 2 for one that closed).
    consuming func close(own: [UInt64], deleteRemote: () async -> Void) async {
        var own = own
        for _ in 0..<Policy.remoteCleanupRounds {
            let current = state.stamp(slots)
            if window.isUndisturbed(current, own: own) { break }
            await deleteRemote()
            // What is there now counts as the baseline: only further openings and closings call for another.
            let moved = current.key &- window.opened
            own = [moved]
        }
        _ = window.close()
    }
}
