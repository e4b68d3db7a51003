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
    /// The storage directory shared with other processes.
    public let storageDirectory: URL
    let engine: CacheEngine

    /// Creates a cache over `storageDirectory` (created on first use if missing, mode 0700).
    ///
    /// Opening the directory is lazy: problems (a file in the way, a network filesystem, a newer layout)
    /// surface as a typed `YCacheError` from the first call that needs storage, or from `openStorage()`.
    ///
    /// - Parameters:
    ///   - storageDirectory: The shared directory. Every process using it should pass the same path.
    ///   - memoryMaximumCost: The in-memory budget in cost units (bytes for the standard codecs).
    ///     Default 64 MiB; `nil` for unbounded; 0 or less keeps nothing in memory.
    ///   - memoryMaximumEntryCount: An optional bound on in-memory entries. Default `nil` (no bound).
    ///   - storageMaximumByteCount: The storage budget in allocated bytes, enforced after every write by
    ///     this instance (LRU trimming). Default 128 MiB; `nil` for unbounded; 0 or less stores nothing.
    ///     Processes with different budgets each enforce their own when they write.
    ///   - sharing: Who may use the directory: `.privateToUser` (default) or `.groupShared`.
    ///   - allowNetworkFilesystem: Use a directory on NFS, SMB, FUSE or 9p anyway, without mmap and
    ///     without cross-process deduplication. Default `false`: such a directory is refused.
    public init(
        storageDirectory: URL,
        memoryMaximumCost: Int? = 64 * 1024 * 1024,
        memoryMaximumEntryCount: Int? = nil,
        storageMaximumByteCount: Int? = 128 * 1024 * 1024,
        sharing: StorageSharingMode = .privateToUser,
        allowNetworkFilesystem: Bool = false
    ) {
        self.storageDirectory = storageDirectory
        engine = CacheEngine(
            storagePath: storageDirectory.standardizedFileURL.path,
            memoryMaximumCost: memoryMaximumCost.map { max(0, $0) },
            memoryMaximumEntryCount: memoryMaximumEntryCount.map { max(0, $0) },
            storageMaximumByteCount: storageMaximumByteCount.map { Int64(max(0, $0)) },
            sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem)
    }

    /// A view of this cache bound to one codec.
    public func using<Codec: CacheCodec>(_ codec: Codec) -> Typed<Codec> {
        Typed(cache: self, codec: codec)
    }

    /// Opens the storage directory now instead of on first use.
    /// - Throws: `YCacheError` naming the problem (`.storageUnavailable`, `.networkFilesystem`,
    ///   `.unsupportedLayout`, `.insecureStorageDirectory`).
    public func openStorage() throws(YCacheError) {
        _ = try engine.storage().get()
    }

    /// Counters of what this instance did since it was created.
    public var statistics: CacheStatistics { engine.statistics.withLock { $0 } }

    // MARK: Get or generate

    /// Returns the cached value for `key`, or runs `generate`, stores its value and returns it.
    ///
    /// Looks in memory, then storage, then generates. Concurrent calls for the same entry share one
    /// generation (in this process and, with `crossProcess: .coordinate`, across processes). A
    /// cancelled caller gets `CancellationError` at once.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored; its identifier is part of the entry's identity.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generate: Produces the value on a miss. Errors are thrown to the callers sharing this
    ///     generation and never stored.
    /// - Throws: What `generate` throws, `CancellationError`, `YCacheError.cacheMiss` with
    ///   `.cacheOnly`, or a `YCacheError` when a write fails under `.throwError`.
    public func value<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        try await resolve(for: key, codec: codec, options: options, generate: generate).value
    }

    /// Like `value(for:codec:options:generate:)`, and also says where the value came from, its metadata,
    /// and whether another task or process generated it while this call waited.
    public func resolve<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> CacheResolution<Codec.Value> {
        if options.lookupPolicy != .refresh,
            let hit = engine.memoryHit(MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec)
        {
            return hit  // the memory fast path: no key hashing
        }
        let request = makeRequest(key, codec, options) { try await generate() }
        guard let resolution = try await engine.resolve(request, optional: false) else {
            throw YCacheError.cacheMiss
        }
        return resolution
    }

    /// Get-or-generate for a generator that may have no value: `nil` is returned to the callers sharing
    /// this generation and never stored (it is not a negative cache entry).
    public func optionalValue<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> Codec.Value? {
        let request = makeRequest(key, codec, options, generate)
        do {
            return try await engine.resolve(request, optional: true)?.value
        } catch YCacheError.cacheMiss {
            return nil
        }
    }

    /// The value if it is in memory or storage; never generates.
    /// - Throws: A `YCacheError` only under `readFailurePolicy: .throwError`.
    public func valueIfCached<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default
    ) async throws -> Codec.Value? {
        if let hit = engine.memoryHit(MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec) {
            return hit.value
        }
        let request = makeRequest(key, codec, options) { nil }
        return try engine.cachedValue(request)?.value
    }

    /// Generates a fresh value even if one is cached, stores it, and returns it. Other processes' memory
    /// copies of the old value are invalidated. Concurrent normal lookups may share this generation;
    /// its failure stays with the `refresh` callers.
    public func refresh<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        var options = options
        options.lookupPolicy = .refresh
        return try await value(for: key, codec: codec, options: options, generate: generate)
    }

    /// The value if it is in this process's memory; never reads storage or generates.
    public func peek<Codec: CacheCodec>(for key: CacheKey, codec: Codec) -> Codec.Value? {
        engine.memoryHit(MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec)?.value
    }

    // MARK: Writing

    /// Stores `value` in memory and storage (per `options.writePolicy`), replacing any cached value, and
    /// invalidates other processes' memory copies.
    /// - Throws: A `YCacheError` when the write fails under `writeFailurePolicy: .throwError`.
    public func store<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, options: Options = .default
    ) async throws {
        let request = makeRequest(key, codec, options) { value }
        let context = engine.openStorage
        _ = try await engine.store(value, request: request, context: context, epochs: nil, bumpEpoch: true)
    }

    /// Puts `value` in this process's memory only.
    /// - Parameters:
    ///   - cost: Its cost; `nil` asks the codec.
    ///   - expiry: When it stops being returned.
    public func putInMemory<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, cost: Int? = nil, expiry: CacheExpiry = .never
    ) {
        let now = Syscall.realtimeNanoseconds
        let metadata = key.metadata(
            codecIdentifier: codec.identifier, createdAt: now, expiresAt: expiry.expiresAtNanoseconds(now: now),
            payloadByteCount: 0)
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
                value: value, cost: cost ?? codec.memoryCost(of: value, encodedByteCount: nil), metadata: metadata,
                slots: slots, stamp: stamp, entryPath: nil),
            for: memoryKey)
    }

    // MARK: Inspecting

    /// The stored value's metadata (from memory if it is not in storage), without decoding the payload.
    /// Does not count as a use for LRU.
    public func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> CacheMetadata? {
        try engine.metadata(for: key, codec: codec)
    }

    /// Whether a value is cached in memory or storage. Does not count as a use for LRU.
    public func contains<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Bool {
        try await metadata(for: key, codec: codec) != nil
    }

    /// The entries in storage, optionally only those of one namespace, with their keys and metadata
    /// (payloads are not read). Expired entries are left out.
    public func entries(in namespace: String? = nil) async throws -> [StoredEntryInfo] {
        try requireStorage()
        let engine = self.engine
        return await BlockingWork.run { engine.entries(inNamespace: namespace) }
    }

    /// Allocated bytes and entry count of the storage directory, counted now (all processes' entries).
    public func storageUsage() async throws -> StorageUsage {
        let context = try requireStorage()
        let usage = await BlockingWork.run { context.trimmer.reconcileUsage() }
        return StorageUsage(byteCount: usage.bytes, entryCount: usage.entries)
    }

    // MARK: Removing

    /// Removes the entry for `key` and `codec` from memory and storage. Every process's next lookup misses.
    /// - Throws: A `YCacheError` when the storage directory cannot be used (the memory copy is removed
    ///   anyway) or the entry file cannot be unlinked.
    public func remove<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws {
        try engine.remove(key: key, codecIdentifier: codec.identifier)
    }

    /// Removes every entry of `namespace`, in memory and storage. Every process's next lookup misses.
    public func removeAll(in namespace: String) async throws {
        try requireStorage()
        let engine = self.engine
        _ = try await BlockingWork.run { () -> Result<Int, YCacheError> in
            Result { () throws(YCacheError) in try engine.removeAll(inNamespace: namespace) }
        }.get()
    }

    /// Removes every entry, in memory and storage. Every process's next lookup misses.
    /// - Throws: A `YCacheError` when the storage directory cannot be used (memory is cleared anyway).
    public func removeAll() async throws {
        let engine = self.engine
        _ = try await BlockingWork.run { () -> Result<Int, YCacheError> in
            Result { () throws(YCacheError) in try engine.removeAll(inNamespace: nil) }
        }.get()
    }

    /// Removes expired entries from storage and returns how many.
    @discardableResult
    public func removeExpired() async throws -> Int {
        try requireStorage()
        let engine = self.engine
        return await BlockingWork.run { engine.removeExpired() }
    }

    /// Recounts storage usage and trims least-recently-used entries until it is within
    /// `storageMaximumByteCount`; also removes staging debris of killed processes and unused lock files.
    public func trimStorageIfNeeded() async throws {
        let context = try requireStorage()
        guard let budget = engine.storageMaximumByteCount else {
            await BlockingWork.run { context.trimmer.sweepDebris() }
            return
        }
        let result = await BlockingWork.run { context.trimmer.trimIfNeeded(budget: budget, force: true) }
        if case .failure(let error) = result {
            throw YCacheError.system(error, path: engine.storagePath, operation: "trimming")
        }
    }

    // MARK: Helpers

    @discardableResult
    private func requireStorage() throws(YCacheError) -> StorageContext {
        try engine.storage(verifyingRoot: true).get()  // I13: these scan, trim or remove
    }

    private func makeRequest<Codec: CacheCodec>(
        _ key: CacheKey, _ codec: Codec, _ options: Options,
        _ generate: @escaping @Sendable () async throws -> Codec.Value?
    ) -> ProductionRequest<Codec> {
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        return ProductionRequest(
            key: key, codec: codec, options: options, memoryKey: memoryKey,
            expectation: engine.expectations.expectation(for: memoryKey), generate: generate)
    }
}
