// Scenario 1, cross-process burst: in each round every worker asks for the same K missing keys at the
// same instant (GO). Judged from the ledger (each key generated exactly once across all processes, I5),
// from the digests every worker reports (identical, correct bytes everywhere) and from a re-read of the
// directory. Breaking the cross-process lock makes this scenario fail.

import Foundation
import YashimaShared

enum BurstScenario: Scenario {
    static let name = "burst"
    static let summary = "all workers request the same K missing keys at once: each generated exactly once"

    private static let sizes = [700, 4096, 20_000, 70_000, 200_000]

    static func key(round: Int, index: Int) -> CacheKey {
        let spec = PayloadSpec(kind: index % 3 == 2 ? .compressed : .data, size: sizes[index % sizes.count])
        return StressKey.make("burst-r\(round)", "k\(index)", spec)
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let rounds = worker.plan["rounds"]
        let keys = worker.plan["keys"]
        let delay = worker.plan["generateMilliseconds"]
        let cache = worker.makeCache()
        try cache.openStorage()
        var random = worker.random()
        for round in 0..<rounds {
            let order = shuffled(Array(0..<keys), &random)
            await worker.awaitGo()
            // Every key at once (one task per key), then every key again (memory hits).
            for pass in 0..<2 {
                await worker.fetchAtOnce(
                    cache, order: order, delayMilliseconds: delay, recordingDigests: pass == 0, round: round
                ) { key(round: round, index: $0) }
            }
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let rounds = run.setting("rounds", smoke: 4, standard: 6)
        let keys = run.setting("keys", smoke: 16, standard: 40)
        run.setting("generateMilliseconds", smoke: 60, standard: 80)
        let fleet = try run.startPhase("burst", workers: run.workerCount)
        for _ in 1..<rounds { fleet.release(deadline: run.deadline) }
        run.finishPhase(fleet)

        // The ledger: exactly one generation per key, whichever process ran it.
        let counts = run.generationCounts()
        var expectedLabels: [String: (round: Int, index: Int)] = [:]
        for round in 0..<rounds {
            for index in 0..<keys { expectedLabels[StressKey.label(key(round: round, index: index))] = (round, index) }
        }
        let seen = counts.values.reduce(0, +)
        run.generations(expected: rounds * keys, seen: seen)
        var duplicated: [String] = []
        for (label, _) in expectedLabels.sorted(by: { $0.key < $1.key }) {
            let count = counts[label] ?? 0
            if count != 1 { duplicated.append("\(label) ×\(count)") }
        }
        run.expect(
            duplicated.isEmpty, "keys not generated exactly once: " + duplicated.prefix(8).joined(separator: ", "))
        for label in counts.keys where expectedLabels[label] == nil { run.fail("unexpected generation of \(label)") }

        // Every worker got every key, and the same, correct bytes.
        run.expectRightDigests(of: fleet, rounds: rounds, keys: keys) { key(round: $0, index: $1) }

        // The directory holds every key, correct.
        let check = await run.verifyStorage()
        run.require(check, "storage")
        run.expect(check.listed == rounds * keys, "storage lists \(check.listed) entries, expected \(rounds * keys)")
        run.note(
            "\(rounds) rounds × \(keys) keys requested by \(run.workerCount) workers at once; "
                + "\(seen) generations for \(rounds * keys) keys; \(check.correct) entries re-read correct")
    }
}
