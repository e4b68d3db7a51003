// RedisRemoteStore.swift: the Redis remote tier as the engine calls it: lookups, stores, removals (one key,
// or with `removeAllRemotely` every key of the prefix: RedisLeases.swift) and the lease protocol, every
// call guarded (RemoteGuard) and never throwing. The design (keys, envelope, leases, failures) is on the type.

import Foundation
import Synchronization

/// The remote tier on Redis behind the local storage directory: values shared across hosts, and
/// exactly-once generation across hosts through Redis leases. Every method is `async`, returns a value
/// and never throws; a remote failure reads as "unavailable" and the caller carries on as if there were
/// no remote tier.
///
/// ## Keys (RemoteKeys)
/// `<prefix>:{<identity hex>}:value`, `…:lease`, `…:released` (a channel). The hash tag keeps the three
/// in one cluster slot and on one shard (rendezvous hashing over the identity hex).
///
/// ## Values (RemoteEnvelope)
/// `SET value <envelope> PX <ttl>`, ttl = min(`valueTimeToLive`, the entry's own expiry). The envelope
/// carries magic, version, the entry identity, the payload length, created and expiry times, a CRC32C,
/// and with a secret an HMAC-SHA256 over all of it. A lookup returns a value only after verifying it
/// for the identity asked for; anything else (foreign bytes, truncated, another entry's, damaged,
/// unsigned or wrongly signed, another Redis type, longer than the cap, expired) is a miss, and the
/// caller's next store overwrites it. Values whose envelope exceeds `maximumValueBytes` stay local.
///
/// ## Lease protocol
/// 1. The caller looked locally and missed, holding the key's local lock.
/// 2. ``lookupOrAcquireLease(_:)``: `GET value` pipelined with a script that takes the lease (`SET lease
///    <random token> NX PX <leaseTTL>`) only when no value is stored: the remote lookup and the lease in
///    one round trip. A value: `.found` (a hit, no lease taken). The lease is someone else's:
///    `.heldElsewhere`, go to 5. After a wait, ``acquireLease(_:)`` (`SET NX` pipelined with `GET
///    value`; a lease taken by a call that also finds the value is released) asks again.
/// 3. `.acquired`: the caller generates, with ``startRenewal(_:onLost:)`` renewing the lease every third
///    of its TTL (a script: `PEXPIRE` only if the token is still ours). A lost lease is reported, not
///    fatal: the value is still right, only exactly-once is no longer guaranteed for it.
/// 4. ``storeAndRelease(_:payload:createdAt:expiresAt:lease:)``: `SET value` and the release script
///    (compare the token, `DEL`, `PUBLISH released`) in one round trip. A generator that fails calls
///    ``release(_:)``. Nobody but the holder deletes a lease: others wait for it to expire.
/// 5. ``waitForRelease(_:timeout:)``: `SUBSCRIBE released` (confirmed by the server) *before* checking
///    `GET value` + `PTTL lease`; then wait for the message or the re-check timer
///    (`waitRecheckInterval`), check again, until the value is there (`.found`) or the lease is gone
///    (`.leaseFree`: go to 2) or the caller's timeout passes (`.timedOut`: generate locally). A holder
///    that died leaves its lease to expire (at most the lease TTL); a lost notification costs at most
///    one re-check interval.
///
/// ## Failures
/// Every call has a deadline of `operationTimeout` (connecting included) and runs on the tier's I/O
/// threads, never on the cooperative pool. A timeout, a refused or closed connection, a protocol
/// violation, `NOAUTH`/`WRONGPASS`, `LOADING` or any other server error opens the breaker of that
/// server for reads and writes: calls are bypassed at no cost for `breakerCooldown`, then one probe
/// call decides. `OOM`, `READONLY` and `MISCONF` open only the write breaker: lookups go on.
/// `WRONGTYPE` and oversized replies are misses of that key. In read-only mode nothing is written and
/// no lease is taken (generation is then coordinated per host only).
final class RedisRemoteStore: RemoteValueStore {
    /// The settings.
    let configuration: RedisConfiguration
    /// The tier's counters.
    let statistics = RemoteStatistics()
    /// Lookups that hit in a row, up to `getFirstAfterHits` (see `startLookupOrAcquireLease`).
    private let hitStreak = Atomic<Int>(0)
    /// Timeouts, breakers, read-only mode, cap.
    let remoteGuard: RemoteGuard
    /// Signs stored values; only values signed with it are hits.
    var secret: RemoteSecret? { configuration.secret }
    /// Where each entry's commands run.
    let router: any RedisRouter
    /// Connection settings of every pool and subscriber.
    let settings: RedisConnectionSettings
    let commands: RedisEntryCommands

    /// Creates the tier (no connection is made until the first call).
    ///
    /// - Parameter now: The breakers' monotonic clock (tests).
    /// - Throws: ``RedisConfigurationError`` for an invalid configuration.
    init(
        configuration: RedisConfiguration, now: @escaping @Sendable () -> Int64 = { Syscall.monotonicNanoseconds }
    ) throws(RedisConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        settings = RedisConnectionSettings(
            limits: .forValues(upTo: configuration.policy.maximumValueBytes),
            connectTimeout: configuration.policy.connectTimeout)
        switch configuration.topology {
        case .servers(let endpoints): router = RedisShardRouter(endpoints: endpoints, settings: settings)
        case .cluster(let seeds): router = RedisClusterRouter(seeds: seeds, settings: settings)
        }
        commands = RedisEntryCommands(router: router)
        remoteGuard = RemoteGuard(
            policy: configuration.policy, scopes: router.scopeCount, labels: router.scopeLabels,
            statistics: statistics, now: now)
    }

    /// The Redis names of `identity`'s entry.
    func keys(for identity: EntryIdentity) -> RemoteKeys {
        RemoteKeys(identity: identity.digest, prefix: configuration.keyPrefix)
    }

    // MARK: Values

    /// Looks `identity` up. A hit is verified for that identity (and signature, with a secret).
    func lookup(_ identity: EntryIdentity) async -> RemoteLookup {
        let keys = keys(for: identity)
        let (commands, secret) = (commands, configuration.secret)
        let attempt = await remoteGuard.perform(scope: router.scope(for: keys.routingKey), access: .read) {
            (deadline) throws(RemoteError) -> RemoteLookup in
            guard let bytes = try commands.get(keys, deadline: deadline) else { return .miss(.absent) }
            return Self.verify(bytes, identity: identity, secret: secret)
        }
        return finishLookup(attempt)
    }

    /// Stores `payload` as `identity`'s value (replacing whatever is there, of any type).
    func store(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async -> RemoteStoreOutcome
    {
        if let skip = skipReason(payloadCount: payload.count, expiresAt: expiresAt) { return .skipped(skip) }
        let ttl = valueMilliseconds(expiresAt: expiresAt)
        let keys = keys(for: identity)
        let (commands, secret) = (commands, configuration.secret)
        let attempt = await remoteGuard.perform(scope: router.scope(for: keys.routingKey), access: .write) {
            (deadline) throws(RemoteError) -> Bool in
            let bytes = RemoteEnvelope.seal(
                payload, identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt, secret: secret)
            return try commands.put(
                keys, bytes: bytes, timeToLiveMilliseconds: ttl, keepSigned: secret == nil, deadline: deadline)
        }
        return finishStore(attempt)
    }

    /// Deletes `identity`'s value: `.removed`, `.absent`, or `.unavailable` when the server could not be
    /// asked or failed (a stored value may survive).
    @discardableResult
    func remove(_ identity: EntryIdentity) async -> RemoteRemoval {
        let keys = keys(for: identity)
        let commands = commands
        let attempt = await remoteGuard.perform(scope: router.scope(for: keys.routingKey), access: .write) {
            (deadline) throws(RemoteError) -> Bool in
            try commands.delete(keys, deadline: deadline)
        }
        return RemoteRemoval(attempt)
    }

    // MARK: Leases

    /// Step 2 of the lease protocol: takes the lease, or finds the value, or finds another holder.
    func acquireLease(_ identity: EntryIdentity) async -> RedisLeaseAcquisition {
        let keys = keys(for: identity)
        let (commands, secret) = (commands, configuration.secret)
        let ttl = configuration.leaseTimeToLive.remoteMilliseconds
        let attempt = await remoteGuard.perform(scope: router.scope(for: keys.routingKey), access: .write) {
            (deadline) throws(RemoteError) -> RedisLeaseAcquisition in
            let found = try commands.acquire(keys, timeToLiveMilliseconds: ttl, deadline: deadline)
            // Not counted when rejected: the lookup just before saw (and counted) the same bytes.
            if let bytes = found.value, case .hit(let value) = Self.verify(bytes, identity: identity, secret: secret) {
                if let lease = found.lease { _ = try? commands.release(lease, deadline: deadline) }
                return .found(value)
            }
            return found.lease.map { .acquired($0) } ?? .heldElsewhere
        }
        switch attempt {
        case .completed(let acquisition):
            switch acquisition {
            case .acquired: statistics.add(.leasesAcquired)
            case .found: statistics.add(.hits)
            default: break
            }
            return acquisition
        case .keyFailure, .unavailable: return .unavailable
        }
    }

    /// The value of `identity`, or when there is none usable its lease (see ``RemoteValueLeaseStore``): one
    /// round trip (`GET` and the acquire-unless-stored script, pipelined); a rejected value costs a second
    /// (`SET NX` past it). While this store's lookups hit (the last ``getFirstAfterHits`` did), a `GET`
    /// alone goes first and answers a hit without the script, whose Lua call cost the server 25–30 µs per
    /// lookup in the bench (SLOWLOG, 4 KiB: `GET` 4 µs, the script 28 µs), for a lease a hit never takes; a
    /// miss then pays one more round trip, once: it ends the streak, so the misses after it (a stampede's
    /// other keys, a cold cache) keep a miss's lookup and lease in one round trip.
    func startLookupOrAcquireLease(
        _ identity: EntryIdentity, completion: @escaping @Sendable (RedisLeaseAcquisition) -> Void
    ) {
        let keys = keys(for: identity)
        let (commands, secret) = (commands, configuration.secret)
        let ttl = configuration.leaseTimeToLive.remoteMilliseconds
        remoteGuard.start(scope: router.scope(for: keys.routingKey), access: .write) {
            (deadline) throws(RemoteError) -> (RemoteLookup, RedisLeaseAcquisition) in
            if self.hitStreak.load(ordering: .relaxed) >= Self.getFirstAfterHits,
                let bytes = try Self.getUnlessOtherType(keys, commands: commands, deadline: deadline),
                case .hit(let value) = Self.verify(bytes, identity: identity, secret: secret)
            {
                self.noteLookup(hit: true)
                return (.hit(value), .found(value))
            }
            let found = try commands.lookupOrAcquire(keys, timeToLiveMilliseconds: ttl, deadline: deadline)
            guard let bytes = found.value else {
                self.noteLookup(hit: false)
                return (.miss(.absent), found.lease.map { .acquired($0) } ?? .heldElsewhere)
            }
            let lookup = Self.verify(bytes, identity: identity, secret: secret)
            if case .hit(let value) = lookup {
                self.noteLookup(hit: true)
                if let lease = found.lease { _ = try? commands.release(lease, deadline: deadline) }
                return (lookup, .found(value))
            }
            self.noteLookup(hit: false)
            if let lease = found.lease { return (lookup, .acquired(lease)) }
            let past = try commands.acquire(keys, timeToLiveMilliseconds: ttl, deadline: deadline)
            return (lookup, past.lease.map { .acquired($0) } ?? .heldElsewhere)
        } completion: { attempt in
            switch attempt {
            case .completed(let (lookup, acquisition)):
                _ = self.finishLookup(.completed(lookup))
                if case .acquired = acquisition { self.statistics.add(.leasesAcquired) }
                completion(acquisition)
            case .keyFailure, .unavailable: completion(.unavailable)
            }
        }
    }

    /// How many lookups in a row hit before a lookup sends `GET` alone first (`startLookupOrAcquireLease`).
    static let getFirstAfterHits = 2

    /// Counts this store's lookups that hit in a row (up to `getFirstAfterHits`); a miss resets it.
    /// Relaxed: it only chooses how the next lookup asks, never what it answers.
    private func noteLookup(hit: Bool) {
        if !hit {
            hitStreak.store(0, ordering: .relaxed)
        } else if hitStreak.load(ordering: .relaxed) < Self.getFirstAfterHits {
            hitStreak.add(1, ordering: .relaxed)
        }
    }

    /// `GET value`, nil also when the key holds another type (the lookup-or-lease call that follows sees
    /// it as a miss, as before). Blocking.
    private static func getUnlessOtherType(
        _ keys: RemoteKeys, commands: RedisEntryCommands, deadline: RemoteDeadline
    ) throws(RemoteError) -> [UInt8]? {
        do {
            return try commands.get(keys, deadline: deadline)
        } catch {
            if case .server(let reply)? = error.redisFailure, reply.kind == .wrongType { return nil }
            throw error
        }
    }

    /// Extends `lease` if this process still holds it.
    func renew(_ lease: RedisLease) async -> RemoteLeaseRenewal {
        await RemoteIO.shared.run { self.renewBlocking(lease) }
    }

    /// Extends `lease` if this process still holds it, on the calling thread (the renewal loop's).
    /// Blocking.
    func renewBlocking(_ lease: RedisLease) -> RemoteLeaseRenewal {
        let commands = commands
        let attempt = remoteGuard.performBlocking(scope: router.scope(for: lease.keys.routingKey), access: .write) {
            (deadline) throws(RemoteError) -> Bool in
            try commands.renew(lease, deadline: deadline)
        }
        switch attempt {
        case .completed(true): return .renewed
        case .completed(false), .keyFailure:
            statistics.add(.leasesLost)
            return .lost
        case .unavailable: return .unavailable
        }
    }

    /// Releases `lease` (only if this process still holds it) and wakes the waiters: a delete-if-mine
    /// that publishes the release. Best effort, retried for one operation timeout while the server fails
    /// (even with its breaker open: waiters on other hosts learn of it at once instead of at the lease's
    /// expiry). True when released.
    @discardableResult
    func release(_ lease: RedisLease) async -> Bool {
        await RemoteIO.shared.run { self.releaseBlocking(lease) }
    }

    /// `release`, on the calling thread (a RemoteIO one). Blocking, at most one operation timeout.
    private func releaseBlocking(_ lease: RedisLease) -> Bool {
        let (commands, scope) = (commands, router.scope(for: lease.keys.routingKey))
        let deadline = RemoteDeadline.after(configuration.policy.operationTimeout)
        var pause = Self.firstReleaseRetry
        while true {
            let attempt = remoteGuard.performBlocking(
                scope: scope, access: .write, deadline: deadline, ignoringBreaker: true
            ) { (limit) throws(RemoteError) -> Bool in
                try commands.release(lease, deadline: limit)
            }
            switch attempt {
            case .completed(let released): return released
            case .keyFailure: return false
            case .unavailable:
                // A fast failure (a failover's CLUSTERDOWN, a refused connection): try again shortly.
                guard deadline.remainingNanoseconds > pause.remoteNanoseconds else { return false }
                Thread.sleep(forTimeInterval: Double(pause.remoteNanoseconds) / 1e9)
                pause = min(pause * 2, Self.lastReleaseRetry)
            }
        }
    }

    /// The first and the longest pause between two release attempts.
    static let firstReleaseRetry: Duration = .milliseconds(20)
    static let lastReleaseRetry: Duration = .milliseconds(200)

    /// Step 4: stores the generated value and releases `lease` in one round trip. A value that may not be
    /// stored (too large, already expired, a signed value a host without the secret keeps) is skipped and
    /// the lease still released. When the round trip fails (a write pause, a failover, a timeout), the
    /// lease is released by a separate call (``release(_:)``), so waiters are woken and take the lease at
    /// once rather than at its expiry: the holder spends at most one more operation timeout on it.
    func storeAndRelease(
        _ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64, lease: RedisLease
    ) async -> RemoteStoreOutcome {
        if let skip = skipReason(payloadCount: payload.count, expiresAt: expiresAt) {
            await release(lease)
            return .skipped(skip)
        }
        let ttl = valueMilliseconds(expiresAt: expiresAt)
        let (commands, secret) = (commands, configuration.secret)
        let released = ReleaseFlag()
        let attempt = await remoteGuard.perform(scope: router.scope(for: lease.keys.routingKey), access: .write) {
            (deadline) throws(RemoteError) -> Bool in
            let bytes = RemoteEnvelope.seal(
                payload, identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt, secret: secret)
            let outcome = try commands.putAndRelease(
                lease, bytes: bytes, timeToLiveMilliseconds: ttl, keepSigned: secret == nil, deadline: deadline)
            released.set(outcome.released)
            // A refused SET (OOM) counts against the write breaker; the lease was released.
            return try outcome.stored.get()
        }
        if !released.value {
            statistics.add(.releasesAfterFailedStore)
            await release(lease)
        }
        return finishStore(attempt)
    }

    /// Starts renewing `lease` every third of its TTL, on a thread of its own, until
    /// ``LeaseRenewal/stop()`` (or until the returned object is dropped).
    ///
    /// - Parameter onLost: Called once if the lease is lost (expired, evicted, taken over).
    func startRenewal(_ lease: RedisLease, onLost: @escaping @Sendable () -> Void = {}) -> LeaseRenewal {
        LeaseRenewal(
            timeToLive: .milliseconds(lease.timeToLiveMilliseconds), interval: configuration.renewalInterval,
            renew: { [self] in renewBlocking(lease) }, onLost: onLost)
    }

    // MARK: Helpers

    /// The value's PX: the configured TTL, shortened to the entry's own expiry.
    private func valueMilliseconds(expiresAt: Int64) -> Int64 {
        let configured = configuration.valueTimeToLive.remoteMilliseconds
        guard expiresAt > 0 else { return configured }
        return max(1, min(configured, (expiresAt - Syscall.realtimeNanoseconds) / 1_000_000))
    }
}

/// Whether a store-and-release released its lease (set on the I/O thread, read after the call).
final class ReleaseFlag: Sendable {
    private let flag = Mutex(false)

    var value: Bool { flag.withLock { $0 } }

    func set(_ released: Bool) { flag.withLock { $0 = released } }
}
