// What the Redis backend adds to the remote store contract (RemoteStoreContractTests): value TTLs, keys
// of another Redis type, a lease released with a value over the cap, and shards (rendezvous placement, a
// value and its lease on one server, one shard down leaves the others up).

import Foundation
import Testing

@testable import YashimaShared

@Suite("Redis remote store", .redisServer)
struct RedisRemoteStoreTests {
    @Test("values get the configured TTL, shortened to the entry's own expiry")
    func timeToLive() async throws {
        let server = try await RedisServer.start()
        // Minutes, not seconds: on a loaded CI machine seconds can pass between a store and its PTTL.
        let store = try makeStore(server) { $0.valueTimeToLive = .seconds(600) }
        let long = entryIdentity("ttl-long")
        let short = entryIdentity("ttl-short")
        #expect(await store.store(long, payload: payload(1), createdAt: 1, expiresAt: 0) == .stored)
        let expires = Syscall.realtimeNanoseconds + 300_000_000_000
        #expect(await store.store(short, payload: payload(1), createdAt: 1, expiresAt: expires) == .stored)
        let longTTL = try await server.pttl(store.keys(for: long).value)
        let shortTTL = try await server.pttl(store.keys(for: short).value)
        #expect(longTTL > 300_000 && longTTL <= 600_000, "\(longTTL) ms")
        #expect(shortTTL > 0 && shortTTL <= 300_000, "\(shortTTL) ms")
        let past = Syscall.realtimeNanoseconds - 1
        #expect(
            await store.store(entryIdentity("ttl-past"), payload: payload(1), createdAt: 1, expiresAt: past)
                == .skipped(.expired))
        await server.stop()
    }

    @Test("a key holding another Redis type is a miss, takes a lease and is overwritten")
    func otherRedisTypes() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let id = entryIdentity("planted")
        let key = store.keys(for: id).value
        for command in [
            RESPCommand("LPUSH", key, "x"), RESPCommand("HSET", key, "f", "v"), RESPCommand("SADD", key, "m"),
        ] {
            try await server.run(RESPCommand("DEL", key))
            try await server.run(command)
            #expect(await store.lookup(id) == .miss(.wrongType))
            #expect(await store.acquireLease(id) != .unavailable)
            #expect(await store.store(id, payload: payload(61), createdAt: 3, expiresAt: 0) == .stored)
            #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(61), createdAt: 3, expiresAt: 0)))
            try await server.run(RESPCommand("DEL", store.keys(for: id).lease))
        }
        #expect(store.statistics.snapshot[.errors] == 0)
        #expect(store.remoteGuard.breaker(scope: 0, access: .read).state == .closed)
        await server.stop()
    }

    @Test(
        "while lookups hit, a lookup sends GET alone (no script); a miss goes back to lookup and lease in one round trip"
    )
    func getFirstWhileHitting() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let hits = (0..<4).map { entryIdentity("streak-hit-\($0)") }
        for id in hits { #expect(await store.store(id, payload: payload(64), createdAt: 1, expiresAt: 0) == .stored) }
        // Calls of GET and of the lease script (EVALSHA, or EVAL after a NOSCRIPT) the server has run.
        func calls() async throws -> (get: Int, script: Int) {
            guard case .bulkString(let bytes) = try await server.run(["INFO", "commandstats"]) else { return (0, 0) }
            var counts: [String: Int] = [:]
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\r\n") {
                guard line.hasPrefix("cmdstat_"), let colon = line.firstIndex(of: ":"),
                    let field = line[colon...].split(separator: ",").first,
                    let count = Int(field.dropFirst("calls=".count + 1))
                else { continue }
                counts[String(line[line.index(line.startIndex, offsetBy: 8)..<colon])] = count
            }
            return (counts["get", default: 0], counts["evalsha", default: 0] + counts["eval", default: 0])
        }
        func lookUp(_ id: EntryIdentity) async -> RedisLeaseAcquisition {
            await withCheckedContinuation { continuation in
                store.startLookupOrAcquireLease(id) { continuation.resume(returning: $0) }
            }
        }
        func delta(_ id: EntryIdentity) async throws -> (acquisition: RedisLeaseAcquisition, get: Int, script: Int) {
            let before = try await calls()
            let acquisition = await lookUp(id)
            let after = try await calls()
            return (acquisition, after.get - before.get, after.script - before.script)
        }
        // The first two hits: lookup and lease pipelined (one GET, the script: EVALSHA, and EVAL too the
        // first time, when the server answers NOSCRIPT).
        for id in hits.prefix(2) {
            let step = try await delta(id)
            guard case .found = step.acquisition else { Issue.record("not a hit: \(step.acquisition)"); continue }
            #expect(step.get == 1 && step.script >= 1, "\(step)")
        }
        // Two hits in a row: a GET alone answers the next ones, no script.
        for id in hits.suffix(2) {
            let step = try await delta(id)
            guard case .found = step.acquisition else { Issue.record("not a hit: \(step.acquisition)"); continue }
            #expect(step.get == 1 && step.script == 0, "\(step)")
        }
        // A miss after hits pays the GET alone once, then the pipelined lookup that takes the lease.
        let first = try await delta(entryIdentity("streak-miss-1"))
        guard case .acquired(let lease) = first.acquisition else {
            Issue.record("no lease: \(first.acquisition)")
            return
        }
        #expect(first.get == 2 && first.script >= 1, "\(first)")
        #expect(await store.release(lease))
        // The miss ended the streak: the next miss is one round trip, lookup and lease together.
        let second = try await delta(entryIdentity("streak-miss-2"))
        guard case .acquired(let secondLease) = second.acquisition else {
            Issue.record("no lease: \(second.acquisition)")
            return
        }
        #expect(second.get == 1 && second.script >= 1, "\(second)")
        #expect(await store.release(secondLease))
        await server.stop()
    }

    @Test("storeAndRelease of a value over the cap releases the lease and stores nothing")
    func storeAndReleaseOverCap() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server) { $0.policy.maximumValueBytes = 4096 }
        let fits = 4096 - RemoteEnvelope.headerSize
        let lease = try #require(await store.acquireLease(entryIdentity("big")).lease)
        #expect(
            await store.storeAndRelease(
                entryIdentity("big"), payload: payload(fits + 1), createdAt: 1, expiresAt: 0, lease: lease)
                == .skipped(.tooLarge))
        #expect(!(try await server.exists(lease.keys.lease)))
        await server.stop()
    }

    @Test("shards: rendezvous placement, value and lease on one server, one shard down leaves the others")
    func shards() async throws {
        var servers: [RedisServer] = []
        for _ in 0..<3 { servers.append(try await RedisServer.start()) }
        let store = try makeStore(servers.map(\.url))
        let hashing = RendezvousHashing(
            names: try servers.map { try RedisEndpoint.parse($0.url, environment: [:]).shardName })
        let ids = (0..<30).map { entryIdentity("shard-\($0)") }
        var perServer = [0, 0, 0]
        for id in ids {
            #expect(await store.store(id, payload: payload(20), createdAt: 1, expiresAt: 0) == .stored)
            let keys = store.keys(for: id)
            let owner = hashing.shard(for: keys.routingKey)
            perServer[owner] += 1
        }
        #expect(perServer.allSatisfy { $0 > 0 }, "\(perServer)")
        for id in ids {
            let keys = store.keys(for: id)
            let owner = hashing.shard(for: keys.routingKey)
            for (index, server) in servers.enumerated() {
                #expect(try await server.exists(keys.value) == (index == owner))
            }
            try await servers[owner].run(RESPCommand("DEL", keys.value))
            let lease = try #require(await store.acquireLease(id).lease)
            #expect(try await servers[owner].exists(keys.lease))
            #expect(await store.release(lease))
            #expect(await store.store(id, payload: payload(20), createdAt: 1, expiresAt: 0) == .stored)
        }
        await servers[1].kill()
        for id in ids {
            let owner = hashing.shard(for: store.keys(for: id).routingKey)
            let lookup = await store.lookup(id)
            if owner == 1 {
                #expect(lookup == .unavailable)
            } else {
                #expect(lookup == .hit(RemoteValue(payload: payload(20), createdAt: 1, expiresAt: 0)))
            }
        }
        for server in servers { await server.stop() }
    }
}
