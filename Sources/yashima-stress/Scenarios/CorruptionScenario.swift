// Scenario 6, corruption: while workers read, the orchestrator replaces entry files with damaged copies
// (flipped, truncated, zero-filled, extended, emptied, another entry's file) written aside and renamed
// over the entry path, never into a file a worker may have mapped (outside the contract of any mmap store);
// between phases it damages files in place. Every read is correct or a miss that regenerates.

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
        // Odd workers keep nothing in memory: every read of theirs goes to the files being damaged.
        let cache = worker.makeCache(memoryBudget: worker.index % 2 == 1 ? 0 : nil)
        try cache.openStorage()
        await worker.awaitGo()
        switch worker.phase {
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
        let seen = run.generationCounts().values.reduce(0, +)
        run.generations(expected: keys, atLeast: true, seen: seen)
        let kinds = counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        run.note("\(replaced) entry files replaced by damaged copies while \(run.workerCount) workers read (\(kinds))")
        run.note(
            "readers detected \(detected) corrupt entries and regenerated them; \(inPlace) files damaged in place "
                + "between phases, \(regenerated) regenerated by the verify pass; never a wrong value")
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
