// Scenario 8, expiry: keys stored with short `.after` expiries (150–600 ms) are read over and over by all
// workers (get-or-generate, cache-only, metadata). No cached value may have expired before the call began
// (metadata expiresAt against the wall clock) or carry another expiry than it was stored with; listing
// leaves expired entries out and `removeExpired()` removes them all.

import Foundation
import YashimaShared

enum ExpiryScenario: Scenario {
    static let name = "expiry"
    static let summary = "short .after expiries: never returned after expiring, in any worker"

    static func key(_ index: Int) -> CacheKey {
        let spec =
            index % 4 == 3
            ? PayloadSpec(kind: .string, size: 300) : PayloadSpec(kind: .data, size: [800, 6_000, 90_000][index % 3])
        return StressKey.make("expiry", "k\(index)", spec)
    }

    static func expiryMilliseconds(_ index: Int) -> Int { 150 + (index % 4) * 150 }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let keys = worker.plan["keys"]
        let duration = UInt64(worker.plan["durationMilliseconds"]) * 1_000_000
        // Odd workers keep nothing in memory: their cached values all come from storage.
        let cache = worker.makeCache(memoryBudget: worker.index % 2 == 1 ? 0 : nil)
        try cache.openStorage()
        await worker.awaitGo()
        let end = monotonicNanoseconds() + duration
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<2 {
                group.addTask {
                    var random = worker.random(UInt64(lane))
                    while monotonicNanoseconds() < end && !worker.stopRequested {
                        let index = random.below(keys)
                        await read(worker, cache, index, roll: random.below(100))
                    }
                }
            }
        }
    }

    private static func read(_ worker: WorkerContext, _ cache: YCache, _ index: Int, roll: Int) async {
        let key = key(index)
        let label = StressKey.label(key)
        let expiry = expiryMilliseconds(index)
        var options = YCache.Options()
        options.expiry = .after(.milliseconds(expiry))
        let callStart = wallNanoseconds()
        do {
            if roll < 70 {
                guard let fetched = await worker.fetch(cache, key, options: options) else { return }
                // A value this call (or a task it joined) generated is fresh, not cached: nothing to check.
                if fetched.source != .generated {
                    check(worker, label, fetched.metadata, callStart, expiry, "\(fetched.source)")
                }
            } else if roll < 85 {
                let start = monotonicNanoseconds()
                if let fetched = try await worker.expected.cached(cache, key, options: options) {
                    worker.tally.record(
                        fetched, nanoseconds: monotonicNanoseconds() - start, describe: "\(label) cache-only")
                    check(worker, label, fetched.metadata, callStart, expiry, "cache-only \(fetched.source)")
                } else {
                    worker.tally.operation(nanoseconds: monotonicNanoseconds() - start, miss: true)
                }
            } else {
                let start = monotonicNanoseconds()
                let metadata = try await KindOperations.metadata(cache, key)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start, miss: metadata == nil)
                if let metadata { check(worker, label, metadata, callStart, expiry, "metadata") }
            }
        } catch {
            worker.tally.error("\(label): \(error)")
        }
    }

    private static func check(
        _ worker: WorkerContext, _ label: String, _ metadata: YCache.Metadata?, _ callStart: Int64, _ expiry: Int,
        _ how: String
    ) {
        guard let metadata else {
            worker.tally.wrong("\(label) (\(how)) has no metadata")
            return
        }
        guard let expiresAt = metadata.expiresAt?.nanosecondsSince1970 else {
            worker.tally.wrong("\(label) (\(how)) has no expiry")
            return
        }
        let margin: Int64 = 1_000  // metadata dates carry ~0.25 µs of rounding
        if expiresAt + margin < callStart {
            worker.tally.wrong(
                "\(label) (\(how)) was returned \(String(format: "%.3f", Double(callStart - expiresAt) / 1e6)) ms after it expired"
            )
        }
        let lifetime = expiresAt - metadata.createdAt.nanosecondsSince1970
        if abs(lifetime - Int64(expiry) * 1_000_000) > 1_000_000 {
            worker.tally.wrong("\(label) (\(how)) was stored to live \(Double(lifetime) / 1e6) ms, not \(expiry) ms")
        }
        worker.tally.count("checked")
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let keys = run.setting("keys", smoke: 16, standard: 40)
        let duration = run.setting("durationMilliseconds", smoke: 4_000, standard: 15_000)
        let results = try run.runPhase("read", workers: run.workerCount)

        // Listing leaves out what has expired.
        let judge = run.judgeCache()
        let listedAt = wallNanoseconds()
        let listed = try await judge.entries()
        let expiredListed = listed.filter { ($0.metadata.expiresAt?.nanosecondsSince1970 ?? .max) + 1_000 < listedAt }
        run.expect(expiredListed.isEmpty, "entries(in:) listed \(expiredListed.count) expired entries")
        let check = await run.verifyStorage(expiring: true)
        run.require(check, "storage")

        // Once everything has expired, removeExpired() removes every entry file.
        let latest = listed.compactMap { $0.metadata.expiresAt?.nanosecondsSince1970 }.max() ?? 0
        let wait = latest - wallNanoseconds()
        // waiting for the wall clock, not for a process
        if wait > 0 { usleep(UInt32(min(wait / 1_000 + 5_000, 5_000_000))) }
        let removed = try await judge.removeExpired()
        let left = StorageProbe.entryFiles(run.cacheDirectory).count
        run.expect(left == 0, "\(left) entry files remain after every entry expired and removeExpired() ran")

        let checked = results.reduce(0) { $0 + ($1.counters["checked"] ?? 0) }
        let seen = run.generationCounts().values.reduce(0, +)
        run.generations(expected: keys, atLeast: true, seen: seen)
        run.note(
            "\(keys) keys with expiries of 150–600 ms read for \(duration / 1000) s by \(run.workerCount) workers; "
                + "\(checked) cached values checked against the clock, none expired; \(seen) generations "
                + "(regenerated after expiry); afterwards \(removed) expired entries removed by removeExpired(), none left"
        )
    }
}
