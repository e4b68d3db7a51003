// What an observer is told: `YCache.Change` and the entries it names (`ObservedEntry`, `RemovedEntry`),
// and where an observation starts. Made by Observation/, returned through `YCache.Changes`.

extension YCache {
    /// Where an observation starts.
    public enum ObservationStart: Sendable, Equatable {
        /// Only changes made after `observe` returns.
        case now
        /// First every matching entry stored when observation begins, each as a `.published` change, then
        /// the changes. Nothing published after `observe` returns is missed in between (an entry may then
        /// be reported twice).
        case currentState
    }

    /// A stored entry, as an observer is told about it: its key read back from the entry's header
    /// (namespace, identity, variants and versions), and its metadata.
    public struct ObservedEntry: Sendable, Equatable {
        /// The entry's key, parsed from the canonical bytes in its header.
        public let key: CacheKey
        /// Its metadata (codec identifier, creation and expiry times, payload size), from its header.
        public let metadata: YCache.Metadata
        /// The entry identity as 64 lowercase hex digits: the name of its file, which names it across
        /// processes (the same key with another codec is another entry).
        public let entryIdentifier: String
    }

    /// An entry that was removed. Its file is gone, so its key is known only when this process had seen
    /// the entry (see ``YCache/observe(in:startingWith:bufferLimit:)``).
    public struct RemovedEntry: Sendable, Equatable {
        /// The entry identity as 64 lowercase hex digits (the removed file's name).
        public let entryIdentifier: String
        /// The entry's key, or nil when this process never saw the entry's header.
        public let key: CacheKey?
        /// The codec the entry was stored with, or nil when its key is unknown.
        public let codecIdentifier: String?
    }

    /// One change to the storage directory, made by any process using it (this one included).
    public enum Change: Sendable, Equatable {
        /// An entry was published: stored or generated, new or replacing one (its new metadata).
        case published(ObservedEntry)
        /// An entry's file was unlinked: by `remove`, by trim, by `removeExpired()` or a lookup that found
        /// it expired or corrupt, or (for a key observer) by a `removeAll`; or it was replaced by a file no
        /// reader accepts (corrupt, already expired), which is then not reported again when it is unlinked.
        case removed(RemovedEntry)
        /// `removeAll(in:)` (the namespace) or `removeAll()` (nil) finished in some process: one change for
        /// the whole removal, reported to namespace and directory observers instead of one `.removed` per
        /// entry. Entries published while it ran and not removed by it are reported after it.
        case removedAll(namespace: String?)
        /// Changes were lost: this observer fell `bufferLimit` changes behind, or the kernel's event queue
        /// overflowed, or a removal's process died before finishing it. Re-read what you need
        /// (`valueIfCached`, `metadata`, `entries(in:)`); the changes that follow are again complete.
        case missedEvents
    }
}
