// Scenario 10, several hosts: the workers are split over three storage directories ("hosts") that share
// one Redis remote tier (`--remote URL`, else a redis-server started for the scenario; without one the
// scenario is skipped with a note). In each round every worker asks for the same K missing keys at the
// same instant. Judged from the ledger: each key generated exactly once across all hosts (I16); in the
// round before the last, the first two workers to start generating are SIGKILLed (holding their host's
// lock and the remote lease), and those keys are generated once more, by one taker (I7, I16: after the
// short lease expires), never more; in the last round, with the server we started SIGSTOPped past the
// remote timeout (then SIGCONT), at least once and at most once per host (the tier is bypassed; each
// host's own lock still holds, I5); every surviving worker got the same, correct bytes; no hangs.

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
            let before = cache.statistics
            defer { logRemote(round, before, cache.statistics) }
            await worker.fetchAtOnce(
                cache, order: order, delayMilliseconds: delay, recordingDigests: true, round: round,
                announce: round == worker.plan["killRound"]
            ) { key(round: round, index: $0) }
        }
    }

    /// One line per round on the worker's standard error (kept in logs/): what its remote tier did, to
    /// tell a generation without the lease (a timeout, a bypass) from one a lease allowed.
    private static func logRemote(_ round: Int, _ before: CacheStatistics, _ after: CacheStatistics) {
        let line =
            "pid \(getpid()) round \(round): remote hits \(after.remoteHits - before.remoteHits), misses "
            + "\(after.remoteMisses - before.remoteMisses), timeouts \(after.remoteTimeouts - before.remoteTimeouts), "
            + "errors \(after.remoteErrors - before.remoteErrors), bypassed "
            + "\(after.remoteBypassedCalls - before.remoteBypassedCalls), lease waits "
            + "\(after.remoteLeaseWaits - before.remoteLeaseWaits), takeovers "
            + "\(after.remoteLeaseTakeovers - before.remoteLeaseTakeovers)\n"
        FileHandle.standardError.write(Data(line.utf8))
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
        // Exactly once across hosts needs the leases to hold, so their renewals must not time out on a loaded
        // machine (the whole test suite runs beside this on two cores): a 1 s timeout and a 3 s lease. A
        // killed holder's lease keeps the other hosts waiting until it expires (3 s at most), and the last
        // round hangs the server for 2.5 timeouts.
        let timeout = run.setting("remoteTimeoutMs", smoke: 1000, standard: 1000)
        run.setting("remoteCooldownMs", smoke: 200, standard: 200)
        run.setting("remoteLeaseMs", smoke: 3000, standard: 3000)
        // The round before the last kills workers (it needs a server, and a worker to spare on each host).
        let workers = max(run.workerCount, hosts) + (server == nil ? 0 : 2)
        let killRound = run.setting("killRound", server == nil ? -1 : rounds - 2)
        var killedProcesses: Set<String> = []
        let fleet = try run.startPhase("hosts", workers: workers)
        // The first two workers to announce a generation in the kill round (the only round that announces)
        // are SIGKILLed at once, while they hold their host's lock and the key's remote lease (and those of
        // any other key they were generating).
        let onLine = { (worker: WorkerProcess, line: String) in
            guard line.hasPrefix("GENERATING "), worker.isRunning, killedProcesses.count < 2 else { return }
            killedProcesses.insert(String(worker.pid))
            fleet.kill(worker)
        }
        for round in 1..<rounds {
            fleet.release(deadline: run.deadline, onLine: onLine)
            if round == rounds - 1, let pid = server?.processID {
                // The last round starts with the server hung for 2.5 remote timeouts.
                kill(pid, SIGSTOP)
                Thread.detachNewThread {
                    usleep(useconds_t(timeout) * 2500)
                    kill(pid, SIGCONT)
                }
            }
        }
        run.finishPhase(fleet, onLine: onLine)
        run.expect(killRound < 0 || !killedProcesses.isEmpty, "no worker announced a generation in the kill round")
        // Every key of the kill round a killed worker had started to generate (the ledger's lines of its pid).
        let killRoundLabels = Set((0..<keys).map { StressKey.label(key(round: killRound, index: $0)) })
        // Generations of each key by a killed worker: the second kill can land on a worker that took over the
        // first one's key (its lease expired), so a key may have two killed generations and then one taker's.
        var killedGenerations: [String: Int] = [:]
        for record in run.ledgerRecords("gen") where record.count >= 3 && killedProcesses.contains(String(record[2])) {
            killedGenerations[String(record[1]), default: 0] += 1
        }
        let killed = Set(killedGenerations.keys).intersection(killRoundLabels)

        let counts = run.generationCounts()
        let chaosRound = server == nil ? nil : rounds - 1
        var wrongCounts: [String] = []
        for round in 0..<rounds {
            for index in 0..<keys {
                let label = StressKey.label(key(round: round, index: index))
                let count = counts[label] ?? 0
                // Each killed generation, then one taker's (unless the kill came after it was stored).
                let allowed =
                    round == chaosRound
                    ? 1...hosts : killed.contains(label) ? 1...(1 + (killedGenerations[label] ?? 0)) : 1...1
                if !allowed.contains(count) { wrongCounts.append("\(label) ×\(count)") }
            }
        }
        run.expect(
            wrongCounts.isEmpty,
            "keys not generated once across hosts: " + wrongCounts.prefix(8).joined(separator: ", "))
        run.expectRightDigests(of: fleet, rounds: rounds, keys: keys) { key(round: $0, index: $1) }
        let seen = counts.values.reduce(0, +)
        run.note(
            "\(rounds) rounds × \(keys) keys requested by \(workers) workers on \(hosts) hosts at once; \(seen) generations"
                + (killRound < 0
                    ? ""
                    : "; round \(killRound + 1): \(killedProcesses.count) workers SIGKILLed while generating, "
                        + "their keys generated "
                        + killed.sorted().map { "\($0) ×\(counts[$0] ?? 0)" }.joined(separator: ", "))
                + (chaosRound.map { "; round \($0 + 1) with the server SIGSTOPped (at most once per host)" } ?? ""))
    }
}
