// Scenario 3, lifecycle churn: workers generate, read, `contains`, `metadata`, `remove`, `removeAll(in:)`,
// `refresh` and `store` concurrently, logging wall-clock times; a second phase adds `removeAll()`. The
// judge proves no read that began after a removal ended returned an entry that existed when the removal
// began (I10), and that a namespace nobody removes was generated once per key and is intact.

import Foundation
import YashimaShared

enum LifecycleScenario: Scenario {
    static let name = "lifecycle"
    static let summary =
        "generate/read/contains/metadata/remove/removeAll(in:)/removeAll()/refresh/store churn; removals seen everywhere"

    /// The second phase, which also removes everything now and then (so the kept namespace is judged
    /// after the first).
    static let globalPhase = "churn-all"

    static let churned = ["life-a", "life-b"]
    static let kept = "life-keep"
    private static let sizes = [200, 3_000, 20_000, 80_000]

    static func key(_ namespace: String, _ index: Int) -> CacheKey {
        let spec =
            index % 3 == 2
            ? PayloadSpec(kind: .json, size: [8, 120][index % 2])
            : PayloadSpec(kind: .data, size: sizes[index % sizes.count])
        return StressKey.make(namespace, "k\(index)", spec)
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let perNamespace = worker.plan["keys"]
        let operations = worker.plan["operations"]
        let lanes = worker.plan["lanes"]
        let cache = worker.makeCache()
        try cache.openStorage()
        await worker.awaitGo()
        if worker.phase != globalPhase {
            for index in 0..<perNamespace { await read(worker, cache, key(kept, index)) }
        }
        let removesEverything = worker.phase == globalPhase
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    var random = worker.random(UInt64(lane + 1))
                    for _ in 0..<(operations / lanes) {
                        await operate(worker, cache, &random, perNamespace, removesEverything: removesEverything)
                    }
                }
            }
        }
    }

    private static func operate(
        _ worker: WorkerContext, _ cache: YCache, _ random: inout SplitMix64, _ keys: Int, removesEverything: Bool
    ) async {
        let namespace = churned[random.below(churned.count)]
        let key = key(namespace, random.below(keys))
        let label = StressKey.label(key)
        let roll = random.below(100)
        let start = monotonicNanoseconds()
        let wallStart = wallNanoseconds()
        do {
            switch roll {
            case 0..<40:
                await read(worker, cache, key)
            case 40..<50:
                if let fetched = try await worker.expected.cached(cache, key) {
                    worker.tally.record(
                        fetched, nanoseconds: monotonicNanoseconds() - start, describe: "\(label) cache-only")
                    if let created = fetched.metadata?.createdAt.nanosecondsSince1970 {
                        worker.event("read \(label) \(wallStart) \(created) cacheOnly")
                    } else {
                        worker.tally.wrong("\(label) (cache-only) has no metadata")
                    }
                } else {
                    worker.tally.operation(nanoseconds: monotonicNanoseconds() - start, miss: true)
                }
            case 50..<58:
                _ = try await KindOperations.contains(cache, key)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
            case 58..<68:
                let metadata = try await KindOperations.metadata(cache, key)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start, miss: metadata == nil)
                if let metadata {
                    if metadata.keyStableIdentifier != key.stableIdentifier
                        || metadata.codecIdentifier != StressKey.codecIdentifier(StressKey.spec(of: key)!.kind)
                    {
                        worker.tally.wrong("\(label): metadata of another entry")
                    }
                    worker.event("read \(label) \(wallStart) \(metadata.createdAt.nanosecondsSince1970) metadata")
                }
            case 68..<76:
                try await KindOperations.remove(cache, key)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                worker.event("remove \(label) \(wallStart) \(wallNanoseconds())")
            case 76..<81:
                var options = YCache.Options()
                options.lookupPolicy = .refresh
                if let fetched = await worker.fetch(cache, key, options: options) {
                    logResult(worker, label, fetched, wallStart, "refresh")
                }
            case 81..<85:
                try await KindOperations.store(cache, key, worker.expected)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                worker.event("store \(label) \(wallStart) \(wallNanoseconds())")
            case 85..<88:
                try await cache.removeAll(in: namespace)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                worker.event("removeAll \(namespace) \(wallStart) \(wallNanoseconds())")
            case 88 where removesEverything:
                try await cache.removeAll()
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                worker.event("removeEverything * \(wallStart) \(wallNanoseconds())")
            default:
                await read(worker, cache, LifecycleScenario.key(kept, random.below(keys)))
            }
        } catch {
            worker.tally.error("\(label): \(error)")
        }
    }

    /// Get-or-generate, logged as a generation (with its stamp and the time the call returned, which is
    /// after the publish) or as a read (with its start time and the stamp of the entry it returned).
    private static func read(_ worker: WorkerContext, _ cache: YCache, _ key: CacheKey) async {
        let wallStart = wallNanoseconds()
        if let fetched = await worker.fetch(cache, key) {
            logResult(worker, StressKey.label(key), fetched, wallStart, "value")
        }
    }

    private static func logResult(
        _ worker: WorkerContext, _ label: String, _ fetched: Fetched, _ wallStart: Int64, _ how: String
    ) {
        guard let created = fetched.metadata?.createdAt.nanosecondsSince1970 else {
            worker.tally.wrong("\(label) (\(how)) has no metadata")
            return
        }
        if fetched.source == .generated && !fetched.shared {
            worker.event("made \(label) \(created) \(wallNanoseconds())")
        } else if fetched.origin == .remote {
            worker.event("fetched \(label) \(created) \(wallNanoseconds())")
        } else {
            worker.event("read \(label) \(wallStart) \(created) \(how)")
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let perNamespace = run.setting("keys", smoke: 10, standard: 24)
        let operations = run.setting("operations", smoke: 800, standard: 1_600)
        run.setting("lanes", 2)
        try run.runPhase("churn", workers: run.workerCount)

        // The namespace nobody removes in the first phase: generated exactly once per key, and all there.
        let counts = run.generationCounts(phase: "churn")
        let keptLabels = (0..<perNamespace).map { StressKey.label(key(kept, $0)) }
        let badKept = keptLabels.filter { counts[$0] != 1 }.map { "\($0) ×\(counts[$0] ?? 0)" }
        run.expect(badKept.isEmpty, "untouched namespace regenerated: " + badKept.prefix(6).joined(separator: ", "))
        let seen = counts.values.reduce(0, +)
        run.generations(expected: 2 * perNamespace + perNamespace, atLeast: true, seen: seen)

        let check = await run.verifyStorage()
        run.require(check, "storage")
        let keptStored = keptLabels.filter { check.labels.contains($0) }.count
        run.expect(keptStored == perNamespace, "only \(keptStored) of \(perNamespace) entries of \(kept) remain")

        // The second phase adds removeAll(); every read of both phases is judged below.
        run.setting("operations", operations / 2)
        try run.runPhase(globalPhase, workers: run.workerCount)

        // Every worker's log: no read after a removal returned what it removed (I10).
        let log = RemovalVisibility(run.eventRecords())
        let stale = log.staleReads(localRemovalsOnly: run.plan.remote != nil)
        run.countWrongValues(stale.count)
        run.expect(
            stale.isEmpty, "\(stale.count) reads returned removed entries: " + stale.prefix(3).joined(separator: "; "))

        run.require(await run.verifyStorage(), "storage after \(globalPhase)")

        // A namespace removal by a fresh process empties it and leaves the others alone.
        let judge = run.judgeCache()
        let keptBefore = try await judge.entries(in: kept).count
        try await judge.removeAll(in: churned[0])
        let left = try await judge.entries(in: churned[0]).count
        let keptAfter = try await judge.entries(in: kept).count
        run.expect(left == 0, "\(left) entries of \(churned[0]) survived removeAll(in:)")
        run.expect(
            keptAfter == keptBefore,
            "removeAll(in: \(churned[0])) left \(keptAfter) of \(keptBefore) entries of \(kept)")

        run.note(
            "\(operations) + \(operations / 2) operations per worker over \(churned.joined(separator: ", ")) and "
                + "\(kept); \(log.keyRemovalCount) key removals, \(log.namespaceRemovalCount) namespace removals, "
                + "\(log.globalRemovals.count) removeAll(), \(log.storeCount) stores; \(log.reads.count) reads checked "
                + "against them, \(stale.count) stale")
    }
}
