// RedisLeases.swift: the Redis store's side of the backend-neutral contract: its leases as tickets a
// `~Copyable` RemoteLease owns (RemoteValueLeaseStore where it holds the values, RemoteLeaseStore where
// another backend does), and `removeAll` (an opt-in). The lease protocol itself is on RedisRemoteStore.

import Foundation

/// A lease this process holds on one entry in Redis: its keys, the random token and the TTL. Copyable:
/// the Redis store's own calls (and its tests) name it; the engine sees it only inside a ``RemoteLease``.
struct RedisLease: Equatable, Sendable {
    /// The entry's Redis names.
    let keys: RemoteKeys
    /// The random token stored in the lease key (32 hex characters from getrandom).
    let token: [UInt8]
    /// The lease TTL in milliseconds (set on acquire, again on each renewal).
    let timeToLiveMilliseconds: Int64
}

/// The result of trying to take a Redis lease.
enum RedisLeaseAcquisition: Equatable, Sendable {
    /// This process holds the lease: generate, then ``RedisRemoteStore/storeAndRelease(_:payload:createdAt:expiresAt:lease:)``.
    case acquired(RedisLease)
    /// Another holder generates: wait (``RedisRemoteStore/waitForRelease(_:timeout:onWaiting:)``).
    case heldElsewhere
    /// The value is there now.
    case found(RemoteValue)
    /// The tier is down, bypassed or read-only: generate without a lease.
    case unavailable
}

/// A Redis lease as a ``RemoteLease`` owns it.
struct RedisLeaseTicket: RemoteValueLeaseTicket {
    let store: RedisRemoteStore
    let lease: RedisLease

    func release() async -> Bool { await store.release(lease) }

    func startRenewal(onLost: @escaping @Sendable () -> Void) -> LeaseRenewal {
        store.startRenewal(lease, onLost: onLost)
    }

    func storeAndRelease(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async
        -> RemoteStoreOutcome
    {
        await store.storeAndRelease(
            identity, payload: payload, createdAt: createdAt, expiresAt: expiresAt, lease: lease)
    }
}

extension RedisRemoteStore: RemoteValueLeaseStore, RemoteLeaseStore {
    /// The value of `identity`, or else its lease (``startLookupOrAcquireLease(_:completion:)``), awaited.
    func lookupOrAcquireLease(_ identity: EntryIdentity) async -> RedisLeaseAcquisition {
        await withCheckedContinuation { continuation in
            startLookupOrAcquireLease(identity) { continuation.resume(returning: $0) }
        }
    }

    func startLookupOrLease(
        _ identity: EntryIdentity, completion: @escaping @Sendable (consuming RemoteValueLeaseAcquisition) -> Void
    ) {
        startLookupOrAcquireLease(identity) { completion(self.owned($0)) }
    }

    func valueLease(for identity: EntryIdentity) async -> RemoteValueLeaseAcquisition {
        owned(await acquireLease(identity))
    }

    /// Leases for values kept elsewhere (HTTP, S3): the value found in Redis, if any, is not theirs.
    func lease(for identity: EntryIdentity) async -> RemoteLeaseAcquisition {
        switch await acquireLease(identity) {
        case .acquired(let lease): return .acquired(RemoteLease(RedisLeaseTicket(store: self, lease: lease)))
        case .heldElsewhere: return .heldElsewhere
        // A value under this prefix in Redis is not one of these values: generate without a lease (a
        // wait would find the lease free and this value again, for ever).
        case .found, .unavailable: return .unavailable
        }
    }

    /// An acquisition with its lease owned.
    private func owned(_ acquisition: RedisLeaseAcquisition) -> RemoteValueLeaseAcquisition {
        switch acquisition {
        case .acquired(let lease): return .acquired(RemoteValueLease(RedisLeaseTicket(store: self, lease: lease)))
        case .heldElsewhere: return .heldElsewhere
        case .found(let value): return .found(value)
        case .unavailable: return .unavailable
        }
    }
}

// MARK: - removeAll (an opt-in: YCache.Remote.Options.removeAllRemotely)

extension RedisRemoteStore {
    /// Deletes every value under the key prefix on every server (each shard, each cluster master) by
    /// `SCAN MATCH` and pipelined `UNLINK`s, each round guarded like any call (leases expire by
    /// themselves). Returns the number deleted, or `.unavailable` when a server could not be asked (what
    /// was deleted before stays deleted), as in read-only mode.
    func removeAll() async -> RemoteBulkRemoval {
        guard !remoteGuard.policy.readOnly else { return .unavailable }
        return await RemoteIO.shared.run { self.removeAllBlocking().map { .removed($0) } ?? .unavailable }
    }

    /// The rounds of `removeAll`, on a RemoteIO thread. Blocking: one operation timeout per round at most.
    private func removeAllBlocking() -> Int? {
        let router = router
        guard
            case .completed(let servers) = remoteGuard.performBlocking(
                scope: 0, access: .write, { (deadline) throws(RemoteError) in try router.servers(deadline: deadline) })
        else { return nil }
        let pattern = RemoteKeys.valuePattern(prefix: configuration.keyPrefix)
        var deleted = 0
        for (endpoint, scope) in servers {
            var cursor: [UInt8] = Array("0".utf8)
            repeat {
                let pool = settings.pool(for: endpoint)
                let attempt = remoteGuard.performBlocking(scope: scope, access: .write) {
                    (deadline) throws(RemoteError) -> ([UInt8], Int) in
                    try pool.withConnection(deadline: deadline) { (connection) throws(RemoteError) -> ([UInt8], Int) in
                        let reply = try connection.execute(
                            RESPCommand("SCAN", cursor, "MATCH", pattern, "COUNT", "1000"), deadline: deadline)
                        guard case .array(let parts) = reply, parts.count == 2, case .bulkString(let next) = parts[0],
                            case .array(let names) = parts[1]
                        else {
                            if case .error(let error) = reply { throw .redis(.server(error)) }
                            throw .redis(.unexpectedReply(reply.shape))
                        }
                        let keys = names.compactMap { name -> [UInt8]? in
                            if case .bulkString(let bytes) = name { return bytes }
                            return nil
                        }
                        // One key per UNLINK: in a cluster, keys of different slots cannot share a command.
                        let replies =
                            keys.isEmpty
                            ? [] : try connection.pipeline(keys.map { RESPCommand("UNLINK", $0) }, deadline: deadline)
                        var count = 0
                        for reply in replies { count += Int((try? RedisEntryCommands.integer(reply)) ?? 0) }
                        return (next, count)
                    }
                }
                guard case .completed(let (next, count)) = attempt else { return nil }
                deleted += count
                cursor = next
            } while cursor != Array("0".utf8)
        }
        return deleted
    }
}
