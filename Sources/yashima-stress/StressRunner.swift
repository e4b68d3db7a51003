// The stress runner's orchestrator: the command line, the profiles, running the selected scenarios (each
// in its own subdirectory, each spawning worker processes of this executable), the progress line, and
// printing the report. Runs on the main thread; it blocks only there (poll on worker pipes), never on
// the cooperative pool. Exit status: 0 every scenario passed, 1 a scenario failed, 2 bad arguments.

import Foundation
import Glibc
import YashimaShared

/// How hard and how long to push.
struct Profile: Sendable {
    enum Name: String, CaseIterable, Sendable {
        case smoke, standard, soak
    }

    let name: Name

    /// smoke: small and quick (CI, debug builds); standard and soak: more workers and keys.
    var isSmoke: Bool { name == .smoke }
    var defaultWorkers: Int { isSmoke ? 4 : 8 }
    /// The longest any phase may take before its workers count as hung. Generous: debug builds are
    /// several times slower, and a correct run finishes far sooner.
    var phaseTimeoutSeconds: Double {
        switch name {
        case .smoke: return 90
        case .standard: return 180
        case .soak: return 300
        }
    }
}

/// The parsed command line.
struct RunOptions {
    var profile = Profile(name: .smoke)
    var processes = 4
    var seed: UInt64 = 1
    var seedGiven = false
    var directory: String?
    var keepArtifacts = false
    var json = false
    var scenarios: [any Scenario.Type] = ScenarioCatalog.all
    var scenariosSelected = false
    var soakSeconds = 600.0
    var durationText: String?
    /// `--users` and `--group`: workers run as these users of one group, caches are group-shared.
    var sharedUsers: (users: [uid_t], group: gid_t)?
    /// `--remote URL`: every worker's cache gets this remote tier (Redis or HTTP).
    var remote: String?
    /// `--inject NAME`: the library guard the workers turn off (`YASHIMA_INJECT`), for the history
    /// checker's proofs.
    var inject: String?
    /// `--history-mode M,...`: the history scenario's modes (nil: the profile's).
    var historyModes: [HistoryMode]?
    /// `--history-operations N`: calls per worker process in each history mode (nil: the profile's).
    var historyOperations: Int?

    /// The names `--inject` accepts (Sources/YashimaShared/Core/Injection.swift).
    static let injections = [
        "publish-no-bump", "publish-bump-after", "removal-no-bump", "memory-no-epochs", "remote-remove-skip",
        "remote-window-skip",
    ]

    static func parse(_ words: [String]) throws -> RunOptions {
        var arguments = try Arguments(words, flagNames: ["keep-artifacts", "help"])
        var options = RunOptions()
        if let profileName = arguments.string("profile") {
            guard let name = Profile.Name(rawValue: profileName) else {
                throw ArgumentError(description: "--profile must be smoke, standard or soak, not '\(profileName)'")
            }
            options.profile = Profile(name: name)
        }
        options.processes = try arguments.int("processes", default: options.profile.defaultWorkers, range: 1...64)!
        if let seed = try arguments.uint64("seed") {
            options.seed = seed
            options.seedGiven = true
        } else {
            options.seed = UInt64.random(in: 1...999_999)
        }
        options.directory = arguments.string("directory")
        options.keepArtifacts = arguments.flag("keep-artifacts")
        switch arguments.string("format") ?? "text" {
        case "text": options.json = false
        case "json": options.json = true
        case let other: throw ArgumentError(description: "--format must be text or json, not '\(other)'")
        }
        if let duration = arguments.string("duration") {
            guard options.profile.name == .soak else {
                throw ArgumentError(description: "--duration applies only to --profile soak")
            }
            options.soakSeconds = try parseDuration(duration)
            options.durationText = duration
        }
        var names = arguments.strings("scenario").flatMap { $0.split(separator: ",").map(String.init) }
        if !arguments.positional.isEmpty {
            guard !names.isEmpty else {
                throw ArgumentError(description: "unexpected argument '\(arguments.positional[0])' (see --help)")
            }
            names += arguments.positional  // `--scenario burst quota`
        }
        if let remote = arguments.string("remote") {
            _ = try WorkerSetup.makeRemote(remote, options: YCache.Remote.Options())  // refused here, not in workers
            options.remote = remote
        }
        if let inject = arguments.string("inject") {
            guard injections.contains(inject) else {
                throw ArgumentError(
                    description: "--inject must be one of \(injections.joined(separator: ", ")), not '\(inject)'")
            }
            options.inject = inject
        }
        options.historyOperations = try arguments.int("history-operations", range: 2...10_000_000)
        let modeNames = arguments.strings("history-mode").flatMap { $0.split(separator: ",").map(String.init) }
        if !modeNames.isEmpty {
            options.historyModes = try modeNames.map { name in
                guard let mode = HistoryMode(rawValue: name) else {
                    let known = HistoryMode.allCases.map(\.rawValue).joined(separator: ", ")
                    throw ArgumentError(description: "--history-mode must be one of \(known), not '\(name)'")
                }
                return mode
            }
        }
        let users = arguments.string("users")
        let group = arguments.string("group")
        _ = arguments.flag("help")
        try arguments.rejectUnknown()
        options.sharedUsers = try SharedUsers.parse(users: users, group: group)
        if !names.isEmpty {
            var selected: [any Scenario.Type] = []
            for name in names {
                guard let scenario = ScenarioCatalog.named(name) else {
                    let known = (ScenarioCatalog.all + ScenarioCatalog.optIn).map { $0.name }.joined(separator: ", ")
                    throw ArgumentError(description: "unknown scenario '\(name)' (scenarios: \(known))")
                }
                if !selected.contains(where: { $0 == scenario }) { selected.append(scenario) }
            }
            options.scenarios = selected
            options.scenariosSelected = true
        } else {
            options.scenarios = ScenarioCatalog.defaults(for: options.profile.name)
        }
        return options
    }

    /// `90`, `90s`, `15m`, `2h`.
    static func parseDuration(_ text: String) throws -> Double {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600]
        var number = Substring(text)
        var scale = 1.0
        if let last = text.last, let unit = units[last] {
            number = text.dropLast()
            scale = unit
        }
        guard let value = Double(number), value > 0, value.isFinite else {
            throw ArgumentError(description: "--duration must be a positive time like 90s, 15m or 2h, not '\(text)'")
        }
        return value * scale
    }

    var reproduceCommand: String {
        var words = [
            "yashima-stress", "--profile", profile.name.rawValue, "--processes", "\(processes)", "--seed", "\(seed)",
        ]
        if let durationText { words += ["--duration", durationText] }
        if let remote { words += ["--remote", remote] }
        if let inject { words += ["--inject", inject] }
        if let historyModes { words += ["--history-mode", historyModes.map(\.rawValue).joined(separator: ",")] }
        if let historyOperations { words += ["--history-operations", "\(historyOperations)"] }
        if scenariosSelected { words += ["--scenario", scenarios.map { $0.name }.joined(separator: ",")] }
        if let sharedUsers {
            words += [
                "--users", sharedUsers.users.map(String.init).joined(separator: ","), "--group", "\(sharedUsers.group)",
            ]
        }
        return words.joined(separator: " ")
    }
}

@MainActor
enum StressRunner {
    static func run(_ words: [String]) async throws -> Int32 {
        if words.contains("--help") || words.contains("-h") {
            print(helpText)
            return 0
        }
        let options = try RunOptions.parse(words)
        signal(SIGPIPE, SIG_IGN)  // a worker that died must not take the orchestrator with it
        Fleet.environment = options.inject.map { ["YASHIMA_INJECT": $0] }
        HistoryScenario.selectedModes = options.historyModes
        HistoryScenario.operationsPerProcess = options.historyOperations

        let createdRoot = options.directory == nil
        let root = options.directory ?? (NSTemporaryDirectory() + "yashima-stress-\(getpid())")
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw ArgumentError(description: "cannot use --directory \(root): \(error.localizedDescription)")
        }
        if let sharedUsers = options.sharedUsers {
            try SharedUsers.begin(
                users: sharedUsers.users, group: sharedUsers.group, root: root, executable: Fleet.executable)
        }
        let progress = ProgressLine(json: options.json)
        var reports: [ScenarioReport] = []
        let started = monotonicNanoseconds()
        var round = 0
        repeat {
            round += 1
            let seed = options.seed &+ UInt64(round - 1)
            for (position, scenario) in options.scenarios.enumerated() {
                let directory =
                    options.profile.name == .soak
                    ? "\(root)/round-\(round)/\(scenario.name)" : "\(root)/\(scenario.name)"
                try prepare(directory)
                progress.begin(scenario.name, position: position + 1, of: options.scenarios.count, round: round)
                var report: ScenarioReport
                do {
                    let run = try ScenarioRun(
                        name: scenario.name, profile: options.profile, seed: seed, workers: options.processes,
                        directory: directory, progress: progress, remote: options.remote)
                    do {
                        try await scenario.run(run)
                    } catch {
                        run.fail("the orchestrator stopped: \(error)")
                    }
                    run.shutdown()
                    report = run.finish()
                } catch {
                    report = ScenarioReport(name: scenario.name, seed: seed)
                    report.failures.append("could not set up \(directory): \(error)")
                }
                progress.end(report)
                // best effort: only disk space
                if report.passed && !options.keepArtifacts { try? FileManager.default.removeItem(atPath: directory) }
                if options.profile.name == .soak && !report.passed {
                    report.failures = report.failures.map { "round \(round) (seed \(seed)): \($0)" }
                }
                if round == 1 {
                    reports.append(report)
                } else {
                    reports[position].merge(round: report, number: round)
                }
            }
        } while options.profile.name == .soak && Double(monotonicNanoseconds() - started) / 1e9 < options.soakSeconds

        let allPassed = reports.allSatisfy(\.passed)
        let keep = options.keepArtifacts || !allPassed
        if !keep {
            if createdRoot {
                try? FileManager.default.removeItem(atPath: root)  // best effort: only disk space
            } else if options.profile.name == .soak {
                for number in 1...round { try? FileManager.default.removeItem(atPath: "\(root)/round-\(number)") }
            }
        }
        var report = StressReport(
            profile: options.profile.name.rawValue, processes: options.processes, seed: options.seed, directory: root,
            keptArtifacts: keep, reproduce: options.reproduceCommand)
        report.seconds = Double(monotonicNanoseconds() - started) / 1e9
        report.scenarios = reports
        if options.profile.name == .soak {
            report.profile += " (\(round) rounds, seeds \(options.seed)…\(options.seed &+ UInt64(round - 1)))"
        }
        print(options.json ? try report.json() : report.text())
        fflush(nil)
        return allPassed ? 0 : 1
    }

    /// Makes `directory` empty: removes an old run's scenario directory, refuses anything else.
    private static func prepare(_ directory: String) throws {
        let manager = FileManager.default
        if manager.fileExists(atPath: directory) {
            // unreadable: not empty
            let isEmpty = (try? manager.contentsOfDirectory(atPath: directory))?.isEmpty == true
            guard manager.fileExists(atPath: directory + "/plan.json") || isEmpty else {
                throw ArgumentError(
                    description: "\(directory) exists and was not made by yashima-stress; choose another --directory")
            }
            try manager.removeItem(atPath: directory)
        }
        try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    static var helpText: String {
        let scenarios = ScenarioCatalog.all.map {
            "  \($0.name.padding(toLength: 14, withPad: " ", startingAt: 0)) \($0.summary)"
        }
        let optIn = ScenarioCatalog.optIn.map {
            "  \($0.name.padding(toLength: 14, withPad: " ", startingAt: 0)) \($0.summary)"
        }
        return """
            yashima-stress: a multi-process stress runner for YashimaShared. It hunts for wrong values, lost
            entries and hangs: worker processes of this executable share one storage directory per scenario,
            every value any worker receives is checked against the deterministic payload for its key, and each
            scenario is judged from an append-only generation ledger and a re-scan of the directory. Judged on
            correctness only; latencies are reported, never judged.

            usage: yashima-stress [--profile smoke|standard|soak] [--processes N] [--seed S] [--directory D]
                                  [--keep-artifacts] [--format text|json] [--scenario NAME ...] [--duration T]
                                  [--remote URL] [--history-mode M,...] [--history-operations N] [--inject NAME]

              --profile P        smoke (default; 4 workers, about half a minute), standard (8 workers, more
                                 keys, a few minutes), soak (standard rounds repeated for --duration)
              --processes N      worker processes per scenario phase (1...64; default 4, or 8 for standard/soak)
              --seed S           payload and schedule seed (default: random; the report prints it)
              --directory D      where the scenario directories go (default: a new folder in $TMPDIR)
              --keep-artifacts   keep the directories, ledgers, plans and worker logs (kept anyway on failure)
              --users U,U --group G
                                 as root: run the workers as these users of group G, taking turns, each with
                                 umask 022, and open every cache group-shared (--directory must be reachable
                                 by them, e.g. under /tmp)
              --format F         text (default; its last line is "N passed, N failed") or json
              --scenario NAME    run only these scenarios (repeat, comma-separate, or list names after it)
              --remote URL       give every worker's cache this remote tier (redis://…, redis+unix://…,
                                 http://…), under a key prefix of the run's own; judged as without it
              --duration T       soak only: how long to keep running rounds, e.g. 90s, 15m, 2h (default 10m)
              --history-mode M   the history scenario's modes (comma-separate): plain, expiry, trim, chaos,
                                 remote (default: plain,chaos,trim for smoke, all five otherwise)
              --history-operations N
                                 the history scenario's calls per worker process and mode (default: 200
                                 for smoke, 1500 otherwise)
              --inject NAME      turn one library guard off in the workers (YASHIMA_INJECT), to prove the
                                 history checker finds its defect: publish-no-bump, publish-bump-after,
                                 removal-no-bump, memory-no-epochs, remote-remove-skip, remote-window-skip
              --help             this text

            scenarios:
            \(scenarios.joined(separator: "\n"))

            run only when named (--scenario NAME):
            \(optIn.joined(separator: "\n"))

            history is left out of a smoke run unless named (until issue 32's fixes land).

            exit status: 0 every scenario passed, 1 a scenario failed, 2 bad arguments.
            (`yashima-stress worker ...` is the hidden worker entry; `yashima-stress bench` runs the benchmarks.)
            """
    }
}

/// One progress line: redrawn in place on a terminal, plain lines otherwise. Goes to stdout for the text
/// report and to stderr for JSON (so stdout stays one JSON document).
@MainActor
final class ProgressLine {
    private let descriptor: Int32
    private let terminal: Bool
    private var scenario = ""
    private var position = 0
    private var total = 0
    private var round = 1
    private var phaseName = ""
    private var phaseStartOperations = 0
    private var operations = 0
    private var lastPhaseOperations = 0
    private var processes = 0
    private var started: UInt64 = 0
    private var lastDraw: UInt64 = 0

    init(json: Bool) {
        descriptor = json ? 2 : 1
        terminal = isatty(descriptor) == 1
    }

    func begin(_ scenario: String, position: Int, of total: Int, round: Int) {
        self.scenario = scenario
        self.position = position
        self.total = total
        self.round = round
        phaseName = ""
        phaseStartOperations = 0
        lastPhaseOperations = 0
        operations = 0
        processes = 0
        started = monotonicNanoseconds()
        if terminal { draw() } else { write("\(prefix) \(scenario): started") }
    }

    func phase(_ name: String) {
        phaseStartOperations += lastPhaseOperations
        lastPhaseOperations = 0
        phaseName = name
        if terminal { draw() } else { write("\(prefix) \(scenario): phase \(name)") }
    }

    func update(operations phaseOperations: Int, processes: Int) {
        lastPhaseOperations = phaseOperations
        operations = phaseStartOperations + phaseOperations
        self.processes = processes
        guard terminal else { return }
        let now = monotonicNanoseconds()
        if now - lastDraw >= 100_000_000 { draw() }
    }

    func end(_ report: ScenarioReport) {
        let verdict = report.passed ? "passed" : "FAILED"
        let line =
            "\(prefix) \(scenario): \(verdict), \(report.operations) ops, " + String(format: "%.1f s", report.seconds)
        if terminal {
            writeRaw("\r\u{1B}[2K" + line + "\n")
        } else {
            write(line)
        }
    }

    private var prefix: String { round > 1 ? "[round \(round) \(position)/\(total)]" : "[\(position)/\(total)]" }

    private func draw() {
        lastDraw = monotonicNanoseconds()
        let elapsed = Double(lastDraw - started) / 1e9
        let phase = phaseName.isEmpty ? "" : " · \(phaseName)"
        let line =
            "\(prefix) \(scenario)\(phase) · \(processes) processes · \(operations) ops · "
            + String(format: "%.1f s", elapsed)
        writeRaw("\r\u{1B}[2K" + line)
    }

    private func write(_ line: String) { writeRaw(line + "\n") }

    private func writeRaw(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress!, $0.count) }
    }
}
