// RedisRouter.swift: where a pipeline of one entry's commands runs. The commands of one call all touch keys
// with the same hash tag (RemoteKeys), so one server serves the whole pipeline: a shard chosen by
// rendezvous hashing (this file; a plain URL that turns out to be a cluster node follows the cluster), or
// the cluster node that owns the slot (RedisClusterRouter.swift). Blocking calls, off the cooperative pool.

import Synchronization

/// Runs one entry's pipelines on the server that holds the entry.
protocol RedisRouter: Sendable {
    /// How many independent servers (breaker scopes) there are; ``scope(for:)`` is below it.
    var scopeCount: Int { get }

    /// The breaker scope of `routingKey`: its shard, or 0 for a cluster (one breaker for the cluster).
    func scope(for routingKey: [UInt8]) -> Int

    /// What each scope is, without credentials (its breakers' names in the machine's shared state).
    var scopeLabels: [String] { get }

    /// Runs `commands` on the server holding `routingKey`, in one round trip when possible (a cluster
    /// may redirect some commands). Blocking.
    ///
    /// - Returns: One reply per command, in order (error replies included, redirections resolved).
    func execute(
        _ commands: [RESPCommand], routingKey: [UInt8], deadline: RemoteDeadline
    ) throws(RemoteError) -> [RESPValue]

    /// The server to subscribe to for `routingKey`'s release channel. Blocking (a cluster may have to
    /// load its slot map first).
    func subscriptionEndpoint(for routingKey: [UInt8], deadline: RemoteDeadline) throws(RemoteError) -> RedisEndpoint

    /// Every server that holds keys (each shard, or each cluster master) and its breaker scope, for
    /// `removeAll`. Blocking (a cluster loads its slot map).
    func servers(deadline: RemoteDeadline) throws(RemoteError) -> [(endpoint: RedisEndpoint, scope: Int)]
}

/// Connection settings shared by the routers.
struct RedisConnectionSettings: Hashable, Sendable {
    /// Reply limits (from the value cap).
    let limits: RESPLimits
    /// The most connecting may take.
    let connectTimeout: Duration

    /// The process's pool for `endpoint`.
    func pool(for endpoint: RedisEndpoint) -> RedisConnectionPool {
        RedisConnectionPool.shared(for: endpoint, limits: limits, connectTimeout: connectTimeout)
    }
}

/// One server, or several independent servers as shards placed by rendezvous hashing. A server that
/// answers `MOVED` or `ASK` is a Redis Cluster node given as a plain `redis://` URL: rather than sharing
/// only that node's slots (and missing every other key), the router then follows the cluster, the URLs
/// given becoming its seeds (as `.redisCluster(seeds:)` would), for the rest of its life.
struct RedisShardRouter: RedisRouter {
    /// The servers, in configuration order.
    let endpoints: [RedisEndpoint]
    /// Connection settings.
    let settings: RedisConnectionSettings
    private let hashing: RendezvousHashing
    /// Each endpoint's pool (the process's shared one, `settings.pool(for:)`), looked up once here rather
    /// than in the registry on every call.
    private let pools: [RedisConnectionPool]
    private let cluster = ClusterSwitch()

    /// A router over `endpoints` (at least one; names must be distinct, as `parseList` ensures).
    init(endpoints: [RedisEndpoint], settings: RedisConnectionSettings) {
        precondition(!endpoints.isEmpty)
        self.endpoints = endpoints
        self.settings = settings
        hashing = RendezvousHashing(names: endpoints.map(\.shardName))
        pools = endpoints.map { settings.pool(for: $0) }
    }

    var scopeCount: Int { endpoints.count }

    var scopeLabels: [String] { endpoints.map { "redis \($0.shardName)" } }

    /// The shard; once the servers turned out to be a cluster, 0 for every key (one breaker for the
    /// cluster, as RedisClusterRouter has).
    func scope(for routingKey: [UInt8]) -> Int { cluster.router == nil ? hashing.shard(for: routingKey) : 0 }

    /// True once a redirect showed the servers to be a Redis Cluster.
    var followsCluster: Bool { cluster.router != nil }

    func execute(
        _ commands: [RESPCommand], routingKey: [UInt8], deadline: RemoteDeadline
    ) throws(RemoteError) -> [RESPValue] {
        if let router = cluster.router {
            return try router.execute(commands, routingKey: routingKey, deadline: deadline)
        }
        let pool = pools[hashing.shard(for: routingKey)]
        var replies = try pool.withConnection(deadline: deadline) {
            (connection) throws(RemoteError) -> [RESPValue] in
            try connection.pipeline(commands, deadline: deadline)
        }
        let redirected = replies.indices.filter { Self.isRedirect(replies[$0]) }
        guard !redirected.isEmpty else { return replies }
        // Only the redirected commands were not run: resend those through the cluster.
        let router = cluster.follow(seeds: endpoints, settings: settings)
        let again = try router.execute(redirected.map { commands[$0] }, routingKey: routingKey, deadline: deadline)
        for (index, reply) in zip(redirected, again) { replies[index] = reply }
        return replies
    }

    func subscriptionEndpoint(for routingKey: [UInt8], deadline: RemoteDeadline) throws(RemoteError) -> RedisEndpoint {
        if let router = cluster.router { return try router.subscriptionEndpoint(for: routingKey, deadline: deadline) }
        return endpoints[hashing.shard(for: routingKey)]
    }

    func servers(deadline: RemoteDeadline) throws(RemoteError) -> [(endpoint: RedisEndpoint, scope: Int)] {
        if let router = cluster.router { return try router.servers(deadline: deadline) }
        return endpoints.enumerated().map { ($0.element, $0.offset) }
    }

    private static func isRedirect(_ reply: RESPValue) -> Bool {
        guard case .error(let error) = reply else { return false }
        switch error.kind {
        case .moved, .ask: return true
        default: return false
        }
    }
}

/// The cluster router a shard router switches to once its servers answered with a redirect. Thread-safe.
final class ClusterSwitch: Sendable {
    private let state = Mutex<RedisClusterRouter?>(nil)

    /// The cluster router, once switched.
    var router: RedisClusterRouter? { state.withLock { $0 } }

    /// Switches (once) and returns the cluster router over `seeds`.
    func follow(seeds: [RedisEndpoint], settings: RedisConnectionSettings) -> RedisClusterRouter {
        state.withLock { router in
            if let router { return router }
            let made = RedisClusterRouter(seeds: seeds, settings: settings)
            router = made
            return made
        }
    }
}

/// Chooses a shard for a routing key by rendezvous (highest random weight) hashing: every server scores
/// SHA-256(label, server name, key) and the highest wins. Stable across hosts (never `Hasher`, seeded per
/// process), independent of list order; adding or removing a server moves only the keys it wins or won.
struct RendezvousHashing: Sendable {
    /// The servers' names (``RedisEndpoint/shardName``), in configuration order.
    let names: [String]

    /// The label hashed first, so these scores never coincide with other SHA-256 uses.
    static let label = Array("yashima.remote.shard.v1".utf8)

    init(names: [String]) {
        self.names = names
    }

    /// The index in ``names`` of the server that holds `routingKey`.
    ///
    /// Ties (a 64-bit score collision) go to the lexicographically smaller name, so the choice never
    /// depends on list order.
    func shard(for routingKey: [UInt8]) -> Int {
        guard names.count > 1 else { return 0 }
        var best = 0
        var bestScore: UInt64 = 0
        for (index, name) in names.enumerated() {
            let score = Self.score(name: name, routingKey: routingKey)
            if index == 0 || score > bestScore || (score == bestScore && name < names[best]) {
                best = index
                bestScore = score
            }
        }
        return best
    }

    /// The score of one server for one key: the first 8 bytes of SHA-256(label ‖ 0 ‖ name ‖ 0 ‖ key),
    /// big-endian.
    static func score(name: String, routingKey: [UInt8]) -> UInt64 {
        var hasher = SHA256()
        hasher.update(label)
        hasher.update([0])
        hasher.update(Array(name.utf8))
        hasher.update([0])
        hasher.update(routingKey)
        return hasher.finalize().w0
    }
}
