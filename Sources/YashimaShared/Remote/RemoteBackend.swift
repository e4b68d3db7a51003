// RemoteBackend.swift: what a `YCache.Remote` describes (Redis, or HTTP with leases on Redis or none),
// and the stores built from it for one cache: the engine's remote tier sees only their protocols
// (RemoteValueStore, RemoteLeaseStore).

/// A remote backend's stores, as the engine's remote tier uses them.
struct RemoteStores: Sendable {
    /// Where values are looked up and stored.
    let values: any RemoteValueStore
    /// Where leases are taken; nil without leases (HTTP alone) or in read-only mode.
    let leases: (any RemoteLeaseStore)?
    /// True when `leases` is `values` (Redis): its lease calls see the value too, and a value is stored
    /// and the lease released in one round trip.
    let leasesHoldValues: Bool
}

/// What a `YCache.Remote` is: the backend and its parsed, validated settings.
enum RemoteBackend: Sendable, Equatable, CustomStringConvertible {
    /// Values and leases on Redis.
    case redis(RedisConfiguration)
    /// Values on an HTTP server; leases on Redis when given (otherwise none: exactly-once per host only).
    case http(HTTPRemoteConfiguration, leases: RedisConfiguration?)

    var description: String {
        switch self {
        case .redis(let configuration): return Self.describe(configuration.topology)
        case .http(let values, let leases):
            let base = "http \(values.endpoint)"
            return leases.map { "\(base), leases on \(Self.describe($0.topology))" } ?? base
        }
    }

    private static func describe(_ topology: RedisTopology) -> String {
        switch topology {
        case .servers(let endpoints): return "redis " + endpoints.map(\.description).joined(separator: ", ")
        case .cluster(let seeds): return "redis cluster " + seeds.map(\.description).joined(separator: ", ")
        }
    }

    /// The stores this backend describes, made for one cache (connections are made on first use).
    func makeStores() -> RemoteStores? {
        // The configurations were validated by `YCache.Remote`'s factories: the stores cannot refuse them.
        switch self {
        case .redis(let configuration):
            guard let store = try? RedisRemoteStore(configuration: configuration) else { return nil }
            return RemoteStores(
                values: store, leases: configuration.policy.readOnly ? nil : store, leasesHoldValues: true)
        case .http(let configuration, let leaseConfiguration):
            guard let store = try? HTTPRemoteStore(configuration: configuration) else { return nil }
            let leases =
                configuration.policy.readOnly
                ? nil : leaseConfiguration.flatMap { try? RedisRemoteStore(configuration: $0) }
            return RemoteStores(values: store, leases: leases, leasesHoldValues: false)
        }
    }
}
