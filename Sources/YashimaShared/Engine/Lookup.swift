// The lookup pipeline, every public lookup's one path: the `.beforeFlight` tiers (memory, storage) on the
// caller's executor up to 64 KiB reads, the rest on the pool; on a miss the in-process flight, joined or
// started (Production.swift). A joiner takes a flight's value only under current epochs (I10).

// Frame sizes (the one statement of why the lookup has the shape it has). A task keeps the frame of each
// async function from the public call down to its await for as long as it waits (another process's lock:
// up to `crossProcessWaitTimeout`), and a frame holds every value its function handles, even one used
// only before the first await. So a lookup that may wait keeps little there: `resolve` is transparent
// (no frame beyond the public entry's); the work between awaits is in functions that do not suspend
// (their values live on the thread's stack); and what crosses an await is one reference, the lookup's
// `PoolLookup` (arguments, flight ticket, outcome), never a 147-byte `YCache.Resolved`, a request or an
// unboxed flight result (`FlightResult` is `indirect`). A lookup hit on the caller's executor allocates
// nothing; one that leaves it allocates its `PoolLookup`, once.

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

    /// The caller's key (the entry key's).
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
    /// Transparent (inlined into the public entry points even in a debug build), so it is no frame of its
    /// own; the look on the caller's executor is a call (`firstLook`), and what crosses the await is one
    /// reference, the lookup's `PoolLookup` (see "Frame sizes" at the top of the file). The caller's
    /// generator arrives as it was given (`LookupGenerator`): the optional-returning closure a production
    /// calls (a heap-allocated context, when it wraps the caller's) is made by `PoolLookup.boxing`, only
    /// when the lookup goes on to the pool, never for a hit.
    @_transparent
    nonisolated(nonsending) func resolve<Codec: CacheCodec, Hit>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, generate: LookupGenerator<Codec.Value>,
        hit: (YCache.Resolved<Codec.Value>) -> Hit, memoryHit: (TypedMemoryContents<Codec.Value>) -> Hit
    ) async throws -> Hit? {
        switch try firstLook(key, codec: codec, options: options, hit: hit, memoryHit: memoryHit) {
        case .hit(let found): return found
        case .missed: return nil
        case .onPool(let looked):
            let lookup = try await resolveOnPool(.boxing(key, codec: codec, options: options, looked: looked, generate))
            return lookup.resolution.map(hit)
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
        _ key: CacheKey, codec: Codec, options: YCache.Options, hit: (YCache.Resolved<Codec.Value>) -> Hit,
        memoryHit: (TypedMemoryContents<Codec.Value>) -> Hit
    ) throws -> FirstLook<Hit> {
        guard options.lookupPolicy != .refresh else { return .onPool(looked: false) }
        switch try lookupOnCallerExecutor(key, codec: codec, options: options) {
        case .memoryHit(let contents): return .hit(memoryHit(contents))
        case .hit(let found): return .hit(hit(found))
        case .missed: return options.lookupPolicy == .cacheOnly ? .missed : .onPool(looked: true)
        case .leaves: return .onPool(looked: false)
        }
    }

    /// The rest of `resolve` on the cooperative pool: the `.beforeFlight` tiers unless they were asked
    /// already (`looked`: a miss), then a refresh, or this process's flight for the entry, joined or
    /// started, and waited for here. Returns `lookup`, its outcome `.done`.
    ///
    /// A lookup waiting for another process holds this frame, so the wait is here and the frame is small
    /// (see "Frame sizes"): one await for the flight's next event, and every step between awaits a
    /// function that does not suspend (`prepareOnPool`, `afterFlightEvent`).
    @concurrent @inline(never)
    func resolveOnPool<Codec: CacheCodec>(_ lookup: sending PoolLookup<Codec>) async throws
        -> sending PoolLookup<Codec>
    {
        try prepareOnPool(lookup)
        while let ticket = lookup.ticket {
            try afterFlightEvent(await ticket.flight.next(ticket.id), lookup)
        }
        // A production of its own only when it has no outcome: `finish`'s frame (about 2 KB, more than a
        // task allocator's slab) is allocated only then.
        if case .done = lookup.outcome { return lookup }
        try await finish(lookup)
        return lookup
    }

    /// The `.beforeFlight` tiers unless they were asked already, then a refresh, a production of its own
    /// (single-flight disabled), or a flight, joined or started.
    @inline(never)
    private func prepareOnPool<Codec: CacheCodec>(_ lookup: PoolLookup<Codec>) throws {
        let options = lookup.options
        if !lookup.looked && options.lookupPolicy != .refresh {
            // The memory key lives in the tier lookup only: a hit copies it nowhere else.
            var tiers = TierLookup(lookup.entryKey, codec: lookup.codec, options: options, in: self)
            if let hit = try walk(&tiers) {
                lookup.outcome = .done(hit)
                return
            }
            if options.lookupPolicy == .cacheOnly { return }  // `.done(nil)`
        }
        if options.lookupPolicy == .refresh {
            lookup.outcome = .alone(.refresh)
        } else if options.singleFlightPolicy == .disabled {
            lookup.outcome = .alone(.lookup)
        } else {
            lookup.ticket = try joinFlight(lookup)
        }
    }

    /// What a flight's event means for a waiting lookup: take the step it was handed, join another
    /// flight (the one it joined was cancelled before it registered), or settle the result: the lookup's
    /// outcome, or (nothing it may use) another flight, at most `Policy.joinedFlightAttempts` in all.
    @inline(never)
    private func afterFlightEvent<Codec: CacheCodec>(_ event: FlightEvent, _ lookup: PoolLookup<Codec>) throws {
        guard let ticket = lookup.ticket else { return }
        let result: FlightResult
        switch event {
        case .lead(let step):
            ticket.flight.advance(step)  // this caller takes the production's next step, then waits again
            return
        case .gone:
            lookup.ticket = try joinFlight(lookup)
            return
        case .expired:
            // Its own wait timeout passed (I8): a production of its own, which tries the lock once more.
            lookup.ticket = nil
            lookup.outcome = .afterOwnTimeout
            return
        case .result(let flightResult):
            result = flightResult
        }
        lookup.ticket = nil
        if try settle(result, joined: ticket.joined, kind: ticket.flight.kind, lookup) { return }
        lookup.attempts += 1
        if lookup.attempts < Policy.joinedFlightAttempts {
            lookup.ticket = try joinFlight(lookup)
        } else {
            lookup.outcome = .alone(.lookup)
        }
    }

    /// A lookup's result once it waits no more, without a lookup flight: a refresh (which shares refresh
    /// flights), or a production of the caller's own (single-flight disabled, no flight's value it may
    /// use, or its own wait timeout passed).
    @inline(never)
    private func finish<Codec: CacheCodec>(_ lookup: PoolLookup<Codec>) async throws {
        switch lookup.outcome {
        case .done:
            return
        case .alone(.refresh):
            lookup.outcome = .done(try await refresh(request(for: lookup)))
        case .alone:
            lookup.outcome = .done(
                try await Production(engine: self, request: request(for: lookup), flight: nil, kind: .lookup)
                    .resolve())
        case .afterOwnTimeout:
            // The lock tried once (its holder may be gone by now), else produced without it (I8).
            var options = lookup.options
            options.crossProcessWaitTimeout = .zero
            let request = request(lookup.entryKey, codec: lookup.codec, options: options, generate: lookup.generate)
            lookup.outcome = .done(
                try await Production(engine: self, request: request, flight: nil, kind: .lookup).resolve())
        }
    }

    /// The production request of a lookup on the pool.
    private func request<Codec: CacheCodec>(for lookup: PoolLookup<Codec>) -> ProductionRequest<Codec> {
        request(lookup.entryKey, codec: lookup.codec, options: lookup.options, generate: lookup.generate)
    }

    /// A lookup that never generates (`valueIfCached`), on the caller's executor as `resolve` is.
    nonisolated(nonsending) func cachedValue<Codec: CacheCodec>(
        _ key: CacheKey, codec: Codec, options: YCache.Options
    ) async throws -> YCache.Resolved<Codec.Value>? {
        switch try lookupOnCallerExecutor(key, codec: codec, options: options) {
        case .memoryHit(let contents): return contents.resolution
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

    /// What the `.beforeFlight` tiers found on the caller's executor.
    enum CallerExecutorLookup<Value: Sendable> {
        /// A quick memory hit (`MemoryTier.quickHit`): the caller takes what it keeps from the contents,
        /// with no resolution made for a caller that keeps the value alone.
        case memoryHit(TypedMemoryContents<Value>)
        case hit(YCache.Resolved<Value>)
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
    func lookupOnCallerExecutor<Codec: CacheCodec>(_ key: CacheKey, codec: Codec, options: YCache.Options) throws
        -> CallerExecutorLookup<Codec.Value>
    {
        let quick = memoryTier.quickHit(
            key, codecIdentifier: codec.identifier, as: Codec.Value.self, storage: storageTier)
        if case .hit(let contents) = quick { return .memoryHit(contents) }
        guard let opened = storageTier.contextIfOpen(for: .read) else { return .leaves }
        var lookup = TierLookup(
            EntryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, opened: opened,
            readLimit: Policy.callerExecutorReadLimit)
        lookup.memoryAbsent = quick.isAbsent
        do {
            if let found = try walk(&lookup) { return .hit(found) }
        } catch is LeavesCallerExecutor {
            return .leaves
        }
        return .missed
    }

    /// The `.beforeFlight` tiers again, for a lookup that is about to join or start another flight.
    private func lookAgain<Codec: CacheCodec>(_ lookup: PoolLookup<Codec>) throws -> YCache.Resolved<Codec.Value>? {
        var tiers = TierLookup(lookup.entryKey, codec: lookup.codec, options: lookup.options, in: self)
        return try walk(&tiers)
    }

    /// Asks the `.beforeFlight` tiers in the order `tiers` lists them (memory, then storage: the engine's
    /// init checks that order); the first hit is the lookup's.
    func walk<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>) throws -> YCache.Resolved<Codec.Value>? {
        // By the typed properties, not over `[any CacheTier]`: copying a tier's existential out of the list
        // retains and releases its class reference, about 40 instructions a tier on every lookup.
        if !lookup.memoryAbsent {
            let hit = try memoryTier.lookup(&lookup, engine: self)
            if case .some = hit { return hit }  // returned as it came: no copy of the value
        }
        return try storageTier.lookup(&lookup, engine: self)
    }

    // MARK: Flights

    /// Joins this process's lookup flight for the entry, or starts one (without waiting for it): only a
    /// flight's first caller makes a production request. A caller that joined someone else's flight with a
    /// `crossProcessWaitTimeout` of its own has it armed (I8: the flight's wait has its first caller's).
    @inline(never)
    private func joinFlight<Codec: CacheCodec>(_ lookup: PoolLookup<Codec>) throws -> FlightTicket {
        let ticket = try flights.join(
            FlightKey(entry: lookup.entryKey, kind: .lookup),
            cancelsWhenNoWaiters: lookup.options.singleFlightPolicy == .cancelWhenNoWaiters
        ) { flight in
            Production(engine: self, request: request(for: lookup), flight: flight, kind: .lookup).start(flight)
        }
        if ticket.joined, let timeout = lookup.options.crossProcessWaitTimeout {
            ticket.flight.expire(ticket.id, after: timeout)
        }
        return ticket
    }

    /// What a flight's outcome means for this caller: true when it set the lookup's outcome (its result),
    /// false when (a value it may not use, an optional generator's nil it did not ask for, a refresh's
    /// error) another look in storage missed too and the lookup takes another flight.
    @inline(never)
    private func settle<Codec: CacheCodec>(
        _ result: FlightResult, joined: Bool, kind: FlightKind, _ lookup: PoolLookup<Codec>
    ) throws -> Bool {
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
            lookup.outcome = .done(
                YCache.Resolved(
                    value: value, origin: source, metadata: metadata,
                    wasSharedGeneration: joined || sharedAcrossProcesses))
            return true
        case .noValue:
            if lookup.optional || !joined {
                lookup.outcome = .done(nil)
                return true
            }
        case .failure(let error):
            if kind == .refresh && joined { break }  // a refresh's error is private to its callers
            throw error
        }
        guard let hit = try lookAgain(lookup) else { return false }
        lookup.outcome = .done(hit)
        return true
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
            Production(engine: self, request: request, flight: flight, kind: .refresh).start(flight)
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

/// A caller's generator as the public call took it: one that always makes a value (`value`, `resolve`), or
/// one that may make none (`optionalValue`, whose nil is its callers' result). A hit makes nothing of it:
/// `PoolLookup.boxing` turns it into the production's closure when the lookup leaves its caller's executor.
enum LookupGenerator<Value: Sendable> {
    case value(@Sendable () async throws -> Value)
    case optional(@Sendable () async throws -> Value?)
}

/// Thrown by a `.beforeFlight` tier asked on the caller's executor (`TierLookup.readLimit` set) when its
/// answer needs work that may take long (a large read, a decompressing decode): the lookup goes on on the
/// cooperative pool. Never reaches a caller.
struct LeavesCallerExecutor: Error {}

/// A lookup that left its caller's executor (`CacheEngine.resolveOnPool`): its one heap object, from
/// its arguments to its resolution, so that the frames of a lookup that waits hold one reference (see
/// "Frame sizes" at the top of the file). Made on the caller's executor, sent to the pool and back; only
/// its own task uses it (a flight's production gets a request of its own, `ProductionRequest`).
final class PoolLookup<Codec: CacheCodec> {
    enum Outcome {
        /// The resolution: nil when an optional generator produced nil or a cache-only lookup missed (and
        /// before the lookup has any other outcome).
        case done(YCache.Resolved<Codec.Value>?)
        /// A production of the caller's own: a refresh, a lookup with single-flight disabled, or one that
        /// found no flight's value it may use.
        case alone(ProductionKind)
        /// A lookup whose own `crossProcessWaitTimeout` passed while the flight it joined waited (I8).
        case afterOwnTimeout
    }

    let entryKey: EntryKey
    let codec: Codec
    let options: YCache.Options
    /// Whether the caller's generator may return nil (`optionalValue`): a flight's nil is its result.
    let optional: Bool
    /// Whether the `.beforeFlight` tiers were asked already (on the caller's executor) and missed.
    let looked: Bool
    let generate: @Sendable () async throws -> Codec.Value?
    /// The flight to wait for and this caller's place in it; nil once the outcome is known.
    var ticket: FlightTicket?
    /// Flights this lookup joined and found nothing it may use in.
    var attempts = 0
    /// Meaningful once `ticket` is nil.
    var outcome: Outcome = .done(nil)

    private init(
        _ entryKey: EntryKey, codec: Codec, options: YCache.Options, optional: Bool, looked: Bool,
        _ generate: @escaping @Sendable () async throws -> Codec.Value?
    ) {
        self.entryKey = entryKey
        self.codec = codec
        self.options = options
        self.optional = optional
        self.looked = looked
        self.generate = generate
    }

    /// The lookup, made out of line from borrowed arguments: the async caller passes on what it was given
    /// rather than copying the arguments into its frame first.
    @inline(never)
    static func boxing(
        _ key: CacheKey, codec: Codec, options: YCache.Options, looked: Bool, _ generator: LookupGenerator<Codec.Value>
    ) -> PoolLookup {
        let optional: Bool
        let generate: @Sendable () async throws -> Codec.Value?
        switch generator {
        case .value(let produce):
            optional = false
            generate = { try await produce() }
        case .optional(let produce):
            optional = true
            generate = produce
        }
        return PoolLookup(
            EntryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options,
            optional: optional, looked: looked, generate)
    }

    /// The resolution, once the outcome is `.done`.
    var resolution: YCache.Resolved<Codec.Value>? {
        if case .done(let resolution) = outcome { resolution } else { nil }
    }
}
