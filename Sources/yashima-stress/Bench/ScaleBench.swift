// Section "scale": storage-hit latency as the directory grows (must stay flat), write cost as writes
// push the directory past its budget (trimming must not put a full scan on every write), one trim pass,
// and the memory layer's bookkeeping per entry.

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum ScaleBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("scale: directory size and trimming (4 KiB values)")
        let large = context.quick ? 10_000 : 100_000
        let payload = Data(count: 4096)
        // Two directories, 1,000 and `large` entries, probed in alternating rounds so that both see the
        // same machine state (measured one after the other, a change in load moved the ratio by 50 %).
        let smallCache = YCache(
            storageDirectory: context.directory("scale-small"), memoryMaximumCost: 0, storageMaximumByteCount: nil)
        let directory = context.directory("scale")
        let cache = YCache(storageDirectory: directory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
        for (target, fill) in [(1_000, smallCache), (large, cache)] {
            for index in 0..<target {
                _ = try await fill.data(for: CacheKey(namespace: "scale", identity: "e\(index)")) { payload }
            }
        }
        var hits: [Int: Samples] = [1_000: Samples(), large: Samples()]
        for round in 0..<8 {
            let (target, probed) = round % 2 == 0 ? (1_000, smallCache) : (large, cache)
            let probes = (0..<1000).map { CacheKey(namespace: "scale", identity: "e\($0 * (target / 1000))") }
            var index = 0
            let samples = try await measureAsync(rounds: 1, iterations: 2000) {
                _ = try await probed.data(for: probes[index % probes.count]) { payload }
                index += 1
            }
            hits[target]!.append(contentsOf: samples)
        }
        report.add(BenchRow(section: "scale", name: "storage hit with 1000 entries", samples: hits[1_000]!))
        report.add(
            BenchRow(section: "scale", name: "storage hit with \(large) entries", samples: hits[large]!),
            comparedTo: "storage hit with 1000 entries", limit: 1.3)

        // One trim pass over every entry: an explicit trim recounts the whole directory, then unlinks
        // least-recently-used entries down to the budget, here 90 % of the current bytes. (Removing half,
        // as before, spent minutes in unlink alone on this project's virtual disk: see the note.)
        let usage = try await cache.storageUsage()
        let trimmer = YCache(
            storageDirectory: directory, memoryMaximumCost: 0,
            storageMaximumByteCount: Int(Double(usage.byteCount) * 0.9))
        let start = monotonicNanoseconds()
        try await trimmer.trimStorageIfNeeded()
        let trimTime = Double(monotonicNanoseconds() - start)
        let removed = usage.entryCount - (try await cache.storageUsage()).entryCount
        report.add(
            BenchRow(
                section: "scale", name: "one trim pass over \(usage.entryCount) entries",
                samples: Samples([trimTime]),
                note: "down to 90 % of the bytes: removed \(removed) entries, "
                    + formatNanoseconds(trimTime / Double(max(1, removed)))
                    + " per removed entry"))

        // Writes past the budget: per-write cost stays flat because trim works from an index.
        let budgetDirectory = context.directory("scale-budget")
        // The budget holds `capacity` entries (4 KiB payload + header = 8 KiB charged): the first 70 % of
        // that many writes are under it, and from 1.5 × capacity on every write lands over it.
        let capacity = context.quick ? 1000 : 2000
        let budget = capacity * 8192
        let budgeted = YCache(storageDirectory: budgetDirectory, memoryMaximumCost: 0, storageMaximumByteCount: budget)
        var below = Samples()
        var above = Samples()
        let writes = context.quick ? 2500 : 20_000
        for index in 0..<writes {
            let start = monotonicNanoseconds()
            _ = try await budgeted.data(for: CacheKey(namespace: "fill", identity: "f\(index)")) { payload }
            let elapsed = Double(monotonicNanoseconds() - start)
            if index < capacity * 7 / 10 {
                below.append(elapsed)
            } else if index >= capacity * 3 / 2 {
                above.append(elapsed)
            }
        }
        report.add(BenchRow(section: "scale", name: "write while under budget", samples: below))
        report.add(
            BenchRow(section: "scale", name: "write while over budget (trimming)", samples: above),
            comparedTo: "write while under budget")

        // L1 bookkeeping: resident memory growth per memory item (tiny values, so overhead dominates),
        // measured in a fresh process: in this one, heap freed by earlier sections is reused and the
        // growth reads as almost nothing.
        let child = try ChildProcess(context.executable, ["worker", "l1-footprint", "--items", "50000"])
        let footprint = child.readJSON(timeout: ChildProcess.benchPatience)
        child.finish()
        let perItem = footprint?["bytesPerEntry"] as? Double ?? .nan
        report.add(
            BenchRow(
                section: "scale", name: "L1 bookkeeping per entry",
                note: String(
                    format: "%.0f bytes/entry (RSS growth of a fresh process over 50000 entries with 1-byte values)",
                    perItem)))
    }

    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
