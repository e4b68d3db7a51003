// The public facade: the type, its initializers and the lookups (get-or-generate, cached values, peek),
// with their documentation, wired to CacheEngine. Writing, inspecting and removing are in
// YCache+Lifecycle.swift. No I/O or locking happens here; the one path handling is `standardPath`, the
// storage directory's path made standard (lexically, without touching the filesystem) for the engine.

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
/// Where the work runs: the lookups (`value`, `resolve`, `optionalValue`, `valueIfCached`, `peek`, and the
/// conveniences and `Typed` views over them) are `nonisolated(nonsending)`: they start on the caller's
/// executor, and a hit from memory or of an entry file up to 64 KiB is served there, with no executor
/// hop (a call from the main actor or another actor costs what it costs from a plain task). Everything
/// that may take long continues on the cooperative pool and never on the caller's executor: the first
/// open of the storage directory, larger entries, decompressing codecs (`CompressedDataCodec`), and every
/// miss (waiting for another process, the generator, publishing); blocking waits and large writes run on
/// threads of their own, never on the pool. A generator runs on the pool, not on the caller's actor.
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
            storagePath: YCache.standardPath(configuration.storageDirectory),
            memoryMaximumCost: configuration.memoryMaximumCost,
            memoryMaximumEntryCount: configuration.memoryMaximumEntryCount,
            budget: StorageBudget(
                payloadBytes: configuration.storageMaximumByteCount.map { Int64($0) },
                allocatedBytes: configuration.storageMaximumAllocatedByteCount.map { Int64($0) }),
            freeSpaceFloor: configuration.storageFreeSpaceFloor,
            sharing: configuration.sharing, allowNetworkFilesystem: configuration.allowNetworkFilesystem,
            remote: configuration.remote.flatMap { $0.backend.makeStores() })
    }

    /// `url.standardizedFileURL.path`, without Foundation's work when the path is already standard
    /// (absolute, no empty, `.` or `..` component, no trailing slash), as a command-line tool's usually is:
    /// a `yashima` hit is a whole process, and standardizing a URL is a good part of one.
    static func standardPath(_ url: URL) -> String {
        let path = url.path
        guard url.isFileURL, path.utf8.count > 1, path.utf8.first == UInt8(ascii: "/") else {
            return url.standardizedFileURL.path
        }
        var component = 0  // the current component's length in bytes
        var dots = true  // whether it is dots only (`.` and `..` are not standard)
        for byte in path.utf8.dropFirst() {
            if byte == UInt8(ascii: "/") {
                if component == 0 || (dots && component <= 2) { return url.standardizedFileURL.path }
                component = 0
                dots = true
            } else {
                component += 1
                dots = dots && byte == UInt8(ascii: ".")
            }
        }
        if component == 0 || (dots && component <= 2) { return url.standardizedFileURL.path }
        return path
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
            storageDirectory: storageDirectory, remote: nil, memoryMaximumCost: memoryMaximumCost,
            memoryMaximumEntryCount: memoryMaximumEntryCount, storageMaximumByteCount: storageMaximumByteCount,
            sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem)
    }

    /// Creates a cache over `storageDirectory` with a remote tier behind it, shared with other hosts:
    ///
    /// ```swift
    /// let cache = YCache(storageDirectory: dir, remote: try .redis("redis://cache.internal:6379"))
    /// ```
    ///
    /// The same as `init(configuration:)` with these fields; see `Remote` for what the tier does.
    /// - Parameters:
    ///   - storageDirectory: The shared directory of this host.
    ///   - remote: The remote tier (`.redis(_:options:)`, `.http(_:options:)`, ...), or `nil` for none.
    ///   - memoryMaximumCost: The in-memory budget in cost units. Default 64 MiB; `nil` for unbounded.
    ///   - memoryMaximumEntryCount: An optional bound on in-memory entries. Default `nil` (no bound).
    ///   - storageMaximumByteCount: The storage budget. Default 128 MiB; `nil` for unbounded.
    ///   - sharing: Who may use the directory: `.privateToUser` (default) or `.groupShared`.
    ///   - allowNetworkFilesystem: Use a directory on a network filesystem anyway. Default `false`.
    public convenience init(
        storageDirectory: URL,
        remote: Remote?,
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
                sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem, remote: remote))
    }

    /// A view of this cache bound to one codec, so calls need no `codec:` argument.
    /// - Parameter codec: The codec every call through the view uses.
    /// - Returns: A `Typed` view sharing this cache's memory layer, storage and statistics.
    public func using<Codec: CacheCodec>(_ codec: Codec) -> Typed<Codec> {
        Typed(cache: self, codec: codec)
    }

    /// Opens the storage directory now instead of on first use, and prepares this process's first lookup.
    ///
    /// Creates the root, its folders and its `layout` and `state` files when they are missing; stores no
    /// entry. The first time in a process it also makes what a first lookup would make on its way (the
    /// runtime's type metadata of the lookup path), so that a worker that opens its storage before its
    /// work looks up at a warm process's speed. A process that makes a single lookup gains nothing by it:
    /// letting that lookup open the directory costs less in all.
    /// - Throws: `YCache.Error` naming the problem: `.storageUnavailable` (a file in the way, cannot be
    ///   created, opened or mapped), `.insecureStorageDirectory`, `.networkFilesystem`, `.unsupportedLayout`,
    ///   or `.storageFull` when the `layout` or `state` file cannot be written on a full disk.
    public func openStorage() throws(YCache.Error) {
        _ = try engine.storageTier.contextPreparingFirstLookup().get()
    }

    /// Counters of what this instance did since it was created.
    public var statistics: CacheStatistics { engine.currentStatistics }

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
    @_specialize(exported:true,where Codec == DataCodec)
    @_specialize(exported:true,where Codec == StringCodec)
    @inline(__always)
    nonisolated(nonsending) public func value<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        // The value alone through the lookup (a small frame, held while the lookup waits: CacheEngine.resolve).
        let value = try await engine.resolve(
            key, codec: codec, options: options, generate: .value(generator), hit: { $0.value },
            memoryHit: { $0.value })
        guard let value else { throw Error.cacheMiss }
        return value
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
    @_specialize(exported:true,where Codec == DataCodec)
    @_specialize(exported:true,where Codec == StringCodec)
    @inline(__always)
    nonisolated(nonsending) public func resolve<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Resolved<Codec.Value> {
        let resolution = try await engine.resolve(
            key, codec: codec, options: options, generate: .value(generator), hit: { $0 },
            memoryHit: { $0.resolution })
        guard let resolution else { throw Error.cacheMiss }
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
    @_specialize(exported:true,where Codec == DataCodec)
    @_specialize(exported:true,where Codec == StringCodec)
    nonisolated(nonsending) public func optionalValue<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        _ generator: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> Codec.Value? {
        do {
            return try await engine.resolve(
                key, codec: codec, options: options, generate: .optional(generator), hit: { $0.value },
                memoryHit: { $0.value })
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
    @_specialize(exported:true,where Codec == DataCodec)
    @_specialize(exported:true,where Codec == StringCodec)
    nonisolated(nonsending) public func valueIfCached<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default
    ) async throws -> Codec.Value? {
        try await engine.cachedValue(key, codec: codec, options: options)?.value
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
    nonisolated(nonsending) public func peek<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Codec
        .Value?
    {
        try engine.memoryTier.peek(key, codec: codec, storage: try? engine.storageTier.context(for: .read).get())
    }
}
