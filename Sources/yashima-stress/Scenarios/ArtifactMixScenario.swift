// Scenario 2, artifact mix: Data, compressed, Codable (JSON and property list) and String entries,
// requested by all workers in shuffled order with several tasks each; then a cold pass by fresh processes
// reads everything cache-only, so every value must come from storage, correct. Judged from the ledger
// (each entry generated once), the cold readers' sources, and a re-read of the directory.

import Foundation
import YashimaShared

enum ArtifactMixScenario: Scenario {
    static let name = "artifact-mix"
    static let summary = "Data, compressed, JSON, plist and String entries; a cold pass reads all from storage"

    static func spec(_ kind: PayloadKind, _ index: Int) -> PayloadSpec {
        switch kind {
        case .data: return PayloadSpec(kind: kind, size: [300, 5_000, 40_000, 90_000, 250_000][index % 5])
        case .compressed: return PayloadSpec(kind: kind, size: [1_000, 8_000, 30_000, 64_000][index % 4])
        case .json, .plist: return PayloadSpec(kind: kind, size: [4, 60, 400][index % 3])
        case .string: return PayloadSpec(kind: kind, size: [10, 500, 3_000][index % 3])
        }
    }

    static func allKeys(_ count: Int) -> [CacheKey] {
        (0..<count).flatMap { index in
            PayloadKind.allCases.map { StressKey.make("mix", "a\(index)", spec($0, index)) }
        }
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let keys = allKeys(worker.plan["keys"])
        let cache = worker.makeCache()
        try cache.openStorage()
        var random = worker.random()
        switch worker.phase {
        case "hot":
            let passes = worker.plan["passes"]
            let lanes = worker.plan["lanes"]
            let work = (0..<passes).flatMap { _ in shuffled(keys, &random) }
            await worker.awaitGo()
            await withTaskGroup(of: Void.self) { group in
                for lane in 0..<lanes {
                    group.addTask {
                        for position in stride(from: lane, to: work.count, by: lanes) {
                            await worker.fetch(cache, work[position])
                        }
                    }
                }
            }
        case "cold":
            let order = shuffled(keys, &random)
            await worker.awaitGo()
            for key in order {
                let start = monotonicNanoseconds()
                do {
                    if let fetched = try await worker.expected.cached(cache, key) {
                        worker.tally.record(
                            fetched, nanoseconds: monotonicNanoseconds() - start,
                            describe: "\(StressKey.label(key)) from \(fetched.source)")
                        if fetched.source != .storage {
                            worker.tally.wrong("\(StressKey.label(key)) came from \(fetched.source) in a fresh process")
                        }
                    } else {
                        worker.tally.operation(nanoseconds: monotonicNanoseconds() - start, miss: true)
                        worker.tally.error("\(StressKey.label(key)) is missing from storage in the cold pass")
                    }
                } catch {
                    worker.tally.error("\(StressKey.label(key)): \(error)")
                }
            }
        default:
            throw ArgumentError(description: "unknown phase \(worker.phase)")
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let count = run.setting("keys", smoke: 24, standard: 100)
        run.setting("passes", smoke: 2, standard: 3)
        run.setting("lanes", 4)
        let keys = allKeys(count)
        try run.runPhase("hot", workers: run.workerCount)

        let counts = run.generationCounts(phase: "hot")
        let seen = counts.values.reduce(0, +)
        run.generations(expected: keys.count, seen: seen)
        var wrongCounts: [String] = []
        for key in keys {
            let label = StressKey.label(key)
            if counts[label] != 1 { wrongCounts.append("\(label) ×\(counts[label] ?? 0)") }
        }
        run.expect(
            wrongCounts.isEmpty, "entries not generated exactly once: " + wrongCounts.prefix(8).joined(separator: ", "))

        let cold = try run.runPhase("cold", workers: run.workerCount)
        let coldReads = cold.reduce(0) { $0 + $1.storageHits }
        run.expect(
            coldReads == keys.count * cold.count,
            "the cold pass read \(coldReads) values from storage, expected \(keys.count * cold.count)")

        let check = await run.verifyStorage()
        run.require(check, "storage")
        run.expect(check.listed == keys.count, "storage lists \(check.listed) entries, expected \(keys.count)")
        let perKind = PayloadKind.allCases.map { kind in
            "\(kind.rawValue) \(check.labels.filter { $0.hasSuffix("#" + kind.rawValue) }.count)"
        }
        run.note(
            "\(keys.count) entries (\(perKind.joined(separator: ", "))); cold pass by \(cold.count) fresh processes: "
                + "\(coldReads) storage reads, all correct")
    }
}
