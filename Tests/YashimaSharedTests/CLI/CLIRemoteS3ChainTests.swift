// `yashima run` on S3 and in chains, with real processes against a real SeaweedFS (and redis-server):
// three storage directories (hosts) × four processes × three keys at once on S3 alone run each command once
// (its own lease objects; a host whose remote call timed out on a loaded machine runs it once itself and
// says so); `--remote-read-only s3://…` asks S3 and never writes it (no value, no lease
// object), and `yashima stats` shows each chain member's counters (a backfill included) and breakers; a
// throttle (503 SlowDown, Retry-After: 30) seen by one process keeps every other process of the machine off
// the server for that long (the breaker slot in the directory's state file).

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("CLI: S3 across hosts, read-only members, stats by member", .seaweedServer, .redisServer, .serialized)
struct CLIRemoteS3ChainTests {
    private let environment = [
        "AWS_ACCESS_KEY_ID": SeaweedServer.accessKeyID, "AWS_SECRET_ACCESS_KEY": SeaweedServer.secretAccessKey,
    ]

    /// A started server whose first write is done (SeaweedFS allocates its volumes then, which on a busy
    /// machine can take longer than the CLI's 1 s operation timeout).
    private func warmServer() async throws -> SeaweedServer {
        let server = try await SeaweedServer.start()
        let store = try makeS3Store(server, prefix: "warm-up")
        #expect(await store.store(entryIdentity("warm"), payload: payload(1), createdAt: 1, expiresAt: 0) == .stored)
        return server
    }

    /// The object keys under `prefix` (values and leases).
    private func objects(_ server: SeaweedServer, prefix: String) async throws -> [String] {
        let store = try makeS3Store(server, prefix: prefix)
        guard let (keys, _) = await store.listPage(after: nil) else {
            Issue.record("could not list \(prefix)")
            return []
        }
        return keys
    }

    @Test func threeHostsTimesFourProcessesOnThreeKeysOnS3AloneRunThreeTimes() async throws {
        let server = try await warmServer()
        let hosts = [try CLIFixture(), try CLIFixture(), try CLIFixture()]
        let scratch = try CLIFixture()
        let (ledger, errors) = (scratch.path("ledger"), scratch.path("errors"))
        let url =
            "s3://\(SeaweedServer.bucket)/cli-many-\(UInt32.random(in: 0...UInt32.max))?endpoint=\(server.endpoint)"
        // Each process waits for GO (a file the test creates once all twelve are READY), then runs the
        // three keys in order; the command records the key and host, and takes 0.3 s.
        let command = "echo \"$0 $HOST\" >> \(ledger); sleep 0.3; echo out-$0"
        var loops: [String] = []
        for (index, host) in hosts.enumerated() {
            for process in 0..<4 {
                loops.append(
                    """
                    ( touch \(scratch.path("ready-\(index)-\(process)")); while [ ! -e \(scratch.path("go")) ]; do sleep 0.01; done
                      for k in 1 2 3; do
                        out=$(HOST=h\(index) \(yashimaExecutable.path) run --dir \(host.storage) --remote '\(url)' -v -- \
                          sh -c '\(command)' "k$k" 2>>\(scratch.path("log"))) || echo "status $? for k$k" >> \(errors)
                        [ "$out" = "out-k$k" ] || echo "wrong output for k$k: $out" >> \(errors)
                      done ) &
                    """)
            }
        }
        let ready = (0..<3).flatMap { host in (0..<4).map { scratch.path("ready-\(host)-\($0)") } }
        let script =
            loops.joined(separator: "\n") + """

                while [ $(ls \(ready.joined(separator: " ")) 2>/dev/null | wc -l) -lt 12 ]; do sleep 0.01; done
                touch \(scratch.path("go"))
                wait
                """
        let result = try await shell(script, environment: environment, timeout: 600)
        #expect(result.status == 0, "\(result.error)")
        let lines = { (path: String) in
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        #expect(lines(errors).isEmpty, "\(lines(errors))")
        let runs = lines(ledger)
        let perKey = Dictionary(grouping: runs, by: { $0.split(separator: " ")[0] }).mapValues(\.count)
        // Once in total; a host whose remote call timed out on a loaded machine (the CLI's 1 s operation
        // timeout) runs it itself, once, and says so: then, and only then, more runs are allowed.
        let degraded = lines(scratch.path("log")).filter { $0.contains("timed out") || $0.contains("skipped") }
        let perHost = Dictionary(grouping: runs, by: { $0 }).mapValues(\.count)
        #expect(perHost.values.allSatisfy { $0 == 1 }, "a key ran twice on one host: \(runs)")
        #expect(Set(perKey.keys) == ["k1", "k2", "k3"], "ran: \(runs)")
        if degraded.isEmpty {
            #expect(perKey.values.allSatisfy { $0 == 1 }, "ran: \(runs)\n\(lines(scratch.path("log")))")
        } else {
            print("S3, 3 hosts × 4 processes × 3 keys: \(runs.count) runs; remote degraded: \(degraded)")
        }
        await server.stop()
    }

    @Test func aReadOnlyMemberStoresNothingAndStatsShowsEachMember() async throws {
        let redis = try await RedisServer.start()
        let s3 = try await warmServer()
        let (reader, writer, chained) = (try CLIFixture(), try CLIFixture(), try CLIFixture())
        let prefix = "cli-ro-\(UInt32.random(in: 0...UInt32.max))"
        let url = "s3://\(SeaweedServer.bucket)/\(prefix)?endpoint=\(s3.endpoint)"
        let ledger = reader.path("ledger")
        let command = ["--", "sh", "-c", "echo ran >> \(ledger); echo shared"]
        // Read-only alone: the command runs, S3 receives nothing (no value, no lease object).
        let first = try await yashima(
            ["run"] + reader.dir + ["--remote-read-only", url, "--verbose"] + command, environment: environment)
        #expect(first.status == 0 && first.text == "shared\n", "\(first.error)")
        #expect(try await objects(s3, prefix: prefix).isEmpty, "a read-only member was written")
        // A writer stores it in S3 (the command's second run: nothing shared it before).
        let second = try await yashima(["run"] + writer.dir + ["--remote", url] + command, environment: environment)
        #expect(second.status == 0 && second.text == "shared\n", "\(second.error)")
        let stored = try await objects(s3, prefix: prefix)
        #expect(stored.count == 1, "\(stored)")
        // Redis, then S3 read-only: a hit in S3, backfilled into Redis; S3 unchanged.
        let third = try await yashima(
            ["run"] + chained.dir + ["--remote", redis.url, "--remote-read-only", url, "--verbose"] + command,
            environment: environment)
        #expect(third.status == 0 && third.text == "shared\n", "\(third.error)")
        #expect(third.error.contains("from the remote tier"), "\(third.error)")
        guard case .array(let keys) = try await redis.run(["KEYS", "yashima:*:value"]) else {
            Issue.record("KEYS failed")
            return
        }
        #expect(keys.count == 1, "Redis holds \(keys.count) values: not backfilled")
        #expect(try await objects(s3, prefix: prefix) == stored)
        let runs = (try? String(contentsOfFile: ledger, encoding: .utf8)) ?? ""
        #expect(runs == "ran\nran\n", "the command ran \(runs.split(separator: "\n").count) times")
        // stats: both members in order, the read-only one marked, its hit and the backfill counted.
        let stats = try await yashima(["stats"] + chained.dir)
        #expect(stats.status == 0, "\(stats.error)")
        let text = stats.text
        let chainLines = text.split(separator: "\n").filter { $0.contains("redis ") || $0.contains("s3 ") }
        #expect(text.contains("remote chain"), "\(text)")
        #expect(
            chainLines.contains { $0.contains("1. redis") && $0.contains("backfills 1") },
            "\(text)")
        #expect(
            chainLines.contains { $0.contains("2. s3") && $0.contains("(read-only)") && $0.contains("hits 1") },
            "\(text)")
        #expect(!text.contains(SeaweedServer.secretAccessKey))
        let json = try await yashima(["stats", "--json"] + chained.dir)
        let object = try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any]
        let members = (object?["remote"] as? [String: Any])?["members"] as? [[String: Any]] ?? []
        #expect(members.map { $0["readOnly"] as? Bool } == [false, true], "\(json.text)")
        let metrics = try await yashima(["stats", "--format", "prometheus"] + chained.dir)
        let backfills = metrics.text.split(separator: "\n").filter {
            $0.hasPrefix("yashima_remote_member_backfills_total{") && $0.contains("position=\"1\"")
        }
        #expect(backfills.count == 1 && backfills[0].hasSuffix(" 1"), "\(metrics.text)")
        await s3.stop()
        await redis.stop()
    }

    @Test func aThrottleSeenByOneProcessBacksTheWholeMachineOffForItsRetryAfter() async throws {
        let slowDown = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Reduce</Message></Error>"
        let server = try FaultyHTTPServer(.answer(503, headers: ["Retry-After: 30"], body: slowDown))
        defer { server.stop() }
        let fixture = try CLIFixture()
        let url = "s3://bucket/throttled?endpoint=http://127.0.0.1:\(server.port)&region=us-east-1"
        let start = Date()
        let first = try await yashima(
            ["run"] + fixture.dir + ["--remote", url, "-v", "--", "echo", "one"], environment: environment)
        #expect(first.status == 0 && first.text == "one\n", "\(first.error)")
        #expect(first.error.contains("throttled"), "\(first.error)")
        let seen = server.requestCount
        #expect(seen == 1, "\(seen) requests")
        // Another process, another key: it does not call the server while the Retry-After runs.
        let second = try await yashima(
            ["run"] + fixture.dir + ["--remote", url, "-v", "--", "echo", "two"], environment: environment)
        #expect(second.status == 0 && second.text == "two\n", "\(second.error)")
        #expect(second.error.contains("skipped"), "\(second.error)")
        #expect(server.requestCount == seen, "the second process called a throttling server")
        // stats: the server's breakers open for the Retry-After (not the 5 s cooldown), the throttle counted.
        let json = try await yashima(["stats", "--json"] + fixture.dir)
        let object = try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any]
        let remote = object?["remote"] as? [String: Any]
        #expect((remote?["counters"] as? [String: Any])?["errors"] as? Int == 1, "\(json.text)")
        let servers = remote?["servers"] as? [[String: Any]] ?? []
        #expect(servers.count == 2 && servers.allSatisfy { $0["reason"] as? String == "throttled" }, "\(json.text)")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for server in servers {
            let until = (server["until"] as? String).flatMap(formatter.date(from:))
            // The answer came after `start` and before now: open until 30 s after it (whole seconds).
            let from = until.map { $0.timeIntervalSince(start) } ?? -1
            #expect(from >= 29 && until.map { $0.timeIntervalSinceNow <= 31 } == true, "until: \(json.text)")
        }
    }
}
