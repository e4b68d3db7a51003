// Section "crossprocess", first open (issue 14): a fresh process that opens an existing cache directory and
// serves one 4 KiB storage hit, against the same process that does nothing, both timed as whole processes
// (spawn to exit) and alternated run by run, so the machine's noise falls on both alike.

import ChildProcesses
import Foundation
import YashimaShared

enum FirstOpenBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: a fresh process's first open and one 4 KiB hit")
        let directory = context.directory("first-open")
        let filler = YCache(storageDirectory: directory, memoryMaximumCost: 0)
        try await filler.store(
            Data(count: 4096), for: CacheKey(namespace: "first", identity: "hit"), codec: DataCodec())
        let runs = context.quick ? 40 : 200
        var bare = Samples()
        var cached = Samples()
        var failures = 0
        for run in 0..<(runs + 2) {
            for withCache in [run % 2 == 0, run % 2 != 0] {
                let start = monotonicNanoseconds()
                let child = try ChildProcess(
                    context.executable,
                    ["worker", "first-hit", "--directory", directory.path, "--key", "hit"]
                        + (withCache ? [] : ["--no-cache"]))
                let exit = child.waitForExit(timeout: ChildProcess.benchPatience)
                let elapsed = Double(monotonicNanoseconds() - start)
                if exit != .exited(0) { failures += 1 }
                if run < 2 { continue }  // warm-up: the binary and its libraries into the page cache
                if withCache { cached.append(elapsed) } else { bare.append(elapsed) }
            }
        }
        report.add(BenchRow(section: "crossprocess", name: "fresh process, no cache (spawn → exit)", samples: bare))
        var row = BenchRow(
            section: "crossprocess", name: "fresh process: open + one 4 KiB hit (spawn → exit)", samples: cached,
            note: "+" + formatNanoseconds(cached.median - bare.median) + " over no cache"
                + (failures > 0 ? "; \(failures) runs failed" : ""))
        row.baseline = "fresh process, no cache (spawn → exit)"
        row.ratio = cached.median / bare.median
        row.target = "≤ +0.5 ms median over no cache"
        row.met = failures == 0 && cached.median - bare.median <= 500_000
        report.add(row)
    }
}
