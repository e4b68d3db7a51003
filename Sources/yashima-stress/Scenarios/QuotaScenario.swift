// Scenario 4, quota pressure: every worker writes (get-or-generate and store) under one small budget while
// the orchestrator samples the real usage (payload bytes of the entry files, what the budget counts)
// throughout. The bound is the budget plus the documented slack: one in-flight entry per writer. Also: an
// entry whose payload equals the budget is kept, and entries larger than the budget are returned but never
// stored.

import Foundation
import YashimaShared

enum QuotaScenario: Scenario {
    static let name = "quota"
    static let summary =
        "writers under a small budget: usage ≤ budget + one in-flight entry per writer; exact fits kept"

    static let poolSizes = [3_000, 9_000, 20_000, 36_000]
    static let exactSize = 24_000

    static func poolKey(_ index: Int) -> CacheKey {
        StressKey.make("quota", "p\(index)", PayloadSpec(kind: .data, size: poolSizes[index % poolSizes.count]))
    }

    static func ownKey(_ worker: Int, _ index: Int) -> CacheKey {
        StressKey.make(
            "quota", "w\(worker)-\(index)", PayloadSpec(kind: .data, size: poolSizes[index % poolSizes.count]))
    }

    static func oversizedKey(_ index: Int, budget: Int) -> CacheKey {
        StressKey.make("quota", "over\(index)", PayloadSpec(kind: .data, size: budget + 8_192 * (index + 1)))
    }

    static var exactKey: CacheKey { StressKey.make("quota", "exact", PayloadSpec(kind: .data, size: exactSize)) }
    static var overExactKey: CacheKey {
        StressKey.make("quota", "exact", PayloadSpec(kind: .data, size: exactSize + 4_096))
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        switch worker.phase {
        case "pressure":
            let cache = worker.makeCache()
            try cache.openStorage()
            let budget = worker.plan.budget ?? 0
            let pool = worker.plan["poolKeys"]
            var random = worker.random()
            await worker.awaitGo()
            for _ in 0..<worker.plan["operations"] {
                let roll = random.below(100)
                if roll < 15 {
                    let key = ownKey(worker.index, random.below(12))
                    let start = monotonicNanoseconds()
                    do {
                        try await cache.store(
                            worker.expected.bytes(key, StressKey.spec(of: key)!), for: key, codec: DataCodec())
                        worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                        worker.tally.count("stores")
                    } catch {
                        worker.tally.error("store \(StressKey.label(key)): \(error)")
                    }
                } else if roll < 20 {
                    await worker.fetch(cache, oversizedKey(random.below(3), budget: budget))
                    worker.tally.count("oversized")
                } else {
                    await worker.fetch(cache, poolKey(random.below(pool)))
                }
            }
        case "exact":
            let cache = worker.makeCache(
                budget: worker.plan["exactBudget"], directory: worker.plan.cacheDirectory + "-exact")
            try cache.openStorage()
            await worker.awaitGo()
            for key in [exactKey, overExactKey, exactKey] {
                await worker.fetch(cache, key)
            }
        default:
            throw ArgumentError(description: "unknown phase \(worker.phase)")
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let budget = run.profile.isSmoke ? 256 << 10 : 1 << 20
        run.setBudget(budget)
        run.setting("poolKeys", smoke: 80, standard: 300)
        run.setting("operations", smoke: 400, standard: 1_000)

        // The budget counts payload bytes: an entry is charged its payload, so the exact-capacity budget is
        // the exact key's payload, and the slack per writer the largest payload.
        let exactCharge = exactSize
        let largestCharge = poolSizes.max()!
        let bound = Int64(budget + run.workerCount * largestCharge)
        run.setting("exactBudget", exactCharge)

        // Many writers; the orchestrator samples real usage all along.
        let fleet = try run.startPhase("pressure", workers: run.workerCount)
        var peak: Int64 = 0
        var largestPayload: Int64 = 0
        var samples = 0
        var lastSample: UInt64 = 0
        run.finishPhase(
            fleet,
            tick: {
                let now = monotonicNanoseconds()
                guard now - lastSample >= 2_000_000 else { return }
                lastSample = now
                let usage = StorageProbe.usage(run.cacheDirectory)
                peak = max(peak, usage.payload)
                largestPayload = max(largestPayload, usage.largestPayload)
                samples += 1
            })
        let final = StorageProbe.usage(run.cacheDirectory)
        peak = max(peak, final.payload)
        run.expect(
            peak <= bound,
            "usage reached \(describeBytes(peak)), over the bound \(describeBytes(bound)) (budget \(describeBytes(Int64(budget))) + \(run.workerCount) × \(describeBytes(Int64(largestCharge))))"
        )
        run.expect(
            final.payload <= Int64(budget),
            "usage is \(describeBytes(final.payload)) after the writers finished, over the budget")
        run.expect(
            largestPayload <= Int64(budget),
            "an entry of \(describeBytes(largestPayload)) (larger than the budget) was stored")

        let check = await run.verifyStorage()
        run.require(check, "storage")
        let oversizedStored = check.labels.filter { $0.hasPrefix("quota/over") }
        run.expect(
            oversizedStored.isEmpty, "oversized entries in storage: \(oversizedStored.sorted().joined(separator: ", "))"
        )
        let judge = run.judgeCache()
        let reported = try await judge.storageUsage()
        let probed = StorageProbe.usage(run.cacheDirectory)
        run.expect(
            reported.byteCount == probed.payload && reported.allocatedByteCount == probed.allocated,
            "storageUsage() says \(reported.byteCount) payload bytes in \(reported.allocatedByteCount) allocated, the "
                + "directory holds \(probed.payload) in \(probed.allocated)")

        // Exact capacity: budget == one entry's payload; the entry is kept, a bigger one is not stored.
        try run.runPhase("exact", workers: 1)
        let exactDirectory = run.cacheDirectory + "-exact"
        let exactJudge = YCache(
            storageDirectory: URL(fileURLWithPath: exactDirectory), memoryMaximumCost: 0, storageMaximumByteCount: nil,
            sharing: run.plan.sharing)
        let kept = try await run.expected.cached(exactJudge, exactKey)
        run.expect(kept?.correct == true, "an entry whose payload (\(exactCharge) B) equals the budget was not kept")
        let over = try await run.expected.cached(exactJudge, overExactKey)
        run.expect(over == nil, "an entry larger than the budget was stored")
        let exactFiles = StorageProbe.entryFiles(exactDirectory)
        run.expect(exactFiles.count == 1, "the exact-capacity directory holds \(exactFiles.count) entries, expected 1")

        let results = fleet.workers.compactMap(\.result)
        let oversized = results.reduce(0) { $0 + ($1.counters["oversized"] ?? 0) }
        let stores = results.reduce(0) { $0 + ($1.counters["stores"] ?? 0) }
        let seen = run.generationCounts().values.reduce(0, +)
        run.generations(expected: nil, seen: seen)
        run.note(
            "budget \(describeBytes(Int64(budget))); \(samples) usage samples: peak \(describeBytes(peak)) ≤ bound "
                + "\(describeBytes(bound)) (budget + \(run.workerCount) writers × \(describeBytes(Int64(largestCharge)))); "
                + "final \(describeBytes(final.payload)) in \(final.files) entries "
                + "(\(describeBytes(final.allocated)) allocated)")
        run.note(
            "\(stores) stores, \(oversized) oversized requests (returned, never stored); exact-capacity entry "
                + "(payload \(exactCharge) B = budget) kept")
    }
}
