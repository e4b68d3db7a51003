// The contract every remote value store keeps (RemoteValueStore), run against each backend: in memory,
// Redis (one server, three shards, a three-master Cluster), HTTP (nginx) and S3 (SeaweedFS). A new backend gets these
// tests by adding a case to `ContractBackend`. Backend-specific behaviour stays in its own suite.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

/// A backend under the contract.
enum ContractBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, redis, redisShards, redisCluster, http, s3

    var testDescription: String { rawValue }

    /// Whether a host without a secret keeps a signed value in place when it stores (the trust rule; HTTP
    /// has no conditional store, so only its lookup before generating protects one).
    var keepsSignedValues: Bool { self != .http && self != .s3 }

    /// The backends this machine can run: every one whose server is installed or required (CI, where a
    /// missing one then fails).
    static var runnable: [ContractBackend] {
        let redis = RedisProcess.executablePath != nil || RedisProcess.isRequired
        let nginx = NginxServer.executablePath != nil || NginxServer.isRequired
        let seaweed = SeaweedServer.executablePath != nil || SeaweedServer.isRequired
        return allCases.filter {
            switch $0 {
            case .memory: return true
            case .http: return nginx
            case .s3: return seaweed
            default: return redis
            }
        }
    }

    /// Starts the backend's servers.
    func start() async throws -> ContractFixture {
        switch self {
        case .memory:
            let server = MemoryRemoteServer()
            return ContractFixture(stop: {}) { settings in
                var policy = RemotePolicy()
                settings.apply(to: &policy)
                return MemoryRemoteStore(server: server, policy: policy, secret: settings.secret)
            } plant: { bytes, identity, _ in
                server[identity.digest] = bytes
            }
        case .redis, .redisShards, .redisCluster:
            var servers: [RedisServer] = []
            var cluster: RedisCluster?
            switch self {
            case .redisCluster: cluster = try await RedisCluster.start()
            case .redisShards: for _ in 0..<3 { servers.append(try await RedisServer.start()) }
            default: servers.append(try await RedisServer.start())
            }
            let urls = cluster?.urls ?? servers.map(\.url)
            let (all, nodes, isCluster) = (servers, cluster, cluster != nil)
            return ContractFixture {
                for server in all { await server.stop() }
                await nodes?.stop()
            } makeStore: { settings in
                try makeStore(urls, cluster: isCluster) {
                    $0.secret = settings.secret
                    settings.apply(to: &$0.policy)
                }
            } plant: { bytes, identity, store in
                // Written by the store's own router, so it lands where the store will look (shard, node).
                let redis = try #require(store as? RedisRemoteStore)
                _ = try await offPool {
                    try redis.commands.put(
                        redis.keys(for: identity), bytes: bytes, timeToLiveMilliseconds: 600_000,
                        deadline: .after(.seconds(10)))
                }
            }
        case .s3:
            let server = try await SeaweedServer.start()
            let prefix = "contract-\(UInt32.random(in: 0...UInt32.max))"
            return ContractFixture {
                await server.stop()
            } makeStore: { settings in
                try makeS3Store(server, prefix: prefix) {
                    $0.secret = settings.secret
                    settings.apply(to: &$0.policy)
                }
            } plant: { bytes, identity, store in
                let s3 = try #require(store as? S3RemoteStore)
                let status = try await offPool { () throws -> Int in
                    try s3.client.exchange(
                        s3.client.request(
                            "PUT", key: s3.configuration.valueKey(identity.digest), body: .bytes(bytes)),
                        deadline: .after(.seconds(30)), cancellation: HTTPCancellation()
                    ).status
                }
                #expect(status == 200)
            }
        case .http:
            let server = try await NginxServer.start()
            return ContractFixture {
                await server.stop()
            } makeStore: { settings in
                try makeHTTPStore(server.url()) {
                    $0.secret = settings.secret
                    settings.apply(to: &$0.policy)
                }
            } plant: { bytes, identity, store in
                let path = server.file(of: try #require(store as? HTTPRemoteStore).url(for: identity))
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data(bytes).write(to: URL(fileURLWithPath: path))
            }
        }
    }
}

/// What a contract test may ask of a store: a secret, read-only mode, a size cap.
struct ContractSettings: Sendable {
    var secret: RemoteSecret?
    var readOnly = false
    var maximumValueBytes: Int?

    func apply(to policy: inout RemotePolicy) {
        policy.readOnly = readOnly
        if let maximumValueBytes { policy.maximumValueBytes = maximumValueBytes }
    }
}

/// A started backend: stores over it, and another client's raw bytes under an entry's name.
struct ContractFixture: Sendable {
    let stop: @Sendable () async -> Void
    let makeStore: @Sendable (ContractSettings) throws -> any RemoteValueStore
    let plant: @Sendable ([UInt8], EntryIdentity, any RemoteValueStore) async throws -> Void

    func store(_ settings: ContractSettings = ContractSettings()) throws -> any RemoteValueStore {
        try makeStore(settings)
    }
}

@Suite("Remote store contract: memory, Redis (one, shards, Cluster), HTTP (nginx), S3 (SeaweedFS)")
struct RemoteStoreContractTests {
    @Test("store, lookup, remove; a payload file; times and statistics", arguments: ContractBackend.runnable)
    func roundTrip(_ backend: ContractBackend) async throws {
        let fixture = try await backend.start()
        let store = try fixture.store()
        let id = entryIdentity("round-trip")
        #expect(await store.lookup(id) == .miss(.absent))
        let expires = Syscall.realtimeNanoseconds + 3_600_000_000_000
        #expect(await store.store(id, payload: payload(5000), createdAt: 42, expiresAt: expires) == .stored)
        // What the first look back found, and the counters then: a failure here derails every later step
        // (one server error opens the breaker for its cooldown), so say what it was.
        let first = await store.lookup(id)
        #expect(
            first == .hit(RemoteValue(payload: payload(5000), createdAt: 42, expiresAt: expires)),
            "\(first); counters \(store.statistics.snapshot)")
        #expect(await store.lookup(entryIdentity("round-trip", codec: "string-v1")) == .miss(.absent))
        #expect(await store.store(id, payload: Data(), createdAt: 43, expiresAt: 0) == .stored)
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: Data(), createdAt: 43, expiresAt: 0)))
        #expect(await store.remove(id) == .removed)
        #expect(await store.remove(id) == .absent)
        #expect(await store.lookup(id) == .miss(.absent))
        let counts = store.statistics.snapshot
        #expect(
            counts[.hits] == 2 && counts[.misses] == 3 && counts[.puts] == 2 && counts[.errors] == 0, "\(counts)")
        // From a local entry's file.
        let directory = TemporaryDirectory("contract-file")
        let (file, fd) = try payloadFile(payload(3000), in: directory)
        defer { close(fd) }
        #expect(await store.store(id, payloadFile: file, createdAt: 44, expiresAt: 0) == .stored)
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(3000), createdAt: 44, expiresAt: 0)))
        await fixture.stop()
    }

    @Test("with a secret: only values signed with it are hits", arguments: ContractBackend.runnable)
    func signing(_ backend: ContractBackend) async throws {
        let fixture = try await backend.start()
        let secretA = RemoteSecret("shared-secret-A")!
        let signerA = try fixture.store(ContractSettings(secret: secretA))
        let readerA = try fixture.store(ContractSettings(secret: secretA))
        let readerB = try fixture.store(ContractSettings(secret: RemoteSecret("shared-secret-B")))
        let unsigned = try fixture.store()
        let id = entryIdentity("signed")
        #expect(await signerA.store(id, payload: payload(300), createdAt: 7, expiresAt: 0) == .stored)
        #expect(await readerA.lookup(id) == .hit(RemoteValue(payload: payload(300), createdAt: 7, expiresAt: 0)))
        #expect(await readerB.lookup(id) == .miss(.rejected(.badSignature)))
        #expect(await unsigned.lookup(id) == .hit(RemoteValue(payload: payload(300), createdAt: 7, expiresAt: 0)))
        #expect(readerB.statistics.snapshot[.rejectedBadSignature] == 1)
        // The trust rule: a host without the secret never replaces a signed value (where the backend can
        // store conditionally); a host with it replaces any value it rejects.
        let overwrite = await unsigned.store(id, payload: payload(300), createdAt: 8, expiresAt: 0)
        if backend.keepsSignedValues {
            #expect(overwrite == .skipped(.signedValueKept))
            #expect(await readerA.lookup(id) == .hit(RemoteValue(payload: payload(300), createdAt: 7, expiresAt: 0)))
            #expect(unsigned.statistics.snapshot[.signedValuesKept] == 1)
            let fresh = entryIdentity("unsigned-first")
            #expect(await unsigned.store(fresh, payload: payload(30), createdAt: 9, expiresAt: 0) == .stored)
            #expect(await readerA.lookup(fresh) == .miss(.rejected(.unsigned)))
            #expect(await signerA.store(fresh, payload: payload(30), createdAt: 10, expiresAt: 0) == .stored)
            #expect(await readerA.lookup(fresh) == .hit(RemoteValue(payload: payload(30), createdAt: 10, expiresAt: 0)))
        } else {
            #expect(overwrite == .stored)
            #expect(await readerA.lookup(id) == .miss(.rejected(.unsigned)))
        }
        let counts = readerA.statistics.snapshot
        #expect(counts[.rejectedValues] == 1 && counts[.rejectedUnsigned] == 1 && counts[.rejectedBadSignature] == 0)
        await fixture.stop()
    }

    @Test(
        "bytes planted by another client are misses, never wrong values, and are overwritten",
        arguments: ContractBackend.runnable)
    func planted(_ backend: ContractBackend) async throws {
        let fixture = try await backend.start()
        let secret = RemoteSecret("planted-secret")!
        let store = try fixture.store(ContractSettings(secret: secret))
        let id = entryIdentity("planted")
        let seal = { (identity: EntryIdentity, expiresAt: Int64, secret: RemoteSecret?) in
            RemoteEnvelope.seal(
                payload(50), identity: identity.digest, createdAt: 1, expiresAt: expiresAt, secret: secret)
        }
        let good = seal(id, 0, secret)
        var damaged = good
        damaged[RemoteEnvelope.Offset.payload + 10] ^= 0x40
        var forged = good
        forged[forged.count - 1] ^= 1
        let cases: [([UInt8], RemoteMiss)] = [
            (Array("<html>not ours</html>".utf8), .rejected(.foreign)), ([], .rejected(.foreign)),
            (seal(entryIdentity("someone-else"), 0, secret), .rejected(.wrongIdentity)),
            (Array(good.dropLast(7)), .rejected(.truncated)), (damaged, .rejected(.badChecksum)),
            (forged, .rejected(.badSignature)), (seal(id, 0, nil), .rejected(.unsigned)),
            (seal(id, Syscall.realtimeNanoseconds - 1_000_000_000, secret), .expired),
        ]
        for (bytes, miss) in cases {
            try await fixture.plant(bytes, id, store)
            #expect(await store.lookup(id) == .miss(miss))
            #expect(await store.store(id, payload: payload(60), createdAt: 2, expiresAt: 0) == .stored)
            #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(60), createdAt: 2, expiresAt: 0)))
        }
        #expect(store.statistics.snapshot[.rejectedValues] == 7)
        #expect(store.statistics.snapshot[.errors] == 0 && store.statistics.snapshot[.bypassed] == 0)
        await fixture.stop()
    }

    @Test(
        "the size cap: larger values stay local, larger stored ones are not read", arguments: ContractBackend.runnable)
    func sizeCap(_ backend: ContractBackend) async throws {
        let fixture = try await backend.start()
        let store = try fixture.store(ContractSettings(maximumValueBytes: 4096))
        let fits = 4096 - RemoteEnvelope.headerSize
        #expect(await store.store(entryIdentity("fits"), payload: payload(fits), createdAt: 1, expiresAt: 0) == .stored)
        #expect(
            await store.store(entryIdentity("big"), payload: payload(fits + 1), createdAt: 1, expiresAt: 0)
                == .skipped(.tooLarge))
        #expect(store.statistics.snapshot[.oversizedValues] == 1)
        let huge = entryIdentity("huge")
        let writer = try fixture.store()
        #expect(await writer.store(huge, payload: payload(200_000), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await store.lookup(huge) == .miss(.tooLarge))
        guard case .hit = await store.lookup(entryIdentity("fits")) else {
            Issue.record("an oversized value disturbed other keys")
            return
        }
        #expect(store.statistics.snapshot[.errors] == 0 && store.statistics.snapshot[.bypassed] == 0)
        await fixture.stop()
    }

    @Test("read-only mode: lookups only; no stores or removals", arguments: ContractBackend.runnable)
    func readOnly(_ backend: ContractBackend) async throws {
        let fixture = try await backend.start()
        let writer = try fixture.store()
        let reader = try fixture.store(ContractSettings(readOnly: true))
        let id = entryIdentity("read-only")
        #expect(await writer.store(id, payload: payload(9), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await reader.lookup(id) == .hit(RemoteValue(payload: payload(9), createdAt: 1, expiresAt: 0)))
        #expect(await reader.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .skipped(.readOnly))
        #expect(await reader.remove(id) == .unavailable)
        #expect(await writer.lookup(id) == .hit(RemoteValue(payload: payload(9), createdAt: 1, expiresAt: 0)))
        await fixture.stop()
    }
}
