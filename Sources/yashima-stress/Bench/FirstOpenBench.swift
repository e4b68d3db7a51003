// Section "crossprocess", first open (issues 14, 34): a fresh process that opens an existing cache directory
// and serves one 4 KiB storage hit, timed as a whole process (spawn to exit), against the C floor's fresh
// process that opens, reads and closes the same entry file (Benchmarks/floors: `floors first-read`), and
// beside the same Swift process doing nothing (a Swift-side baseline: what the runtime's start costs).
// The three alternate run by run, so the machine's noise falls on all alike.

import ChildProcesses
import Foundation
@_spi(Operator) import YashimaShared

enum FirstOpenBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: a fresh process's first open and one 4 KiB hit (spawn → exit)")
        let directory = context.directory("first-open")
        let filler = YCache(storageDirectory: directory, memoryMaximumCost: 0)
        let key = CacheKey(namespace: "first", identity: "hit")
        try await filler.store(Data(count: 4096), for: key, codec: DataCodec())
        let storage = try filler.storageOperator()
        let entry = storage.path + "/" + storage.entryPath(for: key, codecIdentifier: DataCodec().identifier)
        let program = try Floors.program(context)
        let runs = context.quick ? 40 : 200
        var floor = Samples()
        var bare = Samples()
        var cached = Samples()
        var failures = 0
        let kinds: [(String, [String])] = [
            (program, ["first-read", "--path", entry]),
            (context.executable, ["worker", "first-hit", "--directory", directory.path, "--key", "hit", "--no-cache"]),
            (context.executable, ["worker", "first-hit", "--directory", directory.path, "--key", "hit"]),
        ]
        for run in 0..<(runs + 2) {
            for kind in run % 2 == 0 ? [0, 1, 2] : [2, 1, 0] {
                let start = monotonicNanoseconds()
                let child = try ChildProcess(kinds[kind].0, kinds[kind].1)
                let exit = child.waitForExit(timeout: ChildProcess.benchPatience)
                let elapsed = Double(monotonicNanoseconds() - start)
                if exit != .exited(0) { failures += 1 }
                if run < 2 { continue }  // warm-up: the binaries and their libraries into the page cache
                switch kind {
                case 0: floor.append(elapsed)
                case 1: bare.append(elapsed)
                default: cached.append(elapsed)
                }
            }
        }
        let floorRow = floorName("fresh process: open+read+close of the entry (spawn → exit)")
        report.add(BenchRow(section: "crossprocess", name: floorRow, samples: floor))
        let bareRow = "Swift baseline: fresh yashima-stress, no cache (spawn → exit)"
        report.add(BenchRow(section: "crossprocess", name: bareRow, samples: bare), comparedTo: floorRow)
        var row = BenchRow(
            section: "crossprocess", name: "fresh process: open + one 4 KiB hit (spawn → exit)", samples: cached,
            note: "+" + formatNanoseconds(cached.median - bare.median) + " over the Swift baseline; "
                + String(format: "%.2fx the C floor", cached.median / floor.median)
                + (failures > 0 ? "; \(failures) runs failed" : "") + "; load \(loadAverage())")
        row.baseline = floorRow
        row.ratio = cached.median / floor.median
        row.target = "≤ +0.5 ms median over the Swift baseline (issue 14)"
        row.met = failures == 0 && cached.median - bare.median <= 500_000
        report.add(row)
    }
}
