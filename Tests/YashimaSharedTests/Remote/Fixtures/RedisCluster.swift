// A real three-master Redis Cluster on loopback: three redis-server processes with
// `--cluster-enabled yes` on free ports (and free bus ports, +10000, below the ephemeral range), slots assigned with
// `CLUSTER ADDSLOTSRANGE`, joined with `CLUSTER MEET`, ready once every node reports
// `cluster_state:ok`, three known nodes and the whole slot map.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

final class RedisCluster: Sendable {
    let nodes: [RedisServer]

    private init(nodes: [RedisServer]) {
        self.nodes = nodes
    }

    /// The slot ranges of the three masters.
    static let ranges: [(Int, Int)] = [(0, 5460), (5461, 10922), (10923, 16383)]

    /// Starts three masters, and with `replicas` one replica of each (nodes 3, 4, 5 replicate 0, 1, 2).
    ///
    /// - Parameter nodeTimeout: `cluster-node-timeout` in milliseconds: how long a node may be unreachable
    ///   before it is failed over (a replica promoted).
    static func start(replicas: Bool = false, nodeTimeout: Int = 5000) async throws -> RedisCluster {
        var nodes: [RedisServer] = []
        var ports = Set<Int>()
        for _ in 0..<(replicas ? 6 : 3) {
            // Another process may bind the probed port or its bus port before the node does: a new pair
            // then (a node's start fails when either is taken).
            let node = try await startRetryingTakenPorts {
                var port = RedisServer.freePort(withBus: true)
                while ports.contains(port) || ports.contains(port + 10000) || ports.contains(port - 10000) {
                    port = RedisServer.freePort(withBus: true)
                }
                return try await RedisServer.start(
                    tcp: true, port: port,
                    extraArguments: [
                        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", String(nodeTimeout),
                    ])
            }
            ports.insert(node.port)
            nodes.append(node)
        }
        for (node, range) in zip(nodes, ranges) {
            try expectOK(try await node.run(["CLUSTER", "ADDSLOTSRANGE", String(range.0), String(range.1)]))
        }
        for node in nodes.dropFirst() {
            try expectOK(try await nodes[0].run(["CLUSTER", "MEET", "127.0.0.1", String(node.port)]))
        }
        let cluster = RedisCluster(nodes: nodes)
        if replicas {
            // A replica can follow its master once it knows it (gossip after MEET).
            for index in 3..<6 {
                let master = try await cluster.nodeID(index - 3)
                let limit = RemoteDeadline.after(.seconds(30))
                while try await !nodes[index].run(["CLUSTER", "REPLICATE", master]).isOK {
                    guard !limit.hasPassed else { throw RedisFixtureError(description: "CLUSTER REPLICATE failed") }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
        try await cluster.waitUntilReady()
        return cluster
    }

    /// The masters (nodes 0, 1, 2 until a failover).
    var masterCount: Int { 3 }

    /// Seed URLs (every node).
    var urls: [String] { nodes.map(\.url) }

    /// The node's cluster ID.
    func nodeID(_ index: Int) async throws -> String {
        guard case .bulkString(let bytes) = try await nodes[index].run(["CLUSTER", "MYID"]) else {
            throw RedisFixtureError(description: "CLUSTER MYID failed")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The index of the node serving `slot`.
    static func owner(of slot: Int) -> Int { ranges.firstIndex { slot >= $0.0 && slot <= $0.1 }! }

    /// Waits until every node agrees the cluster is up with the full map.
    func waitUntilReady() async throws {
        let limit = RemoteDeadline.after(.seconds(30))
        while !limit.hasPassed {
            var ready = true
            for node in nodes {
                guard case .bulkString(let info) = try await node.run(["CLUSTER", "INFO"]) else { ready = false; break }
                let text = String(decoding: info, as: UTF8.self)
                guard text.contains("cluster_state:ok"), text.contains("cluster_known_nodes:\(nodes.count)") else {
                    ready = false
                    break
                }
                let slots = try await node.run(["CLUSTER", "SLOTS"])
                let synced = nodes.count == 3 ? true : try await replicasInSync()
                guard let map = ClusterSlotMap(slotsReply: slots, queriedHost: "127.0.0.1"), map.coversAllSlots,
                    map.nodes.count == 3, synced
                else {
                    ready = false
                    break
                }
            }
            if ready { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RedisFixtureError(description: "cluster did not become ready")
    }

    /// True when every master has a replica connected and in sync.
    private func replicasInSync() async throws -> Bool {
        for node in nodes.prefix(3) {
            guard case .bulkString(let info) = try await node.run(["INFO", "replication"]) else { return false }
            let text = String(decoding: info, as: UTF8.self)
            guard text.contains("connected_slaves:1"), text.contains("state=online") else { return false }
        }
        return true
    }

    /// Waits until the surviving nodes serve every slot again (a replica promoted after a master was
    /// killed), asking `survivor`.
    func waitForFailover(of killed: Int, asking survivor: Int, within seconds: Double = 60) async throws {
        let limit = RemoteDeadline.after(.seconds(seconds))
        let dead = RemoteAddress.tcp(host: "127.0.0.1", port: nodes[killed].port)
        while !limit.hasPassed {
            if case .bulkString(let info) = try? await nodes[survivor].run(["CLUSTER", "INFO"]),
                String(decoding: info, as: UTF8.self).contains("cluster_state:ok"),
                let slots = try? await nodes[survivor].run(["CLUSTER", "SLOTS"]),
                let map = ClusterSlotMap(slotsReply: slots, queriedHost: "127.0.0.1"), map.coversAllSlots,
                !map.nodes.contains(dead)
            {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RedisFixtureError(description: "no failover")
    }

    func stop() async {
        for node in nodes { await node.stop() }
    }

    private static func expectOK(_ reply: RESPValue) throws {
        guard reply.isOK else { throw RedisFixtureError(description: "cluster setup failed: \(reply)") }
    }
}
