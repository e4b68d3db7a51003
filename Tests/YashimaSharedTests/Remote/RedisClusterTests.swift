// RedisClusterTests.swift: the tier on a real three-master Redis Cluster started locally: keys placed by
// slot with the entry's hash tag (value and lease on one node), the slot map, waiters notified by the
// holder's PUBLISH, MOVED after a slot migrated (followed, map updated), ASK during a migration
// (ASKING, once), a redirect loop cut off by the bound, and a plain redis:// URL at one node following
// the whole cluster instead of sharing only that node's slots.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Redis Cluster", .redisServer, .serialized)
struct RedisClusterTests {
    /// Moves `slot` from node `source` to node `target`: importing, migrating, MIGRATE of `keys` (all
    /// of the slot's keys when `finish`), then, when `finish`, the new owner announced to every node.
    private func migrate(
        _ cluster: RedisCluster, slot: Int, from source: Int, to target: Int, keys: [[UInt8]], finish: Bool
    ) async throws {
        let sourceID = try await cluster.nodeID(source)
        let targetID = try await cluster.nodeID(target)
        #expect(try await cluster.nodes[target].run(["CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID]).isOK)
        #expect(try await cluster.nodes[source].run(["CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID]).isOK)
        let migrate = RESPCommand(
            arguments: ["MIGRATE", "127.0.0.1", String(cluster.nodes[target].port), "", "0", "5000", "KEYS"].map {
                Array($0.utf8)
            } + keys)
        #expect(try await cluster.nodes[source].run(migrate).isOK)
        guard finish else { return }
        for node in cluster.nodes {
            #expect(try await node.run(["CLUSTER", "SETSLOT", String(slot), "NODE", targetID]).isOK)
        }
    }

    @Test("a plain redis:// URL that reaches a cluster node follows the cluster: every key, not that node's slots")
    func plainURLFollowsTheCluster() async throws {
        let cluster = try await RedisCluster.start()
        let plain = try makeStore([cluster.urls[0]])  // not .redisCluster: one server, as a user might write it
        let reader = try makeStore([cluster.urls[1]])
        var owners = Set<Int>()
        for index in 0..<24 {
            let id = entryIdentity("plain-\(index)")
            owners.insert(RedisCluster.owner(of: ClusterSlot.slot(of: plain.keys(for: id).value)))
            #expect(
                await plain.store(id, payload: payload(32, seed: UInt8(index)), createdAt: 1, expiresAt: 0) == .stored)
            #expect(
                await reader.lookup(id)
                    == .hit(RemoteValue(payload: payload(32, seed: UInt8(index)), createdAt: 1, expiresAt: 0)))
        }
        #expect(owners.count == 3)
        // The lease protocol through the plain URL too: acquired, waited for, released.
        let id = entryIdentity("plain-lease")
        let lease = try #require(await plain.acquireLease(id).lease)
        let (waiting, _) = await reader.waiting(for: id)
        #expect(
            await plain.storeAndRelease(id, payload: payload(8), createdAt: 2, expiresAt: 0, lease: lease) == .stored)
        #expect(await waiting.value == .found(RemoteValue(payload: payload(8), createdAt: 2, expiresAt: 0)))
        let router = try #require(plain.router as? RedisShardRouter)
        #expect(router.followsCluster)
        let counts = plain.statistics.snapshot
        #expect(counts[.errors] == 0 && counts[.bypassed] == 0, "\(counts.values)")
        await cluster.stop()
    }

    @Test("values and leases are placed by slot on three masters; waiters are notified across the cluster")
    func placement() async throws {
        let cluster = try await RedisCluster.start()
        let store = try makeStore(cluster.urls, cluster: true)
        let waiterStore = try makeStore([cluster.urls[2]], cluster: true) { $0.waitRecheckInterval = .seconds(600) }
        var perNode = [0, 0, 0]
        for index in 0..<24 {
            let id = entryIdentity("cluster-\(index)")
            let keys = store.keys(for: id)
            let owner = RedisCluster.owner(of: ClusterSlot.slot(of: keys.value))
            #expect(ClusterSlot.slot(of: keys.value) == ClusterSlot.slot(of: keys.lease))
            perNode[owner] += 1
            #expect(
                await store.store(id, payload: payload(64, seed: UInt8(index)), createdAt: 1, expiresAt: 0) == .stored)
            #expect(try await cluster.nodes[owner].exists(keys.value))
            #expect(
                await waiterStore.lookup(id)
                    == .hit(RemoteValue(payload: payload(64, seed: UInt8(index)), createdAt: 1, expiresAt: 0)))
        }
        #expect(perNode.allSatisfy { $0 > 0 }, "\(perNode)")
        let router = try #require(store.router as? RedisClusterRouter)
        #expect(router.currentMap?.coversAllSlots == true)
        #expect(router.currentMap?.nodes.count == 3)
        // The lease protocol: holder and waiter through different seed nodes.
        let id = entryIdentity("cluster-lease")
        let lease = try #require(await store.acquireLease(id).lease)
        let owner = RedisCluster.owner(of: ClusterSlot.slot(of: lease.keys.lease))
        #expect(try await cluster.nodes[owner].exists(lease.keys.lease))
        #expect(await waiterStore.acquireLease(id) == .heldElsewhere)
        let gates = CallGates()
        let waiting = Task { await waiterStore.waitForRelease(id, timeout: .seconds(60), onWaiting: gates.called) }
        #expect(await gates.first.wait(within: 30))
        #expect(
            await store.storeAndRelease(id, payload: payload(8), createdAt: 2, expiresAt: 0, lease: lease) == .stored)
        #expect(await waiting.value == .found(RemoteValue(payload: payload(8), createdAt: 2, expiresAt: 0)))
        await cluster.stop()
    }

    @Test("MOVED after a slot migrated (followed, map updated); ASK during a migration (ASKING, map kept)")
    func migrations() async throws {
        let cluster = try await RedisCluster.start()
        let store = try makeStore(cluster.urls, cluster: true)
        let router = try #require(store.router as? RedisClusterRouter)
        // Two entries in slots owned by the same node, so each migration starts from known owners.
        var ids: [EntryIdentity] = []
        var index = 0
        while ids.count < 2 {
            let id = entryIdentity("migrate-\(index)")
            index += 1
            let slot = ClusterSlot.slot(of: store.keys(for: id).value)
            if RedisCluster.owner(of: slot) == 0,
                ids.allSatisfy({ ClusterSlot.slot(of: store.keys(for: $0).value) != slot })
            {
                ids.append(id)
            }
        }
        for (offset, id) in ids.enumerated() {
            #expect(
                await store.store(id, payload: payload(32, seed: UInt8(offset)), createdAt: 1, expiresAt: 0) == .stored)
        }
        // MOVED: the first slot moves to node 1 for good.
        let movedKeys = store.keys(for: ids[0])
        let movedSlot = ClusterSlot.slot(of: movedKeys.value)
        try await migrate(cluster, slot: movedSlot, from: 0, to: 1, keys: [movedKeys.value], finish: true)
        #expect(router.currentMap?.node(for: movedSlot) == cluster.nodes[0].address)
        #expect(
            await store.lookup(ids[0]) == .hit(RemoteValue(payload: payload(32, seed: 0), createdAt: 1, expiresAt: 0)))
        #expect(router.currentMap?.node(for: movedSlot) == cluster.nodes[1].address)
        #expect(await store.remove(ids[0]) == .removed)
        let lease = try #require(await store.acquireLease(ids[0]).lease)
        #expect(try await cluster.nodes[1].exists(lease.keys.lease))
        #expect(await store.release(lease))
        // ASK: the second slot is migrating to node 2; its value already moved, the slot not yet.
        let askKeys = store.keys(for: ids[1])
        let askSlot = ClusterSlot.slot(of: askKeys.value)
        try await migrate(cluster, slot: askSlot, from: 0, to: 2, keys: [askKeys.value], finish: false)
        #expect(!(try await cluster.nodes[0].exists(askKeys.value)))
        let expected = RemoteValue(payload: payload(32, seed: 1), createdAt: 1, expiresAt: 0)
        #expect(await store.lookup(ids[1]) == .hit(expected))
        #expect(router.currentMap?.node(for: askSlot) == cluster.nodes[0].address)
        // The lease and value commands are redirected together: the value is found, no lease is kept.
        #expect(await store.acquireLease(ids[1]) == .found(expected))
        #expect(store.statistics.snapshot[.errors] == 0)
        await cluster.stop()
    }

    @Test("a node that redirects forever: the redirect bound ends it with a typed error")
    func redirectLoop() async throws {
        let redirecting = try MisbehavingServer(.movedToSelf)
        defer { redirecting.stop() }
        var map = ClusterSlotMap()
        map.assign(0...16383, to: .tcp(host: "127.0.0.1", port: redirecting.port))
        let router = RedisClusterRouter(
            seeds: [try RedisEndpoint.parse(redirecting.url, environment: [:])],
            settings: RedisConnectionSettings(limits: .forValues(upTo: 1024), connectTimeout: .seconds(1)), map: map)
        let failure = await offPool { () -> RemoteError? in
            do throws(RemoteError) {
                _ = try router.execute([RESPCommand("GET", "k")], routingKey: [0x61], deadline: .after(.seconds(10)))
                return nil
            } catch {
                return error
            }
        }
        #expect(failure == .redis(.tooManyRedirects))
    }
}
