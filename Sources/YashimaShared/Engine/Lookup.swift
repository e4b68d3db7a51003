// The lookup pipeline, every public lookup's one path: the `.beforeFlight` tiers (memory, storage), each
// asked once; on a miss the in-process flight, joined or started (Production.swift: the key's lock, the
// `.underKeyLock` tiers, publish). A joiner takes a flight's value only under current epochs (I10).

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
    func request<Codec: CacheCodec>(
        _ memoryKey: MemoryKey, codec: Codec, options: YCache.Options,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) -> ProductionRequest<Codec> {
        ProductionRequest(
            key: memoryKey.key, codec: codec, options: options, memoryKey: memoryKey,
            expectation: expectations.expectation(for: memoryKey), generate: generate)
    }

    /// Get-or-generate (`value`, `resolve`, `optionalValue`, `refresh`): the `.beforeFlight` tiers, then the
    /// flight. Returns nil only when an optional generator produced nil, or a cache-only lookup missed.
    func resolve<Codec: CacheCodec>(
        _ key: CacheKey, codec: Codec, options: YCache.Options, optional: Bool,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> YCache.Resolved<Codec.Value>? {
        if options.lookupPolicy == .refresh {
            let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
            return try await refresh(request(memoryKey, codec: codec, options: options, generate: generate))
        }
        // The memory key lives in the lookup only: a hit copies it nowhere else.
        var lookup = TierLookup(
            MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, in: self)
        if let hit = try walk(&lookup) { return hit }
        if options.lookupPolicy == .cacheOnly { return nil }
        return try await flightTier(
            request(lookup.memoryKey, codec: codec, options: options, generate: generate), optional: optional)
    }

    /// A lookup that never generates (`valueIfCached`): the `.beforeFlight` tiers.
    func cachedValue<Codec: CacheCodec>(_ key: CacheKey, codec: Codec, options: YCache.Options) throws
        -> YCache.Resolved<Codec.Value>?
    {
        var lookup = TierLookup(
            MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec, options: options, in: self)
        return try walk(&lookup)
    }

    /// The `.beforeFlight` tiers again, for a lookup that is about to join or start another flight.
    private func lookAgain<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) throws
        -> YCache.Resolved<Codec.Value>?
    {
        var lookup = TierLookup(request.memoryKey, codec: request.codec, options: request.options, in: self)
        return try walk(&lookup)
    }

    /// Asks the `.beforeFlight` tiers in order; the first hit is the lookup's.
    private func walk<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>) throws -> YCache.Resolved<Codec.Value>? {
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
    private func flightTier<Codec: CacheCodec>(_ request: ProductionRequest<Codec>, optional: Bool) async throws
        -> YCache.Resolved<Codec.Value>?
    {
        guard request.options.singleFlightPolicy != .disabled else {
            return try await Production(engine: self, request: request, flight: nil, kind: .lookup).resolve()
        }
        for _ in 0..<Policy.joinedFlightAttempts {
            let (result, joined, kind) = try await flights.run(
                FlightKey(entry: request.memoryKey, kind: .lookup),
                cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
            ) { flight in
                await Production(engine: self, request: request, flight: flight, kind: .lookup).run()
            }
            switch result {
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
                return YCache.Resolved(
                    value: value, origin: source, metadata: metadata,
                    wasSharedGeneration: joined || sharedAcrossProcesses)
            case .noValue:
                if optional || !joined { return nil }
            case .failure(let error):
                if kind == .refresh && joined { break }  // a refresh's error is private to its callers
                throw error
            }
            if let hit = try lookAgain(request) { return hit }
        }
        return try await Production(engine: self, request: request, flight: nil, kind: .lookup).resolve()
    }

    /// `refresh`: always generates (sharing with concurrent refreshes of the same entry), then stores.
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
