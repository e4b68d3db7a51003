// The lookup pipeline, every public lookup's one path: the `.beforeFlight` tiers (memory, storage) on the
// caller's executor up to 64 KiB reads, the rest on the pool; on a miss the in-process flight, joined or
// started (Production.swift). A joiner takes a flight's value only under current epochs (I10).

/// What a production needs to generate and store one entry.
struct ProductionRequest<Codec: CacheCodec>: Sendable {
    let key: CacheKey
    let codec: Codec
    let options: YCache.Options
    let memoryKey: MemoryKey
    /// The entry's identity and the exact bytes it must hold (two SHA-256s, cached: ExpectationCache).
    let expectation: EntryExpectation
    /// The caller's generator (GeneratorTier).
    let generate: @Sendable () async throws -> Codec.Value?
    /// The storage a remote tier may stage a large hit's entry file in (set for a lookup that writes
    /// to a local storage directory).
    var staging: StorageContext?
}

extension CacheEngine {
    /// The request of a lookup that missed memory: the entry expectation is computed (or found in the
    /// expectation cache) only now, so a memory hit never hashes the key.
    @inline(never)
    func request<Codec: CacheCodec>(
        _ memoryKey: MemoryKey, codec: Codec, options: YCache.Options,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) -> ProductionRequest<Codec> {
        ProductionRequest(
            key: memoryKey.key, codec: codec, options: options, memoryKey: memoryKey,
            expectation: expectations.expectation(for: memoryKey), generate: generate)
    }

    /// Get-or-generate (`value`, `resolve`, `optionalValue`, `refresh`) on the caller's executor: the
    /// `.beforeFlight` tiers there (a hit costs no executor hop), then, on a miss or for work that may take
    /// long (`LeavesCallerExecutor`), the rest on the cooperative pool (`resolveOnPool`). Returns nil only
    /// when an optional generator produced nil, or a cache-only lookup missed.
    nonisolated(nonsending) func resolve<Codec: CacheCodec>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, optional: Bool,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> YCache.Resolved<Codec.Value>? {
        var looked = false
        if options.lookupPolicy != .refresh {
            switch try lookupOnCallerExecutor(key, codec: codec, options: options) {
            case .hit(let hit): return hit
            case .missed:
                if options.lookupPolicy == .cacheOnly { return nil }
                looked = true
            case .leaves:
                break
            }
        }
        return try await resolveOnPool(
            key, codec: codec, options: options, optional: optional, looked: looked, generate)
    }

    /// The rest of `resolve` on the cooperative pool: the `.beforeFlight` tiers unless they were asked
    /// already (`looked`: a miss), then the flight (or a refresh).
    @concurrent @inline(never)
    func resolveOnPool<Codec: CacheCodec>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, optional: Bool, looked: Bool,
        _ generate: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> YCache.Resolved<Codec.Value>? {
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        if options.lookupPolicy == .refresh {
            return try await refresh(request(memoryKey, codec: codec, options: options, generate: generate))
        }
        if !looked {
            switch try lookupOnPool(memoryKey, codec: codec, options: options) {
            case .hit(let hit): return hit
            case .missed, .leaves: if options.lookupPolicy == .cacheOnly { return nil }
            }
        }
        return try await flightTier(
            request(memoryKey, codec: codec, options: options, generate: generate), optional: optional)
    }

    /// The `.beforeFlight` tiers on the pool (any read size).
    @inline(never)
    private func lookupOnPool<Codec: CacheCodec>(_ memoryKey: MemoryKey, codec: Codec, options: YCache.Options) throws
        -> CallerExecutorLookup<Codec.Value>
    {
        // The memory key lives in the lookup only: a hit copies it nowhere else.
        var lookup = TierLookup(memoryKey, codec: codec, options: options, in: self)
        if let hit = try walk(&lookup) { return .hit(hit) }
        return .missed
    }

    /// A lookup that never generates (`valueIfCached`), on the caller's executor as `resolve` is.
    nonisolated(nonsending) func cachedValue<Codec: CacheCodec>(
        _ key: CacheKey, codec: Codec, options: YCache.Options
    ) async throws -> YCache.Resolved<Codec.Value>? {
        switch try lookupOnCallerExecutor(key, codec: codec, options: options) {
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
            MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, in: self)
        return try walk(&lookup)
    }

    /// What the `.beforeFlight` tiers found on the caller's executor.
    enum CallerExecutorLookup<Value: Sendable> {
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
        guard let opened = storageIfOpen(for: .read) else { return .leaves }
        var lookup = TierLookup(
            MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, opened: opened,
            readLimit: Policy.callerExecutorReadLimit)
        do {
            if let hit = try walk(&lookup) { return .hit(hit) }
        } catch is LeavesCallerExecutor {
            return .leaves
        }
        return .missed
    }

    /// The `.beforeFlight` tiers again, for a lookup that is about to join or start another flight.
    private func lookAgain<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) throws
        -> YCache.Resolved<Codec.Value>?
    {
        var lookup = TierLookup(request.memoryKey, codec: request.codec, options: request.options, in: self)
        return try walk(&lookup)
    }

    /// Asks the `.beforeFlight` tiers in order; the first hit is the lookup's.
    func walk<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>) throws -> YCache.Resolved<Codec.Value>? {
        // Through the buffer: no retain of the array, no copy of a tier (a few nanoseconds a hit).
        try lookupTiers.withUnsafeBufferPointer { tiers in
            for index in tiers.indices {
                let hit = try tiers[index].lookup(&lookup, engine: self)
                if case .some = hit { return hit }  // returned as it came: no copy of the value
            }
            return nil
        }
    }

    // MARK: Flights

    /// Joins this process's flight for the entry or starts one. A joiner whose flight gave it nothing it
    /// may use (a value made before a removal it must not see, an optional generator's nil, a refresh's
    /// error) looks again and tries another flight, then produces on its own.
    ///
    /// Its frame, and every frame below it, is held per key while the flight waits for another process,
    /// so it keeps only a reference to the request (`FlightRequest`) and an outcome across its awaits; the
    /// work between them is in functions that do not suspend.
    @inline(never)
    private func flightTier<Codec: CacheCodec>(_ request: ProductionRequest<Codec>, optional: Bool) async throws
        -> YCache.Resolved<Codec.Value>?
    {
        let boxed = FlightRequest(request)
        guard request.options.singleFlightPolicy != .disabled else { return try await produceDirectly(boxed) }
        for _ in 0..<Policy.joinedFlightAttempts {
            let outcome = try await joinFlight(boxed)
            switch try settle(outcome, boxed, optional: optional) {
            case .done(let resolution): return resolution
            case .again: continue
            }
        }
        return try await produceDirectly(boxed)
    }

    /// A production without a flight (single-flight disabled, or a caller that found no flight's value it
    /// may use): the caller's own.
    @inline(never)
    private func produceDirectly<Codec: CacheCodec>(_ boxed: FlightRequest<Codec>) async throws
        -> YCache.Resolved<Codec.Value>?
    {
        try await Production(engine: self, request: boxed.request, flight: nil, kind: .lookup).resolve()
    }

    /// Joins this process's lookup flight for the entry, or starts one.
    @inline(never)
    private func joinFlight<Codec: CacheCodec>(_ boxed: FlightRequest<Codec>) async throws -> FlightOutcome {
        let request = boxed.request
        let (result, joined, kind) = try await flights.run(
            FlightKey(entry: request.memoryKey, kind: .lookup),
            cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
        ) { flight in
            Production(engine: self, request: boxed.request, flight: flight, kind: .lookup).start(flight)
        }
        return FlightOutcome(result: result, joined: joined, kind: kind)
    }

    /// What a flight's outcome means for this caller: its result, or (a value it may not use, an optional
    /// generator's nil it did not ask for, a refresh's error) another look in storage and another flight.
    @inline(never)
    private func settle<Codec: CacheCodec>(_ outcome: FlightOutcome, _ boxed: FlightRequest<Codec>, optional: Bool)
        throws -> Settled<Codec.Value>
    {
        let joined = outcome.joined
        switch outcome.result {
        case .value(let value, let metadata, let source, let sharedAcrossProcesses, let epochs):
            // Another codec with this identifier but another value type made it (as Yashima: an error).
            guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
            // I10: the flight may have read or made its value before a removal that finished before
            // this caller joined; then look again rather than return what was removed.
            if joined, !isCurrent(epochs) { break }
            if joined {
                count { $0.sharedGenerations += 1 }
                stateIfOpen?.add(.misses)  // shared counters; a producer counts its own
            }
            return .done(
                YCache.Resolved(
                    value: value, origin: source, metadata: metadata,
                    wasSharedGeneration: joined || sharedAcrossProcesses))
        case .noValue:
            if optional || !joined { return .done(nil) }
        case .failure(let error):
            if outcome.kind == .refresh && joined { break }  // a refresh's error is private to its callers
            throw error
        }
        if let hit = try lookAgain(boxed.request) { return .done(hit) }
        return .again
    }

    /// `refresh`: always generates (sharing with concurrent refreshes of the same entry), then stores.
    @inline(never)
    private func refresh<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) async throws
        -> YCache.Resolved<Codec.Value>?
    {
        guard request.options.singleFlightPolicy != .disabled else {
            return try await Production(engine: self, request: request, flight: nil, kind: .refresh).resolve()
        }
        let (result, joined, _) = try await flights.run(
            FlightKey(entry: request.memoryKey, kind: .refresh),
            cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
        ) { flight in
            await Production(engine: self, request: request, flight: flight, kind: .refresh).run()
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
            guard case .success(let current) = self.storage(for: .read) else { return true }
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
/// request itself (see `flightTier`).
final class FlightRequest<Codec: CacheCodec>: Sendable {
    let request: ProductionRequest<Codec>

    init(_ request: ProductionRequest<Codec>) { self.request = request }
}

/// A flight's result for one of its callers.
struct FlightOutcome: Sendable {
    let result: FlightResult
    let joined: Bool
    let kind: FlightKind
}

/// What `settle` made of a flight's outcome.
enum Settled<Value: Sendable> {
    case done(YCache.Resolved<Value>?)
    case again
}
