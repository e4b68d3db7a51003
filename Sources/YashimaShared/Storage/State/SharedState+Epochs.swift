// The epochs of the state file (I10): global, per namespace slot, per key slot. Every publish and every
// removal of an entry is a write window on its key slot (opened before its rename, closed after it), and
// `removeAll` holds a window on its namespace's or the global word for its whole scan; memory serves a value
// only under a quiet stamp it was read under. Stamps carry the file's instance id (I14). Docs/Internals.md.

/// The epochs (I10) a value was read or generated under. A memory item carries them, and so does a
/// flight's result: a caller that joined someone else's flight accepts the value only while they are
/// still current, because the flight may have read it before a write or removal that finished before
/// that caller began.
struct EpochSnapshot: Sendable, Equatable {
    let slots: SharedState.Slots
    let stamp: SharedState.Stamp
}

extension SharedState {
    /// How an epoch word is laid out: the low 48 bits count every write window opened and closed on it (the
    /// epoch), the high 16 bits count the windows open now. A window opens with one addition and closes
    /// with another (`writeWindowOpening`, `writeWindowClosing`), so concurrent writers of one slot never
    /// lose each other's marks, and a word whose high bits are zero is quiet: no write of any key of the slot
    /// is between its two marks. Older builds add 1 per bump and compare words for equality: both still
    /// see every change.
    static let openWindowUnit: UInt64 = 1 << 48
    static let writeWindowOpening: UInt64 = openWindowUnit &+ 1
    static let writeWindowClosing: UInt64 = 1 &- openWindowUnit

    /// Whether an epoch word has no write window open.
    static func isQuiet(_ word: UInt64) -> Bool { word < openWindowUnit }

    /// The epochs an in-memory entry is valid for, and which state file they were read from.
    struct Stamp: Equatable, Sendable, CustomStringConvertible {
        var instance: UInt64
        var global: UInt64
        var namespace: UInt64
        var key: UInt64
        /// False when no state file could be had: such a stamp matches nothing, not even itself.
        var isAvailable = true

        static let unavailable = Stamp(instance: 0, global: 0, namespace: 0, key: 0, isAvailable: false)

        /// Whether no write window was open on any of the three words when the stamp was read: only such
        /// a stamp can vouch for a value (a value read while a window was open may be replaced by a rename
        /// that no later epoch change announces before it is visible).
        var isQuiet: Bool {
            isAvailable && SharedState.isQuiet(global) && SharedState.isQuiet(namespace) && SharedState.isQuiet(key)
        }

        /// Whether an item stamped `self` is still valid under the current stamp `other`: both quiet, the
        /// same file, and no epoch moved between them (I10).
        func matches(_ other: Stamp) -> Bool {
            isQuiet && other.isAvailable && instance == other.instance && global == other.global
                && namespace == other.namespace && key == other.key
        }

        var description: String {
            isAvailable ? "\(instance):\(global)/\(namespace)/\(key)" : "unavailable"
        }
    }

    /// Slots of a key: where its namespace and key epochs live.
    struct Slots: Equatable, Sendable {
        var namespace: Int
        var key: Int
    }

    /// The slots of a key. The namespace slot uses CRC32C of the namespace (stable across processes and
    /// cheap on every lookup); the key slot uses the key's SHA-256 digest, already at hand.
    static func slots(namespace: String, keyDigest: SHA256Digest) -> Slots {
        Slots(namespace: namespaceSlot(namespace), key: Int(keyDigest.prefixWord % UInt64(keySlots)))
    }

    static func namespaceSlot(_ namespace: String) -> Int {
        var namespace = namespace
        let crc = namespace.withUTF8 { CRC32C.checksum(UnsafeRawBufferPointer($0)) }
        return Int(crc % UInt32(namespaceSlots))
    }

    /// The current epochs of `slots`. A stamp is returned only if its file was still live after the
    /// epochs were read, so it never mixes a dead file's words with a live file's instance id.
    func stamp(_ slots: Slots) -> Stamp {
        for _ in 0..<Policy.stateSwitchRetries {
            guard let mapping = live() else { break }
            if let stamp = Self.stamp(slots, in: mapping) { return stamp }
        }
        return .unavailable
    }

    /// The current epochs of `slots` in `mapping`, or nil when the mapping was found dead after they were
    /// read (then its words may be a dead file's: `stamp(_:)` switches files and reads again).
    static func stamp(_ slots: Slots, in mapping: StateMapping) -> Stamp? {
        let stamp = Stamp(
            instance: mapping.instance, global: mapping.load(SharedState.globalEpochOffset),
            namespace: mapping.load(SharedState.namespaceOffset + 8 * slots.namespace),
            key: mapping.load(SharedState.keyOffset + 8 * slots.key))
        return mapping.isLive ? stamp : nil
    }

    /// A write window open on a key slot (`openKeyWindow`): closed exactly once (`close`).
    struct KeyWindow: ~Copyable {
        fileprivate let state: SharedState
        fileprivate let mapping: StateMapping
        fileprivate let slots: Slots
        /// The stamp read just before the window opened (unavailable when another write of the slot came
        /// between that read and the opening).
        let before: Stamp
        /// The key word right after this window opened.
        let opened: UInt64

        /// Closes the window: the key word's open count goes down and its epoch up once more, so every stamp
        /// read before this instant (inside the window or before it) no longer matches. Returns the stamp
        /// right after closing when it is quiet and nothing else changed the three words since the window
        /// was opened (the writer's own memory item is valid under it); nil otherwise (the item is then read
        /// again at its next lookup). A file that died meanwhile gets a plain bump in its successor instead
        /// (its words started over: there is no window of ours to close there).
        consuming func close() -> Stamp? {
            let offset = SharedState.keyOffset + 8 * slots.key
            let previous = mapping.fetchAdd(offset, SharedState.writeWindowClosing)
            if mapping.isLive {
                let after = previous &+ SharedState.writeWindowClosing
                guard before.isQuiet, previous == opened, SharedState.isQuiet(after),
                    mapping.load(SharedState.globalEpochOffset) == before.global,
                    mapping.load(SharedState.namespaceOffset + 8 * slots.namespace) == before.namespace
                else { return nil }
                return Stamp(
                    instance: before.instance, global: before.global, namespace: before.namespace, key: after)
            }
            try? state.bump(offset)
            return nil
        }

        /// Whether the words read now (`current`) show no window of anyone else opened or closed since this
        /// one opened: this window is the only one open on them, the global and namespace words are as they
        /// were and quiet (no `removeAll` is scanning, even one whose window opened before this one), and the
        /// key word moved by `own` at most (what windows of the caller's own, opened and closed
        /// inside this one, add: 0 or 2 each, so another's opening or closing is always seen). `openWindows`:
        /// how many windows are open on the key word counting this one (more when the caller's own enclose it).
        func isUndisturbed(_ current: Stamp, own: [UInt64], openWindows: UInt64 = 1) -> Bool {
            guard before.isAvailable, current.isAvailable, current.instance == before.instance,
                current.global == before.global, current.namespace == before.namespace,
                SharedState.isQuiet(current.global), SharedState.isQuiet(current.namespace),
                current.key >> 48 == openWindows
            else { return false }
            return own.contains { current.key == opened &+ $0 }
        }

        /// Closes a window through which nothing became visible (a publish that failed before its rename,
        /// or an `.adding` publish that left a live entry in place): the opening is undone exactly, so the
        /// word is what it was plus whatever other windows did meanwhile, and memory items stamped before
        /// stay valid (nothing changed for them). A file that died meanwhile is left alone.
        consuming func cancel() {
            let offset = SharedState.keyOffset + 8 * slots.key
            guard mapping.isLive else { return }
            _ = mapping.fetchAdd(offset, 0 &- SharedState.writeWindowOpening)
        }
    }

    /// Opens a write window on the key slot of `slots` (I10): called right before the rename that publishes
    /// or removes an entry of that slot; `KeyWindow.close()` right after it. While it is open no stamp of
    /// the slot is quiet, so no memory item is served or confirmed without a look at storage. Throws when
    /// no state file can be had (the write could not be announced to other processes: it must not happen).
    func openKeyWindow(_ slots: Slots) throws(YCache.Error) -> KeyWindow {
        let offset = SharedState.keyOffset + 8 * slots.key
        for _ in 0..<Policy.stateSwitchRetries {
            let before = stamp(slots)
            guard let mapping = live() else { throw unavailableError }
            let previous = mapping.fetchAdd(offset, SharedState.writeWindowOpening)
            if mapping.isLive {
                let expected = before.isAvailable && mapping.instance == before.instance ? before : .unavailable
                return KeyWindow(
                    state: self, mapping: mapping, slots: slots,
                    before: previous == before.key ? expected : .unavailable,
                    opened: previous &+ SharedState.writeWindowOpening)
            }
            // The file died under the opening: our mark landed in a file nobody reads; open it in the successor.
        }
        throw unavailableError
    }

    /// A write window on a namespace word or the global one (`openRemovalWindow`): `removeAll`'s, open for
    /// its whole scan. Its opener closes it exactly once (`close`), whatever the scan did.
    struct WordWindow {
        fileprivate let state: SharedState
        fileprivate let mapping: StateMapping
        fileprivate let offset: Int

        /// Closes the window: the word's open count goes down and its epoch up, so every stamp read before
        /// now no longer matches. A file that died meanwhile gets a plain bump in its successor instead.
        func close() throws(YCache.Error) {
            _ = mapping.fetchAdd(offset, SharedState.writeWindowClosing)
            if !mapping.isLive { try state.bump(offset) }
        }
    }

    /// Opens a write window on the namespace word of `slot` (nil: the global word) for a removal of every
    /// entry in it (I10). While it is open no stamp of the namespace is quiet: no memory item of it is
    /// served or confirmed, and a judged remover's move back (`KeyWindow.isUndisturbed`) is refused, also
    /// when its own window opened after this one, so an entry a trim held aside while the scan passed its
    /// path does not come back after the removal. Throws when no state file can be had.
    func openRemovalWindow(namespaceSlot slot: Int?) throws(YCache.Error) -> WordWindow {
        let offset = slot.map { SharedState.namespaceOffset + 8 * $0 } ?? SharedState.globalEpochOffset
        for _ in 0..<Policy.stateSwitchRetries {
            guard let mapping = live() else { throw unavailableError }
            _ = mapping.fetchAdd(offset, SharedState.writeWindowOpening)
            if mapping.isLive { return WordWindow(state: self, mapping: mapping, offset: offset) }
        }
        throw unavailableError
    }

    /// Bumps the key slot's epoch once (a plain change: stamps read before it no longer match). Throws when
    /// no state file can be had.
    func bumpKey(_ slots: Slots) throws(YCache.Error) { try bump(SharedState.keyOffset + 8 * slots.key) }
    func bumpNamespace(slot: Int) throws(YCache.Error) { try bump(SharedState.namespaceOffset + 8 * slot) }
    func bumpGlobal() throws(YCache.Error) { try bump(SharedState.globalEpochOffset) }

    /// Increments the word at `offset` in the live file, and again in the file everyone switched to if
    /// this one died while the increment landed (marked dead by a repairer, or zeroed by the SIGBUS guard
    /// when the increment itself faulted on a truncated page): a bump never ends up only in a file
    /// nobody reads.
    ///
    /// Why no process keeps a removed entry in memory across a repair (I10, I14): a value in memory
    /// carries the stamp (instance id and epochs) it was read under, a stamp is only returned when its
    /// file was still live after the epochs were read (`stamp`), and a lookup compares it with a stamp of
    /// the file live at lookup time. A value stamped from the old file never matches a stamp of the new
    /// one (another instance id), so only values stamped from the new file matter, and those were stamped
    /// after the repairer marked the old file dead (it does so before its rename). A write window whose
    /// closing finds its file dead bumps the successor after the rename, so a value stamped there before
    /// the rename no longer matches; only a lookup between that rename and that bump can still serve the
    /// value the rename replaced (a repair is damage, I14, and this is its one cost). (A state file
    /// someone else renamed over the path or deleted cannot be marked dead by a repairer, who never sees
    /// it: its holders notice at their next write and within `Policy.rootCheckInterval` of lookups,
    /// `verifyPath`.)
    fileprivate func bump(_ offset: Int) throws(YCache.Error) {
        for _ in 0..<Policy.stateSwitchRetries {
            guard let mapping = live() else { throw unavailableError }
            mapping.increment(offset)
            if mapping.isLive { return }
        }
        throw unavailableError
    }
}
