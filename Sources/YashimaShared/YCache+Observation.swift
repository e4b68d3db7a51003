// The public observation API: `observe(for:codec:)`, `observe(in:)`, `observe()` and `Changes`, the
// asynchronous sequence of `Change`s (Observation/Change.swift). The machinery is in Observation/.

extension YCache {
    /// The changes an `observe` call reports, as an asynchronous sequence. Iterate it once.
    ///
    /// The sequence ends (returns nil) when the iterating task is cancelled; it throws
    /// `YCache.Error.observationUnavailable` when observation cannot go on (the inotify watch limit
    /// reached for a folder that appeared later, or the storage directory removed or replaced). Ending it,
    /// or dropping it and its iterator, releases its share of the process's watches; the watcher thread
    /// stops when the process's last observation ends.
    public struct Changes: AsyncSequence, Sendable {
        /// The element type: one change.
        public typealias Element = Change
        /// The error type.
        public typealias Failure = YCache.Error

        let handle: ObservationHandle

        /// An iterator over the changes. All iterators of one `Changes` share its buffer.
        public struct Iterator: AsyncIteratorProtocol {
            let handle: ObservationHandle

            /// The next change, waiting without holding a thread until there is one; nil once the task is
            /// cancelled.
            /// - Throws: `YCache.Error.observationUnavailable` when observation cannot go on.
            public mutating func next() async throws(YCache.Error) -> Change? {
                try await handle.observer.channel.next(observer: handle.observer, isolation: nil)
            }

            /// The next change, resuming on `actor`; nil once the task is cancelled.
            /// - Parameter actor: The actor the caller runs on.
            /// - Throws: `YCache.Error.observationUnavailable` when observation cannot go on.
            public mutating func next(isolation actor: isolated (any Actor)?) async throws(YCache.Error) -> Change? {
                try await handle.observer.channel.next(observer: handle.observer, isolation: actor)
            }
        }

        /// Makes the iterator.
        /// - Returns: An iterator sharing this sequence's buffer.
        public func makeAsyncIterator() -> Iterator {
            Iterator(handle: handle)
        }
    }

    /// The default `bufferLimit` of an observation: changes kept for an observer that has not read them.
    public static let defaultObservationBufferLimit = 4096

    /// Observes one key's entry (with one codec) in every process using this storage directory: it is
    /// published, with its metadata, or removed.
    ///
    /// Typical use: show a value the moment another process has made it.
    ///
    /// ```swift
    /// for try await change in try await cache.observe(for: key, codec: DataCodec(), startingWith: .currentState) {
    ///     if case .published = change, let value = try await cache.valueIfCached(for: key, codec: DataCodec()) {
    ///         show(value)
    ///     }
    /// }
    /// ```
    ///
    /// Every change after this call returns is reported, from any process (this one included), with no
    /// polling: a watcher thread of this process blocks on inotify and is shared by all its observations.
    /// A `.removed` is reported for every unlink of the entry's file, a `removeAll` included. The entry's
    /// file is only read (its header), never touched or changed, so observing changes neither what is
    /// stored nor the LRU order. Works in `.groupShared` mode across users and on directories whose
    /// folders are created later.
    /// - Parameters:
    ///   - key: The key to observe.
    ///   - codec: The codec its value is stored with (part of the entry's identity).
    ///   - start: `.now`, or `.currentState` to begin with a `.published` change when the entry is stored.
    ///   - bufferLimit: The most changes kept for this observer while it does not read them; past it they
    ///     are replaced by one `.missedEvents`. At least 2.
    /// - Returns: The changes, as an asynchronous sequence (iterate it once).
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`), or `.observationUnavailable` when
    ///   inotify cannot be used: the user's `fs.inotify.max_user_instances` or `max_user_watches` is
    ///   reached (the error names which).
    public func observe<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, startingWith start: ObservationStart = .now,
        bufferLimit: Int = YCache.defaultObservationBufferLimit
    ) async throws(YCache.Error) -> Changes {
        let expectation = EntryExpectation(key: key, codecIdentifier: codec.identifier)
        return try await observe(
            .key(expectation, key: key, codecIdentifier: codec.identifier), start: start, bufferLimit: bufferLimit)
    }

    /// Observes every entry of a namespace in every process using this storage directory: published (with
    /// the key read from the entry's header and its metadata), removed, and one `.removedAll` per
    /// `removeAll(in:)` of this namespace or `removeAll()`.
    ///
    /// A dashboard that shows the reports a worker process regenerates:
    ///
    /// ```swift
    /// for try await change in try await cache.observe(in: "reports", startingWith: .currentState) {
    ///     switch change {
    ///     case .published(let entry): show(entry.key, entry.metadata)
    ///     case .removed(let entry): if let key = entry.key { hide(key) } else { reloadAll() }
    ///     case .removedAll, .missedEvents: reloadAll()
    ///     }
    /// }
    /// ```
    ///
    /// A removed file can no longer be read, so removals are attributed to a key from what this process
    /// saw: the headers of entries published while it observed, and those found by a scan when the
    /// directory's first broad observation (namespace or directory) began; `observe` returns once that
    /// scan is done. The process remembers up to 16,384 keys (and 8 MiB of key bytes) per directory. A
    /// removal it cannot attribute (an entry beyond that, or older than its observation) is reported
    /// with `key == nil` to every namespace observer, since it may be theirs, unless a removal of the
    /// observer's namespace (or of the whole directory) is in progress. An entry unlinked before this
    /// process could read its header is reported neither way (when it knows every entry), since its key
    /// cannot be learnt; the net state is unchanged.
    /// - Parameters:
    ///   - namespace: The namespace whose entries to observe.
    ///   - start: `.now`, or `.currentState` to begin with a `.published` change for each entry stored.
    ///   - bufferLimit: The most changes kept for this observer while it does not read them; past it they
    ///     are replaced by one `.missedEvents`. The scan behind `.currentState` waits for the observer to
    ///     read, so it never overflows the buffer by itself. At least 2.
    /// - Returns: The changes, as an asynchronous sequence (iterate it once).
    /// - Throws: The errors of `observe(for:codec:startingWith:bufferLimit:)`.
    public func observe(
        in namespace: String, startingWith start: ObservationStart = .now,
        bufferLimit: Int = YCache.defaultObservationBufferLimit
    ) async throws(YCache.Error) -> Changes {
        try await observe(
            .namespace(namespace, digest: RemovalSignal.digest(of: namespace)), start: start, bufferLimit: bufferLimit)
    }

    /// Observes every entry of the storage directory, in every process using it: as
    /// `observe(in:startingWith:bufferLimit:)` does for one namespace, with every namespace's changes and
    /// one `.removedAll` per `removeAll(in:)` (naming the namespace) and per `removeAll()` (nil).
    ///
    /// A `.removedAll` of a namespace whose name this process cannot learn (the removal was over before
    /// its record could be read, and no entry of that namespace was seen) is reported as `.missedEvents`.
    /// - Parameters:
    ///   - start: `.now`, or `.currentState` to begin with a `.published` change for each entry stored.
    ///   - bufferLimit: The most changes kept for this observer while it does not read them; past it they
    ///     are replaced by one `.missedEvents`. At least 2.
    /// - Returns: The changes, as an asynchronous sequence (iterate it once).
    /// - Throws: The errors of `observe(for:codec:startingWith:bufferLimit:)`.
    public func observe(
        startingWith start: ObservationStart = .now, bufferLimit: Int = YCache.defaultObservationBufferLimit
    ) async throws(YCache.Error) -> Changes {
        try await observe(.everything, start: start, bufferLimit: bufferLimit)
    }

    private func observe(_ filter: ObservationFilter, start: ObservationStart, bufferLimit: Int)
        async throws(YCache.Error) -> Changes
    {
        let context = try engine.storageTier.context(for: .write).get()
        let observer = Observer(filter: filter, start: start, bufferLimit: bufferLimit)
        try await ObservationHub.shared.register(observer, directory: context.directory)
        return Changes(handle: ObservationHandle(observer: observer))
    }
}

/// Keeps one observation alive while its sequence or an iterator exists; the last one dropped ends it.
final class ObservationHandle: Sendable {
    let observer: Observer

    init(observer: Observer) {
        self.observer = observer
    }

    deinit {
        observer.cancel()
    }
}
