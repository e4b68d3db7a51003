// RedisClusterRouter.swift: one entry's pipeline on the Cluster node owning its slot: the slot map, MOVED
// (map reloaded at most once a second, as after a node that cannot be reached or CLUSTERDOWN: a failover),
// ASK (ASKING first), at most `maximumRedirects` rounds; only redirected commands are resent. Blocking.

import Synchronization

/// Routes pipelines to cluster nodes by hash slot. One breaker scope for the whole cluster.
final class RedisClusterRouter: RedisRouter {
    /// The nodes given in the configuration (any subset of the cluster).
    let seeds: [RedisEndpoint]
    /// Connection settings.
    let settings: RedisConnectionSettings
    /// The most redirect rounds of one call.
    static let maximumRedirects = 5
    /// The shortest time between two full map reloads caused by `MOVED`.
    static let refreshInterval: Int64 = 1_000_000_000

    private struct State {
        var map: ClusterSlotMap?
        var stale = false
        var lastRefresh: Int64 = 0
    }

    private let state = Mutex(State())

    /// A router over the cluster that `seeds` belong to (at least one).
    ///
    /// - Parameter map: A slot map to start from (tests); by default it is loaded on first use.
    init(seeds: [RedisEndpoint], settings: RedisConnectionSettings, map: ClusterSlotMap? = nil) {
        precondition(!seeds.isEmpty)
        self.seeds = seeds
        self.settings = settings
        if let map { state.withLock { $0.map = map } }
    }

    var scopeCount: Int { 1 }

    var scopeLabels: [String] { ["redis cluster " + seeds.map(\.shardName).joined(separator: ",")] }

    func scope(for routingKey: [UInt8]) -> Int { 0 }

    /// The slot map now (tests).
    var currentMap: ClusterSlotMap? { state.withLock { $0.map } }

    func execute(
        _ commands: [RESPCommand], routingKey: [UInt8], deadline: RemoteDeadline
    ) throws(RemoteError) -> [RESPValue] {
        let slot = ClusterSlot.slot(of: routingKey)
        var target = try node(for: slot, deadline: deadline)
        var results = [RESPValue?](repeating: nil, count: commands.count)
        var pending = Array(commands.indices)
        var asking = false
        for _ in 0...Self.maximumRedirects {
            let batch =
                asking ? pending.flatMap { [RESPCommand("ASKING"), commands[$0]] } : pending.map { commands[$0] }
            let replies: [RESPValue]
            do throws(RemoteError) {
                replies = try settings.pool(for: endpoint(at: target)).withConnection(deadline: deadline) {
                    (connection) throws(RemoteError) -> [RESPValue] in
                    try connection.pipeline(batch, deadline: deadline)
                }
            } catch {
                // A node that died never answers MOVED: reload the map on the next call (at most once a
                // second), so a failover's promoted replica is found.
                if error.failureKind == .connection { markStale() }
                throw error
            }
            if replies.contains(where: Self.isClusterDown) { markStale() }
            // After ASKING, every other reply is ASKING's own +OK.
            let own = asking ? stride(from: 1, to: replies.count, by: 2).map { replies[$0] } : replies
            var redirected: [Int] = []
            var redirect: RedisErrorReply.Kind?
            for (index, reply) in zip(pending, own) {
                if case .error(let error) = reply {
                    switch error.kind {
                    case .moved, .ask:
                        redirected.append(index)
                        redirect = redirect ?? error.kind
                        continue
                    default: break
                    }
                }
                results[index] = reply
            }
            guard let redirect, !redirected.isEmpty else { return results.map { $0! } }
            switch redirect {
            case .moved(let movedSlot, let host, let port):
                target = Self.address(host: host, port: port, relativeTo: target)
                let moved = target
                state.withLock { state in
                    if state.map == nil { state.map = ClusterSlotMap() }
                    state.map!.assign(movedSlot...movedSlot, to: moved)
                    state.stale = true
                }
                asking = false
            case .ask(_, let host, let port):
                target = Self.address(host: host, port: port, relativeTo: target)
                asking = true
            default:
                break
            }
            pending = redirected
        }
        throw .tooManyRedirects
    }

    /// Every master of the map, loaded now. Blocking.
    func servers(deadline: RemoteDeadline) throws(RemoteError) -> [(endpoint: RedisEndpoint, scope: Int)] {
        try refresh(deadline: deadline)
        return (state.withLock { $0.map?.nodes } ?? []).map { (endpoint(at: $0), 0) }
    }

    /// Makes the next call reload the slot map (rate-limited by `refreshInterval`).
    private func markStale() { state.withLock { $0.stale = true } }

    /// `CLUSTERDOWN` or `TRYAGAIN`: the cluster is failing over or resharding.
    private static func isClusterDown(_ reply: RESPValue) -> Bool {
        guard case .error(let error) = reply else { return false }
        return error.kind == .clusterDown || error.kind == .tryAgain
    }

    func subscriptionEndpoint(for routingKey: [UInt8], deadline: RemoteDeadline) throws(RemoteError) -> RedisEndpoint {
        endpoint(at: try node(for: ClusterSlot.slot(of: routingKey), deadline: deadline))
    }

    /// Loads the slot map from the first node that answers. Blocking.
    func refresh(deadline: RemoteDeadline) throws(RemoteError) {
        let known = state.withLock { $0.map?.nodes ?? [] }
        var candidates = known
        for seed in seeds where !candidates.contains(seed.address) { candidates.append(seed.address) }
        var lastError = RemoteError.clusterMapUnavailable
        for address in candidates {
            guard !deadline.hasPassed else { throw .timedOut }
            do throws(RemoteError) {
                let reply = try settings.pool(for: endpoint(at: address)).withConnection(deadline: deadline) {
                    (connection) throws(RemoteError) -> RESPValue in
                    try connection.execute(RESPCommand("CLUSTER", "SLOTS"), deadline: deadline)
                }
                if case .error(let error) = reply { throw RemoteError.server(error) }
                let queriedHost: String
                if case .tcp(let host, _) = address { queriedHost = host } else { queriedHost = "127.0.0.1" }
                guard let map = ClusterSlotMap(slotsReply: reply, queriedHost: queriedHost) else {
                    throw RemoteError.clusterMapUnavailable
                }
                let now = Syscall.monotonicNanoseconds
                state.withLock { state in
                    state.map = map
                    state.stale = false
                    state.lastRefresh = now
                }
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    private func node(for slot: Int, deadline: RemoteDeadline) throws(RemoteError) -> RemoteAddress {
        let now = Syscall.monotonicNanoseconds
        let (known, wantsRefresh) = state.withLock { state -> (RemoteAddress?, Bool) in
            let node = state.map?.node(for: slot)
            let due =
                state.map == nil
                || ((node == nil || state.stale) && now - state.lastRefresh >= Self.refreshInterval)
            return (node, due)
        }
        if wantsRefresh {
            do throws(RemoteError) {
                try refresh(deadline: deadline)
            } catch {
                // A stale map still routes (MOVED corrects it); no map at all cannot.
                guard let known else { throw error }
                state.withLock { $0.lastRefresh = now }
                return known
            }
        } else if let known {
            return known
        }
        if let address = state.withLock({ $0.map?.node(for: slot) }) { return address }
        throw .clusterMapUnavailable
    }

    private func endpoint(at address: RemoteAddress) -> RedisEndpoint {
        seeds.first { $0.address == address } ?? seeds[0].moved(to: address)
    }

    /// The address a redirect names; an empty host means the node that sent it.
    private static func address(host: String, port: Int, relativeTo current: RemoteAddress) -> RemoteAddress {
        if !host.isEmpty { return .tcp(host: host, port: port) }
        if case .tcp(let currentHost, _) = current { return .tcp(host: currentHost, port: port) }
        return .tcp(host: "127.0.0.1", port: port)
    }
}
