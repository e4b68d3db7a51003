// The public facade: the API, its documentation, and wiring to CacheEngine. No I/O, locking or path
// handling happens here.

import Foundation

/// A cache for expensive, regenerable artifacts, shared by every process that opens the same storage
/// directory on this machine.
///
/// Each `YCache` keeps its own in-memory layer (L1, an LRU bounded by cost and optionally by count) in
/// front of a file-backed layer (L2) in `storageDirectory`, which all processes share. The main call is
/// get-or-generate:
///
/// ```swift
/// let cache = YCache(storageDirectory: URL(fileURLWithPath: "/var/cache/thumbnails"))
/// let key = CacheKey(namespace: "thumbnail", identity: videoID).variant("size", "320x180")
/// let jpeg = try await cache.data(for: key) { try await renderThumbnail(videoID) }
/// ```
///
/// Across processes: when several processes miss the same entry at once, exactly one runs its generator;
/// the others wait (without blocking Swift's cooperative threads) and read what it published. If that
/// process dies, a waiter takes over at once. The storage budget holds for the directory as a whole.
/// The protocol and its invariants are in `CrossProcessProtocol`.
///
/// - Important: Store only what can be regenerated. Entries can be trimmed, removed by another process,
///   or found corrupt (and then regenerated) at any time.
public final class YCache: Sendable {
    /// The configuration this instance uses (budgets clamped to at least 0).
    public let configuration: Configuration
    /// The storage directory shared with other processes (`configuration.storageDirectory`).
    public var storageDirectory: URL { configuration.storageDirectory }
    let engine: CacheEngine

    /// Creates a cache with `configuration`.
    ///
    /// Opening the directory is lazy: problems (a file in the way, a network filesystem, a newer layout)
    /// surface as a typed `YCache.Error` from the first call that needs storage, or from `openStorage()`.
    /// A failed open is retried at most once a second. Nothing is stored by the initializer itself.
    /// - Parameter configuration: The storage directory, the budgets and the sharing mode.
    public init(configuration: Configuration) {
        let configuration = configuration.clamped
        self.configuration = configuration
        engine = CacheEngine(
            storagePath: configuration.storageDirectory.standardizedFileURL.path,
            memoryMaximumCost: configuration.memoryMaximumCost,
            memoryMaximumEntryCount: configuration.memoryMaximumEntryCount,
            budget: StorageBudget(
                payloadBytes: configuration.storageMaximumByteCount.map { Int64($0) },
                allocatedBytes: configuration.storageMaximumAllocatedByteCount.map { Int64($0) }),
            sharing: configuration.sharing, allowNetworkFilesystem: configuration.allowNetworkFilesystem)
    }

    /// Creates a cache over `storageDirectory`; the same as `init(configuration:)` with these fields.
    ///
    /// - Parameters:
    ///   - storageDirectory: The shared directory. Every process using it should pass the same path.
    ///   - memoryMaximumCost: The in-memory budget in cost units (bytes for the standard codecs).
    ///     Default 64 MiB; `nil` for unbounded; 0 or less keeps nothing in memory.
    ///   - memoryMaximumEntryCount: An optional bound on in-memory entries. Default `nil` (no bound).
    ///   - storageMaximumByteCount: The storage budget; see `Configuration.storageMaximumByteCount`.
    ///     Default 128 MiB; `nil` for unbounded; 0 or less stores nothing.
    ///   - sharing: Who may use the directory: `.privateToUser` (default) or `.groupShared`.
    ///   - allowNetworkFilesystem: Use a directory on NFS, SMB, FUSE or 9p anyway, without mmap and
    ///     without cross-process deduplication. Default `false`: such a directory is refused.
    public convenience init(
        storageDirectory: URL,
        memoryMaximumCost: Int? = Configuration.defaultMemoryMaximumCost,
        memoryMaximumEntryCount: Int? = nil,
        storageMaximumByteCount: Int? = Configuration.defaultStorageMaximumByteCount,
        sharing: StorageSharingMode = .privateToUser,
        allowNetworkFilesystem: Bool = false
    ) {
        self.init(
            configuration: Configuration(
                storageDirectory: storageDirectory, memoryMaximumCost: memoryMaximumCost,
                memoryMaximumEntryCount: memoryMaximumEntryCount, storageMaximumByteCount: storageMaximumByteCount,
                sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem))
    }

    /// A view of this cache bound to one codec, so calls need no `codec:` argument.
    /// - Parameter codec: The codec every call through the view uses.
    /// - Returns: A `Typed` view sharing this cache's memory layer, storage and statistics.
    public func using<Codec: CacheCodec>(_ codec: Codec) -> Typed<Codec> {
        Typed(cache: self, codec: codec)
    }

    /// Opens the storage directory now instead of on first use.
    ///
    /// Creates the root, its folders and its `layout` and `state` files when they are missing; stores no
    /// entry.
    /// - Throws: `YCache.Error` naming the problem: `.storageUnavailable` (a file in the way, cannot be
    ///   created, opened or mapped), `.insecureStorageDirectory`, `.networkFilesystem`, `.unsupportedLayout`,
    ///   or `.storageFull` when the `layout` or `state` file cannot be written on a full disk.
    public func openStorage() throws(YCache.Error) {
        _ = try engine.storage().get()
    }

    /// Counters of what this instance did since it was created.
    public var statistics: CacheStatistics { engine.statistics.withLock { $0 } }

    // MARK: Get or generate

    /// Returns the cached value for `key`, or runs `generator`, stores its value and returns it.
    ///
    /// Looks in memory, then storage, then generates. Concurrent calls for the same entry share one
    /// generation (in this process and, with `crossProcess: .coordinate`, across processes). A
    /// cancelled caller gets `CancellationError` at once.
    ///
    /// What is stored when:
    /// - A storage hit is also put in memory (unless `writePolicy` is `.disabled`).
    /// - A generated value is stored per `options.writePolicy`: `.memoryAndStorage` encodes it, publishes
    ///   the entry (trimming if usage goes over the budget) and then puts it in memory; `.memoryOnly`
    ///   encodes it (for its metadata) and puts it in memory only; `.disabled` stores (and encodes)
    ///   nothing. A payload larger than the whole storage budget, a key over 64 MiB of canonical bytes or a
    ///   codec identifier over 4 KiB is kept in memory only. Expiry comes from `options.expiry`.
    /// - When the codec cannot encode the value, its error is thrown and nothing is stored, whatever the
    ///   write-failure policy. When the storage write fails, `writeFailurePolicy: .throwError` leaves
    ///   neither layer holding the value; `.bestEffort` keeps it in memory and returns it.
    /// - A generator that throws, or (with `.cancelWhenNoWaiters`) a producer cancelled before it
    ///   finished, stores nothing.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored; its identifier is part of the entry's identity.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generator: Produces the value on a miss. Errors are thrown to the callers sharing this
    ///     generation and never stored.
    /// - Returns: The cached or generated value.
    /// - Throws: What `generator` throws; `CancellationError`; the codec's own error when it cannot encode
    ///   the value; `YCache.Error.cacheMiss` with `lookupPolicy: .cacheOnly`;
    ///   `YCache.Error.valueTypeMismatch` when memory (or a call this one joined) holds the key and codec
    ///   identifier with a value of another type; under `readFailurePolicy: .throwError`,
    ///   `YCache.Error.corruptEntry`, `.ioFailure`, a storage-open error (`.storageUnavailable`,
    ///   `.insecureStorageDirectory`, `.networkFilesystem`, `.unsupportedLayout`) or the codec's own error
    ///   when it cannot decode a stored entry; under `writeFailurePolicy: .throwError`,
    ///   `YCache.Error.storageFull`, `.ioFailure` or a storage-open error when the value cannot be stored.
    public func value<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        try await resolve(for: key, codec: codec, options: options, generator).value
    }

    /// Like `value(for:codec:options:_:)`, and also says where the value came from, its metadata,
    /// and whether another task or process generated it while this call waited.
    ///
    /// Stores exactly what `value(for:codec:options:_:)` stores.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored; its identifier is part of the entry's identity.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generator: Produces the value on a miss.
    /// - Returns: The value with its `source` (`.memory`, `.storage` or `.generated`), its metadata, and
    ///   `wasSharedGeneration`.
    /// - Throws: The same errors as `value(for:codec:options:_:)`.
    public func resolve<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Resolved<Codec.Value> {
        if options.lookupPolicy != .refresh,
            let hit = try engine.memoryHit(MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec)
        {
            return hit  // the memory fast path: no key hashing
        }
        let request = makeRequest(key, codec, options) { try await generator() }
        guard let resolution = try await engine.resolve(request, optional: false) else {
            throw Error.cacheMiss
        }
        return resolution
    }

    /// Get-or-generate for a generator that may have no value: `nil` is returned to the callers sharing
    /// this generation and never stored (it is not a negative cache entry).
    ///
    /// A non-nil value is stored as by `value(for:codec:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored; its identifier is part of the entry's identity.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generator: Produces the value on a miss, or `nil` when there is none.
    /// - Returns: The cached or generated value; `nil` when the generator returned `nil`, or on a miss
    ///   with `lookupPolicy: .cacheOnly` (which does not throw `cacheMiss` here).
    /// - Throws: The errors of `value(for:codec:options:_:)`. A `YCache.Error.cacheMiss` the generator
    ///   throws is rethrown (only a `.cacheOnly` miss becomes `nil`), as in Yashima.
    public func optionalValue<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> Codec.Value? {
        let request = makeRequest(key, codec, options, generator)
        do {
            return try await engine.resolve(request, optional: true)?.value
        } catch Error.cacheMiss where options.lookupPolicy == .cacheOnly {
            return nil
        }
    }

    /// The value if it is in memory or storage; never generates.
    ///
    /// `options.lookupPolicy` is ignored. A storage hit is put in memory (unless `writePolicy` is
    /// `.disabled`); a corrupt or expired entry is removed.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: The codec the value was stored with.
    ///   - options: Its `readFailurePolicy` decides whether a failed read throws; `writePolicy` and `cost`
    ///     apply to the memory copy of a storage hit.
    /// - Returns: The cached value, or `nil` on a miss.
    /// - Throws: `YCache.Error.valueTypeMismatch` when memory holds the key and codec identifier with a
    ///   value of another type; under `readFailurePolicy: .throwError`, `YCache.Error.corruptEntry`,
    ///   `.ioFailure`, a storage-open error (`.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`), or the codec's own error when it cannot decode.
    public func valueIfCached<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default
    ) async throws -> Codec.Value? {
        if let hit = try engine.memoryHit(MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec) {
            return hit.value
        }
        let request = makeRequest(key, codec, options) { nil }
        return try engine.cachedValue(request)?.value
    }

    /// Generates a fresh value even if one is cached, stores it, and returns it. Concurrent refreshes of
    /// the same entry in this process share one generation; concurrent normal lookups may share it too,
    /// and its failure stays with the `refresh` callers.
    ///
    /// The value is stored as by `value(for:codec:options:_:)`, with `lookupPolicy` forced to
    /// `.refresh`. With `writePolicy: .memoryAndStorage` the old value is gone for every process: replaced
    /// by the new entry, or removed when the new value is larger than the storage budget (which is kept in
    /// this process's memory only). With `.memoryOnly` the old stored entry stays and other processes keep
    /// seeing it. Every process
    /// that refreshes generates its own value (under the default policies, while holding the key's
    /// cross-process lock, one process at a time).
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored.
    ///   - options: Write, failure and single-flight policies (`lookupPolicy` is ignored).
    ///   - generator: Produces the fresh value.
    /// - Returns: The generated value.
    /// - Throws: What `generator` throws; `CancellationError`; the write errors of
    ///   `value(for:codec:options:_:)` under `writeFailurePolicy: .throwError`; a storage-open
    ///   error under `readFailurePolicy: .throwError`.
    public func refresh<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        var options = options
        options.lookupPolicy = .refresh
        return try await value(for: key, codec: codec, options: options, generator)
    }

    /// The value if it is in this process's memory; never reads an entry or generates.
    ///
    /// Stores nothing. It opens the storage directory (if not yet open) to check that no process removed
    /// the entry since it was cached (I10), and a hit may touch the entry file's mtime (LRU), at most once
    /// a minute.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: The codec the value was cached with.
    /// - Returns: The value from memory, or `nil` when it is not there (or expired, or removed).
    /// - Throws: `YCache.Error.valueTypeMismatch` when memory holds the key and codec identifier with a
    ///   value of another type.
    public func peek<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Codec.Value? {
        try engine.memoryHit(MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec)?.value
    }

    // MARK: Writing

    /// Stores `value`, replacing any cached value, per `options.writePolicy`.
    ///
    /// - `.memoryAndStorage` (the default): encodes the value, publishes it to storage, invalidates other
    ///   processes' memory copies of the key (I10), trims if usage goes over the budget, then puts it in
    ///   memory. A value larger than the whole storage budget, a key over 64 MiB of canonical bytes or a
    ///   codec identifier over 4 KiB is put in this process's memory only; the key's old stored entry is
    ///   removed, for every process.
    /// - `.memoryOnly`: encodes the value (for its metadata) and keeps it in this process's memory only;
    ///   storage and other processes are untouched.
    /// - `.disabled`: nothing is stored.
    ///
    /// When the codec cannot encode the value, its error is thrown and nothing changes, whatever the
    /// policy. When the storage write fails, `writeFailurePolicy: .throwError` throws and removes this
    /// process's memory copy of the key; `.bestEffort` keeps the value in memory and returns normally.
    /// `options.expiry` and `options.cost` apply; the other policies are ignored.
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: What the value depends on.
    ///   - codec: How the value is encoded.
    ///   - options: Write and write-failure policies, expiry and cost.
    /// - Throws: The codec's own error when it cannot encode the value; under
    ///   `writeFailurePolicy: .throwError` only: `YCache.Error.storageFull`, `.ioFailure`, or a storage-open
    ///   error (`.storageUnavailable`, `.insecureStorageDirectory`, `.networkFilesystem`,
    ///   `.unsupportedLayout`).
    public func store<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, options: Options = .default
    ) async throws {
        let request = makeRequest(key, codec, options) { value }
        let context = engine.openStorage
        _ = try await engine.store(value, request: request, context: context, epochs: nil, bumpEpoch: true)
    }

    /// Puts `value` in this process's memory only; storage and other processes never see it.
    ///
    /// The value is encoded (as in Yashima) so that its metadata has its byte count; nothing is written.
    /// When the storage directory can be opened, the item records the key's removal epochs, so a later
    /// `remove` or `removeAll` by any process drops it. It is not kept when its cost exceeds the memory
    /// budget.
    /// - Parameters:
    ///   - value: The value to keep.
    ///   - key: What the value depends on.
    ///   - codec: The codec whose lookups should find it (its identifier is part of the memory key).
    ///   - cost: Its cost; `nil` asks the codec (`memoryCost(of:encodedByteCount:)`).
    ///   - expiry: When it stops being returned.
    /// - Throws: The codec's own error when it cannot encode the value (nothing is kept).
    public func putInMemory<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, cost: CacheCost? = nil, expiry: CacheExpiry = .never
    ) async throws {
        let byteCount = try codec.encode(value).count
        let now = Syscall.realtimeNanoseconds
        let charged = cost?.charged ?? codec.memoryCost(of: value, encodedByteCount: byteCount)
        let metadata = key.metadata(
            codecIdentifier: codec.identifier, createdAt: now, expiresAt: expiry.expiresAtNanoseconds(now: now),
            byteCount: byteCount, cost: charged)
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        var slots: SharedState.Slots?
        var stamp: SharedState.Stamp?
        if let context = engine.openStorage {
            let s = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
            slots = s
            stamp = context.directory.state.stamp(s)
        }
        engine.memory.insert(
            MemoryItem(
                value: value, cost: charged, metadata: metadata,
                slots: slots, stamp: stamp, entryPath: nil),
            for: memoryKey)
    }

    // MARK: Inspecting

    /// The stored value's metadata (from memory if it is not in storage), without decoding the payload.
    /// Does not count as a use for LRU, and stores or removes nothing.
    ///
    /// Only the entry's header and identity are checked, not its payload checksum. When the storage
    /// directory cannot be opened, only memory is consulted.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: The codec the value was stored with.
    /// - Returns: The metadata, or `nil` when nothing unexpired is cached for `key` and `codec`.
    /// - Throws: `YCache.Error.ioFailure` (or `.storageFull`) when reading the entry header fails for a
    ///   reason other than a missing or corrupt file.
    public func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Metadata? {
        try engine.metadata(for: key, codec: codec)
    }

    /// Whether a value is cached in memory or storage. Does not count as a use for LRU.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: The codec the value was stored with.
    /// - Returns: `metadata(for:codec:) != nil`.
    /// - Throws: The errors of `metadata(for:codec:)`.
    public func contains<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Bool {
        try await metadata(for: key, codec: codec) != nil
    }

    /// The entries in storage, optionally only those of one namespace, with their keys and metadata
    /// (payloads are not read). Expired and unreadable entries are left out, and so are values kept only
    /// in memory. Scans the whole directory off the cooperative pool; stores nothing.
    /// - Parameter namespace: Only entries whose key has this namespace; `nil` for all.
    /// - Returns: One `StoredEntryInfo` per entry, in no particular order.
    /// - Throws: A storage-open error: `YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout` or `.storageFull`.
    public func entries(in namespace: String? = nil) async throws -> [StoredEntryInfo] {
        try requireStorage()
        let engine = self.engine
        return await BlockingWork.run { engine.entries(inNamespace: namespace) }
    }

    /// Payload bytes, allocated bytes and entry count of the storage directory, counted now (all
    /// processes' entries).
    ///
    /// Scans the directory, reading each entry's fixed header (not its payload), and stores the counts in
    /// the shared usage counters (I9).
    /// - Returns: The payload bytes (`byteCount`, what the budget counts), the allocated bytes
    ///   (`allocatedByteCount`, `st_blocks × 512`), the number of entry files and the budgets.
    /// - Throws: A storage-open error: `YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout` or `.storageFull`.
    public func storageUsage() async throws -> StorageUsage {
        let context = try requireStorage()
        return usage(await BlockingWork.run { context.trimmer.reconcileUsage() })
    }

    private func usage(_ counted: CountedUsage) -> StorageUsage {
        StorageUsage(
            byteCount: Int(counted.payloadBytes), entryCount: counted.entries,
            maximumByteCount: configuration.storageMaximumByteCount, allocatedByteCount: counted.allocatedBytes,
            maximumAllocatedByteCount: configuration.storageMaximumAllocatedByteCount)
    }

    // MARK: Removing

    /// Removes the entry for `key` and `codec` from memory and storage. Every process's next lookup misses.
    ///
    /// This process's memory copy is removed first; then the key's removal epoch is bumped (invalidating
    /// other processes' memory copies) and the entry file unlinked.
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - codec: The codec it was stored with.
    /// - Returns: True when this process's memory held the value or an entry file was unlinked.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`) when the directory cannot be used (the
    ///   memory copy is removed anyway), or `.ioFailure` when the entry file cannot be unlinked.
    @discardableResult
    public func remove<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Bool {
        try engine.remove(key: key, codecIdentifier: codec.identifier)
    }

    /// Removes every entry of `namespace`, in memory and storage. Every process's next lookup misses.
    ///
    /// Removes the namespace's values from this process's memory, bumps the namespace's removal epoch
    /// (invalidating other processes' memory copies), then scans the directory and unlinks each entry
    /// whose key has this namespace; an entry that cannot be unlinked is skipped silently.
    /// - Parameter namespace: The namespace to empty.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`) when the directory cannot be used (the
    ///   memory copies are removed anyway).
    public func removeAll(in namespace: String) async throws {
        let engine = self.engine
        _ = try await BlockingWork.run { () -> Result<Int, YCache.Error> in
            Result { () throws(YCache.Error) in try engine.removeAll(inNamespace: namespace) }
        }.get()
    }

    /// Removes every entry, in memory and storage. Every process's next lookup misses.
    ///
    /// Clears this process's memory, bumps the global removal epoch (invalidating other processes'
    /// memory copies), then unlinks every entry file; one that cannot be unlinked is skipped silently.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`) when the directory cannot be used
    ///   (memory is cleared anyway).
    public func removeAll() async throws {
        let engine = self.engine
        _ = try await BlockingWork.run { () -> Result<Int, YCache.Error> in
            Result { () throws(YCache.Error) in try engine.removeAll(inNamespace: nil) }
        }.get()
    }

    /// Removes expired entries from storage and returns how many.
    ///
    /// Scans every entry's header. Expired values in memory are not touched here (they are never
    /// returned, and are dropped on their next lookup).
    /// - Returns: The number of entry files unlinked.
    /// - Throws: A storage-open error: `YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout` or `.storageFull`.
    @discardableResult
    public func removeExpired() async throws -> Int {
        try requireStorage()
        let engine = self.engine
        return await BlockingWork.run { engine.removeExpired() }
    }

    /// Recounts storage usage and trims least-recently-used entries until it is within
    /// `storageMaximumByteCount` (payload bytes) and, when set, `storageMaximumAllocatedByteCount`; also
    /// removes staging debris of killed processes and unused lock files.
    ///
    /// Unlike the trim on the write path (down to 90 % of the budget, at most 4,096 unlinks per pass),
    /// this trims down to the budget itself with no per-pass limit, waiting for another process's trim
    /// to finish first. With no budget (both `nil`) it only sweeps debris: staging files and unheld lock
    /// files older than an hour.
    /// - Returns: The usage after trimming: what the trim's scan counted, less what it unlinked.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`), or `.ioFailure` (`.storageFull`)
    ///   when `trim.lock` cannot be opened or locked.
    @discardableResult
    public func trimStorageIfNeeded() async throws -> StorageUsage {
        let context = try requireStorage()
        let budget = engine.budget
        let counted: CountedUsage
        if budget.isBounded {
            switch await BlockingWork.run({ context.trimmer.trimIfNeeded(budget: budget, force: true) }) {
            case .success(let usage): counted = usage ?? context.trimmer.reconcileUsage()
            case .failure(let error): throw Error.system(error, path: engine.storagePath, operation: "trimming")
            }
        } else {
            counted = await BlockingWork.run {
                context.trimmer.sweepDebris()
                return context.trimmer.reconcileUsage()
            }
        }
        return usage(counted)
    }

    // MARK: Helpers

    @discardableResult
    private func requireStorage() throws(YCache.Error) -> StorageContext {
        try engine.storage(verifyingRoot: true).get()  // I13: these scan, trim or remove
    }

    private func makeRequest<Codec: CacheCodec>(
        _ key: CacheKey, _ codec: Codec, _ options: Options,
        _ generator: @escaping @Sendable () async throws -> Codec.Value?
    ) -> ProductionRequest<Codec> {
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        return ProductionRequest(
            key: key, codec: codec, options: options, memoryKey: memoryKey,
            expectation: engine.expectations.expectation(for: memoryKey), generate: generator)
    }
}
