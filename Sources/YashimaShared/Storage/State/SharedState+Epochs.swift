// The removal epochs of the state file (I10): global, per namespace slot, per key slot; bumped around every
// removal and after a replacing publish, compared by every memory hit. Stamps carry the file's instance id
// (I14). How a slot shared by many keys still keeps I10: Docs/Internals.md.

/// The removal epochs (I10) a value was read or generated under. A memory item carries them, and so does
/// a flight's result: a caller that joined someone else's flight accepts the value only while they are
/// still current, because the flight may have read it before a removal that finished before that caller
/// began.
struct EpochSnapshot: Sendable, Equatable {
    let slots: SharedState.Slots
    let stamp: SharedState.Stamp
}

extension SharedState {
    /// The epochs an in-memory entry is valid for, and which state file they were read from.
    struct Stamp: Equatable, Sendable, CustomStringConvertible {
        var instance: UInt64
        var global: UInt64
        var namespace: UInt64
        var key: UInt64
        /// False when no state file could be had: such a stamp matches nothing, not even itself.
        var isAvailable = true

        static let unavailable = Stamp(instance: 0, global: 0, namespace: 0, key: 0, isAvailable: false)

        /// Whether an item stamped `self` is still valid under the current stamp `other`.
        func matches(_ other: Stamp) -> Bool {
            isAvailable && other.isAvailable && instance == other.instance && global == other.global
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
            let stamp = Stamp(
                instance: mapping.instance, global: mapping.load(SharedState.globalEpochOffset),
                namespace: mapping.load(SharedState.namespaceOffset + 8 * slots.namespace),
                key: mapping.load(SharedState.keyOffset + 8 * slots.key))
            if mapping.isLive { return stamp }
        }
        return .unavailable
    }

    /// Bumps the key slot's epoch. Throws when no state file can be had (the removal could not be
    /// announced to other processes).
    func bumpKey(_ slots: Slots) throws(YCache.Error) { try bump(SharedState.keyOffset + 8 * slots.key) }

    /// Bumps the key slot's epoch like `bumpKey(_:)` and returns the stamp right after that bump, when
    /// nobody else bumped any epoch of `slots` since `expected` was read (in the same file); nil otherwise.
    /// A writer stamps its own memory item with the result; with nil it falls back to `expected`, which
    /// no longer matches, so the item is re-read instead of outliving a removal that ran between
    /// `expected` and the bump (I10).
    func bumpKey(_ slots: Slots, expecting expected: Stamp) throws(YCache.Error) -> Stamp? {
        let offset = SharedState.keyOffset + 8 * slots.key
        var result: Stamp?
        var first = true
        for _ in 0..<Policy.stateSwitchRetries {
            guard let mapping = live() else { throw unavailableError }
            let previous = mapping.fetchIncrement(offset)
            if first, expected.isAvailable, mapping.instance == expected.instance, previous == expected.key,
                mapping.load(SharedState.globalEpochOffset) == expected.global,
                mapping.load(SharedState.namespaceOffset + 8 * slots.namespace) == expected.namespace
            {
                result = Stamp(
                    instance: expected.instance, global: expected.global, namespace: expected.namespace,
                    key: previous &+ 1)
            }
            first = false
            if mapping.isLive { return result }
            result = nil  // the file died under the bump: bumped again in its successor, our stamp is stale
        }
        throw unavailableError
    }
    func bumpNamespace(slot: Int) throws(YCache.Error) { try bump(SharedState.namespaceOffset + 8 * slot) }
    func bumpGlobal() throws(YCache.Error) { try bump(SharedState.globalEpochOffset) }

    /// Increments the word at `offset` in the live file, and again in the file everyone switched to if
    /// this one died while the increment landed (marked dead by a repairer, or zeroed by the SIGBUS guard
    /// when the increment itself faulted on a truncated page): a bump never ends up only in a file
    /// nobody reads.
    ///
    /// Why no process keeps a removed entry in memory across a repair (I10, I14), given that a removal
    /// is bump, unlink, bump, each bump starting with the magic check of `live()`: a value in memory
    /// carries the stamp (instance id and epochs) it was read under, a stamp is only returned when its
    /// file was still live after the epochs were read (`stamp`), and a lookup compares it with a stamp of
    /// the file live at lookup time. A value stamped from the old file never matches a stamp of the new
    /// one (another instance id), so only values stamped from the new file matter, and those were stamped
    /// after the repairer marked the old file dead (it does so before its rename). If the remover's
    /// second bump found the old file still live, that mark, the stamp and the read after it all came
    /// after the remover's unlink: the entry was gone. If it found the old file dead, it switched first
    /// and bumped the new file after the unlink, so the value's key epoch no longer matches. (A state
    /// file someone else renamed over the path or deleted cannot be marked dead by a repairer, who never
    /// sees it: its holders notice at their next write and within `Policy.rootCheckInterval` of lookups,
    /// `verifyPath`.)
    private func bump(_ offset: Int) throws(YCache.Error) {
        for _ in 0..<Policy.stateSwitchRetries {
            guard let mapping = live() else { throw unavailableError }
            mapping.increment(offset)
            if mapping.isLive { return }
        }
        throw unavailableError
    }
}
