// RedisConfiguration.swift: the settings of the Redis remote tier and their validation: servers (one,
// several as shards, or the seeds of a cluster), the shared policy (timeouts, cap, read-only,
// breaker), key prefix, value and lease TTLs, the re-check interval of waiters, and the shared secret
// (`YASHIMA_REMOTE_SECRET` when none is given in code).

import Foundation

/// How the Redis servers are organised.
enum RedisTopology: Hashable, Sendable {
    /// One server, or several independent servers as shards (rendezvous hashing).
    case servers([RedisEndpoint])
    /// A Redis Cluster, reached through any of these nodes (database 0 only).
    case cluster(seeds: [RedisEndpoint])
}

/// The settings of a Redis remote tier.
struct RedisConfiguration: Sendable, Equatable {
    /// The servers.
    var topology: RedisTopology
    /// Timeouts, size cap, read-only mode and breaker (shared with other backends).
    var policy = RemotePolicy()
    /// The first part of every key name (see RemoteKeys), so several caches can share a server.
    var keyPrefix = RemoteKeys.defaultPrefix
    /// How long a stored value lives in Redis (at most; an entry's own expiry may end it earlier).
    var valueTimeToLive: Duration = .seconds(7 * 86_400)
    /// The lease TTL; the holder renews at a third of it, so a holder that died, hung or cannot reach the
    /// server (or whose release failed) blocks others at most this long after its last renewal.
    var leaseTimeToLive: Duration = .seconds(2)
    /// How often a waiter re-checks the lease without a notification: a lost notification costs at most
    /// this much.
    var waitRecheckInterval: Duration = .seconds(1)
    /// Signs stored values and accepts only values signed with it.
    var secret: RemoteSecret?

    /// A configuration for `topology` with defaults, and the secret from the environment if set.
    init(topology: RedisTopology, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.topology = topology
        secret = RemoteSecret.fromEnvironment(environment)
    }

    /// A configuration from URLs: one or more servers (shards), or with `cluster` the seeds of a
    /// cluster. Credentials and the secret come from the URLs or the environment.
    init(
        urls: [String], cluster: Bool = false, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RedisConfigurationError) {
        let endpoints: [RedisEndpoint]
        do throws(RemoteURLError) {
            endpoints = try RedisEndpoint.parseList(urls, environment: environment)
        } catch {
            throw .invalidURL(error)
        }
        self.init(topology: cluster ? .cluster(seeds: endpoints) : .servers(endpoints), environment: environment)
    }

    /// The renewal interval: a third of the lease TTL.
    var renewalInterval: Duration { leaseTimeToLive / 3 }

    /// Checks every setting.
    func validate() throws(RedisConfigurationError) {
        guard RemoteKeys.isValidPrefix(keyPrefix) else { throw .invalidKeyPrefix }
        guard valueTimeToLive.remoteMilliseconds >= 1, leaseTimeToLive.remoteMilliseconds >= 30,
            waitRecheckInterval.remoteMilliseconds >= 1
        else { throw .invalidTimeToLive }
        switch policy.problem {
        case .invalidTimeout: throw .invalidTimeout
        case .invalidValueCap: throw .invalidValueCap
        case nil: break
        }
        switch topology {
        case .servers(let endpoints):
            guard !endpoints.isEmpty else { throw .invalidURL(.noServers) }
            guard Set(endpoints.map(\.shardName)).count == endpoints.count else { throw .invalidURL(.duplicateServer) }
        case .cluster(let seeds):
            guard !seeds.isEmpty else { throw .invalidURL(.noServers) }
            guard seeds.allSatisfy({ $0.database == 0 }) else { throw .clusterDatabaseNotZero }
        }
    }
}

/// Why a remote configuration was refused.
enum RedisConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A URL (or the list) is invalid.
    case invalidURL(RemoteURLError)
    /// The key prefix is empty, too long, or has spaces, braces or non-ASCII characters.
    case invalidKeyPrefix
    /// A TTL or interval is too short (value TTL and interval under 1 ms, lease TTL under 30 ms).
    case invalidTimeToLive
    /// A timeout or cooldown is under 1 ms.
    case invalidTimeout
    /// The value cap is negative or 2 GiB or more.
    case invalidValueCap
    /// A cluster seed selects a database other than 0 (a cluster has only database 0).
    case clusterDatabaseNotZero

    var description: String {
        switch self {
        case .invalidURL(let error): return error.description
        case .invalidKeyPrefix:
            return "remote key prefix must be 1-64 printable ASCII characters without spaces or braces"
        case .invalidTimeToLive: return "remote TTL or re-check interval too short"
        case .invalidTimeout: return "remote timeout or cooldown too short"
        case .invalidValueCap: return "remote value size cap out of range"
        case .clusterDatabaseNotZero: return "a Redis Cluster has only database 0"
        }
    }
}
