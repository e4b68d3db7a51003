// The StressTests target: runs the stress runner's smoke profile (every scenario) by spawning the built
// `yashima-stress` next to this test bundle, and fails with the runner's full report when a scenario
// fails. Also checks that bad arguments exit with status 2, and runs the opt-in netns scenario (its skip
// without `ip`; as root, its run at 0 and 10 ms). The standard profile is opt-in (YASHIMA_STRESS_STANDARD=1):
// it takes minutes.

import ChildProcesses
import Foundation
import Glibc
import Testing

@testable import yashima_stress

@Suite(.serialized) struct StressRunnerTests {
    @Test func smokeProfilePasses() async throws {
        try await expectPasses(profile: "smoke", timeoutSeconds: 900)
    }

    /// The scenarios whose workers race on the same keys, with workers of two users of one group
    /// (group-shared caches). Needs root, as CI runs: it caught lock files another user could not open.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func twoUsersPassTheRacingScenarios() async throws {
        var template = Array("/tmp/stress-users-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        try #require(created)
        let directory = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try await RunnerProcess.run(
            [
                "--scenario", "burst,lifecycle,chaos,restart", "--users", "40001,40002", "--group", "40000",
                "--directory", directory,
            ], timeoutSeconds: 600)
        let lastLine = run.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        #expect(
            run.status == 0 && lastLine == "4 passed, 0 failed",
            "two-user run failed (exit \(run.status)):\n\(run.standardOutput)\n\(run.standardError)")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["YASHIMA_STRESS_STANDARD"] == "1"))
    func standardProfilePasses() async throws {
        try await expectPasses(profile: "standard", timeoutSeconds: 1_800)
    }

    @Test func badArgumentsExitWithStatusTwo() async throws {
        let cases: [[String]] = [
            ["--profile", "huge"], ["--processes", "0"], ["--processes", "many"], ["--scenario", "no-such-scenario"],
            ["--format", "xml"], ["--unknown-option"], ["--duration", "10m"],
            ["--profile", "soak", "--duration", "-3"],
            ["stray-word"], ["--seed"], ["--users", "40001"], ["--users", "0", "--group", "40000"],
            ["--users", "a,b", "--group", "40000"], ["--inject", "no-such-guard"], ["--history-mode", "calm"],
        ]
        for arguments in cases {
            let run = try await RunnerProcess.run(arguments, timeoutSeconds: 60)
            #expect(run.status == 2, "\(arguments) exited with \(run.status): \(run.standardError)")
            let lines = run.standardError.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("yashima-stress: "), "\(arguments): \(run.standardError)")
            #expect(run.standardOutput.isEmpty, "\(arguments) printed: \(run.standardOutput)")
        }
    }

    @Test func helpDocumentsEveryScenario() async throws {
        let run = try await RunnerProcess.run(["--help"], timeoutSeconds: 60)
        #expect(run.status == 0)
        for name in [
            "burst", "artifact-mix", "lifecycle", "quota", "chaos", "corruption", "cancellation", "expiry", "restart",
            "hosts", "waits", "history", "netns",
        ] {
            #expect(run.standardOutput.contains("  \(name) "), "--help does not list \(name)")
        }
    }

    /// Where network namespaces cannot be made (here: no `ip`), the opt-in netns scenario passes with the
    /// reason it skipped.
    @Test func netnsScenarioSkipsWithTheReason() async throws {
        let run = try await RunnerProcess.run(
            ["--scenario", "netns"], timeoutSeconds: 120,
            environment: ["YASHIMA_IP": "/nonexistent/ip", "YASHIMA_REQUIRE_NETNS": "0"])
        let reason = getuid() == 0 ? "skipped: ip (iproute2) not found" : "skipped: not root"
        #expect(run.status == 0 && run.standardOutput.contains(reason), "\(run.standardOutput)\n\(run.standardError)")
    }

    /// As root (CI): hosts in network namespaces, Redis behind the delay proxy at 0 and 10 ms each way;
    /// each key generated once across hosts. Prints the scenario's table of round trips.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server")))
    func netnsScenarioPasses() async throws {
        let run = try await RunnerProcess.run(["--scenario", "netns"], timeoutSeconds: 600)
        let lastLine = run.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        #expect(
            run.status == 0 && lastLine == "1 passed, 0 failed",
            "netns scenario failed (exit \(run.status)):\n\(run.standardOutput)\n\(run.standardError)")
        #expect(run.standardOutput.contains("10 ms | "), "no figures at 10 ms:\n\(run.standardOutput)")
        print(run.standardOutput.split(separator: "\n").filter { $0.contains(" ms | ") }.joined(separator: "\n"))
    }

    private func expectPasses(profile: String, timeoutSeconds: Double) async throws {
        let directory = NSTemporaryDirectory() + "stress-tests-\(getpid())-\(profile)"
        let run = try await RunnerProcess.run(
            ["--profile", profile, "--directory", directory], timeoutSeconds: timeoutSeconds)
        let lastLine = run.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        // Every scenario of the profile (history joins the smoke run once issue 32's fixes land).
        let count = ScenarioCatalog.defaults(for: Profile.Name(rawValue: profile)!).count
        let passed = run.status == 0 && lastLine == "\(count) passed, 0 failed"
        #expect(
            passed,
            "yashima-stress --profile \(profile) failed (exit \(run.status)):\n\(run.standardOutput)\n\(run.standardError)"
        )
        if passed { try? FileManager.default.removeItem(atPath: directory) }  // best effort: only disk space
    }
}

/// One run of the built `yashima-stress` (a child of the shared ChildProcesses helper): stdout read to its
/// end and stderr captured in a file, waited for without blocking a thread of the cooperative pool.
struct RunnerProcess {
    let status: Int32
    let standardOutput: String
    let standardError: String

    /// The directory holding this test bundle and the package's built executables.
    static var productsDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// Runs the stress runner with `arguments`; past `timeoutSeconds` it is killed (its workers exit when
    /// their stdin closes). The status is the exit status, or minus the signal that ended it.
    static func run(_ arguments: [String], timeoutSeconds: Double, environment: [String: String]? = nil) async throws
        -> RunnerProcess
    {
        let errorPath = NSTemporaryDirectory() + "stress-runner-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).err"
        defer { unlink(errorPath) }
        let runner = try ChildProcess(
            productsDirectory.appendingPathComponent("yashima-stress").path, arguments, environment: environment,
            standardError: .file(errorPath))
        runner.closeInput()
        let output = await runner.output(timeout: timeoutSeconds)  // until it exits (or the bound)
        _ = await runner.exitStatus(timeout: 30)
        // Unreadable output reads as empty, which fails the checks with the exit status shown.
        let error = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
        let status: Int32
        switch runner.exit {
        case .exited(let code): status = code
        case .signaled(let signal): status = -signal
        case nil: status = -SIGKILL
        }
        return RunnerProcess(
            status: status, standardOutput: String(decoding: output, as: UTF8.self), standardError: error)
    }
}
