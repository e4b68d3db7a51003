// Scenario 11, waits: holder processes take thousands of keys' locks and keep them (their generators wait);
// waiter processes then get every key at once and wait for all of them (I5: one thread per process, not
// one per key); then half the holders are SIGKILLed and the others release. Judged: every waiter gets every
// value right, the killed holders' keys are each taken over by exactly one waiter and the released ones are
// never generated again (the ledger), no waiter process goes over 32 threads (without a remote tier, whose
// lease waits still take a thread each), and storage holds every key.

import Foundation
import Glibc
@_spi(Testing) import YashimaShared

enum WaitsScenario: Scenario {
    static let name = "waits"
    static let summary =
        "thousands of keys waited on at once while their holders are SIGKILLed: each taken over once, ≤ 32 threads"

    static func key(_ index: Int) -> CacheKey {
        StressKey.make("waits", "k\(index)", PayloadSpec(kind: .data, size: 200 + index % 1800))
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let keys = worker.plan["keys"]
        let holders = worker.plan["holders"]
        let cache = worker.makeCache()
        try cache.openStorage()
        await worker.awaitGo()
        if worker.phase == "hold" {
            WaitWorker.raiseDescriptorLimit()  // one locked descriptor per key held
            let mine = Array(stride(from: worker.index, to: keys, by: holders))
            let started = WaitCount()
            let release = LineGate()
            let control = worker.control
            let reader = Task {
                while let line = await control.next(), line != "RELEASE" {}
                release.open()
            }
            let ledger = worker.ledger
            let pid = worker.pid
            await withTaskGroup(of: Void.self) { group in
                for index in mine {
                    group.addTask {
                        let key = key(index)
                        let line = "gen \(StressKey.label(key)) \(pid) hold"
                        let hooks = GeneratorHooks(willGenerate: {
                            ledger.record(line)
                            if started.add() == mine.count { worker.send("HOLDING \(mine.count)") }
                            await release.wait()
                        })
                        await worker.fetch(cache, key, hooks: hooks)
                    }
                }
            }
            reader.cancel()
            return
        }
        let sampler = ResourceSampler()
        let waiting = WaitCount()
        await CrossProcessWaitObservation.observing({ if waiting.add() == keys { worker.send("WAITING \(keys)") } }) {
            await worker.fetchAtOnce(
                cache, order: Array(0..<keys), delayMilliseconds: 0, recordingDigests: false, round: 0, key: key)
        }
        let peak = sampler.stop()
        worker.tally.count("peakThreads", peak.threads)
        worker.tally.count("rssGrowthMB", (peak.residentBytes - peak.residentBytesBefore) >> 20)
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let keys = run.setting("keys", smoke: 800, standard: 4000)
        let holders = run.setting("holders", max(2, run.workerCount / 2))
        let waiters = max(1, run.workerCount - holders)
        let deadline = run.deadline

        // The holders take every key's lock and say HOLDING; then the waiters start and say WAITING.
        let holdFleet = try run.startPhase("hold", workers: holders)
        var holding = Set<Int>()
        while holding.count < holders && monotonicNanoseconds() < deadline && !holdFleet.running.isEmpty {
            holdFleet.pump(timeoutMilliseconds: 20) { worker, line in
                if line.hasPrefix("HOLDING") { holding.insert(worker.index) }
            }
        }
        run.expect(holding.count == holders, "\(holders - holding.count) holders never held their keys")
        let waitFleet = try run.startPhase("wait", workers: waiters)
        var waiting = Set<Int>()
        while waiting.count < waiters && monotonicNanoseconds() < deadline && !waitFleet.running.isEmpty {
            waitFleet.pump(timeoutMilliseconds: 20) { worker, line in
                if line.hasPrefix("WAITING") { waiting.insert(worker.index) }
            }
            holdFleet.pump(timeoutMilliseconds: 0)
        }
        run.expect(waiting.count == waiters, "\(waiters - waiting.count) waiters never waited on every key")

        // Every other holder dies holding its keys (the kernel drops its locks); the others publish.
        var killed = Set<Int>()
        for worker in holdFleet.workers {
            if worker.index % 2 == 1 {
                holdFleet.kill(worker)
                killed.insert(worker.index)
            } else {
                worker.send("RELEASE")
            }
        }
        run.finishPhase(waitFleet)
        run.finishPhase(holdFleet)

        // The ledger: a killed holder's key twice (its own, then one waiter's takeover), the others once.
        let counts = run.generationCounts()
        var wrong: [String] = []
        for index in 0..<keys {
            let label = StressKey.label(key(index))
            let expected = killed.contains(index % holders) ? 2 : 1
            if counts[label] != expected { wrong.append("\(label) ×\(counts[label] ?? 0) (expected \(expected))") }
        }
        let takenOver = (0..<keys).filter { killed.contains($0 % holders) }.count
        run.generations(expected: keys + takenOver, seen: counts.values.reduce(0, +))
        run.expect(wrong.isEmpty, "keys not generated as expected: " + wrong.prefix(6).joined(separator: ", "))

        let results = waitFleet.workers.compactMap(\.result)
        let peak = results.map { $0.counters["peakThreads"] ?? 0 }.max() ?? 0
        let memory = results.map { $0.counters["rssGrowthMB"] ?? 0 }.max() ?? 0
        // With a remote tier the takeovers wait for the dead holders' leases and renew their own, and the
        // remote tier still takes a thread for each (RedisLeaseWait, LeaseRenewal): reported, not judged.
        let remote = run.plan.remote != nil
        run.expect(remote || peak <= 32, "a waiting process peaked at \(peak) threads")
        let check = await run.verifyStorage()
        run.require(check, "storage")
        run.expect(check.listed == keys, "storage lists \(check.listed) entries, expected \(keys)")
        run.note(
            "\(waiters) processes each waited on \(keys) keys held by \(holders) processes; \(killed.count) holders "
                + "SIGKILLed, their keys taken over once each; waiters peaked at \(peak) threads, RSS +\(memory) MB"
                + (remote ? " (not judged with a remote tier: its lease waits and renewals take a thread each)" : ""))
    }
}
