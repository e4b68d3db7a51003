// RedisRemoteStoreTests.swift: the tier's value operations against real redis-server processes:
// round trips and TTLs, signing (HMAC) in every combination, values planted by another client (foreign
// bytes, another entry's envelope, truncated, damaged, expired, another Redis type) read as misses and
// overwritten, the size cap on both sides, read-only mode, and several servers as shards (placement
// by rendezvous hashing, a value and its lease on one server, one shard down leaves the others up).

import Foundation
import Testing

@testable import YashimaShared

@Suite("Redis remote store", .redisServer)
struct RedisRemoteStoreTests {
    @Test("store, lookup, remove; times and statistics")
    func roundTrip() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let id = entryIdentity("round-trip")
        #expect(await store.lookup(id) == .miss(.absent))
        let expires = Syscall.realtimeNanoseconds + 3_600_000_000_000
        #expect(await store.store(id, payload: payload(5000), createdAt: 42, expiresAt: expires) == .stored)
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(5000), createdAt: 42, expiresAt: expires)))
        #expect(await store.lookup(entryIdentity("round-trip", codec: "string-v1")) == .miss(.absent))
        #expect(await store.store(id, payload: Data(), createdAt: 43, expiresAt: 0) == .stored)
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: Data(), createdAt: 43, expiresAt: 0)))
        #expect(await store.remove(id))
        #expect(!(await store.remove(id)))
        #expect(await store.lookup(id) == .miss(.absent))
        let counts = store.statistics.snapshot
        #expect(counts[.hits] == 2 && counts[.misses] == 3 && counts[.puts] == 2 && counts[.errors] == 0)
        await server.stop()
    }

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

    @Test("with a secret: only values signed with it are hits")
    func signing() async throws {
        let server = try await RedisServer.start()
        let secretA = RemoteSecret("shared-secret-A")!
        let signerA = try makeStore(server) { $0.secret = secretA }
        let readerA = try makeStore(server) { $0.secret = secretA }
        let readerB = try makeStore(server) { $0.secret = RemoteSecret("shared-secret-B") }
        let unsignedStore = try makeStore(server)
        let id = entryIdentity("signed")
        #expect(await signerA.store(id, payload: payload(300), createdAt: 7, expiresAt: 0) == .stored)
        #expect(await readerA.lookup(id) == .hit(RemoteValue(payload: payload(300), createdAt: 7, expiresAt: 0)))
        #expect(await readerB.lookup(id) == .miss(.rejected(.badSignature)))
        #expect(await unsignedStore.lookup(id) == .hit(RemoteValue(payload: payload(300), createdAt: 7, expiresAt: 0)))
        #expect(await unsignedStore.store(id, payload: payload(300), createdAt: 8, expiresAt: 0) == .stored)
        #expect(await readerA.lookup(id) == .miss(.rejected(.unsigned)))
        #expect(readerA.statistics.snapshot[.rejectedValues] == 1)
        // A signed value copied under another entry's name is still another entry's.
        let copy = entryIdentity("copy")
        #expect(await signerA.store(id, payload: payload(300), createdAt: 9, expiresAt: 0) == .stored)
        let bytes = try #require(try await server.rawGet(signerA.keys(for: id).value))
        try await server.rawSet(signerA.keys(for: copy).value, bytes)
        #expect(await readerA.lookup(copy) == .miss(.rejected(.wrongIdentity)))
        await server.stop()
    }

    @Test("values planted by another client are misses, never wrong values, and are overwritten")
    func planted() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let id = entryIdentity("planted")
        let key = store.keys(for: id).value
        let other = RemoteEnvelope.seal(
            payload(50), identity: entryIdentity("someone-else").digest, createdAt: 1, expiresAt: 0, secret: nil)
        let good = RemoteEnvelope.seal(payload(50), identity: id.digest, createdAt: 1, expiresAt: 0, secret: nil)
        var damaged = good
        damaged[RemoteEnvelope.Offset.payload + 10] ^= 0x40
        let expired = RemoteEnvelope.seal(
            payload(50), identity: id.digest, createdAt: 1, expiresAt: Syscall.realtimeNanoseconds - 1_000_000_000,
            secret: nil)
        let cases: [([UInt8], RemoteMiss)] = [
            (Array("not ours at all".utf8), .rejected(.foreign)), (other, .rejected(.wrongIdentity)),
            (Array(good.dropLast(7)), .rejected(.truncated)), (damaged, .rejected(.badChecksum)), (expired, .expired),
            ([], .rejected(.foreign)),
        ]
        for (bytes, miss) in cases {
            try await server.rawSet(key, bytes)
            #expect(await store.lookup(id) == .miss(miss))
            #expect(await store.store(id, payload: payload(60), createdAt: 2, expiresAt: 0) == .stored)
            #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(60), createdAt: 2, expiresAt: 0)))
        }
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

    @Test("the size cap: larger values stay local; a larger stored value is a miss and is not read")
    func sizeCap() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server) { $0.policy.maximumValueBytes = 4096 }
        let fits = 4096 - RemoteEnvelope.headerSize
        #expect(await store.store(entryIdentity("fits"), payload: payload(fits), createdAt: 1, expiresAt: 0) == .stored)
        #expect(
            await store.store(entryIdentity("big"), payload: payload(fits + 1), createdAt: 1, expiresAt: 0)
                == .skipped(.tooLarge))
        #expect(store.statistics.snapshot[.oversizedValues] == 1)
        let huge = entryIdentity("huge")
        try await server.rawSet(store.keys(for: huge).value, [UInt8](repeating: 1, count: 200_000))
        #expect(await store.lookup(huge) == .miss(.tooLarge))
        guard case .hit = await store.lookup(entryIdentity("fits")) else {
            Issue.record("a planted oversized value disturbed other keys")
            return
        }
        #expect(store.remoteGuard.breaker(scope: 0, access: .read).state == .closed)
        // storeAndRelease of a value over the cap releases the lease and stores nothing.
        guard case .acquired(let lease) = await store.acquireLease(entryIdentity("big")) else {
            Issue.record("not acquired")
            return
        }
        #expect(
            await store.storeAndRelease(
                entryIdentity("big"), payload: payload(fits + 1), createdAt: 1, expiresAt: 0, lease: lease)
                == .skipped(.tooLarge))
        #expect(!(try await server.exists(lease.keys.lease)))
        await server.stop()
    }

    @Test("read-only mode: lookups only; no stores, removals or leases")
    func readOnly() async throws {
        let server = try await RedisServer.start()
        let writer = try makeStore(server)
        let reader = try makeStore(server) { $0.policy.readOnly = true }
        let id = entryIdentity("read-only")
        #expect(await writer.store(id, payload: payload(9), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await reader.lookup(id) == .hit(RemoteValue(payload: payload(9), createdAt: 1, expiresAt: 0)))
        #expect(await reader.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .skipped(.readOnly))
        #expect(!(await reader.remove(id)))
        #expect(await reader.acquireLease(entryIdentity("other")) == .unavailable)
        #expect(await writer.lookup(id) == .hit(RemoteValue(payload: payload(9), createdAt: 1, expiresAt: 0)))
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
            guard case .acquired(let lease) = await store.acquireLease(id) else {
                Issue.record("not acquired")
                continue
            }
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
