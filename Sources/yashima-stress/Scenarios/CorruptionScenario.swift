// Scenario 6, corruption: while workers read, the orchestrator replaces entry files with damaged copies
// (flipped, truncated, zero-filled, extended, emptied, another entry's file) written aside and renamed
// over the entry path, never into a file a worker may have mapped (outside the contract of any mmap store);
// between phases it damages files in place. Every read is correct or a miss that regenerates. Then the
// `auxiliary` phase damages `state` and `trim.lock` in place (I14), under workers that have them open and
// mapped and keep getting, refreshing, trimming and removing: every call must succeed with the right
// value, and no read after a removal may return what it removed (I10).

import Foundation
import Glibc
import YashimaShared

enum CorruptionScenario: Scenario {
    static let name = "corruption"
    static let summary =
        "entry files flipped/truncated/zeroed/replaced while workers read: correct or a regenerated miss"

    static func key(_ index: Int) -> CacheKey {
        let specs = [
            PayloadSpec(kind: .data, size: 500), PayloadSpec(kind: .data, size: 9_000),
            PayloadSpec(kind: .data, size: 100_000),
            PayloadSpec(kind: .compressed, size: 20_000), PayloadSpec(kind: .json, size: 50),
            PayloadSpec(kind: .string, size: 700), PayloadSpec(kind: .data, size: 300_000),
        ]
        return StressKey.make("corrupt", "k\(index)", specs[index % specs.count])
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        let keys = worker.plan["keys"]
        // Odd workers keep nothing in memory: every read of theirs goes to the files being damaged. In the
        // auxiliary phase a small budget makes writes trim, through trim.lock.
        let cache = worker.makeCache(
            budget: worker.phase == "auxiliary" ? worker.plan["auxiliaryBudget"] : nil,
            memoryBudget: worker.index % 2 == 1 ? 0 : nil)
        try cache.openStorage()
        await worker.awaitGo()
        switch worker.phase {
        case "auxiliary":
            await auxiliaryWork(worker, cache, keys: keys)
        case "fill", "verify":
            for index in 0..<keys { await worker.fetch(cache, key(index)) }
        case "read":
            let limit = worker.plan["operations"]
            await withTaskGroup(of: Void.self) { group in
                for lane in 0..<2 {
                    group.addTask {
                        var random = worker.random(UInt64(lane))
                        var done = 0
                        while !worker.stopRequested && done < limit / 2 {
                            await worker.fetch(cache, key(random.below(keys)))
                            done += 1
                        }
                    }
                }
            }
        default:
            throw ArgumentError(description: "unknown phase \(worker.phase)")
        }
    }

    /// Two lanes of checked reads, cache-only reads, refreshes, removals and trims, each logged for the
    /// removal check; every failure counts as an error (reads throw instead of missing).
    private static func auxiliaryWork(_ worker: WorkerContext, _ cache: YCache, keys: Int) async {
        let limit = worker.plan["operations"]
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<2 {
                group.addTask {
                    var random = worker.random(UInt64(lane) + 100)
                    var done = 0
                    while !worker.stopRequested && done < limit / 2 {
                        await auxiliaryOperation(worker, cache, key(random.below(keys)), roll: random.below(100))
                        done += 1
                    }
                }
            }
        }
        let statistics = cache.statistics
        worker.tally.count("repairs", statistics.auxiliaryFileRepairs)
        worker.tally.count("writeFailures", statistics.writeFailures)
    }

    private static func auxiliaryOperation(_ worker: WorkerContext, _ cache: YCache, _ key: CacheKey, roll: Int) async {
        var options = YCache.Options()
        options.readFailurePolicy = .throwError  // a directory that cannot be used is an error here, not a miss
        let label = StressKey.label(key)
        let start = monotonicNanoseconds()
        let wallStart = wallNanoseconds()
        do {
            switch roll {
            case 0..<60, 85..<92:
                if roll >= 85 { options.lookupPolicy = .refresh }
                if let fetched = await worker.fetch(cache, key, options: options) {
                    guard let created = fetched.metadata?.createdAt.nanosecondsSince1970 else {
                        worker.tally.wrong("\(label) has no metadata")
                        return
                    }
                    if fetched.source == .generated && !fetched.shared {
                        worker.event("made \(label) \(created) \(wallNanoseconds())")
                    } else if fetched.origin == .remote {
                        worker.event("fetched \(label) \(created) \(wallNanoseconds())")
                    } else {
                        worker.event("read \(label) \(wallStart) \(created) value")
                    }
                }
            case 60..<72:
                if let fetched = try await worker.expected.cached(cache, key, options: options) {
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
            case 72..<85:
                try await KindOperations.remove(cache, key)
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
                worker.event("remove \(label) \(wallStart) \(wallNanoseconds())")
            default:
                try await cache.trimStorageIfNeeded()
                worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
            }
        } catch {
            worker.tally.error("\(label): \(error)")
        }
    }

    // MARK: Judge

    private enum Damage: CaseIterable {
        case flipNearStart, flipAnywhere, flipNearEnd, truncate, zeroFill, extend, empty, otherEntry
    }

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let keys = run.setting("keys", smoke: 28, standard: 70)
        run.setting("operations", smoke: 200_000, standard: 2_000_000)
        let duration = UInt64(run.profile.isSmoke ? 4_000 : 15_000) * 1_000_000
        var random = SplitMix64(seed: run.seed ^ 0xC0_7707)
        var counts: [String: Int] = [:]

        try run.runPhase("fill", workers: 1)

        // Readers run while entry files are replaced by damaged copies (rename over the entry path).
        let fleet = try run.startPhase("read", workers: run.workerCount)
        let stopAt = monotonicNanoseconds() + duration
        var lastDamage: UInt64 = 0
        var stopped = false
        var scratch = 0
        run.finishPhase(
            fleet,
            tick: {
                let now = monotonicNanoseconds()
                if now >= stopAt {
                    if !stopped { fleet.broadcast("STOP") }
                    stopped = true
                    return
                }
                guard now - lastDamage >= 8_000_000 else { return }
                lastDamage = now
                let files = StorageProbe.entryFiles(run.cacheDirectory)
                guard let target = files.isEmpty ? nil : files[random.below(files.count)] else { return }
                // replaced meanwhile
                guard var bytes = try? Data(contentsOf: URL(fileURLWithPath: target.path)) else { return }
                let damage = Damage.allCases[random.below(Damage.allCases.count)]
                if damage == .otherEntry {
                    guard let other = files.first(where: { $0.path != target.path }),
                        // replaced meanwhile: skip
                        let otherBytes = try? Data(contentsOf: URL(fileURLWithPath: other.path))
                    else { return }
                    bytes = otherBytes
                } else {
                    apply(damage, to: &bytes, &random)
                }
                scratch += 1
                let aside = run.directory + "/scratch/damaged-\(scratch)"
                guard (try? bytes.write(to: URL(fileURLWithPath: aside))) != nil else { return }  // disk trouble: skip
                if rename(aside, target.path) == 0 {
                    counts["\(damage)", default: 0] += 1
                } else {
                    unlink(aside)
                }
            })
        let replaced = counts.values.reduce(0, +)
        run.expect(replaced > 0, "no entry file was damaged while workers read")

        // No worker running: damage files in place too.
        var inPlace = 0
        for file in StorageProbe.entryFiles(run.cacheDirectory) where random.chance(50) {
            let fd = open(file.path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            let size = Int(file.size)
            if random.chance(50) || size < 2 {
                _ = ftruncate(fd, off_t(random.below(max(1, size))))
            } else {
                var byte: UInt8 = 0
                let offset = off_t(random.below(size))
                if pread(fd, &byte, 1, offset) == 1 {
                    byte ^= 0x5A
                    _ = pwrite(fd, &byte, 1, offset)
                }
            }
            inPlace += 1
        }

        // Fresh readers: every key correct (from storage, or regenerated after a miss).
        let verify = try run.runPhase("verify", workers: run.workerCount)
        let regenerated = verify.reduce(0) { $0 + $1.generated }
        let check = await run.verifyStorage()
        run.require(check, "storage")
        run.expect(check.listed == keys, "storage lists \(check.listed) of \(keys) keys after the verify pass")

        let detected = fleet.workers.compactMap(\.result).reduce(0) { $0 + $1.corruptEntries }

        try await auxiliaryPhase(run, &random)

        let seen = run.generationCounts().values.reduce(0, +)
        run.generations(expected: keys, atLeast: true, seen: seen)
        let kinds = counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        run.note("\(replaced) entry files replaced by damaged copies while \(run.workerCount) workers read (\(kinds))")
        run.note(
            "readers detected \(detected) corrupt entries and regenerated them; \(inPlace) files damaged in place "
                + "between phases, \(regenerated) regenerated by the verify pass; never a wrong value")
    }

    /// The ways `state` and `trim.lock` are damaged in place (the five, a flipped version byte,
    /// and for trim.lock a folder or FIFO planted in its place).
    private enum AuxiliaryDamage: String, CaseIterable {
        case flipHeaderByte, flipVersionByte, flipMiddleByte, truncateToHalf, truncateToZero, fillWithZeros
        case plantFolder, plantFIFO
    }

    /// Workers get, refresh, trim and remove while `state` and `trim.lock` are damaged in place every few
    /// milliseconds. Judged: no wrong value, no error, no hang or crash (a truncated state file would kill
    /// them with SIGBUS), no read after a removal returning what it removed, one good state file at the end.
    @MainActor private static func auxiliaryPhase(_ run: ScenarioRun, _ random: inout SplitMix64) async throws {
        run.setting("auxiliaryBudget", 512 * 1024)
        let duration = UInt64(run.profile.isSmoke ? 3_000 : 10_000) * 1_000_000
        let fleet = try run.startPhase("auxiliary", workers: run.workerCount)
        let stopAt = monotonicNanoseconds() + duration
        var lastDamage: UInt64 = 0
        var stopped = false
        var counts: [String: Int] = [:]
        var generator = random
        run.finishPhase(
            fleet,
            tick: {
                let now = monotonicNanoseconds()
                if now >= stopAt {
                    if !stopped { fleet.broadcast("STOP") }
                    stopped = true
                    return
                }
                guard now - lastDamage >= 40_000_000 else { return }
                lastDamage = now
                let file = generator.chance(60) ? "state" : "trim.lock"
                var choices = AuxiliaryDamage.allCases
                if file == "state" { choices.removeAll { $0 == .plantFolder || $0 == .plantFIFO } }
                let damage = choices[generator.below(choices.count)]
                if damageInPlace(run.cacheDirectory + "/" + file, damage) {
                    counts["\(file) \(damage)", default: 0] += 1
                }
            })
        random = generator
        let results = fleet.workers.compactMap(\.result)
        let repairs = results.reduce(0) { $0 + ($1.counters["repairs"] ?? 0) }
        let writeFailures = results.reduce(0) { $0 + ($1.counters["writeFailures"] ?? 0) }
        let damaged = counts.values.reduce(0, +)
        run.expect(damaged > 0, "no auxiliary file was damaged while workers ran")
        run.expect(repairs > 0, "\(damaged) auxiliary files damaged, none repaired")
        run.expect(writeFailures == 0, "\(writeFailures) writes failed while auxiliary files were damaged")
        let log = RemovalVisibility(run.eventRecords())
        let stale = log.staleReads(localRemovalsOnly: run.plan.remote != nil)
        run.countWrongValues(stale.count)
        run.expect(
            stale.isEmpty, "\(stale.count) reads returned removed entries: " + stale.prefix(3).joined(separator: "; "))
        // The next open (the verify pass's, the judge's) repairs whatever the last damage left.
        let judge = run.judgeCache()
        try? judge.openStorage()
        run.expect(isGoodStateFile(run.cacheDirectory + "/state"), "no good state file after the auxiliary phase")
        run.require(await run.verifyStorage(), "storage after the auxiliary phase")
        let kinds = counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        run.note(
            "auxiliary phase: \(damaged) in-place damages of state and trim.lock while \(run.workerCount) workers ran "
                + "(\(kinds)); \(repairs) repairs; \(log.reads.count) reads and \(log.keyRemovalCount) removals "
                + "checked, \(stale.count) stale")
    }

    /// Damages `path` in place (never a rename: the same inode the workers have open and mapped).
    private static func damageInPlace(_ path: String, _ damage: AuxiliaryDamage) -> Bool {
        switch damage {
        case .plantFolder, .plantFIFO:
            guard unlink(path) == 0 || errno == ENOENT else { return false }
            if damage == .plantFolder {
                // Any user of a group-shared run must be able to move it aside (a folder's ".." changes).
                guard mkdir(path, 0o777) == 0 else { return false }
                return chmod(path, 0o777) == 0
            }
            guard mkfifo(path, 0o666) == 0 else { return false }
            return chmod(path, 0o666) == 0
        default:
            break
        }
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return false }
        let size = Int(status.st_size)
        func flip(_ offset: Int) -> Bool {
            var byte: UInt8 = 0
            if size > offset { _ = pread(fd, &byte, 1, off_t(offset)) }
            byte ^= 0xFF
            return pwrite(fd, &byte, 1, off_t(offset)) == 1
        }
        switch damage {
        case .flipHeaderByte: return flip(3)
        case .flipVersionByte: return flip(8)
        case .flipMiddleByte: return flip(size / 2)
        case .truncateToHalf: return ftruncate(fd, off_t(size / 2)) == 0
        case .truncateToZero: return ftruncate(fd, 0) == 0
        case .fillWithZeros:
            let zeros = [UInt8](repeating: 0, count: max(size, 4096))
            return pwrite(fd, zeros, zeros.count, 0) == zeros.count
        case .plantFolder, .plantFIFO: return false
        }
    }

    /// Whether `path` is a good state file: a regular file of 65,536 bytes with the magic and version 1.
    private static func isGoodStateFile(_ path: String) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size == 65_536,
            let data = FileManager.default.contents(atPath: path)
        else { return false }
        return Array(data.prefix(16)) == Array("YSHSTATE".utf8) + [1, 0, 0, 0, 0, 0, 0, 0]
    }

    private static func apply(_ damage: Damage, to bytes: inout Data, _ random: inout SplitMix64) {
        let count = bytes.count
        guard count > 0 else { return }
        switch damage {
        case .flipNearStart:
            let index = random.below(min(count, 200))
            bytes[index] ^= UInt8(1 + random.below(255))
        case .flipAnywhere:
            for _ in 0..<(1 + random.below(3)) {
                let index = random.below(count)
                bytes[index] ^= UInt8(1 + random.below(255))
            }
        case .flipNearEnd:
            let index = count - 1 - random.below(min(count, 64))
            bytes[index] ^= UInt8(1 + random.below(255))
        case .truncate:
            bytes = bytes.prefix(random.below(count))
        case .zeroFill:
            let start = random.below(count)
            let length = 1 + random.below(min(4_096, count - start))
            bytes.replaceSubrange(start..<(start + length), with: Data(count: length))
        case .extend:
            bytes.append(Data((0..<(1 + random.below(100))).map { _ in UInt8(random.below(256)) }))
        case .empty:
            bytes = Data()
        case .otherEntry:
            break
        }
    }
}
