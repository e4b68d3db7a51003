// `yashima run --remote redis+cluster://…` against a real Redis Cluster started by the test, with real
// processes: three storage directories (hosts) × four processes on twenty keys run each command once in
// total; with a master killed (no replica) every output is right and every call within the bound; with a
// replica, a failover during a run generates a key at most once per host, never a wrong output.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("CLI: --remote redis+cluster://", .redisServer, .serialized)
struct CLIRemoteClusterTests {
    /// The documented bound of one `yashima run` of a command taking `command` seconds (YCache.Remote:
    /// operation timeout T = 1 s, lease TTL L = 2 s): a wait for another host's lease ends within the
    /// holder's generation + L + T, then the lease is taken (≤ T), the command runs, the value is stored
    /// (≤ T; its release retried ≤ T more). Plus 2 s for starting the process on a loaded machine.
    private func bound(command: Double) -> Double { command + (command + 2 + 1) + 1 + 1 + 1 + 2 }

    /// A shell loop, one process of a host: for each key, `yashima run` a command that records which host
    /// ran it (`$HOST`, outside the key) and prints its key; each call's duration in ms into `times`.
    private func loop(
        _ fixture: CLIFixture, host: String, keys: ClosedRange<Int>, url: String, ledger: String, times: String,
        seconds: Double
    ) -> String {
        let command = "echo \"$0 $HOST\" >> \(ledger); sleep \(seconds); echo out-$0"
        return """
            for k in \(keys.map(String.init).joined(separator: " ")); do
              s=$(date +%s%N)
              out=$(HOST=\(host) \(yashimaExecutable.path) run --dir \(fixture.storage) --remote '\(url)' -- \
                sh -c '\(command)' "k$k") || echo "status $? for k$k" >> \(times).errors
              e=$(date +%s%N)
              [ "$out" = "out-k$k" ] || echo "wrong output for k$k: $out" >> \(times).errors
              echo $(( (e - s) / 1000000 )) >> \(times)
            done
            """
    }

    /// Runs `perHost` loops on each of `hosts` directories at once; returns the ledger's lines ("kN host").
    private func round(
        hosts: [CLIFixture], perHost: Int, keys: ClosedRange<Int>, url: String, scratch: CLIFixture,
        seconds: Double = 0.1, during: (() async throws -> Void)? = nil
    ) async throws -> (ledger: [String], times: [Double], errors: [String]) {
        let ledger = scratch.path("ledger-\(keys.lowerBound)")
        let times = scratch.path("times-\(keys.lowerBound)")
        var loops: [String] = []
        for (index, host) in hosts.enumerated() {
            for _ in 0..<perHost {
                loops.append(
                    "(\(loop(host, host: "h\(index)", keys: keys, url: url, ledger: ledger, times: times, seconds: seconds))) &"
                )
            }
        }
        async let finished = shell(loops.joined(separator: "\n") + "\nwait", timeout: 600)
        if let during { try await during() }
        let result = try await finished
        #expect(result.status == 0, "\(result.error)")
        let lines = { (path: String) in
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        return (lines(ledger), lines(times).compactMap { Double($0).map { $0 / 1000 } }, lines(times + ".errors"))
    }

    @Test func threeHostsTimesFourProcessesOnTwentyKeysRunEachCommandOnceThenAMasterDies() async throws {
        let cluster = try await RedisCluster.start()
        let url = "redis+cluster://" + cluster.nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        let hosts = [try CLIFixture(), try CLIFixture(), try CLIFixture()]
        let scratch = try CLIFixture()
        let first = try await round(hosts: hosts, perHost: 4, keys: 1...20, url: url, scratch: scratch)
        #expect(first.errors.isEmpty, "\(first.errors)")
        let counts = Dictionary(grouping: first.ledger, by: { $0.split(separator: " ")[0] }).mapValues(\.count)
        #expect(counts.count == 20 && counts.values.allSatisfy { $0 == 1 }, "ran: \(first.ledger)")
        #expect(first.times.count == 240)
        print(
            "cluster, 3 hosts × 4 processes × 20 keys: \(first.ledger.count) runs; slowest call \(first.times.max() ?? 0) s"
        )
        // One master killed, no replica: its slots are gone (then the whole cluster answers CLUSTERDOWN).
        await cluster.nodes[0].kill()
        let second = try await round(hosts: hosts, perHost: 4, keys: 21...40, url: url, scratch: scratch)
        #expect(second.errors.isEmpty, "\(second.errors)")
        let perHost = Dictionary(grouping: second.ledger, by: { $0 }).mapValues(\.count)
        #expect(perHost.values.allSatisfy { $0 == 1 }, "a key ran twice on one host: \(perHost)")
        let slowest = second.times.max() ?? 0
        print(
            "cluster with a master killed: \(second.ledger.count) runs of 20 keys on 3 hosts; slowest call \(slowest) s"
        )
        #expect(slowest < bound(command: 0.1), "a call took \(slowest) s")
        await cluster.stop()
    }

    /// A master SIGKILLed with a replica: during the failover (node timeout 1 s) a key is generated at most
    /// once per host and every output is right; every call within the bound; once the replica serves its
    /// slots, and the breaker's cooldown has passed, the cluster shares again (one run per new key).
    @Test func aMasterKilledWithAReplicaFailsOverWithoutAWrongOutput() async throws {
        let cluster = try await RedisCluster.start(replicas: true, nodeTimeout: 1000)
        let url = "redis+cluster://" + cluster.nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        let hosts = [try CLIFixture(), try CLIFixture(), try CLIFixture()]
        let scratch = try CLIFixture()
        let ledger = scratch.path("ledger-1")
        let during = try await round(hosts: hosts, perHost: 2, keys: 1...40, url: url, scratch: scratch) {
            // Kill the master once the run is under way (a quarter of the keys ran).
            _ = await eventually(within: 120) {
                ((try? String(contentsOfFile: ledger, encoding: .utf8))?.split(separator: "\n").count ?? 0) >= 10
            }
            await cluster.nodes[0].kill()
        }
        #expect(during.errors.isEmpty, "\(during.errors)")
        let perHost = Dictionary(grouping: during.ledger, by: { $0 }).mapValues(\.count)
        #expect(perHost.values.allSatisfy { $0 == 1 }, "a key ran twice on one host: \(perHost)")
        let perKey = Dictionary(grouping: during.ledger, by: { $0.split(separator: " ")[0] }).mapValues(\.count)
        #expect(perKey.count == 40)
        let slowest = during.times.max() ?? 0
        print(
            "failover during a run: \(during.ledger.count) runs of 40 keys on 3 hosts "
                + "(\(perKey.values.filter { $0 > 1 }.count) keys on more than one host); slowest call \(slowest) s")
        #expect(slowest < bound(command: 0.1), "a call took \(slowest) s")
        try await cluster.waitForFailover(of: 0, asking: 1)
        // Past the breaker's cooldown (5 s, shared by each host's processes), the cluster shares again.
        try await Task.sleep(for: .seconds(6))
        let after = try await round(hosts: hosts, perHost: 2, keys: 41...50, url: url, scratch: scratch)
        #expect(after.errors.isEmpty, "\(after.errors)")
        let afterKeys = Dictionary(grouping: after.ledger, by: { $0.split(separator: " ")[0] }).mapValues(\.count)
        #expect(afterKeys.count == 10 && afterKeys.values.allSatisfy { $0 == 1 }, "after the failover: \(after.ledger)")
        await cluster.stop()
    }
}
