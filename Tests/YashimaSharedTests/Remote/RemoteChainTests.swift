// RemoteChainTests.swift: a chain Redis → S3 (a real redis-server and SeaweedFS) through YCache: a value
// generated on one host goes to both members; with Redis emptied, another host hits S3 and Redis is filled
// again (backfill); a read-only member receives no store and no delete; leases from the first member.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Remote chains: Redis → S3", .redisServer, .seaweedServer, .serialized)
struct RemoteChainTests {
    private let codec = DataCodec()

    private func s3Remote(_ server: SeaweedServer, prefix: String, readOnly: Bool = false) throws -> YCache.Remote {
        try .s3(
            "s3://\(SeaweedServer.bucket)/\(prefix)?endpoint=\(server.endpoint)",
            accessKeyID: SeaweedServer.accessKeyID,
            secretAccessKey: SeaweedServer.secretAccessKey,
            options: YCache.Remote.Options(
                readOnly: readOnly, operationTimeout: .seconds(30), connectTimeout: .seconds(5),
                breakerCooldown: .milliseconds(100), leaseTimeToLive: .seconds(60)))
    }

    @Test("stores go to both; with Redis emptied a lookup hits S3 and backfills Redis")
    func backfill() async throws {
        let redis = try await RedisServer.start()
        let s3 = try await SeaweedServer.start()
        let prefix = "chain-\(UInt32.random(in: 0...UInt32.max))"
        let chain = try YCache.Remote.chain([try testRemote(redis), try s3Remote(s3, prefix: prefix)])
        let (one, two) = (TemporaryDirectory("chain-one"), TemporaryDirectory("chain-two"))
        let first = YCache(storageDirectory: one.url, remote: chain)
        let key = CacheKey(namespace: "chain", identity: "k")
        let made = try await first.resolve(for: key, codec: codec) { payload(300) }
        #expect(made.origin == .generated)
        let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
        let redisKey = RemoteKeys(identity: identity.digest, prefix: RemoteKeys.defaultPrefix).value
        #expect(try await redis.exists(redisKey))
        let s3Store = try makeS3Store(s3, prefix: prefix)
        guard case .hit(let stored) = await s3Store.lookup(identity) else {
            Issue.record("the S3 member did not get the value")
            return
        }
        #expect(stored.payload == payload(300))
        try await redis.run(["FLUSHALL"])
        let second = YCache(storageDirectory: two.url, remote: chain)
        let fetched = try await second.resolve(for: key, codec: codec) {
            Issue.record("generated again")
            return Data()
        }
        #expect(fetched.origin == .remote && fetched.value == payload(300))
        #expect(try await redis.exists(redisKey), "Redis was not backfilled")
        #expect(second.statistics.remoteHits == 1 && second.statistics.remoteMisses == 1)
        await s3.stop()
        await redis.stop()
    }

    @Test("a read-only member receives no store and no delete; leases come from the first writable member")
    func readOnlyMember() async throws {
        let redis = try await RedisServer.start()
        let s3 = try await SeaweedServer.start()
        let prefix = "chain-ro-\(UInt32.random(in: 0...UInt32.max))"
        let s3Store = try makeS3Store(s3, prefix: prefix)
        let planted = entryIdentity("planted-ro", codec: codec.identifier)
        #expect(await s3Store.store(planted, payload: payload(5), createdAt: 1, expiresAt: 0) == .stored)
        let chain = try YCache.Remote.chain([try testRemote(redis), try s3Remote(s3, prefix: prefix, readOnly: true)])
        let cache = YCache(storageDirectory: TemporaryDirectory("chain-ro").url, remote: chain)
        let key = CacheKey(namespace: "chain", identity: "ro")
        _ = try await cache.resolve(for: key, codec: codec) { payload(7) }
        let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
        #expect(await s3Store.lookup(identity) == .miss(.absent), "a read-only member got a store")
        #expect(
            try await redis.exists(RemoteKeys(identity: identity.digest, prefix: RemoteKeys.defaultPrefix).value))
        // The read-only member's value is found (and backfilled into Redis), and a removal leaves it there.
        let plantedKey = CacheKey("planted-ro")
        let found = try await cache.resolve(for: plantedKey, codec: codec) { Data() }
        #expect(found.origin == .remote && found.value == payload(5))
        #expect(try await cache.remove(for: plantedKey, codec: codec))
        #expect(await s3Store.lookup(planted) == .hit(RemoteValue(payload: payload(5), createdAt: 1, expiresAt: 0)))
        await s3.stop()
        await redis.stop()
    }
}
