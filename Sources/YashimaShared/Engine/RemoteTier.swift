// The remote tier (I16), an `.underKeyLock` tier: holding the key's local lock (I5), a verified remote hit is
// published locally; on a miss the key's remote lease is taken or another host's holder waited for, then
// the value generated and stored remotely. Every remote call is guarded and never throws (RemoteGuard).

import Foundation
import Synchronization

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
    /// `leases` when its first lease call is the lookup too (Redis), cast once here rather than per miss.
    private let lookupOrLease: (any RemoteLookupOrLease)?

    init(_ stores: RemoteStores) {
        values = stores.values
        leases = stores.leases
        leasesHoldValues = stores.leasesHoldValues
        lookupOrLease = stores.leasesHoldValues ? stores.leases as? any RemoteLookupOrLease : nil
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
        var lookingUp = writes ? lookupOrLease : nil
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
                if let early = request.remoteLookup {
                    acquisition = await early.answer()
                } else {
                    acquisition = await combined.lookupOrAcquireLease(identity)
                }
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

    /// Starts the first remote call of a lookup's production (the value, or else the lease: the call
    /// `produce` begins with) as soon as the production holds the key's lock, before its task runs, so that
    /// the round trip overlaps the hop to that task; `produce` then takes its answer. Nil when `produce`
    /// would not begin with that call (values kept out of storage, no lease store holding the values).
    ///
    /// The caller takes the production's epochs (I10) before this: a removal that deletes the remote value
    /// after this call read it is then seen, and the value is not published.
    func startLookup<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) -> EarlyRemoteLookup? {
        guard Self.writesRemotely(request.options), let lookupOrLease else { return nil }
        let early = EarlyRemoteLookup(leases: lookupOrLease)
        lookupOrLease.startLookupOrAcquireLease(request.expectation.identity) { early.deliver($0) }
        return early
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
        guard !isReadOnly, !Injection.remoteRemoveSkip else { return false }
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

/// The answer of a remote call a production started before its task ran (`RemoteTier.startLookup`): taken
/// once, by `RemoteTier.produce`. A lease it holds that nobody took is released when it goes.
final class EarlyRemoteLookup: Sendable {
    private enum State {
        /// No answer yet; the production's task waits for it (at most one continuation).
        case pending(CheckedContinuation<RemoteLeaseAcquisition, Never>?)
        /// Answered, not yet taken.
        case answered(RemoteLeaseAcquisition)
        case taken
    }

    private let state = Mutex(State.pending(nil))
    private let leases: any RemoteLeaseStore

    init(leases: any RemoteLeaseStore) { self.leases = leases }

    /// Hands the call's answer over (once, on the I/O thread).
    func deliver(_ acquisition: RemoteLeaseAcquisition) {
        let waiting = state.withLock { state -> CheckedContinuation<RemoteLeaseAcquisition, Never>? in
            guard case .pending(let continuation) = state else { return nil }
            state = continuation == nil ? .answered(acquisition) : .taken
            return continuation
        }
        waiting?.resume(returning: acquisition)
    }

    /// The answer, once it is in (without a suspension when it is in already). Called once.
    func answer() async -> RemoteLeaseAcquisition {
        if let ready = takeIfAnswered() { return ready }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> RemoteLeaseAcquisition? in
                if case .answered(let acquisition) = state {
                    state = .taken
                    return acquisition
                }
                state = .pending(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func takeIfAnswered() -> RemoteLeaseAcquisition? {
        state.withLock { state in
            guard case .answered(let acquisition) = state else { return nil }
            state = .taken
            return acquisition
        }
    }

    deinit {
        // Never reached on the engine's paths (every production that started the call takes its answer);
        // a lease left here would make other hosts wait for its expiry.
        guard case .answered(.acquired(let lease)) = state.withLock({ $0 }) else { return }
        let leases = leases
        Task.detached { await leases.release(lease) }
    }
}
