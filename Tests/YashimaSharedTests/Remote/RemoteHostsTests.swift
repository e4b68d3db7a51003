// RemoteHostsTests.swift: several "hosts" on one machine against one real redis-server, with real
// worker processes (`yashima-stress worker get --remote URL`): each host is its own storage directory
// with its own processes. Exactly one generation per key across every host and process (the ledger);
// every value checked. Faults through YCache: Redis SIGKILLed mid-run, Redis SIGSTOPped past the
// timeout, the lease holder's process SIGKILLed (another host takes over after the lease TTL). Events
// are ordered by GENERATING and WAITING lines (the lease-wait observer), never by sleeps; elapsed-time
// bounds are only the generous "does not hang" kind.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote tier across hosts (processes)", .redisServer, .serialized)
struct RemoteHostsTests {
    private func worker(_ host: TemporaryDirectory, _ server: RedisServer, _ extra: [String]) throws -> ChildProcess {
        try ChildProcess(
            ["worker", "get", "--directory", host.path, "--remote", server.url, "--remote-timeout-ms", "2000"] + extra)
    }

    /// Every JSON line a child prints before it exits (one per key).
    private func results(_ child: ChildProcess, count: Int) async -> [[String: Any]] {
        var lines: [[String: Any]] = []
        for _ in 0..<count {
            guard let line = await child.json(timeout: 120) else { break }
            lines.append(line)
        }
        return lines
    }

    @Test("three hosts × four processes miss the same keys together: one generation per key in total")
    func threeHostsFourProcesses() async throws {
        let server = try await RedisServer.start()
        let keys = 6
        let round = try await HostsRound.run(label: "host", hosts: 3, perHost: 4, keys: keys) { host, ledger in
            try worker(
                host, server,
                [
                    "--key", "stampede", "--count", "\(keys)", "--generate-ms", "200", "--size", "20000",
                    "--ledger", ledger, "--go",
                ])
        }
        let all = round.results
        #expect(all.count == keys * 12)
        #expect(all.allSatisfy { $0["correct"] as? Bool == true })
        let generations = round.generations
        #expect(generations.count == keys, "generations: \(generations)")
        #expect(Set(generations.map { $0.split(separator: " ")[0] }).count == keys)  // one per key
        let origins = all.map { $0["origin"] as? String ?? "?" }
        #expect(origins.filter { $0 == "generated" }.count == keys)
        #expect(origins.allSatisfy { ["generated", "remote", "storage"].contains($0) })
        // Each host other than the generator's got each key from the remote tier exactly once.
        #expect(origins.filter { $0 == "remote" }.count == keys * 2)
        #expect(all.allSatisfy { $0["remoteErrors"] as? Int == 0 })
        await server.stop()
    }

    @Test("the lease holder's process SIGKILLed: another host takes over after the lease TTL")
    func holderKilled() async throws {
        let server = try await RedisServer.start()
        let (one, two) = (TemporaryDirectory("holder"), TemporaryDirectory("taker"))
        let ledger = one.path + ".ledger"
        defer { unlink(ledger) }
        let lease = ["--remote-lease-ms", "1500"]
        let doomed = try worker(
            one, server, ["--key", "k", "--generate-ms", "600000", "--announce", "--ledger", ledger] + lease)
        #expect(await doomed.line(timeout: 60, where: { $0.hasPrefix("GENERATING") }) != nil)
        let taker = try worker(
            two, server, ["--key", "k", "--generate-ms", "10", "--announce-wait", "--ledger", ledger] + lease)
        // The taker says when it starts waiting for the holder's remote lease; then the holder dies.
        #expect(await taker.line(timeout: 60, where: { $0.hasPrefix("WAITING") }) != nil)
        doomed.kill()
        await doomed.exitStatus()
        let result = try #require(await taker.json(timeout: 60), "the taker hung after the holder was killed")
        #expect(result["correct"] as? Bool == true)
        #expect(result["origin"] as? String == "generated")
        #expect(result["remoteLeaseTakeovers"] as? Int == 1)
        #expect(Ledger(path: ledger).lines().count == 2)  // the killed holder's, then the takeover's
        #expect(await taker.exitStatus() == 0)
        // The value it stored is there for a third host.
        let third = TemporaryDirectory("third")
        let reader = try worker(third, server, ["--key", "k", "--ledger", ledger])
        let read = try #require(await reader.json(timeout: 60))
        #expect(read["origin"] as? String == "remote" && read["correct"] as? Bool == true)
        #expect(await reader.exitStatus() == 0)
        await server.stop()
    }

    @Test("a generation longer than three lease TTLs keeps its lease: the waiting host never takes over")
    func longGenerationKeepsItsLease() async throws {
        let server = try await RedisServer.start()
        let (one, two) = (TemporaryDirectory("long"), TemporaryDirectory("long-waiter"))
        let ledger = one.path + ".ledger"
        defer { unlink(ledger) }
        let lease = ["--remote-lease-ms", "600"]
        let holder = try worker(
            one, server, ["--key", "slow", "--generate-ms", "2500", "--announce", "--ledger", ledger] + lease)
        #expect(await holder.line(timeout: 60, where: { $0.hasPrefix("GENERATING") }) != nil)
        let waiter = try worker(two, server, ["--key", "slow", "--announce-wait", "--ledger", ledger] + lease)
        #expect(await waiter.line(timeout: 60, where: { $0.hasPrefix("WAITING") }) != nil)
        let result = try #require(await waiter.json(timeout: 60))
        #expect(result["origin"] as? String == "remote" && result["correct"] as? Bool == true)
        #expect(result["shared"] as? Bool == true)  // another host generated it while this one waited
        #expect(result["remoteLeaseTakeovers"] as? Int == 0)
        #expect(Ledger(path: ledger).lines().count == 1)
        #expect(await holder.exitStatus() == 0)
        #expect(await waiter.exitStatus() == 0)
        await server.stop()
    }

    @Test("the stress runner with --remote: removals, corruption and stampedes judged as without it")
    func stressRunnerWithRemote() async throws {
        let server = try await RedisServer.start()
        let directory = TemporaryDirectory("stress-remote")
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let runner = try ChildProcess(
            [
                "--profile", "smoke", "--scenario", "lifecycle,corruption,burst", "--remote", server.url,
                "--directory", directory.path,
            ], capturingStandardError: true)
        let output = String(decoding: await runner.output(timeout: 600), as: UTF8.self)
        let status = await runner.exitStatus(timeout: 60)
        #expect(status == 0, "\(output.split(separator: "\n").suffix(12).joined(separator: "\n"))")
        #expect(output.hasSuffix("3 passed, 0 failed\n"), "\(output.suffix(600))")
        await server.stop()
    }

    @Test("Redis SIGKILLed mid-run: every call goes on, no error thrown, every value right; restarted empty")
    func serverKilledMidRun() async throws {
        let server = try await RedisServer.start()
        let hosts = (0..<2).map { TemporaryDirectory("killed-\($0)") }
        let keys = 30
        let children = try hosts.flatMap { host in
            try (0..<2).map { _ in
                try worker(host, server, ["--key", "run", "--count", "\(keys)", "--generate-ms", "20", "--go"])
            }
        }
        #expect(await startTogether(children))
        // Once the first values are in, the server dies.
        _ = await children[0].json(timeout: 60)
        await server.kill()
        for child in children {
            #expect(await child.exitStatus(timeout: 120) == 0, "a worker threw or returned a wrong value")
        }
        try await server.restart()
        let later = TemporaryDirectory("killed-later")
        let after = try worker(later, server, ["--key", "after-restart"])
        let first = try #require(await after.json(timeout: 60))
        #expect(first["origin"] as? String == "generated" && first["correct"] as? Bool == true)
        #expect(await after.exitStatus() == 0)
        let again = try worker(TemporaryDirectory("killed-again"), server, ["--key", "after-restart"])
        let second = try #require(await again.json(timeout: 60))
        // Seen once in a loaded CI run (2026-12-07, not reproduced in 8 runs of the suite beside two busy
        // loops): the second process's origin was not "remote". Both processes' lines and the server's log
        // are in the message, so the next failure says which step went another way.
        #expect(
            second["origin"] as? String == "remote" && second["correct"] as? Bool == true,
            "after the restart: \(first); again: \(second); server log: \(server.log.suffix(1500))")
        #expect(await again.exitStatus() == 0)
        await server.stop()
    }

    @Test("Redis SIGSTOPped longer than the timeout: calls end within the timeouts, values right; SIGCONT after")
    func serverStopped() async throws {
        let server = try await RedisServer.start()
        let hosts = (0..<2).map { TemporaryDirectory("stopped-\($0)") }
        await server.pause()
        let start = Syscall.monotonicNanoseconds
        let children = try hosts.map { host in
            try ChildProcess(
                [
                    "worker", "get", "--directory", host.path, "--remote", server.url, "--remote-timeout-ms", "300",
                    "--key", "hang", "--count", "10", "--go",
                ])
        }
        #expect(await startTogether(children))
        for child in children {
            let lines = await results(child, count: 10)
            #expect(lines.count == 10 && lines.allSatisfy { $0["correct"] as? Bool == true })
            #expect(lines.allSatisfy { $0["origin"] as? String == "generated" })
            #expect(await child.exitStatus(timeout: 60) == 0)
        }
        // The "does not hang" bound: without deadlines these workers would wait forever.
        #expect(Double(Syscall.monotonicNanoseconds - start) / 1e9 < 60)
        server.resume()
        let after = try worker(TemporaryDirectory("stopped-after"), server, ["--key", "resumed"])
        #expect(await after.exitStatus(timeout: 60) == 0)
        await server.stop()
    }
}
