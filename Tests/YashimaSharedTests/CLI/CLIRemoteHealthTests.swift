// `yashima run/put/stats --remote` when the remote misbehaves, with real processes and a real redis-server:
// the CLIENT PAUSE reproduction of issue 22 (the waiter finishes within the documented bound), a SIGSTOPped
// Redis paid for once by ten processes (one breaker per machine), the trust rule's rejections in `stats`,
// and what `-v` and `put` say. Two storage directories play two hosts.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("CLI: --remote when the remote misbehaves", .redisServer, .serialized)
struct CLIRemoteHealthTests {
    /// Runs `body` and returns its result with the time from `start` to the process's end, in seconds: the
    /// end its reaper thread saw, not when this task ran again (on a loaded machine the rest of a parallel
    /// run can keep the cooperative pool busy for many seconds).
    private func finished(after start: ContinuousClock.Instant, _ body: () async throws -> CLIResult) async rethrows
        -> (CLIResult, Double)
    {
        let result = try await body()
        return (result, seconds(start.duration(to: result.exitedAt ?? .now)))
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Issue 22's reproduction: host A runs a 2 s command, host B the same command 0.5 s later, Redis
    /// pauses writes for 2.5 s at 1.8 s. A cannot store its value nor release its lease (every write waits
    /// for the pause); its lease, no longer renewed, dies within the lease TTL (2 s); B takes it over once
    /// writes resume and runs the command itself. On a quiet machine the timeline is the issue's; on a
    /// loaded one it stretches, but its order holds: B starts once A runs the command, the pause once B
    /// waits (subscribed), and A's command ends (the `go` file) once the pause is on. The documented bound
    /// after A's command ended: B within lease TTL (2 s) + operation timeout (1 s) for its wait, plus its own
    /// command (2 s) and remote calls (2 × 1 s) = 7 s; A within 2 × 1 s. Before the fix B waited for the 10 s
    /// lease taken at 0 s: 10 s after A's command ended, and 12.5 s in all.
    @Test func aPauseOfWritesDuringTheHoldersStoreEndsTheWaitWithinTheBound() async throws {
        let server = try await RedisServer.start()
        let (a, b) = (try CLIFixture(), try CLIFixture())
        let (ledger, go) = (a.path("ledger"), a.path("go"))
        // A runs until `go` (2 s on a quiet machine); B, which starts its command after that, runs for 2 s.
        let script =
            "echo ran >> \(ledger); if [ -e \(go) ]; then sleep 2; else while [ ! -e \(go) ]; do sleep 0.02; done; fi; "
            + "echo out"
        let command = ["--remote", server.url, "--", "sh", "-c", script]
        let start = ContinuousClock.now
        async let first = finished(after: start) { try await yashima(["run", "-v"] + a.dir + command) }
        #expect(await eventually(within: 60) { !a.lines("ledger").isEmpty })
        try await Task.sleep(until: start + .milliseconds(500))
        async let second = finished(after: start) { try await yashima(["run", "-v"] + b.dir + command) }
        #expect(
            try await eventually(within: 60) {
                guard case .array(let channels) = try await server.run(["PUBSUB", "CHANNELS", "yashima:*"]) else {
                    return false
                }
                return !channels.isEmpty  // B waits for A's lease, subscribed to its release
            })
        try await Task.sleep(until: start + .milliseconds(1800))
        #expect(try await server.run(["CLIENT", "PAUSE", "2500", "WRITE"]).isOK)
        let paused = seconds(start.duration(to: .now))
        try await Task.sleep(until: start + .milliseconds(2000))
        _ = FileManager.default.createFile(atPath: go, contents: Data())
        let ended = seconds(start.duration(to: .now))
        let ((resultA, endA), (resultB, endB)) = try await (first, second)
        print(
            "CLIENT PAUSE reproduction: pause at \(paused) s, A's command ended at \(ended) s; A exited at \(endA) s, "
                + "B at \(endB) s (B took \(endB - 0.5) s from its start). A: \(resultA.error)B: \(resultB.error)")
        #expect(resultA.status == 0 && resultA.text == "out\n", "\(resultA.error)")
        #expect(resultB.status == 0 && resultB.text == "out\n", "\(resultB.error)")
        let runs = a.lines("ledger").count
        #expect(runs >= 1 && runs <= 2, "the command ran \(runs) times")
        // The bounds (see above) with room for a loaded machine (the suite runs beside this on two cores):
        // B's whole run +5 s, A +8 s. B's wait itself (from stats, below) is held to its bound more closely.
        #expect(endB - ended < 7 + 5, "B ended \(endB - ended) s after A's command")
        #expect(endA - ended < 2 + 8, "A ended \(endA - ended) s after its command")
        #expect(resultB.error.contains("remote: waited"), "\(resultB.error)")
        let stats = try await yashima(["stats", "--json"] + b.dir)
        let remote = stats.json["remote"] as? [String: Any]
        let counters = remote?["counters"] as? [String: Any]
        #expect(counters?["leaseWaits"] as? Int == 1, "\(stats.text)")
        // B waited from about 0.5 s: at most A's remaining command (its end, `ended`) + lease TTL (2 s) +
        // operation timeout (1 s), with 2.5 s for a loaded machine: under the old lease's 10 s either way.
        let waited = counters?["leaseWaitSeconds"] as? Double ?? 0
        #expect(waited > 1 && waited < (ended - 0.5) + 2 + 1 + 2.5, "B waited \(waited) s: \(stats.text)")
        let text = try await yashima(["stats"] + b.dir)
        #expect(text.text.contains("waited for another host 1 times"), "\(text.text)")
        await server.stop()
    }

    /// One breaker per machine: with Redis hung (SIGSTOP), the first `yashima run` pays the 1 s timeout and
    /// marks the server down in the directory's state file; the nine after it skip Redis at no cost. The
    /// ten processes take about one timeout more than ten runs with no remote at all (before: ten timeouts,
    /// 10.3 s). `stats` shows the server down.
    @Test func tenProcessesAgainstAHungRedisPayTheTimeoutOnce() async throws {
        let server = try await RedisServer.start()
        let (hung, baseline) = (try CLIFixture(), try CLIFixture())
        let run = { (fixture: CLIFixture, index: Int, remote: [String]) async throws -> CLIResult in
            try await yashima(["run"] + fixture.dir + remote + ["--", "echo", "command \(index)"])
        }
        // The same ten commands with no remote tier: what ten processes cost here, now. Each process's own
        // time (spawn to exit, seen by its reaper), summed: what this task waits for the pool in between
        // is not theirs.
        var floor = 0.0
        for index in 0..<10 { floor += try await run(baseline, index, []).lifetime ?? 0 }
        await server.pause()
        var total = 0.0
        let start = ContinuousClock.now
        for index in 0..<10 {
            let result = try await run(hung, index, ["--remote", server.url])
            #expect(result.status == 0 && result.text == "command \(index)\n", "\(result.error)")
            total += result.lifetime ?? 0
        }
        // The breakers' cooldowns run in real time, gaps between the processes included.
        let span = seconds(start.duration(to: .now))
        print("10 runs against a SIGSTOPped Redis: \(total) s; the same 10 with no remote: \(floor) s")
        let stats = try await yashima(["stats", "--json"] + hung.dir)
        let remote = stats.json["remote"] as? [String: Any]
        let counters = remote?["counters"] as? [String: Any]
        // One process pays the timeout and the others skip the server, until the cooldown (5 s, doubling
        // while probes fail) lets one process probe again: a loaded machine that takes longer than the
        // cooldown for ten runs sees a probe per breaker (reads, writes: two timeouts) per cooldown, never
        // one per process.
        let timeouts = counters?["timeouts"] as? Int ?? 0
        #expect(
            timeouts >= 1 && timeouts <= 1 + 2 * Int(span / 5), "\(timeouts) timeouts in \(span) s: \(stats.text)")
        #expect((counters?["bypassed"] as? Int ?? 0) >= 10 - timeouts, "\(stats.text)")
        // The time the timeouts cost, with room for the load changing between the two series (the floor's
        // own length again: a loaded machine measured 10 s over a 5 s floor with 3 timeouts).
        #expect(
            total - floor < 1.5 * Double(timeouts) + 1.5 + floor,
            "ten runs took \(total) s, \(total - floor) s over ten runs without a remote (\(timeouts) timeouts)")
        let servers = remote?["servers"] as? [[String: Any]] ?? []
        // Down: skipped until the cooldown ends, or (on a machine slow enough that it ended) probe-due.
        #expect(
            servers.count == 2 && servers.allSatisfy { ["open", "probe-due"].contains($0["state"] as? String ?? "") },
            "\(stats.text)")
        #expect(servers.allSatisfy { $0["reason"] as? String == "timed out" }, "\(stats.text)")
        let text = try await yashima(["stats"] + hung.dir)
        #expect(
            text.text.contains("down, skipped by every process until")
                || text.text.contains("down, the next call probes it"),
            "\(text.text)")
        let prometheus = try await yashima(["stats", "--format", "prometheus"] + hung.dir)
        #expect(prometheus.text.contains("yashima_remote_timeouts_total{directory="), "\(prometheus.text)")
        #expect(prometheus.text.contains("yashima_remote_breaker_open{"), "\(prometheus.text)")
        server.resume()
        await server.stop()
    }

    /// The trust rule, seen by an operator: a value stored by a host without the secret is rejected by a
    /// host with it, and that host's `stats` counts it as unsigned; `-v` says so.
    @Test func aValueOfAHostWithoutTheSecretIsRejectedAndCounted() async throws {
        let server = try await RedisServer.start()
        let (plain, signed) = (try CLIFixture(), try CLIFixture())
        let secret = ["YASHIMA_REMOTE_SECRET": "fleet-secret"]
        let put = try await yashima(
            ["put"] + plain.dir + ["--identity", "shared", "--remote", server.url], input: Data("unsigned".utf8))
        #expect(put.status == 0 && put.error.isEmpty, "\(put.error)")
        let get = try await yashima(
            ["get"] + signed.dir + ["--identity", "shared", "--remote", server.url], environment: secret)
        #expect(get.status == 1 && get.output.isEmpty, "\(get.error)")
        let stats = try await yashima(["stats", "--json"] + signed.dir)
        let counters = (stats.json["remote"] as? [String: Any])?["counters"] as? [String: Any]
        let rejected = counters?["rejected"] as? [String: Any]
        #expect(rejected?["unsigned"] as? Int == 1 && rejected?["total"] as? Int == 1, "\(stats.text)")
        // A command: the host without the secret stores it unsigned; the host with it rejects that value,
        // runs the command and replaces the value with a signed one, which the first host then keeps.
        let ledger = plain.path("ledger")
        let command = ["--remote", server.url, "--", "sh", "-c", "echo ran >> \(ledger); echo out"]
        _ = try await yashima(["run"] + plain.dir + command)
        let rejecting = try await yashima(["run", "-v"] + signed.dir + command, environment: secret)
        #expect(rejecting.text == "out\n", "\(rejecting.error)")
        #expect(rejecting.error.contains("value rejected: unsigned"), "\(rejecting.error)")
        let prometheus = try await yashima(["stats", "--format", "prometheus"] + signed.dir)
        #expect(prometheus.text.contains("yashima_remote_rejections_total{"), "\(prometheus.text)")
        #expect(prometheus.text.contains("reason=\"unsigned\"} 2"), "\(prometheus.text)")
        await server.stop()
    }

    /// `-v` says what the remote did: a hit and its time, a refused connection, an authentication failure.
    /// `put --remote` with the remote down says so on standard error and exits 0.
    @Test func verboseAndPutSayWhatTheRemoteDid() async throws {
        let server = try await RedisServer.start(password: "right-password")
        let (one, two) = (try CLIFixture(), try CLIFixture())
        let good = "redis+unix://:right-password@" + (server.process.socketPath ?? "?")
        let bad = "redis+unix://:wrong-password@" + (server.process.socketPath ?? "?")
        let stored = try await yashima(["run", "-v"] + one.dir + ["--remote", good, "--", "echo", "v"])
        #expect(stored.error.contains("remote: miss, stored"), "\(stored.error)")
        let hit = try await yashima(["run", "-v"] + two.dir + ["--remote", good, "--", "echo", "v"])
        #expect(hit.error.contains("remote: hit in "), "\(hit.error)")
        let refused = try await yashima(
            ["run", "-v"] + one.dir + ["--remote", "redis://127.0.0.1:\(Loopback.freePort())", "--", "echo", "r"])
        #expect(refused.error.contains("refused (could not connect)"), "\(refused.error)")
        let denied = try await yashima(["run", "-v"] + two.dir + ["--remote", bad, "--", "echo", "d"])
        #expect(denied.error.contains("authentication failed"), "\(denied.error)")
        #expect(!denied.error.contains("wrong-password"), "\(denied.error)")
        let url = server.url
        await server.stop()
        let put = try await yashima(
            ["put"] + one.dir + ["--identity", "p", "--remote", url], input: Data("value".utf8))
        #expect(put.status == 0, "\(put.error)")
        #expect(
            put.error.contains("the remote tier did not take the value (refused (could not connect))"), "\(put.error)")
        let local = try await yashima(["get"] + one.dir + ["--identity", "p"])
        #expect(local.status == 0 && local.text == "value")
    }
}
