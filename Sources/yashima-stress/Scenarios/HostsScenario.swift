// Scenario 10, several hosts: the workers are split over three storage directories ("hosts") that share
// one Redis remote tier (`--remote URL`, else a redis-server started for the scenario; without one the
// scenario is skipped with a note). In each round every worker asks for the same K missing keys at the
// same instant. Judged from the ledger: each key generated exactly once across all hosts (I16), and in the
// last round, with the server we started SIGSTOPped past the remote timeout (then SIGCONT), at least once
// and at most once per host (the tier is bypassed; each host's own lock still holds, I5); every worker
// got the same, correct bytes; no hangs.

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum HostsScenario: Scenario {
    static let name = "hosts"
    static let summary = "three storage directories share one Redis: each key generated once across hosts"

    static let hosts = 3
    private static let sizes = [700, 4096, 20_000, 70_000]

    static func key(round: Int, index: Int) -> CacheKey {
        StressKey.make("hosts-r\(round)", "k\(index)", PayloadSpec(kind: .data, size: sizes[index % sizes.count]))
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let (rounds, keys, delay) = (worker.plan["rounds"], worker.plan["keys"], worker.plan["generateMilliseconds"])
        let cache = worker.makeCache(directory: worker.plan.cacheDirectory + "-host\(worker.index % hosts)")
        try cache.openStorage()
        var random = worker.random()
        for round in 0..<rounds {
            let order = shuffled(Array(0..<keys), &random)
            await worker.awaitGo()
            await worker.fetchAtOnce(
                cache, order: order, delayMilliseconds: delay, recordingDigests: true, round: round
            ) { key(round: round, index: $0) }
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        var server: RedisProcess?  // SIGKILLed when it goes (its deinit)
        if run.plan.remote == nil {
            guard let started = await RemoteBench.startServer(in: run.directory) else {
                run.note("skipped: no --remote and no redis-server installed")
                return
            }
            server = started
            run.useRemote(started.url)
        }
        let rounds = run.setting("rounds", smoke: 3, standard: 5)
        let keys = run.setting("keys", smoke: 8, standard: 24)
        run.setting("generateMilliseconds", smoke: 60, standard: 80)
        run.setting("remoteTimeoutMs", smoke: 300, standard: 300)
        run.setting("remoteCooldownMs", smoke: 200, standard: 200)
        let fleet = try run.startPhase("hosts", workers: max(run.workerCount, hosts))
        for round in 1..<rounds {
            fleet.release(deadline: run.deadline)
            if round == rounds - 1, let pid = server?.processID {
                // The last round starts with the server hung for three remote timeouts.
                kill(pid, SIGSTOP)
                Thread.detachNewThread {
                    usleep(900_000)
                    kill(pid, SIGCONT)
                }
            }
        }
        run.finishPhase(fleet)

        let counts = run.generationCounts()
        let chaosRound = server == nil ? nil : rounds - 1
        var wrongCounts: [String] = []
        for round in 0..<rounds {
            for index in 0..<keys {
                let label = StressKey.label(key(round: round, index: index))
                let count = counts[label] ?? 0
                let allowed = round == chaosRound ? 1...hosts : 1...1
                if !allowed.contains(count) { wrongCounts.append("\(label) ×\(count)") }
            }
        }
        run.expect(
            wrongCounts.isEmpty,
            "keys not generated once across hosts: " + wrongCounts.prefix(8).joined(separator: ", "))
        run.expectRightDigests(of: fleet, rounds: rounds, keys: keys) { key(round: $0, index: $1) }
        let seen = counts.values.reduce(0, +)
        run.note(
            "\(rounds) rounds × \(keys) keys requested by \(max(run.workerCount, hosts)) workers on \(hosts) hosts at "
                + "once; \(seen) generations"
                + (chaosRound.map { "; round \($0 + 1) with the server SIGSTOPped (at most once per host)" } ?? ""))
    }
}
