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

    private func stampede(remote: [String], hosts: Int, perHost: Int, keys: Int) async throws -> (Int, [String]) {
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
            for _ in 0..<keys where await child.json(timeout: 120)?["correct"] as? Bool == true { correct += 1 }
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
        #expect(generations.count == 4, "\(generations)")
        await redis.stop()
        await server.stop()
    }
}
