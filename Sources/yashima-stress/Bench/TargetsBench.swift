// Section "targets": issue 34's targets, each a median ratio against its C floor (Benchmarks/floors) in one
// run, where a user meets it, through the public API: storage hits on random keys at 1k, 100k and 1M
// entries; a local miss and publish at 4 KiB and 1 MiB; the memory hit; the stampede, fresh and warm, at
// 8, 32 and 64 processes (StampedeBench); a fresh process's open and first hit, spawn to exit, against a C
// process's open+read+close (FirstOpenBench); Redis and HTTP remote hits (RemoteBench, HTTPRemoteBench). Each
// row carries its verdict and the load average it was measured under; a table of them closes the section.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

enum TargetsBench {
    static func run(_ context: BenchContext) async throws {
        let first = context.report.rows.count
        for size in context.scaleSizes { try await storageHits(size, context) }
        for size in [4 << 10, 1 << 20] { try await missAndPublish(size, context) }
        try await memoryHit(context)
        try await StampedeBench.run(context)
        try await FirstOpenBench.run(context)
        try await RemoteBench.run(context, url: context.remoteURL)
        try await HTTPRemoteBench.run(context)
        summary(Array(context.report.rows[first...]), context)
    }

    /// The label of an entry count: 1k, 100k, 1M.
    static func label(_ size: Int) -> String {
        size >= 1_000_000 ? "\(size / 1_000_000)M" : size >= 1000 ? "\(size / 1000)k" : "\(size)"
    }

    /// Storage hits on random keys of a directory of `size` 1 KiB entries (the scale section's, made once
    /// and reused) against the C floor's open+fstat+read+close of the same entry files in the same order;
    /// chunks alternate which goes first (the second finds the first's dentries and pages warm).
    /// `filled`: what the caller's fill did (nil: this fills the directory first).
    static func storageHits(_ size: Int, _ context: BenchContext, section: String = "targets", filled: String? = nil)
        async throws
    {
        let report = context.report
        let label = label(size)
        report.section("\(section): storage hit, random keys, \(label) entries of 1 KiB (memory layer off)")
        let directory = URL(fileURLWithPath: context.scaleDirectory).appendingPathComponent("n\(size)")
        let filled = try filled ?? ScaleBench.fill(directory, size: size, context)
        let cache = YCache(storageDirectory: directory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
        let storage = try cache.storageOperator()
        var random = SplitMix64(seed: UInt64(size) &* 34)
        let probeCount = context.quick ? 10_000 : 40_000
        let keys = (0..<probeCount).map { _ in ScaleKeys.key(Int(random.next() % UInt64(size))) }
        let codec = DataCodec()
        // Relative to the root, opened from it (openat), as the library opens its entries.
        let paths = keys.map { storage.entryPath(for: $0, codecIdentifier: codec.identifier) }
        let list = try Floors.scratchFile(context, "paths-\(size)")
        try (paths.joined(separator: "\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let floor = try FloorServer(context, "read", ["--paths", list, "--root", directory.path])
        var hits = Samples()
        var misses = 0
        let rounds = 20
        let chunk = probeCount / rounds
        for round in 0..<rounds {
            let range = (round * chunk)..<((round + 1) * chunk)
            for pass in 0..<2 {
                if (round + pass) % 2 == 0 {
                    try floor.run("R \(range.lowerBound) \(range.upperBound)")
                } else {
                    for index in range {
                        let start = monotonicNanoseconds()
                        let value = try await cache.valueIfCached(for: keys[index], codec: codec)
                        hits.append(Double(monotonicNanoseconds() - start))
                        if value == nil { misses += 1 }
                    }
                }
            }
        }
        let floorRow = floorName("open+fstat+read+close, random, \(label) entries")
        report.add(BenchRow(section: section, name: floorRow, samples: floor.takeSamples(), note: filled))
        report.add(
            BenchRow(
                section: section, name: "storage hit, random keys, \(label) entries", samples: hits,
                note: (misses > 0 ? "\(misses) misses; " : "") + "load \(loadAverage())"),
            comparedTo: floorRow, limit: 2.0, targetText: "≤ 2x the C floor")
    }

    /// A miss of a new key and its publish (memory layer off, no budget: `value(for:)` with a generator that
    /// returns at once) against the C floor's miss and publish of a new name, one each in turn, alternating
    /// which goes first. Both directories are warmed first (their fan-out folders exist).
    /// With `fresh`, the library's directory is new (its first writes make its fan-out folders).
    static func missAndPublish(_ size: Int, _ context: BenchContext, section: String = "targets", fresh: Bool = false)
        async throws
    {
        let report = context.report
        let label = formatBytes(size) + (fresh ? ", fresh directory" : "")
        report.section("\(section): local miss + publish of a new key, \(label)")
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let directory = context.directory("\(section)-publish-\(size)-\(fresh)")
        let cache = YCache(
            storageDirectory: directory.appendingPathComponent("cache"), memoryMaximumCost: 0,
            storageMaximumByteCount: nil)
        try cache.openStorage()
        for index in 0..<(fresh ? 0 : 1024) {
            _ = try await cache.data(for: CacheKey(namespace: "warm", identity: "w\(index)")) { Data([1]) }
        }
        let floor = try FloorServer(context, "publish", ["--dir", directory.path + "/floor", "--size", "\(size)"])
        try floor.run("P 64")  // its folders and first files, not counted
        _ = floor.takeSamples()
        let count = size > 65536 ? (context.quick ? 40 : 150) : fresh ? 256 : (context.quick ? 300 : 2000)
        var floorSamples = Samples()
        var samples = Samples()
        for index in 0..<count {
            for turn in index % 2 == 0 ? [0, 1] : [1, 0] {
                if turn == 0 {
                    floorSamples.append(try floor.run("P 1"))
                } else {
                    let key = CacheKey(namespace: "publish", identity: "p\(size)-\(index)")
                    let start = monotonicNanoseconds()
                    _ = try await cache.data(for: key) { payload }
                    samples.append(Double(monotonicNanoseconds() - start))
                }
            }
        }
        let floorRow = floorName(
            "miss + lock + write + rename \(formatBytes(size))" + (fresh ? " (beside a fresh directory)" : ""))
        report.add(BenchRow(section: section, name: floorRow, samples: floorSamples))
        let row = BenchRow(
            section: section, name: "local miss+publish \(label)", samples: samples, note: "load \(loadAverage())")
        if fresh {
            report.add(row, comparedTo: floorRow)
        } else {
            let limit = size > 65536 ? 1.2 : 1.5
            report.add(
                row, comparedTo: floorRow, limit: limit, targetText: String(format: "≤ %.1fx the C floor", limit))
        }
    }

    /// The memory hit of a 4 KiB value (`data(for:)`, the value in the memory layer) against the C floor's
    /// mutex-protected hash-table lookup plus one atomic load, in alternating chunks of 10,000.
    static func memoryHit(_ context: BenchContext, section: String = "targets") async throws {
        let report = context.report
        report.section("\(section): memory (L1) hit, 4 KiB")
        let cache = YCache(storageDirectory: context.directory("\(section)-memory"), storageMaximumByteCount: nil)
        let key = CacheKey(namespace: "bench", identity: "memory")
        let value = Data(count: 4096)
        _ = try await cache.data(for: key) { value }
        let floor = try FloorServer(context, "memory", [])
        let chunk = 10_000
        var samples = Samples()
        for round in 0..<(context.quick ? 4 : 12) {
            for pass in 0..<2 {
                if (round + pass) % 2 == 0 {
                    try floor.run("M \(chunk)")
                } else {
                    for _ in 0..<chunk {
                        let start = monotonicNanoseconds()
                        let got = try await cache.data(for: key) { value }
                        samples.append(Double(monotonicNanoseconds() - start))
                        blackHole(UInt8(truncatingIfNeeded: got.count))
                    }
                }
            }
        }
        let floorRow = floorName("mutex + hash-table lookup + atomic load")
        report.add(BenchRow(section: section, name: floorRow, samples: floor.takeSamples()))
        report.add(
            BenchRow(section: section, name: "memory hit 4 KiB", samples: samples, note: "load \(loadAverage())"),
            comparedTo: floorRow, limit: 2.0, targetText: "≤ 2x the C floor")
    }

    /// The section's closing table: every judged row, its floor, ratio, target and verdict.
    static func summary(_ rows: [BenchRow], _ context: BenchContext) {
        guard !context.report.json else { return }
        print("\n## targets: summary (median ratios against the C floors, this run)\n")
        print("| figure | YashimaShared | C floor | ratio | target | verdict | C floor row |")
        print("|---|---|---|---|---|---|---|")
        for row in rows where row.met != nil && row.ratio != nil {
            let floor = row.baseline.flatMap { name in rows.last(where: { $0.name == name }) }
            print(
                "| \(row.name) | \(formatNanoseconds(row.medianNs)) | "
                    + "\(floor.map { formatNanoseconds($0.medianNs) } ?? "-") | "
                    + "\(row.ratio.map { String(format: "%.2fx", $0) } ?? "-") | \(row.target ?? "") | "
                    + "\(row.met == true ? "met" : "MISSED") | \(row.baseline ?? "") |")
        }
        print("(load average now \(loadAverage()))")
    }
}
