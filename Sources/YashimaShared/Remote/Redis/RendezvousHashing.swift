// RendezvousHashing.swift: places a key on one of several independent servers (shards) by rendezvous
// (highest random weight) hashing: every server gets a score SHA-256(label, server name, key) and the
// highest wins. Stable across processes and hosts (SHA-256 of fixed bytes, never `Hasher`, which is
// seeded per process), independent of list order, and when a server is added or removed only the keys
// it wins or won move. A key's value and lease use the same routing bytes, so they share a server.

/// Chooses a shard for a routing key.
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
