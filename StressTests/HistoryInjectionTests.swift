// The history checker fails the scenario for each defect `--inject` puts into the library (issue 32: a
// checker that never failed proves nothing): the built runner's history scenario (plain mode, 4 processes)
// with one guard turned off must report anomalies of that defect's class. With remote-remove-skip the
// workers get a Redis remote tier of the test's own (no faults). Until the fixes land the library has
// anomalies of its own; after them, these classes appear only with the injection.

import ChildProcesses
import Foundation
import Glibc
import Testing

@Suite(.serialized) struct HistoryInjectionTests {
    @Test(arguments: [
        ("publish-no-bump", "stale read"), ("publish-bump-after", "writes seen in opposite orders"),
        ("removal-no-bump", "removed value seen again"),
        ("memory-no-epochs", "removed value seen again"),
    ])
    func theCheckerFindsTheInjectedDefect(injection: String, expected: String) async throws {
        try await expectFound(injection, expected, extra: [])
    }

    @Test(.enabled(if: RedisProcess.executablePath != nil || RedisProcess.isRequired))
    func theCheckerFindsARemovalTheRemoteTierKept() async throws {
        let server = try await RedisProcess.start()
        defer { withExtendedLifetime(server) {} }  // SIGKILLed when it goes
        try await expectFound("remote-remove-skip", "removed value seen again", extra: ["--remote", server.url])
    }

    /// Without the write windows around remote stores, a store's remote copy that lands after a removal (or
    /// after a newer write) comes back at a later miss: a removed or superseded value seen again.
    @Test(.enabled(if: RedisProcess.executablePath != nil || RedisProcess.isRequired))
    func theCheckerFindsARemoteStoreThatOutlivedALocalWrite() async throws {
        let server = try await RedisProcess.start()
        defer { withExtendedLifetime(server) {} }  // SIGKILLed when it goes
        try await expectFound(
            "remote-window-skip", "removed value seen again",
            extra: ["--remote", server.url, "--history-operations", "1500"])
    }

    /// Runs the scenario with `injection` (up to three seeds: the defect shows in a race, which a busy
    /// machine may not run often enough in one short run) until it reports `expected` anomalies.
    private func expectFound(_ injection: String, _ expected: String, extra: [String]) async throws {
        var outputs: [String] = []
        for seed in [32, 33, 34] {
            let directory = NSTemporaryDirectory() + "history-inject-\(getpid())-\(injection)-\(seed)"
            defer { try? FileManager.default.removeItem(atPath: directory) }  // best effort: only disk space
            let run = try await RunnerProcess.run(
                [
                    "--scenario", "history", "--history-mode", "plain", "--processes", "4", "--seed", "\(seed)",
                    "--inject", injection, "--directory", directory,
                ] + extra, timeoutSeconds: 600)
            let summary = run.standardOutput.split(separator: "\n").first { $0.contains("history plain: ") }
            print("--inject \(injection), seed \(seed): \(summary.map(String.init) ?? "no summary")")
            #expect(run.standardOutput.contains("--inject \(injection)"), "the reproduce line lacks the injection")
            let found = summary.flatMap { line -> Int? in
                guard let range = line.range(of: expected + " ") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }
            if (found ?? 0) > 0 {
                #expect(run.status == 1, "anomalies, yet exit \(run.status):\n\(run.standardOutput)")
                return
            }
            outputs.append(run.standardOutput)
        }
        Issue.record("no \(expected) with --inject \(injection) in 3 runs:\n\(outputs.joined(separator: "\n"))")
    }
}
