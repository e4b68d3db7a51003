// RemoteHTTPTierTests.swift: the HTTP backend through YCache (issue 18), against a real nginx (and
// redis-server for the leases): a value generated on one host is a verified `.remote` hit on another,
// large values included; `remove(for:)` deletes it on the server. With processes: HTTP alone generates
// at most once per host (no leases across hosts); HTTP values with Redis leases generate once in total.

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

@Suite("Remote tier through YCache: HTTP", .nginxServer, .serialized)
struct RemoteHTTPTierTests {
    private let codec = DataCodec()

    @Test("HTTP: a value generated on one host is a .remote hit on another (1.5 MiB); remove deletes it")
    func httpHitAcrossHosts() async throws {
        let server = try await NginxServer.start()
        let remote = try YCache.Remote.http(server.url(), options: .init(operationTimeout: .seconds(5)))
        let (one, two, three) = (
            TemporaryDirectory("http-one"), TemporaryDirectory("http-two"), TemporaryDirectory("http-3")
        )
        let first = YCache(storageDirectory: one.url, remote: remote)
        let second = YCache(storageDirectory: two.url, remote: remote)
        let key = CacheKey(namespace: "http", identity: "large")
        let large = payload(1_500_000)
        _ = try await first.value(for: key, codec: codec) { large }
        #expect(first.statistics.remotePuts == 1)
        let fetched = try await second.resolve(for: key, codec: codec) { Data() }
        #expect(fetched.origin == .remote && fetched.value == large)
        #expect(try await second.remove(for: key, codec: codec))
        let third = YCache(storageDirectory: three.url, remote: remote)
        let regenerated = try await third.resolve(for: key, codec: codec) { payload(3) }
        #expect(regenerated.origin == .generated && regenerated.value == payload(3))
        await server.stop()
    }

    private func worker(_ host: TemporaryDirectory, _ remote: [String], _ extra: [String]) throws -> ChildProcess {
        try ChildProcess(["worker", "get", "--directory", host.path] + remote + extra)
    }

    /// Each worker's result lines (key, origin, shared, remote errors and lease counts), for failure messages.
    private static let results = Mutex<[String]>([])

    private func stampede(remote: [String], hosts: Int, perHost: Int, keys: Int) async throws -> (Int, [String]) {
        Self.results.withLock { $0 = [] }
        let directories = (0..<hosts).map { TemporaryDirectory("http-host-\($0)") }
        let ledger = directories[0].path + ".ledger"
        defer { unlink(ledger) }
        var children: [ChildProcess] = []
        for host in directories {
            for _ in 0..<perHost {
                children.append(
                    try worker(
                        host, remote,
                        ["--key", "k", "--count", "\(keys)", "--generate-ms", "200", "--ledger", ledger, "--go"]))
            }
        }
        #expect(await startTogether(children))
        var correct = 0
        for child in children {
            for _ in 0..<keys {
                guard let line = await child.json(timeout: 120) else { continue }
                if line["correct"] as? Bool == true { correct += 1 }
                let summary = ["key", "origin", "shared", "remoteErrors", "remoteLeaseWaits", "remoteLeaseTakeovers"]
                    .map { "\($0)=\(line[$0] ?? "-")" }.joined(separator: " ")
                Self.results.withLock { $0.append("pid \(line["pid"] ?? "?"): \(summary)") }
            }
            #expect(await child.exitStatus(timeout: 120) == 0)
        }
        return (correct, Ledger(path: ledger).lines())
    }

    @Test("HTTP alone: hosts missing together generate at most once per host, every value right")
    func httpAlonePerHost() async throws {
        let server = try await NginxServer.start()
        let (correct, generations) = try await stampede(
            remote: ["--remote", server.url()], hosts: 2, perHost: 3, keys: 3)
        #expect(correct == 2 * 3 * 3)
        #expect(generations.count >= 3 && generations.count <= 2 * 3, "\(generations)")
        await server.stop()
    }

    @Test("HTTP values with Redis leases: three hosts generate each key once in total", .redisServer)
    func httpWithRedisLeases() async throws {
        let server = try await NginxServer.start()
        let redis = try await RedisServer.start()
        let (correct, generations) = try await stampede(
            remote: ["--remote", server.url(), "--remote-leases", redis.url], hosts: 3, perHost: 2, keys: 4)
        #expect(correct == 3 * 2 * 4)
        #expect(generations.count == 4, "\(generations)\n\(Self.results.withLock { $0.joined(separator: "\n") })")
        await redis.stop()
        await server.stop()
    }

    @Test(
        "HTTP values with Redis leases: a value stored and its lease released after this host's lookup is read, not generated again",
        .redisServer)
    func valueStoredBetweenLookupAndLease() async throws {
        let server = try await NginxServer.start()
        let redis = try await RedisServer.start()
        let remote = try YCache.Remote.http(server.url(), leases: .redis(redis.url))
        let (one, two) = (TemporaryDirectory("http-late-one"), TemporaryDirectory("http-late-two"))
        let first = YCache(storageDirectory: one.url, remote: remote)
        let second = YCache(storageDirectory: two.url, remote: remote)
        let key = CacheKey(namespace: "late", identity: "k")
        let value = Data(repeating: 7, count: 3000)
        // Between the second host's remote miss and its lease request, the first host generates the value,
        // stores it over HTTP and releases its lease: the lease is free when the second host asks.
        let resolution = try await RemoteTier.$afterRemoteMiss.withValue({
            await RemoteTier.$afterRemoteMiss.withValue(nil) {
                _ = try? await first.value(for: key, codec: DataCodec()) { value }
                _ = await eventually { first.statistics.remotePuts == 1 }
            }
        }) {
            try await second.resolve(for: key, codec: DataCodec()) {
                Issue.record("generated on both hosts")
                return Data()
            }
        }
        #expect(resolution.value == value)
        #expect(resolution.origin == .remote)
        #expect(first.statistics.generations == 1 && second.statistics.generations == 0)
        await redis.stop()
        await server.stop()
    }
}
