// Scenario 9, restart: workers write entries (some then removed, some expiring), one is SIGKILLed while
// publishing, and the orchestrator plants staging debris two hours old, a young staging file and an
// abandoned lock file. A fresh process reopens the directory: every valid entry is found, removed and
// expired ones are not, and `trimStorageIfNeeded()` cleans the old debris but keeps the young file.

import Foundation
import Glibc
import YashimaShared

enum RestartScenario: Scenario {
    static let name = "restart"
    static let summary = "reopen after others wrote: every valid entry found; old staging debris trimmed"

    static func regularKey(_ index: Int) -> CacheKey {
        let kinds = PayloadKind.allCases
        let kind = kinds[index % kinds.count]
        let size: Int
        switch kind {
        case .data: size = [600, 15_000, 120_000][index % 3]
        case .compressed: size = 12_000
        case .json, .plist: size = 40
        case .string: size = 900
        }
        return StressKey.make("restart", "r\(index)", PayloadSpec(kind: kind, size: size))
    }

    static func goneKey(_ index: Int) -> CacheKey {
        StressKey.make("restart", "gone\(index)", PayloadSpec(kind: .data, size: 2_000))
    }

    static func expiringKey(_ index: Int) -> CacheKey {
        StressKey.make("restart", "exp\(index)", PayloadSpec(kind: .data, size: 3_000))
    }

    static var crashKey: CacheKey { StressKey.make("restart", "crash", PayloadSpec(kind: .data, size: 8 << 20)) }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let regular = (0..<worker.plan["keys"]).map(regularKey)
        let gone = (0..<worker.plan["goneKeys"]).map(goneKey)
        let expiring = (0..<worker.plan["expiringKeys"]).map(expiringKey)
        let cache = worker.makeCache()
        try cache.openStorage()
        var random = worker.random()
        switch worker.phase {
        case "write":
            await worker.awaitGo()
            for key in shuffled(regular + gone, &random) { await worker.fetch(cache, key) }
            var options = YCache.Options()
            options.expiry = .after(.milliseconds(worker.plan["expiryMilliseconds"]))
            for key in expiring { await worker.fetch(cache, key, options: options) }
            await worker.awaitGo()  // everyone has written: now remove
            if worker.index == 0 {
                for key in gone {
                    do { try await KindOperations.remove(cache, key) } catch { worker.tally.error("remove: \(error)") }
                }
            }
        case "crash":
            await worker.awaitGo()
            let hooks = worker.recordingHooks(crashKey)
            let announce = GeneratorHooks(
                willGenerate: hooks.willGenerate, didGenerate: { WorkerOutput.send("PUBLISHING") })
            await worker.fetch(cache, crashKey, hooks: announce)
        case "reopen":
            await worker.awaitGo()
            for key in regular {
                let found = await cachedRead(worker, cache, key)
                worker.tally.count(found ? "found" : "missing")
                if !found { worker.tally.error("\(StressKey.label(key)) was not found after the restart") }
            }
            for key in gone + expiring {
                if await cachedRead(worker, cache, key) {
                    worker.tally.wrong("\(StressKey.label(key)) was found after it was removed or expired")
                }
            }
            if await cachedRead(worker, cache, crashKey) { worker.tally.count("crashKeyFound") }
            do { try await cache.trimStorageIfNeeded() } catch { worker.tally.error("trimStorageIfNeeded: \(error)") }
        default:
            throw ArgumentError(description: "unknown phase \(worker.phase)")
        }
    }

    private static func cachedRead(_ worker: WorkerContext, _ cache: YCache, _ key: CacheKey) async -> Bool {
        let start = monotonicNanoseconds()
        do {
            guard let fetched = try await worker.expected.cached(cache, key) else {
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start, miss: true)
                return false
            }
            worker.tally.record(
                fetched, nanoseconds: monotonicNanoseconds() - start, describe: "\(StressKey.label(key)) after restart")
            return true
        } catch {
            worker.tally.error("\(StressKey.label(key)): \(error)")
            return false
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let keys = run.setting("keys", smoke: 30, standard: 120)
        let goneCount = run.setting("goneKeys", smoke: 6, standard: 20)
        let expiringCount = run.setting("expiringKeys", smoke: 6, standard: 20)
        let expiry = run.setting("expiryMilliseconds", 300)
        var random = SplitMix64(seed: run.seed ^ 0x2E57A27)

        let writers = try run.startPhase("write", workers: run.workerCount)
        writers.release(deadline: run.deadline)
        run.finishPhase(writers)
        let written = wallNanoseconds()
        let counts = run.generationCounts(phase: "write")
        // Exactly once, except the expiring keys: one may expire before a slow worker reads it.
        let lasting = (0..<keys).map(regularKey) + (0..<goneCount).map(goneKey)
        let wrongCounts = lasting.map(StressKey.label).filter { counts[$0] != 1 }.map { "\($0) ×\(counts[$0] ?? 0)" }
        run.expect(
            wrongCounts.isEmpty, "entries not generated exactly once: " + wrongCounts.prefix(6).joined(separator: ", "))
        let expiringLabels = (0..<expiringCount).map { StressKey.label(expiringKey($0)) }
        run.expect(expiringLabels.allSatisfy { counts[$0, default: 0] >= 1 }, "an expiring entry was never generated")
        run.generations(
            expected: lasting.count + expiringCount, atLeast: expiringLabels.contains { counts[$0, default: 0] > 1 },
            seen: counts.values.reduce(0, +))

        // A writer killed while publishing a large entry.
        let crasher = try run.startPhase("crash", workers: 1)
        crasher.wait(
            deadline: run.deadline,
            onLine: { worker, line in
                guard line == "PUBLISHING" else { return }
                usleep(UInt32(random.below(4_000)))
                crasher.kill(worker)
            })
        run.absorb(crasher)

        // Debris: everything now in tmp/ is made two hours old (as if its writer died long ago), plus planted
        // old files, one young staging file that must survive, and an abandoned lock file.
        let root = run.cacheDirectory
        let realDebris = StorageProbe.stagingFiles(root).count
        for file in StorageProbe.stagingFiles(root) { _ = StorageProbe.backdate(file.path, bySeconds: 7_200) }
        for index in 0..<3 {
            let path = root + "/tmp/stress-old-\(index).staging"
            run.expect(
                FileManager.default.createFile(atPath: path, contents: Data(count: 5_000)), "could not plant debris")
            run.expect(StorageProbe.backdate(path, bySeconds: 7_200), "could not backdate debris")
        }
        let young = root + "/tmp/stress-young.staging"
        run.expect(
            FileManager.default.createFile(atPath: young, contents: Data(count: 100)),
            "could not plant a young staging file")
        try FileManager.default.createDirectory(atPath: root + "/locks/ab", withIntermediateDirectories: true)
        let abandonedLock = root + "/locks/ab/ab" + String(repeating: "0", count: 62) + ".lock"
        run.expect(FileManager.default.createFile(atPath: abandonedLock, contents: nil), "could not plant a lock file")
        // Trim sweeps lock files nobody has held for an hour (I6): this one was left by a process long gone.
        run.expect(StorageProbe.backdate(abandonedLock, bySeconds: 7_200), "could not backdate the lock file")
        // With --users, planted files look like the cache's own: group-shared modes (after the backdating:
        // chmod leaves mtimes alone).
        for path in [young, root + "/locks/ab", abandonedLock] + (0..<3).map({ root + "/tmp/stress-old-\($0).staging" })
        {
            SharedUsers.share(path)
        }

        // Let the expiring entries expire (waiting for the wall clock, not for a process).
        let wait = written + Int64(expiry + 50) * 1_000_000 - wallNanoseconds()
        if wait > 0 { usleep(UInt32(wait / 1_000)) }

        let reopened = try run.runPhase("reopen", workers: 1)
        let found = reopened.reduce(0) { $0 + ($1.counters["found"] ?? 0) }
        let crashFound = reopened.reduce(0) { $0 + ($1.counters["crashKeyFound"] ?? 0) }
        run.expect(found == keys, "after the restart \(found) of \(keys) entries were found")

        let staging = StorageProbe.stagingFiles(root)
        let now = Int(wallNanoseconds() / 1_000_000_000)
        let old = staging.filter { now - $0.modifiedSeconds >= 3_600 }
        run.expect(old.isEmpty, "trimming left \(old.count) staging files older than an hour")
        run.expect(
            staging.contains { $0.path == young }, "trimming removed a young staging file (someone's write in progress)"
        )
        run.expect(!FileManager.default.fileExists(atPath: abandonedLock), "trimming left an abandoned lock file")

        let check = await run.verifyStorage(expiring: true)
        run.require(check, "storage")
        run.expect(
            check.listed == keys + crashFound, "storage lists \(check.listed) entries, expected \(keys + crashFound)")
        let usage = try await run.judgeCache().storageUsage()
        let probed = StorageProbe.usage(root)
        run.expect(
            usage.byteCount == probed.payload && usage.allocatedByteCount == probed.allocated,
            "storageUsage() disagrees with the directory")
        run.note(
            "\(keys) entries written by \(run.workerCount) workers, \(goneCount) removed, \(expiringCount) expired; "
                + "a fresh process found all \(found) valid ones and none of the others")
        run.note(
            "publisher SIGKILLed mid-write (\(counted(realDebris, "staging file")) left, large entry \(crashFound == 1 ? "published" : "not published")); "
                + "trim removed \(realDebris + 3) old staging files and the abandoned lock, kept the young staging file"
        )
    }
}
