// RemoteBackend.swift: what a `YCache.Remote` describes (Redis; HTTP or S3 with leases on Redis, S3's own, or none),
// and the stores built from it for one cache: the engine's remote tier sees only their protocols
// (RemoteValueStore; RemoteValueLeaseStore or RemoteLeaseStore, the shape of its leases).

/// Where a remote tier's leases come from, by the protocol their store conforms to.
enum RemoteLeasing: Sendable {
    /// From the store that holds the values (Redis, ``RemoteValueLeaseStore``): a lookup and its lease in
    /// one call, a value stored and the lease released in one.
    case withValues(any RemoteValueLeaseStore)
    /// From a store apart from the values (``RemoteLeaseStore``: Redis leases for HTTP values): a lease
    /// taken, or seen released, is followed by a lookup of the value; a value is stored, then the lease
    /// released.
    case apart(any RemoteLeaseStore)
}

/// A remote backend's stores, as the engine's remote tier uses them.
struct RemoteStores: Sendable {
    /// Where values are looked up and stored.
    let values: any RemoteValueStore
    /// Where leases are taken; nil without leases (HTTP alone) or in read-only mode.
    let leasing: RemoteLeasing?
}

/// What a `YCache.Remote` is: the backend and its parsed, validated settings.
indirect enum RemoteBackend: Sendable, Equatable, CustomStringConvertible {
    /// Values and leases on Redis.
    case redis(RedisConfiguration)
    /// Values on an HTTP server; leases on Redis when given (otherwise none: exactly-once per host only).
    case http(HTTPRemoteConfiguration, leases: RedisConfiguration?)
    /// Values on an S3 bucket; leases on Redis when given, else lease objects beside the values
    /// (conditional writes), unless those are turned off (then none).
    case s3(S3Configuration, leases: RedisConfiguration?)
    /// Members asked in order (RemoteChainStore); leases from the first writable member that has them.
    case chain([RemoteBackend])

    var description: String {
        switch self {
        case .redis(let configuration): return Self.describe(configuration.topology)
        case .http(let values, let leases):
            let base = "http \(values.endpoint)"
            return leases.map { "\(base), leases on \(Self.describe($0.topology))" } ?? base
        case .s3(let values, let leases):
            return leases.map { "\(values), leases on \(Self.describe($0.topology))" } ?? values.description
        case .chain(let members): return "chain: " + members.map(\.description).joined(separator: " → ")
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
            return RemoteStores(values: store, leasing: configuration.policy.readOnly ? nil : .withValues(store))
        case .http(let configuration, let leaseConfiguration):
            guard let store = try? HTTPRemoteStore(configuration: configuration) else { return nil }
            let leases =
                configuration.policy.readOnly
                ? nil : leaseConfiguration.flatMap { try? RedisRemoteStore(configuration: $0) }
            return RemoteStores(values: store, leasing: leases.map { .apart($0) })
        case .s3(let configuration, let leaseConfiguration):
            guard let store = try? S3RemoteStore(configuration: configuration) else { return nil }
            guard !configuration.policy.readOnly else { return RemoteStores(values: store, leasing: nil) }
            if let leaseConfiguration {
                return RemoteStores(
                    values: store,
                    leasing: (try? RedisRemoteStore(configuration: leaseConfiguration)).map { .apart($0) })
            }
            return RemoteStores(values: store, leasing: configuration.conditionalLeases ? .apart(store) : nil)
        case .chain(let members):
            let stores = members.compactMap { $0.makeStores() }
            guard stores.count == members.count else { return nil }
            // In a chain the values are spread over the members: every lease store is one apart from them.
            let leasing = stores.lazy.compactMap { stores -> RemoteLeasing? in
                switch stores.leasing {
                case .apart(let leases)?: return .apart(leases)
                case .withValues(let store)?: return (store as? any RemoteLeaseStore).map { .apart($0) }
                case nil: return nil
                }
            }.first
            return RemoteStores(values: RemoteChainStore(members: stores.map(\.values)), leasing: leasing)
        }
    }
}
