// The tier seam: every level of the cache (memory, storage, remote, the generator) is a `CacheTier`, and
// `CacheEngine.tiers` lists them in the order a lookup walks them. Lookups, productions, explicit stores,
// removals and counters reach a tier only through this protocol (I5, I10, I16 fix the order of each walk).

/// Where the walk asks a tier.
enum TierPlace: Sendable {
    /// By every lookup before the in-process flight, with no lock: synchronous and cheap (memory, storage).
    case beforeFlight
    /// By a production holding the key's lock (I5), outermost first, each able to answer or to ask the
    /// tiers after it (`next`); the last one generates (remote, generation).
    case underKeyLock
}

/// One level of the cache (see the file's header). Every requirement but `place` has a default that does
/// nothing, so a tier implements only what it takes part in.
protocol CacheTier: Sendable {
    /// Where the walk asks this tier. Every `.beforeFlight` tier comes before every `.underKeyLock` one.
    var place: TierPlace { get }

    /// A `.beforeFlight` tier's hit for `lookup`, or nil (a miss: the walk asks the next tier).
    func lookup<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?

    /// An `.underKeyLock` tier's value for `request`, from this tier or from `next` (the tiers after it).
    /// Returns nil when `next` did (an optional generator's nil); throws what `next` throws. `kind` says
    /// whether the value may be found (a lookup) or must be generated (a refresh).
    func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, kind: ProductionKind, engine: CacheEngine,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>?

    /// An explicit `store` published `published` locally (the publish step writes storage and memory,
    /// Store.swift): this tier's copy is replaced too.
    func store(_ identity: EntryIdentity, published: PublishedValue, options: YCache.Options) async

    /// Removes `key`'s value from this tier; true when it held one. The walk goes from the last tier to
    /// the first, so no tier is refilled from one below it that still holds the value (I16: the remote
    /// value goes before the local one); an error is thrown once every tier was asked.
    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool

    /// `removeAll()` is about to remove every local entry: this tier removes its values first (I16: the
    /// remote before the local), when it does (the remote tier, opted in). An error is thrown once the
    /// local entries are removed too.
    func removeAll() async throws(YCache.Error)

    /// Adds the counters this tier keeps itself (the engine counts memory, storage and generations).
    func addCounters(to statistics: inout CacheStatistics)
}

extension CacheTier {
    func lookup<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?
    {
        nil
    }

    func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, kind: ProductionKind, engine: CacheEngine,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        try await next()
    }

    func store(_ identity: EntryIdentity, published: PublishedValue, options: YCache.Options) async {}

    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool { false }

    func removeAll() async throws(YCache.Error) {}

    func addCounters(to statistics: inout CacheStatistics) {}
}

/// One lookup as the `.beforeFlight` tiers see it: what it looks for, and the clock and the storage read
/// once for all of them. It holds no reference to the engine or the generator (a memory hit retains
/// neither), and no production request (a memory hit never hashes the key: ExpectationCache).
struct TierLookup<Codec: CacheCodec> {
    let entryKey: EntryKey
    let codec: Codec
    let options: YCache.Options
    /// The realtime clock, read once per lookup.
    let now: Int64
    /// What `storageTier.context(for: .read)` returned, asked once per lookup.
    let opened: Result<StorageContext, YCache.Error>
    /// Set on the caller's executor: the largest entry file a tier may read (a larger one, or a decode that
    /// may take long, throws `LeavesCallerExecutor`); nil on the pool.
    let readLimit: Int?
    /// Set when a quick look has just found no item for the key in memory (`MemoryTier.quickHit`): the
    /// walk goes straight to storage, which is at least as new as anything memory could have gained since.
    var memoryAbsent = false

    init(_ entryKey: EntryKey, codec: Codec, options: YCache.Options, in engine: CacheEngine) {
        self.init(
            entryKey, codec: codec, options: options, opened: engine.storageTier.context(for: .read), readLimit: nil)
    }

    init(
        _ entryKey: EntryKey, codec: Codec, options: YCache.Options, opened: Result<StorageContext, YCache.Error>,
        readLimit: Int?
    ) {
        self.entryKey = entryKey
        self.codec = codec
        self.options = options
        now = Syscall.realtimeNanoseconds
        self.opened = opened
        self.readLimit = readLimit
    }
}

/// The key a removal walks the tiers with.
struct TierKey: Sendable {
    let key: CacheKey
    let codecIdentifier: String
    /// The entry's identity (a SHA-256 of key and codec): its file name and its remote name.
    let identity: EntryIdentity

    init(key: CacheKey, codecIdentifier: String) {
        self.key = key
        self.codecIdentifier = codecIdentifier
        identity = EntryIdentity(key: key, codecIdentifier: codecIdentifier)
    }

    var entryKey: EntryKey { EntryKey(key: key, codecIdentifier: codecIdentifier) }
}

/// The last tier: the caller's generator.
struct GeneratorTier: CacheTier {
    var place: TierPlace { .underKeyLock }

    func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, kind: ProductionKind, engine: CacheEngine,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        guard let value = try await request.generate() else { return nil }
        engine.count { $0.generations += 1 }
        return Produced(value: value, source: .generated)
    }
}
