// Scenario 5, chaos: workers get-or-generate (and sometimes remove) small and large keys; the orchestrator
// SIGKILLs random workers while they generate (after their GENERATING line) and while they publish (just
// after PUBLISHING, during the write of a large payload), and starts replacements. Survivors must never
// hang or read a torn or wrong value, and every key must end readable and correct.

import Foundation
import Glibc
import YashimaShared

enum ChaosScenario: Scenario {
    static let name = "chaos"
    static let summary = "SIGKILL workers while they generate and publish; survivors never hang or read wrong values"

    static func key(_ index: Int) -> CacheKey {
        let spec: PayloadSpec
        switch index % 3 {
        case 0: spec = PayloadSpec(kind: .data, size: [2 << 20, 4 << 20, 6 << 20][index / 3 % 3])
        case 1: spec = PayloadSpec(kind: .data, size: [900, 12_000, 70_000][index / 3 % 3])
        default: spec = PayloadSpec(kind: .compressed, size: [2_000, 30_000][index / 3 % 2])
        }
        return StressKey.make("chaos", "k\(index)", spec)
    }

    static func isLarge(_ key: CacheKey) -> Bool { (StressKey.spec(of: key)?.size ?? 0) >= 1 << 20 }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let keys = worker.plan["keys"]
        let cache = worker.makeCache()
        try cache.openStorage()
        var random = worker.random()
        await worker.awaitGo()
        if worker.phase == "verify" {
            for index in 0..<keys {
                if let fetched = await worker.fetch(cache, key(index)) {
                    worker.tally.count(fetched.source == .storage ? "foundInStorage" : "regenerated")
                }
            }
            return
        }
        for _ in 0..<worker.plan["operations"] {
            let key = key(random.below(keys))
            if random.chance(10) {
                let start = monotonicNanoseconds()
                do {
                    try await KindOperations.remove(cache, key)
                    worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                } catch {
                    worker.tally.error("remove \(StressKey.label(key)): \(error)")
                }
                continue
            }
            let delay = 10 + random.below(50)
            let ledger = worker.ledger
            let label = StressKey.label(key)
            let line = "gen \(label) \(worker.pid) \(worker.phase)"
            let hooks = GeneratorHooks(
                willGenerate: {
                    ledger.record(line)
                    WorkerOutput.send("GENERATING \(label)")
                    try await Task.sleep(for: .milliseconds(delay))
                },
                didGenerate: {
                    WorkerOutput.send("PUBLISHING \(label)")
                })
            await worker.fetch(cache, key, hooks: hooks)
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let keys = run.setting("keys", smoke: 24, standard: 60)
        run.setting("operations", smoke: 80, standard: 150)
        let killQuota = run.profile.isSmoke ? 10 : 24
        var random = SplitMix64(seed: run.seed ^ 0xC4A0_5000)
        var killsDuringGeneration = 0
        var killsDuringPublish = 0
        var nextIndex = run.workerCount

        let fleet = try run.startPhase("chaos", workers: run.workerCount, releaseLateWorkers: true)
        run.finishPhase(
            fleet,
            onLine: { worker, line in
                guard worker.isRunning, killsDuringGeneration + killsDuringPublish < killQuota else { return }
                var kill = false
                if line.hasPrefix("GENERATING "), killsDuringGeneration < killQuota / 2, random.chance(35) {
                    killsDuringGeneration += 1
                    kill = true
                } else if line.hasPrefix("PUBLISHING "), killsDuringPublish < killQuota / 2,
                    line.contains("#data"), isLarge(labelKey(line)), random.chance(60)
                {
                    // The worker is about to encode and write a multi-megabyte staging file: kill it in there.
                    usleep(UInt32(random.below(3_000)))
                    killsDuringPublish += 1
                    kill = true
                }
                guard kill else { return }
                fleet.kill(worker)
                do {
                    try fleet.spawn(phase: "chaos", index: nextIndex)
                    nextIndex += 1
                } catch {
                    run.fail("could not start a replacement worker: \(error)")
                }
            })
        let stagingLeft = StorageProbe.stagingFiles(run.cacheDirectory).count

        // Every key ends readable and correct: a fresh process reads them all.
        let verify = try run.runPhase("verify", workers: 1)
        let found = verify.reduce(0) { $0 + ($1.counters["foundInStorage"] ?? 0) }
        let check = await run.verifyStorage()
        run.require(check, "storage")
        let seen = run.generationCounts().values.reduce(0, +)
        run.generations(expected: keys, atLeast: true, seen: seen)
        run.note(
            "\(killsDuringGeneration + killsDuringPublish) workers SIGKILLed (\(killsDuringGeneration) while generating, "
                + "\(killsDuringPublish) while publishing) and replaced; \(counted(stagingLeft, "staging file")) left by them"
        )
        run.note(
            "a fresh process read all \(keys) keys correct (\(found) from storage, \(keys - found) regenerated); "
                + "\(check.listed) entries re-read correct, none torn")
    }

    /// The key named in a `GENERATING`/`PUBLISHING` line (`namespace/identity#kind`), by index.
    private static func labelKey(_ line: String) -> CacheKey {
        guard let slash = line.firstIndex(of: "/"), let hash = line.firstIndex(of: "#"),
            let index = Int(line[line.index(slash, offsetBy: 2)..<hash])
        else { return key(1) }
        return key(index)
    }
}
