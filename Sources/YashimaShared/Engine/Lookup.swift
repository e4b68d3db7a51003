// The lookup pipeline, every public lookup's one path: the `.beforeFlight` tiers (memory, storage) on the
// caller's executor up to 64 KiB reads, the rest on the pool; on a miss the in-process flight, joined or
// started (Production.swift). A joiner takes a flight's value only under current epochs (I10).

/// What a production needs to generate and store one entry.
struct ProductionRequest<Codec: CacheCodec>: Sendable {
    let codec: Codec
    let options: YCache.Options
    let entryKey: EntryKey
    /// The entry's identity and the exact bytes it must hold (two SHA-256s, cached: ExpectationCache).
    let expectation: EntryExpectation
    /// The caller's generator (GeneratorTier).
    let generate: @Sendable () async throws -> Codec.Value?
    /// The storage a remote tier may stage a large hit's entry file in (set for a lookup that writes
    /// to a local storage directory).
    var staging: StorageContext?
    /// The storage directory the production publishes in, where the remote deletes it owes are recorded
    /// (RemoteWriteWindow); nil when it writes no storage.
    var directory: Directory?
    /// The remote tier's first call, started when the production took the key's lock (RemoteTier.startLookup).
    var remoteLookup: EarlyRemoteLookup?

    /// The caller's key (the memory key's: one copy, which a waiting lookup holds on the heap).
    var key: CacheKey { entryKey.key }
}

extension CacheEngine {
    /// The request of a lookup that missed memory: the entry expectation is computed (or found in the
    /// expectation cache) only now, so a memory hit never hashes the key.
    @inline(never)
    func request<Codec: CacheCodec>(
        _ entryKey: EntryKey, codec: Codec, options: YCache.Options,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) -> ProductionRequest<Codec> {
        ProductionRequest(
            codec: codec, options: options, entryKey: entryKey,
            expectation: expectations.expectation(for: entryKey), generate: generate)
    }

    /// Get-or-generate (`value`, `resolve`, `optionalValue`, `refresh`) on the caller's executor: the
    /// `.beforeFlight` tiers there (a hit costs no executor hop), then, on a miss or for work that may take
    /// long (`LeavesCallerExecutor`), the rest on the cooperative pool (`resolveOnPool`). Returns what the
    /// caller keeps of the resolution (`hit`: the value alone for `value`), or nil only when an optional
    /// generator produced nil, or a cache-only lookup missed.
    ///
    /// Inlined into the public entry points, even in a debug build (transparent), so that it is no frame
    /// of its own: a lookup waiting for another process holds its caller's frame and `resolveOnPool`'s,
    /// and only what `hit` keeps and a reference (`LookupResolution`) cross its await. An async frame
    /// holds every value its function handles, even one used before its first await, so nothing larger
    /// goes through it (a `YCache.Resolved` is 147 bytes): the look on the caller's executor is a call
    /// (`firstLook`).
    @_transparent
    nonisolated(nonsending) func resolve<Codec: CacheCodec, Hit>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, optional: Bool,
        generate: @escaping @Sendable () async throws -> Codec.Value?,
        hit: (YCache.Resolved<Codec.Value>) -> Hit
    ) async throws -> Hit? {
        switch try firstLook(key, codec: codec, options: options, hit: hit) {
        case .hit(let found): return found
        case .missed: return nil
        case .onPool(let looked):
            let resolution = try await resolveOnPool(
                .boxing(key, codec: codec, options: options, optional: optional, looked: looked, generate))
            return resolution.map { hit($0.resolution) }
        }
    }

    /// What a lookup's look on its caller's executor found.
    enum FirstLook<Hit> {
        case hit(Hit)
        /// A cache-only lookup missed.
        case missed
        /// The rest runs on the pool (`resolveOnPool`); `looked`: the `.beforeFlight` tiers were asked.
        case onPool(looked: Bool)
    }

    /// The `.beforeFlight` tiers on the caller's executor (`lookupOnCallerExecutor`), unless the lookup
    /// is a refresh.
    @inline(never)
    func firstLook<Codec: CacheCodec, Hit>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, hit: (YCache.Resolved<Codec.Value>) -> Hit
    ) throws -> FirstLook<Hit> {
        guard options.lookupPolicy != .refresh else { return .onPool(looked: false) }
        switch try lookupOnCallerExecutor(key, codec: codec, options: options, hit: hit) {
        case .hit(let found): return .hit(found)
        case .missed: return options.lookupPolicy == .cacheOnly ? .missed : .onPool(looked: true)
        case .leaves: return .onPool(looked: false)
        }
    }

    /// The rest of `resolve` on the cooperative pool: the `.beforeFlight` tiers unless they were asked
    /// already (`looked`: a miss), then a refresh, or this process's flight for the entry, joined or
    /// started, and waited for here.
    ///
    /// A lookup waiting for another process holds this frame and those above it up to the public call,
    /// so the wait is here, not in a function below, and this frame is small: one await for the flight's
    /// next event, the arguments boxed and consumed, the lookup's state on the heap (`PoolLookup`), every
    /// step between awaits a function that does not suspend (`prepareOnPool`, `afterFlightEvent`).
    @concurrent @inline(never)
    func resolveOnPool<Codec: CacheCodec>(_ arguments: consuming LookupArguments<Codec>) async throws
        -> LookupResolution<Codec.Value>?
    {
        let lookup = try prepareOnPool(arguments)
        while let ticket = lookup.ticket {
            try afterFlightEvent(await ticket.flight.next(ticket.id), lookup)
        }
        // A production of its own only when it has no outcome: `finish`'s frame (about 2 KB, more than a
        // task allocator's slab) is allocated only then.
        if case .done(let resolution) = lookup.outcome { return resolution }
        return try await finish(lookup)
    }

    /// The `.beforeFlight` tiers unless they were asked already, then the production request (its entry
    /// expectation computed, or found in the expectation cache, only now) for a refresh or a flight,
    /// joined or started.
    @inline(never)
    private func prepareOnPool<Codec: CacheCodec>(_ arguments: consuming LookupArguments<Codec>) throws
        -> PoolLookup<Codec>
    {
        let options = arguments.options
        let entryKey = EntryKey(key: arguments.key, codecIdentifier: arguments.codec.identifier)
        if !arguments.looked && options.lookupPolicy != .refresh {
            switch try lookupOnPool(entryKey, codec: arguments.codec, options: options) {
            case .hit(let hit): return PoolLookup(.done(hit))
            case .missed, .leaves: if options.lookupPolicy == .cacheOnly { return PoolLookup(.done(nil)) }
            }
        }
        let boxed = FlightRequest(
            request(entryKey, codec: arguments.codec, options: options, generate: arguments.generate),
            optional: arguments.optional)
        if options.lookupPolicy == .refresh { return PoolLookup(.alone(boxed, kind: .refresh)) }
        if options.singleFlightPolicy == .disabled { return PoolLookup(.alone(boxed, kind: .lookup)) }
        return PoolLookup(boxed, ticket: try joinFlight(boxed))
    }

    /// What a flight's event means for a waiting lookup: take the step it was handed, join another
    /// flight (the one it joined was cancelled before it registered), or settle the result: the lookup's
    /// outcome, or (nothing it may use) another flight, at most `Policy.joinedFlightAttempts` in all.
    @inline(never)
    private func afterFlightEvent<Codec: CacheCodec>(_ event: FlightEvent, _ lookup: PoolLookup<Codec>) throws {
        guard let ticket = lookup.ticket, let boxed = lookup.boxed else { return }
        let result: FlightResult
        switch event {
        case .lead(let step):
            ticket.flight.advance(step)  // this caller takes the production's next step, then waits again
            return
        case .gone:
            lookup.ticket = try joinFlight(boxed)
            return
        case .expired:
            // Its own wait timeout passed (I8): a production of its own, which tries the lock once more.
            lookup.ticket = nil
            lookup.outcome = .afterOwnTimeout(boxed)
            return
        case .result(let flightResult):
            result = flightResult
        }
        lookup.ticket = nil
        switch try settle(result, joined: ticket.joined, kind: ticket.flight.kind, boxed) {
        case .done(let resolution):
            lookup.outcome = .done(resolution)
        case .again:
            lookup.attempts += 1
            if lookup.attempts < Policy.joinedFlightAttempts {
                lookup.ticket = try joinFlight(boxed)
            } else {
                lookup.outcome = .alone(boxed, kind: .lookup)
            }
        }
    }

    /// A lookup's result once it waits no more: its outcome, or a production of the caller's own, without
    /// a lookup flight: a refresh (which shares refresh flights), or a lookup's (single-flight disabled,
    /// or no flight's value it may use).
    @inline(never)
    private func finish<Codec: CacheCodec>(_ lookup: PoolLookup<Codec>) async throws -> LookupResolution<Codec.Value>? {
        switch lookup.outcome {
        case .done(let resolution):
            return resolution
        case .alone(let boxed, kind: .refresh):
            return try await refresh(boxed.request).map(LookupResolution.init)
        case .alone(let boxed, kind: _):
            return try await Production(engine: self, request: boxed.request, flight: nil, kind: .lookup).resolve()
                .map(LookupResolution.init)
        case .afterOwnTimeout(let boxed):
            // The lock tried once (its holder may be gone by now), else produced without it (I8).
            let waited = boxed.request
            var options = waited.options
            options.crossProcessWaitTimeout = .zero
            let request = request(waited.entryKey, codec: waited.codec, options: options, generate: waited.generate)
            return try await Production(engine: self, request: request, flight: nil, kind: .lookup).resolve()
                .map(LookupResolution.init)
        }
    }

    /// The `.beforeFlight` tiers on the pool (any read size); a hit boxed (see `resolve`).
    @inline(never)
    private func lookupOnPool<Codec: CacheCodec>(_ entryKey: EntryKey, codec: Codec, options: YCache.Options) throws
        -> CallerExecutorLookup<LookupResolution<Codec.Value>>
    {
        // The memory key lives in the lookup only: a hit copies it nowhere else.
        var lookup = TierLookup(entryKey, codec: codec, options: options, in: self)
        if let hit = try walk(&lookup) { return .hit(LookupResolution(hit)) }
        return .missed
    }

    /// A lookup that never generates (`valueIfCached`), on the caller's executor as `resolve` is.
    nonisolated(nonsending) func cachedValue<Codec: CacheCodec>(
        _ key: CacheKey, codec: Codec, options: YCache.Options
    ) async throws -> YCache.Resolved<Codec.Value>? {
        switch try lookupOnCallerExecutor(key, codec: codec, options: options, hit: { $0 }) {
        case .hit(let hit): return hit
        case .missed: return nil
        case .leaves: return try await cachedValueOnPool(key, codec: codec, options: options)
        }
    }

    @concurrent @inline(never)
    private func cachedValueOnPool<Codec: CacheCodec>(_ key: CacheKey, codec: Codec, options: YCache.Options)
        async throws -> YCache.Resolved<Codec.Value>?
    {
        var lookup = TierLookup(
            EntryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, in: self)
        return try walk(&lookup)
    }

    /// What the `.beforeFlight` tiers found on the caller's executor (of a hit, what its caller keeps).
    enum CallerExecutorLookup<Hit> {
        case hit(Hit)
        /// Every tier missed.
        case missed
        /// Continue on the pool: storage is not open yet, or a tier would read a large entry or decode
        /// with a decompressing codec (LeavesCallerExecutor).
        case leaves
    }

    /// The `.beforeFlight` tiers, run where the caller runs: only what costs a few syscalls (memory, an
    /// entry file up to `Policy.callerExecutorReadLimit` bytes); nothing that opens the directory, reads a
    /// large file, or waits.
    @inline(never)
    func lookupOnCallerExecutor<Codec: CacheCodec, Hit>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, hit: (YCache.Resolved<Codec.Value>) -> Hit
    ) throws -> CallerExecutorLookup<Hit> {
        guard let opened = storageTier.contextIfOpen(for: .read) else { return .leaves }
        var lookup = TierLookup(
            EntryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, opened: opened,
            readLimit: Policy.callerExecutorReadLimit)
        do {
            if let found = try walk(&lookup) { return .hit(hit(found)) }
        } catch is LeavesCallerExecutor {
            return .leaves
        }
        return .missed
    }

    /// The `.beforeFlight` tiers again, for a lookup that is about to join or start another flight.
    private func lookAgain<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) throws
        -> YCache.Resolved<Codec.Value>?
    {
        var lookup = TierLookup(request.entryKey, codec: request.codec, options: request.options, in: self)
        return try walk(&lookup)
    }

    /// Asks the `.beforeFlight` tiers in the order `tiers` lists them (memory, then storage: the engine's
    /// init checks that order); the first hit is the lookup's.
    func walk<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>) throws -> YCache.Resolved<Codec.Value>? {
        // By the typed properties, not over `[any CacheTier]`: copying a tier's existential out of the list
        // retains and releases its class reference, about 40 instructions a tier on every lookup.
        let hit = try memoryTier.lookup(&lookup, engine: self)
        if case .some = hit { return hit }  // returned as it came: no copy of the value
        return try storageTier.lookup(&lookup, engine: self)
    }

    // MARK: Flights

    /// Joins this process's lookup flight for the entry, or starts one (without waiting for it). A caller
    /// that joined someone else's flight with a `crossProcessWaitTimeout` of its own has it armed (I8: the
    /// flight's wait has its first caller's).
    @inline(never)
    private func joinFlight<Codec: CacheCodec>(_ boxed: FlightRequest<Codec>) throws -> FlightTicket {
        let request = boxed.request
        let ticket = try flights.join(
            FlightKey(entry: request.entryKey, kind: .lookup),
            cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
        ) { flight in
            Production(engine: self, request: boxed.request, flight: flight, kind: .lookup).start(flight, boxed)
        }
        if ticket.joined, let timeout = request.options.crossProcessWaitTimeout {
            ticket.flight.expire(ticket.id, after: timeout)
        }
        return ticket
    }

    /// What a flight's outcome means for this caller: its result, or (a value it may not use, an optional
    /// generator's nil it did not ask for, a refresh's error) another look in storage and another flight.
    @inline(never)
    private func settle<Codec: CacheCodec>(
        _ result: FlightResult, joined: Bool, kind: FlightKind, _ boxed: FlightRequest<Codec>
    ) throws -> Settled<Codec.Value> {
        switch result {
        case .value(let value, let metadata, let source, let sharedAcrossProcesses, let epochs):
            // Another codec with this identifier but another value type made it (as Yashima: an error).
            guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
            // I10: the flight may have read or made its value before a removal that finished before
            // this caller joined; then look again rather than return what was removed.
            if joined, !isCurrent(epochs) { break }
            if joined {
                count { $0.sharedGenerations += 1 }
                storageTier.stateIfOpen?.add(.misses)  // shared counters; a producer counts its own
            }
            return .done(
                LookupResolution(
                    YCache.Resolved(
                        value: value, origin: source, metadata: metadata,
                        wasSharedGeneration: joined || sharedAcrossProcesses)))
        case .noValue:
            if boxed.optional || !joined { return .done(nil) }
        case .failure(let error):
            if kind == .refresh && joined { break }  // a refresh's error is private to its callers
            throw error
        }
        if let hit = try lookAgain(boxed.request) { return .done(LookupResolution(hit)) }
        return .again
    }

    /// `refresh`: always generates (sharing with concurrent refreshes of the same entry), then stores.
    private func refresh<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) async throws
        -> YCache.Resolved<Codec.Value>?
    {
        guard request.options.singleFlightPolicy != .disabled else {
            return try await Production(engine: self, request: request, flight: nil, kind: .refresh).resolve()
        }
        let (result, joined, _) = try await flights.run(
            FlightKey(entry: request.entryKey, kind: .refresh),
            cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
        ) { flight in
            Production(engine: self, request: request, flight: flight, kind: .refresh)
                .start(flight, FlightRequest(request, optional: false))
        }
        switch result {
        case .value(let value, let metadata, let source, _, let epochs):
            // Another codec with this identifier but another value type made it (as Yashima: an error).
            guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
            // I10: a joined refresh whose value a removal has replaced since: refresh for this caller.
            guard !joined || isCurrent(epochs) else {
                return try await Production(engine: self, request: request, flight: nil, kind: .refresh).resolve()
            }
            return YCache.Resolved(value: value, origin: source, metadata: metadata, wasSharedGeneration: joined)
        case .noValue:
            return nil
        case .failure(let error):
            throw error
        }
    }

    /// True while no removal (or replacement) has bumped the epochs `epochs` were taken under (I10); true
    /// when there is nothing to compare (no storage).
    ///
    /// - Parameter taken: The storage whose state file `epochs` came from, when the caller holds it: the
    ///   stamps are compared there. Without it, the storage open now, which after a root re-check (I13)
    ///   may be a root that replaced that one, whose stamps say nothing about it.
    func isCurrent(_ epochs: EpochSnapshot?, in taken: StorageContext? = nil) -> Bool {
        guard let epochs else { return true }
        let storage: StorageContext
        if let taken {
            storage = taken
        } else {
            guard case .success(let current) = storageTier.context(for: .read) else { return true }
            storage = current
        }
        return epochs.stamp.matches(storage.directory.state.stamp(epochs.slots))
    }
}

/// Thrown by a `.beforeFlight` tier asked on the caller's executor (`TierLookup.readLimit` set) when its
/// answer needs work that may take long (a large read, a decompressing decode): the lookup goes on on the
/// cooperative pool. Never reaches a caller.
struct LeavesCallerExecutor: Error {}

/// A lookup's production request on the heap: what the frames of a waiting lookup hold instead of the
/// request itself (see `resolveOnPool`).
final class FlightRequest<Codec: CacheCodec>: Sendable {
    let request: ProductionRequest<Codec>
    /// Whether the caller's generator may return nil (`optionalValue`): a flight's nil is its result.
    let optional: Bool

    init(_ request: ProductionRequest<Codec>, optional: Bool) {
        self.request = request
        self.optional = optional
    }
}

/// A lookup's arguments on the heap (see `CacheEngine.resolveOnPool`).
final class LookupArguments<Codec: CacheCodec>: Sendable {
    let key: CacheKey
    let codec: Codec
    let options: YCache.Options
    let optional: Bool
    /// Whether the `.beforeFlight` tiers were asked already (on the caller's executor) and missed.
    let looked: Bool
    let generate: @Sendable () async throws -> Codec.Value?

    private init(
        key: CacheKey, codec: Codec, options: YCache.Options, optional: Bool, looked: Bool,
        _ generate: @escaping @Sendable () async throws -> Codec.Value?
    ) {
        self.key = key
        self.codec = codec
        self.options = options
        self.optional = optional
        self.looked = looked
        self.generate = generate
    }

    /// The box, made out of line from borrowed arguments: the async caller passes on what it was given
    /// rather than copying the arguments into its frame first.
    @inline(never)
    static func boxing(
        _ key: CacheKey, codec: Codec, options: YCache.Options, optional: Bool, looked: Bool,
        _ generate: @escaping @Sendable () async throws -> Codec.Value?
    ) -> LookupArguments {
        LookupArguments(key: key, codec: codec, options: options, optional: optional, looked: looked, generate)
    }
}

/// A lookup on the pool (`CacheEngine.resolveOnPool`), on the heap: the frame of a lookup that waits
/// for a flight refers to it. Only its own task uses it.
final class PoolLookup<Codec: CacheCodec> {
    enum Outcome {
        case done(LookupResolution<Codec.Value>?)
        /// A production of the caller's own: a refresh, a lookup with single-flight disabled, or one that
        /// found no flight's value it may use.
        case alone(FlightRequest<Codec>, kind: ProductionKind)
        /// A lookup whose own `crossProcessWaitTimeout` passed while the flight it joined waited (I8).
        case afterOwnTimeout(FlightRequest<Codec>)
    }

    /// The request, once the `.beforeFlight` tiers missed.
    let boxed: FlightRequest<Codec>?
    /// The flight to wait for and this caller's place in it; nil once the outcome is known.
    var ticket: FlightTicket?
    /// Flights this lookup joined and found nothing it may use in.
    var attempts = 0
    /// Set when `ticket` is nil.
    var outcome: Outcome = .done(nil)

    init(_ outcome: Outcome) {
        boxed = nil
        self.outcome = outcome
    }

    init(_ boxed: FlightRequest<Codec>, ticket: FlightTicket) {
        self.boxed = boxed
        self.ticket = ticket
    }
}

/// What `settle` made of a flight's outcome.
enum Settled<Value: Sendable> {
    case done(LookupResolution<Value>?)
    case again
}

/// A lookup's resolution on the heap, as the part of a lookup on the pool returns it: the frames of a
/// lookup that waits keep a reference where they would keep a 147-byte `YCache.Resolved` (see
/// `CacheEngine.resolve`).
final class LookupResolution<Value: Sendable>: Sendable {
    let resolution: YCache.Resolved<Value>

    init(_ resolution: YCache.Resolved<Value>) { self.resolution = resolution }
}
