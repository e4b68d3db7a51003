// What a scenario is (a worker side and an orchestrator side that judges), the list of scenarios, the
// plan file the orchestrator hands its workers, and `ScenarioRun`: one scenario's directories, phases,
// failures and the shared judging steps (ledger counts, re-reading the directory with a fresh YCache,
// the digests workers got in each round).

import Foundation
import Glibc
import YashimaShared

protocol Scenario {
    /// The name on the command line (`--scenario NAME`).
    static var name: String { get }
    /// One line for `--help`.
    static var summary: String { get }
    /// Orchestrator side: run the phases and judge. Runs on the main thread; blocking waits are fine.
    @MainActor static func run(_ run: ScenarioRun) async throws
    /// Worker side, in a worker process (`worker scenario --name NAME`).
    static func work(_ worker: WorkerContext) async throws
}

enum ScenarioCatalog {
    static var all: [any Scenario.Type] {
        [
            BurstScenario.self, ArtifactMixScenario.self, LifecycleScenario.self, QuotaScenario.self,
            ChaosScenario.self, CorruptionScenario.self, CancellationScenario.self, ExpiryScenario.self,
            RestartScenario.self, HostsScenario.self, WaitsScenario.self, HistoryScenario.self,
        ]
    }

    /// What a run without `--scenario` runs: every scenario, except history in a smoke run until
    /// `HistoryScenario.inSmokeByDefault`.
    static func defaults(for profile: Profile.Name) -> [any Scenario.Type] {
        guard profile == .smoke, !HistoryScenario.inSmokeByDefault else { return all }
        return all.filter { $0 != HistoryScenario.self }
    }

    /// Scenarios run only when named (`--scenario NAME`): they need more than a machine (root) or
    /// measure rather than hunt.
    static var optIn: [any Scenario.Type] { [NetnsScenario.self] }

    static func named(_ name: String) -> (any Scenario.Type)? {
        (all + optIn).first { $0.name == name }
    }
}

/// What the orchestrator tells a scenario's workers (written as JSON next to the cache directory).
struct ScenarioPlan: Codable, Sendable {
    var scenario: String
    var cacheDirectory: String
    var ledgerPath: String
    var logDirectory: String
    var seed: UInt64
    var workers: Int
    /// The storage budget workers open their caches with; nil for the library default.
    var budget: Int?
    /// Scenario-specific numbers (keys, rounds, sizes, durations).
    var settings: [String: Int] = [:]
    /// Whether every cache is group-shared (`--users`); nil or false: private.
    var groupShared: Bool?
    /// `--remote URL`: the remote tier every worker's cache has (nil: none), under a key prefix of this
    /// run's own so runs never see each other's values.
    var remote: String?
    var remoteKeyPrefix: String?

    /// The sharing mode of every cache in this scenario.
    var sharing: StorageSharingMode { groupShared == true ? .groupShared : .privateToUser }

    subscript(_ name: String) -> Int {
        guard let value = settings[name] else { preconditionFailure("plan has no setting '\(name)'") }
        return value
    }

    static func load(from path: String) throws -> ScenarioPlan {
        try JSONDecoder().decode(ScenarioPlan.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func save(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path))
    }
}

/// One scenario being run by the orchestrator: its directories, plan, phases and verdict.
@MainActor
final class ScenarioRun {
    let name: String
    let profile: Profile
    let seed: UInt64
    let workerCount: Int
    let directory: String
    let cacheDirectory: String
    let ledger: Ledger
    let expected: ExpectedValues
    let progress: ProgressLine
    private(set) var plan: ScenarioPlan
    private(set) var report: ScenarioReport
    private(set) var latency = LatencyHistogram()
    private var fleets: [Fleet] = []
    private let started = monotonicNanoseconds()
    /// What every worker of later phases is started inside (see `Fleet.launchPrefix`).
    var launchPrefix: ((_ index: Int) -> [String])?

    var planPath: String { directory + "/plan.json" }
    var logDirectory: String { directory + "/logs" }
    var cacheURL: URL { URL(fileURLWithPath: cacheDirectory) }

    init(
        name: String, profile: Profile, seed: UInt64, workers: Int, directory: String, progress: ProgressLine,
        remote: String? = nil
    ) throws {
        self.name = name
        self.profile = profile
        self.seed = seed
        self.workerCount = workers
        self.directory = directory
        self.progress = progress
        cacheDirectory = directory + "/cache"
        ledger = Ledger(path: directory + "/ledger")
        expected = ExpectedValues(seed: seed)
        plan = ScenarioPlan(
            scenario: name, cacheDirectory: cacheDirectory, ledgerPath: directory + "/ledger",
            logDirectory: directory + "/logs", seed: seed, workers: workers)
        plan.groupShared = SharedUsers.sharing == .groupShared
        if let remote {
            plan.remote = remote
            plan.remoteKeyPrefix = "ys-stress-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)"
        }
        report = ScenarioReport(name: name, seed: seed)
        try FileManager.default.createDirectory(atPath: directory + "/logs", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/scratch", withIntermediateDirectories: true)
        // With --users, every worker user appends to the ledger and writes its logs here.
        for path in [directory, directory + "/logs", directory + "/scratch"] { SharedUsers.share(path) }
        if SharedUsers.sharing == .groupShared {
            guard FileManager.default.createFile(atPath: directory + "/ledger", contents: nil) else {
                throw ArgumentError(description: "cannot create \(directory)/ledger")
            }
            SharedUsers.share(directory + "/ledger")
        }
    }

    // MARK: Plan

    /// Gives every worker of this scenario the remote tier at `url` (a scenario that starts its own
    /// server), under a key prefix of its own.
    func useRemote(_ url: String) {
        plan.remote = url
        plan.remoteKeyPrefix = "ys-stress-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)"
    }

    /// A setting chosen by profile, recorded in the plan so workers see the same number.
    @discardableResult
    func setting(_ name: String, smoke: Int, standard: Int) -> Int {
        let value = profile.isSmoke ? smoke : standard
        plan.settings[name] = value
        return value
    }

    @discardableResult
    func setting(_ name: String, _ value: Int) -> Int {
        plan.settings[name] = value
        return value
    }

    func setBudget(_ budget: Int?) {
        plan.budget = budget
    }

    // MARK: Phases

    /// A deadline for one phase's waits, from the profile.
    var deadline: UInt64 { monotonicNanoseconds() + UInt64(profile.phaseTimeoutSeconds * 1e9) }

    /// Starts `count` workers of `phase` (after writing the plan) and releases them together once all
    /// are READY. With `releaseLateWorkers`, workers started later (replacements) get GO as soon as they
    /// are READY; without it, every later READY waits for the next `release` (rounds).
    func startPhase(_ phase: String, workers count: Int, releaseLateWorkers: Bool = false) throws -> Fleet {
        try plan.save(to: planPath)
        let fleet = Fleet(scenario: name, planPath: planPath, logDirectory: logDirectory, progress: progress)
        fleet.launchPrefix = launchPrefix
        fleets.append(fleet)
        progress.phase(phase)
        for index in 0..<count { try fleet.spawn(phase: phase, index: index) }
        fleet.release(deadline: deadline)
        fleet.releasesLateWorkers = releaseLateWorkers
        return fleet
    }

    /// Waits for the phase's workers to finish and takes their results into the report.
    func finishPhase(
        _ fleet: Fleet, onLine: (WorkerProcess, String) -> Void = { _, _ in }, tick: () -> Void = {}
    ) {
        fleet.wait(deadline: deadline, onLine: onLine, tick: tick)
        absorb(fleet)
    }

    /// Runs a whole phase: start, release, wait, absorb. Returns the workers' results.
    @discardableResult
    func runPhase(_ phase: String, workers count: Int) throws -> [WorkerResult] {
        let fleet = try startPhase(phase, workers: count)
        finishPhase(fleet)
        return fleet.workers.compactMap(\.result)
    }

    /// Adds a finished fleet's workers to the report: results, hangs, crashes, wrong values, errors.
    func absorb(_ fleet: Fleet) {
        for worker in fleet.workers {
            report.workers += 1
            if worker.hung {
                report.hangs += 1
                fail(
                    "\(worker.label) did not finish within \(Int(profile.phaseTimeoutSeconds)) s and was SIGKILLed (a hang)"
                )
                continue
            }
            if worker.killedOnPurpose { continue }
            if let result = worker.result {
                report.add(result)
                latency.merge(result.latency)
                if result.wrongValues > 0 || result.errors > 0 {
                    let notes = result.notes.prefix(4).joined(separator: "; ")
                    fail("\(worker.label): \(result.wrongValues) wrong values, \(result.errors) errors: \(notes)")
                }
            }
            if worker.exit != .exited(0) {
                report.crashes += 1
                let tail = worker.stderrTail()
                fail(
                    "\(worker.label) ended with \(worker.exit.map { "\($0)" } ?? "no status")"
                        + (tail.isEmpty ? "" : ": \(tail)"))
            } else if worker.result == nil {
                report.crashes += 1
                fail("\(worker.label) exited without a result" + (worker.malformedResult.map { ": \($0)" } ?? ""))
            }
        }
    }

    /// Kills anything still running (after an orchestrator error).
    func shutdown() {
        for fleet in fleets { fleet.shutdown() }
    }

    // MARK: Verdict

    func fail(_ reason: String) {
        if report.failures.count < 40 { report.failures.append(reason) }
    }

    func note(_ text: String) {
        report.notes.append(text)
    }

    func expect(_ condition: Bool, _ reason: @autoclosure () -> String) {
        if !condition { fail(reason()) }
    }

    /// Wrong values the judge found itself (stale reads, stored cancelled results).
    func countWrongValues(_ count: Int) {
        report.wrongValues += count
    }

    func generations(expected: Int?, atLeast: Bool = false, seen: Int) {
        report.generationsExpected = expected
        report.generationsExpectedIsMinimum = atLeast
        report.generationsSeen = seen
    }

    func finish() -> ScenarioReport {
        report.seconds = Double(monotonicNanoseconds() - started) / 1e9
        report.latencyP50Nanoseconds = latency.percentile(50)
        report.latencyP99Nanoseconds = latency.percentile(99)
        report.latency = latency
        return report
    }

    // MARK: Judging helpers

    /// Ledger lines that start with `prefix`, split into words.
    func ledgerRecords(_ prefix: String) -> [[Substring]] {
        ledger.lines().compactMap { line in
            let words = line.split(separator: " ")
            return words.first.map(String.init) == prefix ? words : nil
        }
    }

    /// Generations per entry label, from the ledger's `gen <label> <pid> <phase>` lines.
    func generationCounts(phase: String? = nil) -> [String: Int] {
        var counts: [String: Int] = [:]
        for words in ledgerRecords("gen") where words.count >= 4 {
            if let phase, words[3] != phase { continue }
            counts[String(words[1]), default: 0] += 1
        }
        return counts
    }

    /// Every worker's event lines (see `WorkerContext.event`), split into words.
    func eventRecords() -> [[Substring]] {
        StorageProbe.names(in: logDirectory).filter { $0.hasSuffix(".events") }.sorted().flatMap { name in
            // A worker that left no readable log crashed or hung, which `absorb` already reported.
            ((try? String(contentsOfFile: logDirectory + "/" + name, encoding: .utf8)) ?? "")
                .split(separator: "\n").map { $0.split(separator: " ") }
        }
    }

    /// A cache for judging: no memory layer (every read comes from the directory), no budget (never trims).
    func judgeCache() -> YCache {
        YCache(storageDirectory: cacheURL, memoryMaximumCost: 0, storageMaximumByteCount: nil, sharing: plan.sharing)
    }

    struct StorageCheck {
        var listed = 0
        var correct = 0
        var labels: Set<String> = []
        var entryFiles = 0
        var problems: [String] = []
    }

    /// Re-reads the directory with a fresh cache: lists entries (of `namespace`, or all), reads every one
    /// back cache-only and checks it against `Payload`. Entry files that do not list (invalid headers)
    /// are problems unless `expiring` (expired entries are not listed).
    func verifyStorage(namespace: String? = nil, expiring: Bool = false) async -> StorageCheck {
        var check = StorageCheck()
        let cache = judgeCache()
        var options = YCache.Options()
        options.readFailurePolicy = .throwError
        let entries: [StoredEntryInfo]
        do {
            entries = try await cache.entries(in: namespace)
        } catch {
            check.problems.append("listing entries failed: \(error)")
            return check
        }
        check.listed = entries.count
        check.entryFiles = StorageProbe.entryFiles(cacheDirectory).count
        for entry in entries {
            guard let spec = StressKey.spec(of: entry.key) else {
                check.problems.append("an entry with a foreign key: \(entry.key)")
                continue
            }
            let label = StressKey.label(entry.key)
            check.labels.insert(label)
            if entry.metadata.codecIdentifier != StressKey.codecIdentifier(spec.kind) {
                check.problems.append("\(label) is stored with codec \(entry.metadata.codecIdentifier)")
            }
            do {
                if let fetched = try await expected.cached(cache, entry.key, options: options) {
                    if fetched.correct {
                        check.correct += 1
                    } else {
                        check.problems.append("\(label): the stored value is wrong")
                    }
                } else if !(expiring && (entry.metadata.expiresAt.map { $0 <= Date() } ?? false)) {
                    check.problems.append("\(label) is listed but reads as a miss")
                }
            } catch {
                check.problems.append("\(label) is listed but unreadable: \(error)")
            }
        }
        if namespace == nil && !expiring && check.entryFiles != check.listed {
            check.problems.append("\(check.entryFiles - check.listed) entry files do not validate (torn or corrupt)")
        }
        return check
    }

    /// Fails the scenario with a storage check's problems.
    func require(_ check: StorageCheck, _ what: String) {
        for problem in check.problems.prefix(6) { fail("\(what): \(problem)") }
        if check.problems.count > 6 { fail("\(what): \(check.problems.count - 6) more problems") }
    }

    /// The verdict on what the workers of `fleet` received in a round-based scenario (burst, hosts): each
    /// worker listed one digest per key of every round (`digests`: `<round>/<index>=<hex>`), and every key's
    /// workers all got the one value `key(round, index)` must have.
    func expectRightDigests(of fleet: Fleet, rounds: Int, keys: Int, key: (_ round: Int, _ index: Int) -> CacheKey) {
        var digestsByKey: [String: Set<String>] = [:]
        for result in fleet.workers.compactMap(\.result) {
            let digests = result.lists["digests"] ?? []
            expect(digests.count == rounds * keys, "a worker reported \(digests.count) of \(rounds * keys) keys")
            for entry in digests {
                let parts = entry.split(separator: "=")
                if parts.count == 2 { digestsByKey[String(parts[0]), default: []].insert(String(parts[1])) }
            }
        }
        for round in 0..<rounds {
            for index in 0..<keys {
                let key = key(round, index)
                let right = Digest.hex(expected.digest(key) ?? 0)
                let got = digestsByKey["\(round)/\(index)"] ?? []
                expect(got == [right], "\(StressKey.label(key)): workers got \(got.count) different values")
            }
        }
    }
}

/// "1 staging file", "3 staging files".
func counted(_ count: Int, _ noun: String) -> String {
    "\(count) \(noun)\(count == 1 ? "" : "s")"
}

/// Formats a byte count for notes.
func describeBytes(_ bytes: Int64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
    if bytes >= 1 << 10 { return String(format: "%.1f KiB", Double(bytes) / 1024) }
    return "\(bytes) B"
}

/// A shuffled copy of `items` (Fisher–Yates with a seeded generator).
func shuffled<T>(_ items: [T], _ generator: inout SplitMix64) -> [T] {
    var copy = items
    if copy.count > 1 {
        for index in stride(from: copy.count - 1, to: 0, by: -1) {
            let other = Int(generator.next() % UInt64(index + 1))
            copy.swapAt(index, other)
        }
    }
    return copy
}

extension SplitMix64 {
    /// A number in `0..<bound`.
    mutating func below(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(next() % UInt64(bound)) }
    /// True with probability `percent`/100.
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}
