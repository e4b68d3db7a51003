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

    /// A delete of one key's remote value: true when the tier holds none now (deleted, or there was none),
    /// false when the server could not be asked or failed (a copy may survive: RemoteWriteWindow owes it).
    typealias Delete = @Sendable () async -> Bool

    /// Where values are looked up and stored.
    let values: any RemoteValueStore
    /// Where leases come from (the type of their store says how they go with the values); nil without
    /// leases (HTTP alone) or in read-only mode.
    let leasing: RemoteLeasing?

    init(_ stores: RemoteStores) {
        values = stores.values
        leasing = stores.leasing
    }

    var place: TierPlace { .underKeyLock }

    /// The counters of the stores behind this tier (each once): the values' (a chain's members'), and the
    /// leases' when they are apart on another store.
    private var statisticsSources: [RemoteStatistics] {
        let sources = values.memberStatistics
        guard case .apart(let leases) = leasing, !sources.contains(where: { $0 === leases.statistics }) else {
            return sources
        }
        return sources + [leases.statistics]
    }

    /// Shares the stores' breakers and counters with every process on the machine (I17).
    func attach(_ board: any MachineBoard) {
        for source in statisticsSources { source.board.attach(board) }
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
        // A remote copy this directory may have outlived (a delete owed) is never taken: paid first, or
        // the value is generated (and stored) without asking the tier (I16).
        if let directory = request.directory, !isReadOnly {
            let (values, identity) = (values, request.expectation.identity)
            let settled = await RemoteWriteWindow.settle(
                identity, slots: request.expectation.slots, in: directory,
                deleteRemote: { await values.remove(identity) != .unavailable })
            if !settled { return try await generateAndStore(request, next: next) }
        }
        // Where the lease store holds the values (Redis), the first lease call is the lookup too: a miss's
        // lookup and lease in one round trip.
        if writes, case .withValues(let store) = leasing {
            return try await produce(request, leasingWith: store, next: next)
        }
        if let hit = await lookup(request, shared: false) { return hit }
        await Self.afterRemoteMiss?()
        guard writes, case .apart(let leases) = leasing else { return try await generateAndStore(request, next: next) }
        return try await produce(request, leasingApart: leases, next: next)
    }

    /// A miss's production with leases where the values are (Redis): the first call looks up and takes the
    /// lease at once (the early call, if the production started one); after a wait, the lease call sees the
    /// value too.
    private func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, leasingWith store: any RemoteValueLeaseStore,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        let identity = request.expectation.identity
        let deadline = request.options.crossProcessWaitTimeout.map { RemoteDeadline.after($0) } ?? .distantFuture
        var first = true
        while true {
            let acquisition: RemoteValueLeaseAcquisition
            if first, let early = request.remoteLookup {
                acquisition = await early.answer()
            } else if first {
                acquisition = await store.lookupOrLease(identity)
            } else {
                acquisition = await store.valueLease(for: identity)
            }
            let wasFirst = first
            first = false
            switch consume acquisition {
            case .acquired(let lease):
                return try await generateHolding(lease, request: request, next: next)
            case .found(let value):
                if let hit = hit(value, request, shared: false) { return hit }
                return try await generateAndStore(request, next: next)
            case .unavailable:
                // The lease side may be refused while reads go on (OOM, a replica): then look the value up.
                if wasFirst, let hit = await lookup(request, shared: false) { return hit }
                return try await generateAndStore(request, next: next)
            case .heldElsewhere:
                let timeout = Duration.nanoseconds(deadline.remainingNanoseconds)
                switch await store.waitForRelease(identity, timeout: timeout, onWaiting: LockWait.leaseObserver) {
                case .found(let value):
                    if let hit = hit(value, request, shared: true) { return hit }
                    return try await generateAndStore(request, next: next)
                case .leaseFree: continue
                case .timedOut, .unavailable: return try await generateAndStore(request, next: next)
                case .cancelled: throw CancellationError()
                }
            }
        }
    }

    /// A miss's production with leases apart from the values (HTTP values, Redis leases): a holder stores
    /// its value and then releases its lease, so a lease taken, or seen released, is followed by a lookup.
    private func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, leasingApart leases: any RemoteLeaseStore,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        let identity = request.expectation.identity
        let deadline = request.options.crossProcessWaitTimeout.map { RemoteDeadline.after($0) } ?? .distantFuture
        while true {
            let acquisition = await leases.lease(for: identity)
            switch consume acquisition {
            case .acquired(let lease):
                // A holder that stored and released after this host's lookup left a free lease and a value
                // that lookup did not see: look again before generating.
                if let hit = await lookup(request, shared: true) {
                    await lease.release()
                    return hit
                }
                return try await generateHolding(lease, request: request, next: next)
            case .unavailable:
                return try await generateAndStore(request, next: next)
            case .heldElsewhere:
                let timeout = Duration.nanoseconds(deadline.remainingNanoseconds)
                switch await leases.waitForRelease(identity, timeout: timeout, onWaiting: LockWait.leaseObserver) {
                case .found(let value):
                    if let hit = hit(value, request, shared: true) { return hit }
                    return try await generateAndStore(request, next: next)
                case .leaseFree:
                    // The released holder's value is with the values, not with the lease.
                    if let hit = await lookup(request, shared: true) { return hit }
                case .timedOut, .unavailable: return try await generateAndStore(request, next: next)
                case .cancelled: throw CancellationError()
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
    /// Nor when `storage` owes a remote delete of the key (`produce` pays it first).
    func startLookup<Codec: CacheCodec>(_ request: ProductionRequest<Codec>, storage: StorageContext?)
        -> EarlyRemoteLookup?
    {
        guard Self.writesRemotely(request.options), case .withValues(let store) = leasing else { return nil }
        if let storage, storage.directory.owesRemoteDelete(request.expectation.identity) { return nil }
        let early = EarlyRemoteLookup()
        store.startLookupOrLease(request.expectation.identity) { early.deliver($0) }
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
            let outcome = await Self.store(identity, published, in: values)
            Self.keepInStep(identity, published, after: outcome)
        }
        produced.deleteRemote = { await values.remove(identity) != .unavailable }
        return produced
    }

    /// Generates holding `lease` (renewed meanwhile); after the publish, stores the value and releases the
    /// lease in one round trip (Redis). A generator that throws or has no value releases the lease.
    private func generateHolding<Codec: CacheCodec>(
        _ lease: consuming RemoteValueLease, request: ProductionRequest<Codec>,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        let renewal = lease.startRenewal()
        let generated: Produced<Codec.Value>?
        do {
            generated = try await next()
        } catch {
            renewal.stopNow()
            await lease.release()
            throw error
        }
        guard var produced = generated else {
            renewal.stopNow()
            await lease.release()
            return nil
        }
        let (held, values, identity) = (HeldLease(lease), values, request.expectation.identity)
        produced.afterPublish = Self.chain(produced.afterPublish) { published in
            renewal.stopNow()
            guard let lease = held.take() else { return }
            guard let published, let content = published.content else {
                await lease.release()
                return
            }
            let outcome = await lease.storeAndRelease(
                identity, payload: content.payload, createdAt: content.createdAt, expiresAt: content.expiresAt)
            Self.keepInStep(identity, published, after: outcome)
        }
        produced.deleteRemote = { await values.remove(identity) != .unavailable }
        return produced
    }

    /// Generates holding `lease` (renewed meanwhile), a lease apart from the values: after the publish,
    /// stores the value, then releases the lease, so that woken waiters find it. A generator that throws
    /// or has no value releases the lease.
    private func generateHolding<Codec: CacheCodec>(
        _ lease: consuming RemoteLease, request: ProductionRequest<Codec>,
        next: @Sendable () async throws -> Produced<Codec.Value>?
    ) async throws -> Produced<Codec.Value>? {
        let renewal = lease.startRenewal()
        let generated: Produced<Codec.Value>?
        do {
            generated = try await next()
        } catch {
            renewal.stopNow()
            await lease.release()
            throw error
        }
        guard var produced = generated else {
            renewal.stopNow()
            await lease.release()
            return nil
        }
        let (held, values, identity) = (HeldLease(lease), values, request.expectation.identity)
        produced.afterPublish = Self.chain(produced.afterPublish) { published in
            renewal.stopNow()
            guard let lease = held.take() else { return }
            if let published {
                let outcome = await Self.store(identity, published, in: values)
                Self.keepInStep(identity, published, after: outcome)
            }
            await lease.release()
        }
        produced.deleteRemote = { await values.remove(identity) != .unavailable }
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

    /// After a write's remote store (`outcome`; nil: nothing encoded to store): when the value did not land
    /// (the tier down, bypassed or failing; the value too large for it), the tier may still hold an older
    /// one of the key, which a later miss on this machine would take (I16). The delete is owed in the
    /// directory the value was published in (RemoteWriteWindow), inside the write's window: the next
    /// lookup of the key pays it (no call now, to a tier that just failed). A value not stored by the trust
    /// rule (`signedValueKept`) or about to expire owes nothing: the copy there is another host's to keep.
    private static func keepInStep(
        _ identity: EntryIdentity, _ published: PublishedValue, after outcome: RemoteStoreOutcome?
    ) {
        guard outcome == .unavailable || outcome == .skipped(.tooLarge),
            let directory = published.entry?.storage.directory
        else { return }
        directory.oweRemoteDelete(identity)
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
        let outcome = await Self.store(identity, published, in: values)
        Self.keepInStep(identity, published, after: outcome)
    }

    /// Whether an explicit `store` with `options` writes this tier (`store(_:published:options:)` does).
    func storesExplicitly(_ options: YCache.Options) -> Bool { !isReadOnly && Self.writesRemotely(options) }

    /// Deletes the key's remote value (the cleanup of a write window, RemoteWriteWindow): false when the
    /// server could not be asked or failed. A read-only tier never stores, so it has nothing to delete.
    func deleteRemote(_ identity: EntryIdentity) async -> Bool {
        guard !isReadOnly else { return true }
        return await values.remove(identity) != .unavailable
    }

    /// Deletes the remote value (unless read-only); true when one was deleted. A delete that could not
    /// reach the server (its breaker open, a failure, a timeout) throws
    /// ``YCache/Error/remoteRemovalIncomplete(reason:)`` once the walk has removed the local copies
    /// (Lifecycle.swift): the remote copy may survive, and another host's miss may fetch it again. This
    /// machine's lookups never do: the delete is owed in its directory (RemoteWriteWindow), inside the
    /// removal's window, until one succeeds.
    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool {
        guard !isReadOnly, !Injection.remoteRemoveSkip else { return false }
        switch await values.remove(key.identity) {
        case .removed: return true
        case .absent: return false
        case .unavailable:
            if case .success(let storage) = engine.storageTier.context(for: .write) {
                storage.directory.oweRemoteDelete(key.identity)
            }
            throw .remoteRemovalIncomplete(reason: "the remote server could not be reached or refused the delete")
        }
    }

    /// With `removeAllRemotely`, deletes every remote value of the cache (Redis; HTTP cannot list its
    /// values: documented, not an error). A server that could not be asked throws
    /// ``YCache/Error/remoteRemovalIncomplete(reason:)`` (the caller removes the local entries first).
    func removeAll() async throws(YCache.Error) {
        guard !isReadOnly, values.remoteGuard.policy.removeAllRemotely else { return }
        if await values.removeAll() == .unavailable {
            throw .remoteRemovalIncomplete(reason: "a remote server could not be reached or refused a delete")
        }
    }

    // MARK: Statistics

    /// Adds the tier's counters (its stores') to `statistics`.
    func addCounters(to statistics: inout CacheStatistics) {
        for source in statisticsSources {
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
            statistics.remoteThrottled += counters[.throttled]
            statistics.remoteBackfills += counters[.backfills]
            statistics.remoteLeaseWaitTime += .nanoseconds(counters[.leaseWaitNanoseconds])
            statistics.remoteReleasesAfterFailedStore += counters[.releasesAfterFailedStore]
            statistics.remoteSignedValuesKept += counters[.signedValuesKept]
        }
    }
}

/// The answer of a remote call a production started before its task ran (`RemoteTier.startLookup`): taken
/// once, by `RemoteTier.produce`. A lease it holds that nobody took goes with it (the lease's deinit
/// releases it).
///
/// Safe to share (`@unchecked Sendable`): `answer` is written once, by `deliver`, before it marks the state
/// answered under `state`'s lock, and read once, by the one `answer()` call, after it saw that mark under
/// the same lock (or resumed from the continuation `deliver` resumes after marking): the lock orders the
/// two. Only `deinit` touches it otherwise, when no other reference exists.
final class EarlyRemoteLookup: @unchecked Sendable {
    private enum State {
        /// No answer yet; the production's task waits for it (at most one continuation).
        case pending(CheckedContinuation<Void, Never>?)
        /// Answered, not yet taken.
        case answered
        case taken
    }

    private let state = Mutex(State.pending(nil))
    private var answer: RemoteValueLeaseAcquisition?

    init() {}

    /// Hands the call's answer over (once, on the I/O thread).
    func deliver(_ acquisition: consuming RemoteValueLeaseAcquisition) {
        answer = consume acquisition
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .pending(let continuation) = state else { return nil }
            state = continuation == nil ? .answered : .taken
            return continuation
        }
        waiting?.resume()
    }

    /// The answer, once it is in (without a suspension when it is in already). Called once.
    func answer() async -> RemoteValueLeaseAcquisition {
        let ready = state.withLock { state -> Bool in
            guard case .answered = state else { return false }
            state = .taken
            return true
        }
        if !ready {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if case .answered = state {
                        state = .taken
                        return true
                    }
                    state = .pending(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
        return answer.take() ?? .unavailable
    }
}
