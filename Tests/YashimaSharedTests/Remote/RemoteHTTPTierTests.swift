// RemoteHTTPTierTests.swift: the HTTP backend through YCache (issue 18), against a real nginx (and
// redis-server for the leases): a value generated on one host is a verified `.remote` hit on another,
// large values included; `remove(for:)` deletes it on the server. With processes: HTTP alone generates
// at most once per host (no leases across hosts); HTTP values with Redis leases generate once in total.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote tier through YCache: HTTP", .nginxServer, .serialized)
struct RemoteHTTPTierTests {
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
        _ = try await first.value(for: key, codec: DataCodec()) { large }
        #expect(first.statistics.remotePuts == 1)
        let fetched = try await second.resolve(for: key, codec: DataCodec()) { Data() }
        #expect(fetched.origin == .remote && fetched.value == large)
        #expect(try await second.remove(for: key, codec: DataCodec()))
        let third = YCache(storageDirectory: three.url, remote: remote)
        let regenerated = try await third.resolve(for: key, codec: DataCodec()) { payload(3) }
        #expect(regenerated.origin == .generated && regenerated.value == payload(3))
        await server.stop()
    }

    private func worker(_ host: TemporaryDirectory, _ remote: [String], _ extra: [String]) throws -> ChildProcess {
        try ChildProcess(["worker", "get", "--directory", host.path] + remote + extra)
    }

    /// A stampede round (HostsRound): `perHost` workers on each of `hosts` hosts miss `keys` keys together.
    private func stampede(remote: [String], hosts: Int, perHost: Int, keys: Int) async throws -> HostsRound {
        try await HostsRound.run(label: "http-host", hosts: hosts, perHost: perHost, keys: keys) { host, ledger in
            try worker(
                host, remote, ["--key", "k", "--count", "\(keys)", "--generate-ms", "200", "--ledger", ledger, "--go"])
        }
    }

    /// Each worker's result lines (key, origin, shared, remote errors and lease counts), for failure messages.
    private static func summary(_ round: HostsRound) -> String {
        round.results.map { line in
            let fields = ["key", "origin", "shared", "remoteErrors", "remoteLeaseWaits", "remoteLeaseTakeovers"]
                .map { "\($0)=\(line[$0] ?? "-")" }.joined(separator: " ")
            return "pid \(line["pid"] ?? "?"): \(fields)"
        }.joined(separator: "\n")
    }

    @Test("HTTP alone: hosts missing together generate at most once per host, every value right")
    func httpAlonePerHost() async throws {
        let server = try await NginxServer.start()
        let round = try await stampede(remote: ["--remote", server.url()], hosts: 2, perHost: 3, keys: 3)
        #expect(round.correctCount == 2 * 3 * 3)
        #expect(round.generations.count >= 3 && round.generations.count <= 2 * 3, "\(round.generations)")
        await server.stop()
    }

    @Test("HTTP values with Redis leases: three hosts generate each key once in total", .redisServer)
    func httpWithRedisLeases() async throws {
        let server = try await NginxServer.start()
        let redis = try await RedisServer.start()
        let round = try await stampede(
            remote: ["--remote", server.url(), "--remote-leases", redis.url], hosts: 3, perHost: 2, keys: 4)
        #expect(round.correctCount == 3 * 2 * 4)
        #expect(round.generations.count == 4, "\(round.generations)\n\(Self.summary(round))")
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
