// RemoteTierTests.swift: the remote tier through YCache, in one process against a real redis-server:
// two caches over two storage directories play two hosts. A value generated on one is a `.remote` hit on
// the other (published into its storage, expiry carried over); `remove(for:)` removes remotely; planted
// values (wrong bytes, another entry's identity, another Redis type, a missing signature) are misses and
// never returned; a killed or stopped server throws nothing; read-only hosts never write; the public
// factories refuse bad URLs and options with a typed error. The multi-process tests are RemoteHostsTests.

import Foundation
import Testing

@testable import YashimaShared

/// A remote over `server` with test options: a short breaker cooldown and lease re-check, and deadlines
/// far beyond any wait in a test (every suite shares a two-thread pool; under load, worse under ASan, a
/// continuation can wait seconds for a thread). A test about timeouts sets its own.
func testRemote(_ server: RedisServer, _ configure: (inout YCache.Remote.Options) -> Void = { _ in }) throws
    -> YCache.Remote
{
    var options = YCache.Remote.Options(
        operationTimeout: .seconds(60), connectTimeout: .seconds(10), breakerCooldown: .milliseconds(100),
        leaseTimeToLive: .seconds(600), leaseRecheckInterval: .milliseconds(200))
    configure(&options)
    return try .redis(server.url, options: options)
}

@Suite("Remote tier through YCache", .redisServer, .serialized)
struct RemoteTierTests {
    private let codec = DataCodec()

    @Test("a value generated on one host is a verified .remote hit on another, then local storage")
    func remoteHitAcrossHosts() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let (one, two) = (TemporaryDirectory("host-one"), TemporaryDirectory("host-two"))
        let remote = try testRemote(server)
        let first = YCache(storageDirectory: one.url, remote: remote)
        let second = YCache(storageDirectory: two.url, remote: remote)
        let key = CacheKey(namespace: "remote", identity: "shared")
        let made = try await first.resolve(
            for: key, codec: codec, options: YCache.Options(expiry: .after(.seconds(3600)))
        ) { payload(5000) }
        #expect(made.origin == .generated)
        #expect(first.statistics.remotePuts == 1)
        #expect(first.statistics.remoteMisses == 1)
        let fetched = try await second.resolve(for: key, codec: codec) {
            Issue.record("generated twice"); return Data()
        }
        #expect(fetched.value == payload(5000))
        #expect(fetched.origin == .remote)
        #expect(fetched.source == .storage)  // Yashima's three cases: not generated here
        #expect(!fetched.wasSharedGeneration)
        #expect(second.statistics.remoteHits == 1)
        #expect(second.statistics.generations == 0)
        // Expiry carried over: the times are the generator's.
        #expect(fetched.metadata?.createdAt == made.metadata?.createdAt)
        #expect(fetched.metadata?.expiresAt == made.metadata?.expiresAt)
        // Published into the second host's storage: a fresh process there reads it locally.
        let third = YCache(storageDirectory: two.url, remote: remote)
        let local = try await third.resolve(for: key, codec: codec) { Data() }
        #expect(local.origin == .storage && local.value == payload(5000))
        #expect(third.statistics.remoteHits == 0)
    }

    @Test("a Redis server closing the connection mid-reply (half a real value sent): the generated value, never a part")
    func closedMidReply() async throws {
        let key = CacheKey(namespace: "closed", identity: "mid-reply")
        let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
        let remoteValue = payload(200_000, seed: 3)
        let sealed = RemoteEnvelope.seal(
            remoteValue, identity: identity.digest, createdAt: Syscall.realtimeNanoseconds, expiresAt: 0, secret: nil)
        let server = try MisbehavingServer(.closeMidBulk(sealed))
        defer { server.stop() }
        let host = TemporaryDirectory("redis-closed")
        let remote = try YCache.Remote.redis(
            server.url, options: .init(operationTimeout: .seconds(30), breakerCooldown: .seconds(600)))
        let cache = YCache(storageDirectory: host.url, remote: remote)
        let generated = payload(200_000, seed: 4)
        let resolved = try await cache.resolve(for: key, codec: codec) { generated }
        #expect(resolved.origin == .generated && resolved.value == generated)
        let statistics = cache.statistics
        #expect(statistics.remoteErrors == 1 && statistics.remoteConnectionFailures == 1, "\(statistics)")
        #expect(statistics.remoteHits == 0 && statistics.remotePuts == 0, "\(statistics)")
        // The lookup's failure marked the server down: the lease and the store were not asked.
        #expect(statistics.remoteBypassedCalls >= 1, "\(statistics)")
        #expect(server.acceptedCount == 1)
        let local = try await YCache(storageDirectory: host.url).resolve(for: key, codec: codec) { Data() }
        #expect(local.origin == .storage && local.value == generated)
    }

    @Test("removeAllRemotely: removeAll() deletes every remote value of the prefix on every shard, and no other")
    func removeAllRemotely() async throws {
        let servers = [try await RedisServer.start(), try await RedisServer.start(), try await RedisServer.start()]
        defer { Task { for server in servers { await server.stop() } } }
        let urls = servers.map(\.url)
        let options = { (removing: Bool, prefix: String) in
            YCache.Remote.Options(
                operationTimeout: .seconds(60), connectTimeout: .seconds(10), leaseTimeToLive: .seconds(600),
                keyPrefix: prefix, removeAllRemotely: removing)
        }
        let (one, two, other) = (TemporaryDirectory("ra-one"), TemporaryDirectory("ra-two"), TemporaryDirectory("ra-x"))
        let first = YCache(
            storageDirectory: one.url, remote: try .redis(shards: urls, options: options(true, "te*am[1]")))
        let second = YCache(
            storageDirectory: two.url, remote: try .redis(shards: urls, options: options(false, "te*am[1]")))
        let neighbour = YCache(
            storageDirectory: other.url, remote: try .redis(shards: urls, options: options(false, "team")))
        let keys = (0..<30).map { CacheKey(namespace: "all", identity: "k\($0)") }
        for (index, key) in keys.enumerated() {
            _ = try await first.value(for: key, codec: codec) { payload(20, seed: UInt8(index)) }
            _ = try await neighbour.value(for: key, codec: codec) { payload(21, seed: UInt8(index)) }
        }
        var perServer: [Int] = []
        for server in servers {
            guard case .integer(let count) = try await server.run(["DBSIZE"]) else {
                throw RedisFixtureError(description: "DBSIZE")
            }
            perServer.append(Int(count))
        }
        #expect(perServer.allSatisfy { $0 > 0 } && perServer.reduce(0, +) == 60, "\(perServer)")
        // Without the option, removeAll stays local.
        try await second.removeAll()
        try await first.removeAll()
        for (index, key) in keys.enumerated() {
            let again = try await second.resolve(for: key, codec: codec) { payload(22, seed: UInt8(index)) }
            #expect(again.origin == .generated, "\(key) was still stored remotely")
            let kept = try await YCache(
                storageDirectory: TemporaryDirectory("ra-y").url,
                remote: try .redis(shards: urls, options: options(false, "team"))
            )
            .resolve(for: key, codec: codec) { Data() }
            #expect(kept.origin == .remote && kept.value == payload(21, seed: UInt8(index)))  // another prefix: kept
        }
    }

    @Test("remove(for:) removes remotely; removeAll stays local")
    func removal() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let (one, two) = (TemporaryDirectory("rm-one"), TemporaryDirectory("rm-two"))
        let remote = try testRemote(server)
        let first = YCache(storageDirectory: one.url, remote: remote)
        let second = YCache(storageDirectory: two.url, remote: remote)
        let key = CacheKey(namespace: "remote", identity: "removed")
        let kept = CacheKey(namespace: "remote", identity: "kept")
        _ = try await first.value(for: key, codec: codec) { payload(10) }
        _ = try await first.value(for: kept, codec: codec) { payload(11) }
        #expect(try await first.remove(for: key, codec: codec))
        let regenerated = try await second.resolve(for: key, codec: codec) { payload(12) }
        #expect(regenerated.origin == .generated && regenerated.value == payload(12))
        try await first.removeAll()
        let still = try await second.resolve(for: kept, codec: codec) { payload(13) }
        #expect(still.origin == .remote && still.value == payload(11))
        let back = try await first.resolve(for: kept, codec: codec) { payload(14) }
        #expect(back.origin == .remote && back.value == payload(11))
    }

    @Test("planted values: wrong bytes, another entry's identity, another Redis type, unsigned, wrongly signed")
    func plantedValues() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let remote = try testRemote(server) { $0.secret = "shared secret" }
        let store = try makeStore(server)
        let other = entryIdentity("elsewhere")
        let otherValue = RemoteEnvelope.seal(
            payload(64), identity: other.digest, createdAt: 1, expiresAt: 0, secret: RemoteSecret("shared secret"))
        for (index, plant) in ["bytes", "identity", "type", "unsigned", "signature"].enumerated() {
            let key = CacheKey(namespace: "planted", identity: plant)
            let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
            let name = store.keys(for: identity).value
            switch plant {
            case "bytes": try await server.rawSet(name, Array("not an envelope".utf8))
            case "identity": try await server.rawSet(name, otherValue)
            case "type": try await server.run(RESPCommand("LPUSH", name, Array("x".utf8)))
            case "signature":
                try await server.rawSet(
                    name,
                    RemoteEnvelope.seal(
                        payload(64), identity: identity.digest, createdAt: 1, expiresAt: 0,
                        secret: RemoteSecret("another secret")))
            default:
                try await server.rawSet(
                    name,
                    RemoteEnvelope.seal(payload(64), identity: identity.digest, createdAt: 1, expiresAt: 0, secret: nil)
                )
            }
            let (here, there) = (TemporaryDirectory("planted-\(index)"), TemporaryDirectory("planted-next-\(index)"))
            let cache = YCache(storageDirectory: here.url, remote: remote)
            let resolved = try await cache.resolve(for: key, codec: codec) { payload(32, seed: 9) }
            #expect(resolved.origin == .generated, "\(plant)")
            #expect(resolved.value == payload(32, seed: 9), "\(plant)")
            #expect(cache.statistics.remoteHits == 0, "\(plant)")
            // The generated value replaced the planted one: the next host gets the right value.
            let next = YCache(storageDirectory: there.url, remote: remote)
            let fetched = try await next.resolve(for: key, codec: codec) { Data() }
            #expect(fetched.origin == .remote && fetched.value == payload(32, seed: 9), "\(plant)")
        }
    }

    @Test("the server killed, or stopped longer than the timeout: lookups throw nothing, calls go on locally")
    func serverFaults() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let remote = try testRemote(server) {
            $0.breakerCooldown = .seconds(600)
            $0.operationTimeout = .milliseconds(500)
        }
        let directory = TemporaryDirectory("faults")
        let cache = YCache(storageDirectory: directory.url, remote: remote)
        _ = try await cache.value(for: CacheKey("before"), codec: codec) { payload(1) }
        await server.pause()
        let paused = try await cache.resolve(for: CacheKey("paused"), codec: codec) { payload(2) }
        #expect(paused.origin == .generated && paused.value == payload(2))
        #expect(cache.statistics.remoteTimeouts >= 1)
        server.resume()
        await server.kill()
        for index in 0..<5 {
            let value = try await cache.value(for: CacheKey("killed-\(index)"), codec: codec) { payload(index) }
            #expect(value == payload(index))
        }
        #expect(cache.statistics.remoteBypassedCalls >= 5)
        // The local removal still works; the remote copy could not be deleted, and that is said
        // (RemoteRemovalTests).
        await #expect(throws: YCache.Error.self) { try await cache.remove(for: CacheKey("before"), codec: codec) }
        let local = YCache(storageDirectory: directory.url)
        let gone = try await local.resolve(for: CacheKey("before"), codec: codec) { payload(9) }
        #expect(gone.origin == .generated)
    }

    @Test(
        "maxmemory with allkeys-lru (values and leases evicted) or noeviction (OOM): every value right, nothing thrown")
    func maxmemory() async throws {
        for policy in ["allkeys-lru", "noeviction"] {
            let server = try await RedisServer.start()
            let used = try await server.usedMemory()
            try await server.run(["CONFIG", "SET", "maxmemory", String(used + (2 << 20))])
            try await server.run(["CONFIG", "SET", "maxmemory-policy", policy])
            let hosts = (0..<2).map { TemporaryDirectory("maxmemory-\(policy)-\($0)") }
            let remote = try testRemote(server)
            let caches = hosts.map { YCache(storageDirectory: $0.url, remote: remote, storageMaximumByteCount: nil) }
            // 30 values of 128 KiB: about twice what the server may hold.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (host, cache) in caches.enumerated() {
                    group.addTask {
                        for index in 0..<30 {
                            let key = CacheKey(namespace: "maxmemory", identity: "\(index)")
                            let value = try await cache.value(for: key, codec: DataCodec()) {
                                payload(128 << 10, seed: UInt8(index))
                            }
                            #expect(value == payload(128 << 10, seed: UInt8(index)), "host \(host) key \(index)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            if policy == "noeviction" { #expect(caches.map(\.statistics.remoteErrors).reduce(0, +) >= 1) }
            await server.stop()
        }
    }

    @Test("read-only: lookups only, nothing written remotely")
    func readOnly() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let (writing, reading) = (TemporaryDirectory("ro-writer"), TemporaryDirectory("ro-reader"))
        let writer = YCache(storageDirectory: writing.url, remote: try testRemote(server))
        let reader = YCache(storageDirectory: reading.url, remote: try testRemote(server) { $0.readOnly = true })
        _ = try await writer.value(for: CacheKey("published"), codec: codec) { payload(3) }
        let hit = try await reader.resolve(for: CacheKey("published"), codec: codec) { Data() }
        #expect(hit.origin == .remote && hit.value == payload(3))
        _ = try await reader.value(for: CacheKey("private"), codec: codec) { payload(4) }
        let store = try makeStore(server)
        #expect(await store.lookup(entryIdentity("private")) == .miss(.absent))
        #expect(reader.statistics.remotePuts == 0)
    }

    @Test("a server that refuses writes (a replica cut off from its primary) still serves remote hits")
    func writesRefusedReadsServed() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let (writing, reading) = (TemporaryDirectory("refusing-writer"), TemporaryDirectory("refusing-reader"))
        let writer = YCache(storageDirectory: writing.url, remote: try testRemote(server))
        _ = try await writer.value(for: CacheKey("kept"), codec: codec) { payload(9) }
        // A replica of a primary that is not there: its data stays readable, every write is READONLY.
        try await server.run(["REPLICAOF", "127.0.0.1", String(RedisServer.freePort())])
        // A miss first: its lease is refused (READONLY), which opens the write breaker for a minute.
        let reader = YCache(
            storageDirectory: reading.url, remote: try testRemote(server) { $0.breakerCooldown = .seconds(60) })
        let missed = try await reader.resolve(for: CacheKey("new"), codec: codec) { payload(10) }
        #expect(missed.origin == .generated && reader.statistics.remotePuts == 0)
        // The lease side bypassed, the value is still read.
        let hit = try await reader.resolve(for: CacheKey("kept"), codec: codec) {
            Issue.record("generated although the value was readable")
            return Data()
        }
        #expect(hit.origin == .remote && hit.value == payload(9))
    }

    @Test("the guide's ACL user has every right the tier uses: a miss, a wait woken by the holder, a hit")
    func guideACL() async throws {
        // The `user yashima on …` line of the guide (SharingAcrossMachines.md in the documentation catalog),
        // word for word, as the server's only user.
        let guide = try String(
            contentsOf: packageRoot().appendingPathComponent(
                "Sources/YashimaShared/YashimaShared.docc/SharingAcrossMachines.md"), encoding: .utf8)
        let line = try #require(guide.split(separator: "\n").first { $0.hasPrefix("user yashima on ") })
        let rules = line.split(separator: " ").map(String.init)
        let password = try #require(rules.first { $0.hasPrefix(">") }).dropFirst()
        let server = try await RedisServer.start(tcp: true, extraArguments: ["--user"] + rules.dropFirst())
        defer { Task { await server.stop() } }
        var options = YCache.Remote.Options(
            operationTimeout: .seconds(60), connectTimeout: .seconds(10), leaseTimeToLive: .seconds(600),
            leaseRecheckInterval: .seconds(600))  // only the holder's release message wakes the waiter
        options.keyPrefix = "yashima"
        let remote = try YCache.Remote.redis("redis://yashima:\(password)@127.0.0.1:\(server.port)", options: options)
        let (one, two, three) = (TemporaryDirectory("acl-1"), TemporaryDirectory("acl-2"), TemporaryDirectory("acl-3"))
        let (holder, waiter) = (
            YCache(storageDirectory: one.url, remote: remote), YCache(storageDirectory: two.url, remote: remote)
        )
        let (generating, waiting) = (Gate(), Gate())
        async let held = holder.resolve(for: CacheKey("acl"), codec: codec) {
            generating.open()
            _ = await waiting.wait(within: 60)  // the bound: a waiter that never waits fails, not hangs
            return payload(64)
        }
        // The holder has the lease (it generates) before the other host asks.
        #expect(await generating.wait(within: 60))
        // The waiter says when it blocks on the holder's lease; only then does the holder finish.
        let woken = try await LockWait.$leaseObserver.withValue({ waiting.open() }) {
            try await waiter.resolve(for: CacheKey("acl"), codec: codec) {
                Issue.record("generated twice")
                return Data()
            }
        }
        #expect(try await held.origin == .generated)
        #expect(woken.origin == .remote && woken.wasSharedGeneration && woken.value == payload(64))
        let reader = YCache(storageDirectory: three.url, remote: remote)
        #expect(try await reader.resolve(for: CacheKey("acl"), codec: codec) { Data() }.origin == .remote)
        for cache in [holder, waiter, reader] {
            #expect(cache.statistics.remoteErrors == 0 && cache.statistics.remoteTimeouts == 0)
        }
        #expect(holder.statistics.remotePuts == 1 && waiter.statistics.remoteLeaseWaits == 1)
    }

    @Test("store(_:for:) replaces the remote value; values kept out of storage stay out of the remote tier")
    func writesFollowTheWritePolicy() async throws {
        let server = try await RedisServer.start()
        defer { Task { await server.stop() } }
        let (one, two) = (TemporaryDirectory("wp-one"), TemporaryDirectory("wp-two"))
        let remote = try testRemote(server)
        let first = YCache(storageDirectory: one.url, remote: remote)
        let second = YCache(storageDirectory: two.url, remote: remote)
        try await first.store(payload(20), for: CacheKey("stored"), codec: codec)
        let stored = try await second.resolve(for: CacheKey("stored"), codec: codec) { Data() }
        #expect(stored.origin == .remote && stored.value == payload(20))
        try await first.store(payload(21), for: CacheKey("stored"), codec: codec)
        let store = try makeStore(server)
        guard case .hit(let replaced) = await store.lookup(entryIdentity("stored")) else {
            Issue.record("the stored value is not remote")
            return
        }
        #expect(replaced.payload == payload(21))
        let memoryOnly = YCache.Options(writePolicy: .memoryOnly)
        _ = try await first.value(for: CacheKey("memory"), codec: codec, options: memoryOnly) { payload(22) }
        try await first.store(payload(23), for: CacheKey("memory-store"), codec: codec, options: memoryOnly)
        #expect(await store.lookup(entryIdentity("memory")) == .miss(.absent))
        #expect(await store.lookup(entryIdentity("memory-store")) == .miss(.absent))
        #expect(try await server.exists(store.keys(for: entryIdentity("memory")).lease) == false)
    }

    @Test("factories: bad URLs and options are typed errors; descriptions hide credentials")
    func factories() throws {
        #expect(throws: YCache.Remote.ConfigurationError.self) { try YCache.Remote.redis("http://x") }
        #expect(throws: YCache.Remote.ConfigurationError.self) { try YCache.Remote.redis(shards: []) }
        #expect(throws: YCache.Remote.ConfigurationError.self) {
            try YCache.Remote.redis("redis://x", options: .init(leaseTimeToLive: .milliseconds(1)))
        }
        #expect(throws: YCache.Remote.ConfigurationError.self) {
            try YCache.Remote.redis("redis://x", options: .init(secret: ""))
        }
        #expect(throws: YCache.Remote.ConfigurationError.self) {
            try YCache.Remote.http("http://x/cache", leases: .http("http://y/cache"))
        }
        let remote = try YCache.Remote.redis(
            "redis://user:hunter2@cache.internal:6379/2", options: .init(secret: "correct horse"))
        #expect(!remote.description.contains("hunter2"))
        for shown in ["\(remote)", "\(remote.options)", String(reflecting: remote), String(reflecting: remote.options)]
        {
            #expect(!shown.contains("hunter2") && !shown.contains("correct horse"), "\(shown)")
        }
        var dumped = ""
        dump(remote, to: &dumped)
        #expect(!dumped.contains("hunter2") && !dumped.contains("correct horse"), "\(dumped)")
        #expect(
            remote
                == (try YCache.Remote.redis(
                    "redis://user:hunter2@cache.internal:6379/2", options: .init(secret: "correct horse"))))
        let hybrid = try YCache.Remote.http("http://cache.internal/v1", leases: .redis("redis://cache.internal"))
        #expect(hybrid.description.contains("leases on redis"))
        let configuration = YCache.Configuration(storageDirectory: URL(fileURLWithPath: "/tmp/x"), remote: remote)
        #expect(configuration.remote == remote)
    }
}
