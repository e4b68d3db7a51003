// `yashima run/get/put --remote URL` against a real redis-server: two storage directories play two
// hosts. A command run on one host is not run again on the other (its output comes from the remote
// tier, and then from local storage); `put` on one host is `get` on the other; a remote that is down is
// skipped without an error.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("CLI: --remote", .redisServer, .serialized)
struct CLIRemoteTests {
    @Test func aCommandRunOnOneHostIsNotRunAgainOnAnother() async throws {
        let server = try await RedisServer.start()
        let (one, two) = (try CLIFixture(), try CLIFixture())
        let ledger = one.root.path + "/ledger"
        let command = [
            "run", "--remote", server.url, "--verbose", "--", "sh", "-c", "echo ran >> \(ledger); echo hello",
        ]
        let first = try await yashima(Array(command.prefix(1)) + one.dir + command.dropFirst())
        #expect(first.status == 0 && first.text == "hello\n", "\(first.error)")
        let second = try await yashima(Array(command.prefix(1)) + two.dir + command.dropFirst())
        #expect(second.status == 0 && second.text == "hello\n", "\(second.error)")
        #expect(second.error.contains("from the remote tier"), "\(second.error)")
        let third = try await yashima(Array(command.prefix(1)) + two.dir + command.dropFirst())
        #expect(third.status == 0 && third.text == "hello\n")
        #expect(third.error.contains("from storage"), "\(third.error)")
        let runs = (try? String(contentsOfFile: ledger, encoding: .utf8)) ?? ""
        #expect(runs == "ran\n", "the command ran \(runs.split(separator: "\n").count) times")
        await server.stop()
    }

    @Test func putOnOneHostIsGetOnAnother() async throws {
        let server = try await RedisServer.start()
        let (one, two) = (try CLIFixture(), try CLIFixture())
        let put = try await yashima(
            ["put"] + one.dir + ["--identity", "shared", "--remote", server.url], input: Data("payload".utf8))
        #expect(put.status == 0, "\(put.error)")
        let localMiss = try await yashima(["get"] + two.dir + ["--identity", "shared"])
        #expect(localMiss.status == 1)
        let got = try await yashima(["get"] + two.dir + ["--identity", "shared", "--remote", server.url])
        #expect(got.status == 0 && got.text == "payload", "\(got.error)")
        let missing = try await yashima(["get"] + two.dir + ["--identity", "absent", "--remote", server.url])
        #expect(missing.status == 1 && missing.output.isEmpty)
        // get never writes remotely: no lease, no value for the missed key.
        let store = try makeStore(server)
        let absent = EntryIdentity(key: CacheKey(namespace: "default", identity: "absent"), codecIdentifier: "data-v1")
        #expect(await store.lookup(absent) == .miss(.absent))
        #expect(try await server.exists(store.keys(for: absent).lease) == false)
        await server.stop()
    }

    @Test func aRemoteThatIsDownIsSkipped() async throws {
        let server = try await RedisServer.start()
        let url = server.url
        await server.stop()
        let fixture = try CLIFixture()
        let result = try await yashima(["run"] + fixture.dir + ["--remote", url, "--", "echo", "local"])
        #expect(result.status == 0 && result.text == "local\n", "\(result.error)")
        #expect(result.error.isEmpty, "\(result.error)")
        let hit = try await yashima(["run"] + fixture.dir + ["--remote", url, "--", "echo", "local"])
        #expect(hit.status == 0 && hit.text == "local\n")
    }
}

/// `--remote s3://` against a real SeaweedFS (and a chain with redis-server): credentials from AWS_*.
@Suite("CLI: --remote s3://", .seaweedServer, .redisServer, .serialized)
struct CLIRemoteS3Tests {
    /// A started server whose first write is done: SeaweedFS allocates its volumes then, which on a busy
    /// machine can take longer than the CLI's 1 s operation timeout.
    private func warmServer() async throws -> SeaweedServer {
        let server = try await SeaweedServer.start()
        let store = try makeS3Store(server, prefix: "warm-up")
        #expect(await store.store(entryIdentity("warm"), payload: payload(1), createdAt: 1, expiresAt: 0) == .stored)
        return server
    }

    private func environment(secret: String = SeaweedServer.secretAccessKey) -> [String: String] {
        ["AWS_ACCESS_KEY_ID": SeaweedServer.accessKeyID, "AWS_SECRET_ACCESS_KEY": secret]
    }

    @Test func twoHostsOnS3AloneRunACommandOnce() async throws {
        let server = try await warmServer()
        let (one, two) = (try CLIFixture(), try CLIFixture())
        let ledger = one.root.path + "/ledger"
        let url = "s3://\(SeaweedServer.bucket)/cli-\(UInt32.random(in: 0...UInt32.max))?endpoint=\(server.endpoint)"
        let command = ["--remote", url, "--verbose", "--", "sh", "-c", "echo ran >> \(ledger); echo hello"]
        let first = try await yashima(["run"] + one.dir + command, environment: environment())
        #expect(first.status == 0 && first.text == "hello\n", "\(first.error)")
        let second = try await yashima(["run"] + two.dir + command, environment: environment())
        #expect(second.status == 0 && second.text == "hello\n", "\(second.error)")
        #expect(second.error.contains("from the remote tier"), "\(second.error)")
        let runs = (try? String(contentsOfFile: ledger, encoding: .utf8)) ?? ""
        #expect(runs == "ran\n", "the command ran \(runs.split(separator: "\n").count) times")
        await server.stop()
    }

    @Test func aWrongSecretRunsTheCommandUncachedAndNeverPrintsTheSecret() async throws {
        let server = try await SeaweedServer.start()
        let fixture = try CLIFixture()
        let wrong = "wrong-secret-key-4242424242"
        let url = "s3://\(SeaweedServer.bucket)/cli-wrong?endpoint=\(server.endpoint)"
        let result = try await yashima(
            ["run"] + fixture.dir + ["--remote", url, "--verbose", "--", "echo", "local"],
            environment: environment(secret: wrong))
        #expect(result.status == 0 && result.text == "local\n", "\(result.error)")
        #expect(!result.error.contains(wrong) && !result.text.contains(wrong))
        #expect(result.error.contains("remote:"), "\(result.error)")
        // Without -v (another host): one warning line, no secret; the command's output untouched.
        let quiet = try await yashima(
            ["run"] + (try CLIFixture()).dir + ["--remote", url, "--", "echo", "again"],
            environment: environment(secret: wrong))
        #expect(quiet.status == 0 && quiet.text == "again\n", "\(quiet.error)")
        let lines = quiet.error.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("warning") && lines[0].contains("credentials"), "\(quiet.error)")
        #expect(!quiet.error.contains(wrong))
        await server.stop()
    }

    @Test func aChainRedisThenS3StoresInBothAndRedisEmptiedIsFilledFromS3() async throws {
        let redis = try await RedisServer.start()
        let s3 = try await warmServer()
        let (one, two) = (try CLIFixture(), try CLIFixture())
        let ledger = one.root.path + "/ledger"
        let prefix = "cli-chain-\(UInt32.random(in: 0...UInt32.max))"
        let url = "s3://\(SeaweedServer.bucket)/\(prefix)?endpoint=\(s3.endpoint)"
        let command = ["--remote", redis.url, "--remote", url, "--", "sh", "-c", "echo ran >> \(ledger); echo chained"]
        let first = try await yashima(["run"] + one.dir + command, environment: environment())
        #expect(first.status == 0 && first.text == "chained\n", "\(first.error)")
        guard case .array(let keys) = try await redis.run(["KEYS", "yashima:*:value"]) else {
            Issue.record("KEYS failed")
            return
        }
        #expect(keys.count == 1, "Redis holds \(keys.count) values")
        let inS3 = try makeS3Store(s3, prefix: prefix)
        let objects = await inS3.listPage(after: nil)?.0 ?? []
        #expect(objects.count == 1, "S3 holds \(objects)")
        try await redis.run(["FLUSHALL"])
        let second = try await yashima(["run"] + two.dir + ["--verbose"] + command, environment: environment())
        #expect(second.status == 0 && second.text == "chained\n", "\(second.error)")
        guard case .array(let refilled) = try await redis.run(["KEYS", "yashima:*:value"]) else { return }
        #expect(refilled.count == 1, "Redis was not backfilled")
        let runs = (try? String(contentsOfFile: ledger, encoding: .utf8)) ?? ""
        #expect(runs == "ran\n", "the command ran \(runs.split(separator: "\n").count) times")
        await s3.stop()
        await redis.stop()
    }
}
