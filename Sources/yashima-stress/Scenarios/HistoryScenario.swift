// Scenario 12, history (issue 32): workers race on a few hot keys with every public call that reads or
// writes them, each write a unique version inside its bytes, each call logged on CLOCK_MONOTONIC (History/);
// one phase per mode (plain, expiry, trim, chaos: workers SIGKILLed at random and replaced, remote: Redis
// SIGSTOPped and restarted). Judged by the history checker: each key must be a linearizable register and
// every process must hold the same value once writers stop. Any anomaly fails the scenario.

import ChildProcesses
import Foundation
import Glibc
import Synchronization
import YashimaShared

enum HistoryScenario: Scenario {
    static let name = "history"
    static let summary = "hot keys, every call logged: each key linearizable, all processes agree (issue 32)"

    /// Whether a smoke run without `--scenario` includes this scenario (its plain, chaos and trim modes, a
    /// few seconds); standard and soak run every mode, and `--scenario history` runs it in any profile.
    static let inSmokeByDefault = true

    /// `--history-mode`: the modes to run (nil: the profile's).
    @MainActor static var selectedModes: [HistoryMode]?
    /// `--history-operations`: calls per worker process and mode (nil: the profile's).
    @MainActor static var operationsPerProcess: Int?

    static func modes(for profile: Profile) -> [HistoryMode] {
        profile.isSmoke ? [.plain, .chaos, .trim] : HistoryMode.allCases
    }

    static func work(_ worker: WorkerContext) async throws {
        try await HistoryWorker.work(worker)
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        run.setting("keys", 4)
        run.setting("lanes", 2)
        let lanes = run.plan["lanes"]
        run.setting("operations", (operationsPerProcess ?? (run.profile.isSmoke ? 200 : 1_500)) / lanes)  // per lane
        run.setting("trimBudget", 40 << 10)  // values of 6–30 KB on 4 keys: trims all the time
        // A user's own --remote is every mode's remote tier; the remote mode then adds no faults.
        let givenRemote = run.plan.remote != nil
        // In the order of `HistoryMode.allCases`: the remote mode last, since its tier stays in the plan.
        var modes = HistoryMode.allCases.filter((selectedModes ?? Self.modes(for: run.profile)).contains)
        if givenRemote { modes.removeAll { $0 == .remote } }
        var total = 0
        for mode in modes {
            run.setting("mode", HistoryMode.allCases.firstIndex(of: mode)!)
            var server: RedisProcess?  // SIGKILLed when it goes (its deinit)
            // Each phase under a remote key prefix of its own: its workers' versions start over, and a value
            // an earlier phase left in a shared remote tier would read as one never written.
            if givenRemote, let url = run.plan.remote { run.useRemote(url) }
            if mode == .remote {
                guard RedisProcess.executablePath != nil, let started = try? await RedisProcess.start(socketMode: "777")
                else {
                    if RedisProcess.isRequired {
                        run.fail("redis-server required (YASHIMA_REQUIRE_REDIS=1) but not started")
                    }
                    run.note("history remote: skipped (no redis-server)")
                    continue
                }
                server = started
                run.useRemote(started.url)
                run.setting("remoteTimeoutMs", 200)
                run.setting("remoteCooldownMs", 100)
                run.setting("remoteLeaseMs", 1_000)
            }
            let driver = HistoryPhase(run: run, mode: mode, server: server)
            try await driver.drive()
            if let server { await server.stop() }
            total += driver.judge()
        }
        run.note("history: \(total) anomalies in all")
    }
}

/// One mode's phase: its workers, the chaos it adds, the final barrier, and the verdict.
@MainActor
final class HistoryPhase {
    let run: ScenarioRun
    let mode: HistoryMode
    let server: RedisProcess?
    private var random: SplitMix64
    private var done: Set<pid_t> = []
    private var finalSent = false
    private var kills = 0
    private var nextKill: UInt64 = 0
    private var nextIndex = 0
    private var faults = 0
    private var restarts = 0
    private var stoppedUntil: UInt64?
    private var nextFault: UInt64 = 0
    private var restart: Task<Void, Never>?
    private var phaseName: String { mode.rawValue }

    init(run: ScenarioRun, mode: HistoryMode, server: RedisProcess?) {
        self.run = run
        self.mode = mode
        self.server = server
        random = SplitMix64(seed: run.seed ^ 0x4157_0000 ^ UInt64(HistoryMode.allCases.firstIndex(of: mode)!))
    }

    private var killQuota: Int { mode == .chaos ? (run.profile.isSmoke ? 4 : 12) : 0 }

    func drive() async throws {
        let fleet = try run.startPhase(phaseName, workers: run.workerCount, releaseLateWorkers: true)
        nextIndex = run.workerCount
        let now = monotonicNanoseconds()
        nextKill = now + UInt64(50 + random.below(200)) * 1_000_000
        nextFault = now + UInt64(200 + random.below(300)) * 1_000_000
        run.finishPhase(
            fleet,
            onLine: { worker, line in
                if line == "OPS-DONE" { self.done.insert(worker.pid) }
            },
            tick: { self.tick(fleet) })
        await restart?.value
        server?.resume()
        for result in fleet.workers.compactMap(\.result) {
            for (name, count) in result.counters { fleetCounters[name, default: 0] += count }
        }
        if mode == .trim {
            let judge = YCache(
                storageDirectory: URL(fileURLWithPath: run.cacheDirectory + "-trim"), memoryMaximumCost: 0,
                storageMaximumByteCount: nil, sharing: run.plan.sharing)
            if let usage = try? await judge.storageUsage() {
                storageUsage =
                    "storage at the end \(describeBytes(Int64(usage.byteCount))) of a \(describeBytes(Int64(run.plan["trimBudget"]))) budget"
            }
        }
    }

    private var fleetCounters: [String: Int] = [:]
    private var storageUsage: String?

    private func tick(_ fleet: Fleet) {
        let now = monotonicNanoseconds()
        let running = fleet.running
        if !finalSent, !running.isEmpty, running.allSatisfy({ done.contains($0.pid) }) {
            if stoppedUntil != nil { server?.resume() }
            stoppedUntil = nil
            finalSent = true
            fleet.broadcast("FINAL")
            return
        }
        guard !finalSent else { return }
        if kills < killQuota, now >= nextKill {
            let candidates = running.filter { !done.contains($0.pid) }
            if !candidates.isEmpty {
                fleet.kill(candidates[random.below(candidates.count)])
                kills += 1
                do {
                    try fleet.spawn(phase: phaseName, index: nextIndex)
                    nextIndex += 1
                } catch {
                    run.fail("could not start a replacement worker: \(error)")
                }
            }
            nextKill = now + UInt64(50 + random.below(250)) * 1_000_000
        }
        guard let server else { return }
        if let stopped = stoppedUntil {
            guard now >= stopped else { return }
            server.resume()
            stoppedUntil = nil
            nextFault = now + UInt64(150 + random.below(400)) * 1_000_000
        } else if now >= nextFault, restart == nil || restartFinished.isSet {
            faults += 1
            if random.chance(65) {
                server.signal(SIGSTOP)  // every call on it times out (200 ms) until SIGCONT; not waited for here
                stoppedUntil = now + UInt64(300 + random.below(400)) * 1_000_000
            } else {
                restarts += 1
                restartFinished.set(false)
                let finished = restartFinished
                restart = Task.detached {
                    try? await server.restart()  // SIGKILL, then an empty server on the same socket
                    finished.set(true)
                }
                nextFault = now + UInt64(300 + random.below(400)) * 1_000_000
            }
        }
    }

    private let restartFinished = AtomicFlag()

    /// Reads the phase's history files, checks them, and fails the scenario on any anomaly. Returns how many.
    func judge() -> Int {
        let directory = run.logDirectory
        var operations: [HistoryOperation] = []
        var malformed = 0
        for name in StorageProbe.names(in: directory).sorted()
        where name.hasPrefix(phaseName + "-") && name.hasSuffix(".history") {
            guard let text = try? String(contentsOfFile: directory + "/" + name, encoding: .utf8) else {
                run.fail("history \(phaseName): cannot read \(name)")
                continue
            }
            let parsed = HistoryLog.parse(text)
            operations += parsed.operations
            malformed += parsed.malformed
        }
        let checking = monotonicNanoseconds()
        let verdict = HistoryChecker.check(operations)
        let checked = Double(monotonicNanoseconds() - checking) / 1e6
        let origin = operations.map(\.start).min() ?? 0
        var extra: [String] = []
        if kills > 0 { extra.append("\(kills) workers SIGKILLed and replaced") }
        if faults > 0 { extra.append("\(faults) server faults (\(restarts) restarts, \(faults - restarts) SIGSTOPs)") }
        if verdict.uncertainWritesDropped > 0 {
            extra.append(
                "\(verdict.uncertainWritesDropped) writes nobody read left out"
                    + " (unfinished, or a generation that found another's entry)")
        }
        if malformed > 0 { extra.append("\(malformed) malformed lines") }
        let counters = fleetCounters
        let remote = ["remoteHits", "remoteErrors", "remoteTimeouts", "remoteBypassed", "removalsOwed"].compactMap {
            name in
            counters[name].map { "\($0) \(name)" }
        }
        if !remote.isEmpty { extra.append(remote.joined(separator: ", ")) }
        if let usage = storageUsage { extra.append(usage) }
        extra.append(String(format: "checked in %.0f ms", checked))
        let summary = verdict.summaryLine(phaseName) + (extra.isEmpty ? "" : "; " + extra.joined(separator: ", "))
        run.note(summary)
        guard !verdict.anomalies.isEmpty || malformed > 0 else { return 0 }
        run.fail(verdict.summaryLine(phaseName))
        for example in verdict.examples(perClass: 2, origin: origin) { run.fail(example) }
        let all = verdict.anomalies.map { $0.described(origin: origin) }.joined(separator: "\n\n")
        // Best effort: the report above already failed the scenario.
        try? Data((all + "\n").utf8).write(to: URL(fileURLWithPath: run.directory + "/\(phaseName).anomalies"))
        return verdict.anomalies.count
    }
}

/// A flag the detached restart sets when it is done.
final class AtomicFlag: Sendable {
    private let value = Atomic<Bool>(true)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set(_ newValue: Bool) { value.store(newValue, ordering: .releasing) }
}
