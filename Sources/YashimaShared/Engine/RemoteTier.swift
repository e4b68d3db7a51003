// The remote tier (I16), an `.underKeyLock` tier: holding the key's local lock (I5), a verified remote hit is
// published locally; on a miss the key's remote lease is taken or another host's holder waited for, then
// the value generated and stored remotely. Every remote call is guarded and never throws (RemoteGuard).

import Foundation

/// The remote tier of one cache: its stores and the production step (see the file's header).
final class RemoteTier: CacheTier {
    /// Test seam: called after a production's first remote lookup missed, before the lease is asked for
    /// (where the lease store holds the values, Redis, its lease call is the lookup: not called).
    @TaskLocal static var afterRemoteMiss: (@Sendable () async -> Void)?

    /// Where values are looked up and stored.
    let values: any RemoteValueStore
    /// Where leases are taken; nil without leases (HTTP alone) or in read-only mode.
    let leases: (any RemoteLeaseStore)?
    /// True when `leases` is `values` (Redis): its lease calls see the value too, and a value is stored
    /// and the lease released in one round trip.
    let leasesHoldValues: Bool

    init(_ stores: RemoteStores) {
        values = stores.values
        leases = stores.leases
        leasesHoldValues = stores.leasesHoldValues
    }

    var place: TierPlace { .underKeyLock }

    /// Shares the stores' breakers and counters with every process on the machine (I17).
    func attach(_ board: any RemoteMachineBoard) {
        values.statistics.board.attach(board)
        if let leases, !leasesHoldValues { leases.statistics.board.attach(board) }
    }

    private var isReadOnly: Bool { values.remoteGuard.policy.readOnly }

    // MARK: Producing

    func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, kind: ProductionKind, engine: CacheEngine,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        // A refresh always generates, and its value replaces the remote one.
        guard kind == .lookup else { return try await generateAndStore(request, next: next) }
        // Values kept out of this host's storage (`.memoryOnly`, `.disabled`) are kept out of the remote
        // tier too: no lease, no store.
        let writes = Self.writesRemotely(request.options)
        // Where the lease store holds the values (Redis), the first lease call is the lookup too: a miss's
        // lookup and lease in one round trip.
        var lookingUp = leasesHoldValues && writes ? leases as? any RemoteLookupOrLease : nil
        if lookingUp == nil {
            if let hit = await lookup(request, shared: false) { return hit }
            await Self.afterRemoteMiss?()
        }
        guard let leases, writes else { return try await generateAndStore(request, next: next) }
        let identity = request.expectation.identity
        let deadline = request.options.crossProcessWaitTimeout.map { RemoteDeadline.after($0) } ?? .distantFuture
        let observer = LockWait.leaseObserver
        while true {
            let acquisition: RemoteLeaseAcquisition
            let combined = lookingUp
            if let combined {
                lookingUp = nil
                acquisition = await combined.lookupOrAcquireLease(identity)
            } else {
                acquisition = await leases.acquireLease(identity)
            }
            switch acquisition {
            case .acquired(let lease):
                // With values elsewhere (HTTP), a holder stores its value and then releases its lease: one
                // that did so after this host's lookup above left a free lease and a value this lookup did
                // not see. Look again before generating (Redis answers that in the lease call itself).
                if !leasesHoldValues, let hit = await lookup(request, shared: true) {
                    await leases.release(lease)
                    return hit
                }
                return try await generateHolding(lease, leases: leases, request: request, next: next)
            case .found(let value):
                if let hit = hit(value, request, shared: false) { return hit }
                return try await generateAndStore(request, next: next)
            case .unavailable:
                // The lease side may be refused while reads go on (OOM, a replica): then look the value up.
                if combined != nil, let hit = await lookup(request, shared: false) { return hit }
                return try await generateAndStore(request, next: next)
            case .heldElsewhere:
                let timeout = Duration.nanoseconds(deadline.remainingNanoseconds)
                switch await leases.waitForRelease(identity, timeout: timeout, onWaiting: observer) {
                case .found(let value):
                    if let hit = hit(value, request, shared: true) { return hit }
                    return try await generateAndStore(request, next: next)
                case .leaseFree:
                    // With values elsewhere (HTTP), the released holder's value is there, not in Redis.
                    if !leasesHoldValues, let hit = await lookup(request, shared: true) { return hit }
                case .timedOut, .unavailable:
                    return try await generateAndStore(request, next: next)
                case .cancelled:
                    throw CancellationError()
                }
            }
        }
    }

    /// The remote value of `request`'s entry, verified and decoded, as a production's value; nil on a
    /// miss, an unavailable tier, or bytes the codec cannot decode.
    private func lookup<Codec: CacheCodec>(_ request: ProductionRequest<Codec>, shared: Bool) async
        -> Produced<Codec.Value>?
    {
        if let storage = request.staging, values.fileStreamingThreshold != nil {
            return await lookupStaged(request, storage: storage, shared: shared)
        }
        guard case .hit(let value) = await values.lookup(request.expectation.identity) else { return nil }
        return hit(value, request, shared: shared)
    }

    /// A verified remote value as a production's value, published locally with its own bytes and times
    /// (its expiry carries over); nil when the codec cannot decode it (a miss: it is regenerated and
    /// overwritten).
    func hit<Codec: CacheCodec>(_ value: RemoteValue, _ request: ProductionRequest<Codec>, shared: Bool)
        -> Produced<Codec.Value>?
    {
        guard let decoded = try? request.codec.decode(value.payload) else { return nil }
        var produced = Produced(
            value: decoded, source: .remote,
            stored: StoredForm(
                payload: value.payload, createdAt: value.createdAt,
                expiresAt: value.expiresAt == 0 ? nil : value.expiresAt))
        produced.sharedGeneration = shared
        return produced
    }

    /// Generates without a lease (none to take, the tier unavailable, or a wait that timed out), then
    /// stores the published value remotely (unless read-only).
    private func generateAndStore<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        guard var produced = try await next() else { return nil }
        guard !isReadOnly, produced.source == .generated, Self.writesRemotely(request.options) else {
            return produced
        }
        let (values, identity) = (values, request.expectation.identity)
        produced.afterPublish = Self.chain(produced.afterPublish) { published in
            guard let published else { return }
            _ = await Self.store(identity, published, in: values)
        }
        return produced
    }

    /// Generates holding `lease` (renewed meanwhile); after the publish, stores the value remotely and
    /// releases the lease (one round trip on Redis; with values elsewhere, stored first, then released, so
    /// that woken waiters find it). A generator that throws or has no value releases the lease.
    private func generateHolding<Codec: CacheCodec>(
        _ lease: RemoteLease, leases: any RemoteLeaseStore, request: ProductionRequest<Codec>,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        let renewal = leases.startRenewal(lease, onLost: {})
        let generated: Produced<Codec.Value>?
        do {
            generated = try await next()
        } catch {
            renewal.stopNow()
            await leases.release(lease)
            throw error
        }
        guard var produced = generated else {
            renewal.stopNow()
            await leases.release(lease)
            return nil
        }
        let (values, identity, leasesHoldValues) = (values, request.expectation.identity, leasesHoldValues)
        produced.afterPublish = Self.chain(produced.afterPublish) { published in
            renewal.stopNow()
            guard let published, let content = published.content else {
                await leases.release(lease)
                return
            }
            if leasesHoldValues {
                _ = await leases.storeAndRelease(
                    identity, payload: content.payload, createdAt: content.createdAt, expiresAt: content.expiresAt,
                    lease: lease)
            } else {
                _ = await Self.store(identity, published, in: values)
                await leases.release(lease)
            }
        }
        return produced
    }

    /// Stores a published value in `values`: for a backend that streams (HTTP) and a payload at or above
    /// its threshold, streamed from the published entry file (immutable once published, I1), so the upload
    /// reads the page cache rather than holding the payload; otherwise (or when the entry is already gone
    /// or replaced) from the payload in memory.
    private static func store(_ identity: EntryIdentity, _ published: PublishedValue, in values: any RemoteValueStore)
        async -> RemoteStoreOutcome?
    {
        guard let content = published.content else { return nil }
        if let threshold = values.fileStreamingThreshold, content.payload.count >= threshold,
            let file = published.entry?.openPayload()
        {
            defer { Syscall.close(file.descriptor) }
            return await values.store(
                identity, payloadFile: file, createdAt: content.createdAt, expiresAt: content.expiresAt)
        }
        return await values.store(
            identity, payload: content.payload, createdAt: content.createdAt, expiresAt: content.expiresAt)
    }

    /// Whether values of a call with `options` go to the remote tier: only those that go to storage.
    static func writesRemotely(_ options: YCache.Options) -> Bool { options.writePolicy == .memoryAndStorage }

    /// `first` (if any), then `then`.
    private static func chain(
        _ first: (@Sendable (PublishedValue?) async -> Void)?,
        _ then: @escaping @Sendable (PublishedValue?) async -> Void
    ) -> @Sendable (PublishedValue?) async -> Void {
        guard let first else { return then }
        return { published in
            await first(published)
            await then(published)
        }
    }

    // MARK: Writes outside productions

    /// Stores a value an explicit `store` published (unless read-only, or kept out of storage).
    func store(_ identity: EntryIdentity, published: PublishedValue, options: YCache.Options) async {
        guard !isReadOnly, Self.writesRemotely(options) else { return }
        _ = await Self.store(identity, published, in: values)
    }

    /// Deletes the remote value (unless read-only); true when one was deleted. Never throws: a remote
    /// failure is counted, not reported.
    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool {
        guard !isReadOnly else { return false }
        return await values.remove(key.identity)
    }

    /// With `removeAllRemotely`, deletes every remote value of the cache (Redis; HTTP cannot list its
    /// values). Never throws: a remote failure is counted, not reported.
    func removeAll() async {
        guard !isReadOnly, values.remoteGuard.policy.removeAllRemotely else { return }
        _ = await values.removeAll()
    }

    // MARK: Statistics

    /// Adds the tier's counters (its stores') to `statistics`.
    func addCounters(to statistics: inout CacheStatistics) {
        var sources = [values.statistics]
        if let leases, !leasesHoldValues { sources.append(leases.statistics) }
        for source in sources {
            let counters = source.snapshot
            statistics.remoteHits += counters[.hits]
            statistics.remoteMisses += counters[.misses]
            statistics.remotePuts += counters[.puts]
            statistics.remoteRejectedValues += counters[.rejectedValues]
            statistics.remoteErrors += counters[.errors]
            statistics.remoteTimeouts += counters[.timeouts]
            statistics.remoteBypassedCalls += counters[.bypassed]
            statistics.remoteLeaseWaits += counters[.leaseWaits]
            statistics.remoteLeaseTakeovers += counters[.leaseTakeovers]
            statistics.remoteRejectedBadSignature += counters[.rejectedBadSignature]
            statistics.remoteRejectedUnsigned += counters[.rejectedUnsigned]
            statistics.remoteRejectedDamaged += counters[.rejectedDamaged]
            statistics.remoteRejectedTooLarge += counters[.rejectedTooLarge]
            statistics.remoteAuthenticationFailures += counters[.authenticationFailures]
            statistics.remoteConnectionFailures += counters[.connectionFailures]
            statistics.remoteLeaseWaitTime += .nanoseconds(counters[.leaseWaitNanoseconds])
            statistics.remoteReleasesAfterFailedStore += counters[.releasesAfterFailedStore]
            statistics.remoteSignedValuesKept += counters[.signedValuesKept]
        }
    }
}
