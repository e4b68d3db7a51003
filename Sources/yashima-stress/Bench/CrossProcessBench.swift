// Section "crossprocess": many processes on one directory. The 8-process stampede (generations and the
// slowest process's overhead), the stampede at 8, 32 and 64 processes, fresh and warm, against the
// bare-flock C floor at the same N (StampedeBench), lock hand-off wake-up against the C floor's flock
// hand-off, throughput of 1, 2 and 4 processes on storage hits and mixed workloads, and python-diskcache's
// benchmark shape (100:10:1).

import ChildProcesses
import Foundation
import Glibc
import Synchronization
import YashimaShared

extension ChildProcess {
    /// How long the benchmarks wait for a child's line: as long as a measurement takes (each child's own
    /// arguments bound its run).
    static let benchPatience: Duration = .seconds(3600)

    /// Closes the child's stdin (a worker's command loop ends there) and waits for it to exit.
    func finish() {
        closeInput()
        _ = waitForExit(timeout: nil)
    }

    /// Releases stampede workers (`worker get --go --linger`) at the start barrier, reads every one's
    /// `elapsedNs`, and only then lets them exit: a process that exits (milliseconds of CPU on 2 cores)
    /// while its siblings still wake would be timed as the library's hand-off.
    static func stampedeWalls(_ children: [ChildProcess]) -> Samples {
        releaseTogether(children)
        var walls = Samples()
        for child in children {
            if let result = child.readJSON(timeout: benchPatience), let elapsed = result["elapsedNs"] as? Double {
                walls.append(elapsed)
            }
        }
        for child in children { child.finish() }
        return walls
    }
}

enum CrossProcessBench {
    static func run(_ context: BenchContext) async throws {
        try await stampede(context)
        try await StampedeBench.run(context)
        try await handoff(context)
        try await FirstOpenBench.run(context)
        try await throughput(context)
        try await diskcacheMix(context)
    }

    /// 8 processes × 1 missing key, 200 ms generator, repeated rounds. The main figure opens storage
    /// before the start barrier (a long-running process has it open already); a second run includes each
    /// process's first open of the directory in its wall time.
    static func stampede(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: 8 processes miss one key (200 ms generator)")
        try await stampede(context, rounds: context.quick ? 3 : 10, openFirst: true)
        try await stampede(context, rounds: context.quick ? 1 : 5, openFirst: false)
    }

    static func stampede(_ context: BenchContext, rounds: Int, openFirst: Bool) async throws {
        let report = context.report
        let suffix = openFirst ? "" : " (incl. first open)"
        var overheads = Samples()
        var medians = Samples()
        var generations: [Int] = []
        for round in 0..<rounds {
            let directory = context.directory("stampede-\(openFirst)-\(round)")
            let ledger = directory.path + "/../stampede-\(openFirst)-\(round).ledger"
            let children = try (0..<8).map { _ in
                try ChildProcess(
                    context.executable,
                    [
                        "worker", "get", "--directory", directory.path, "--key", "hot", "--generate-ms", "200",
                        "--ledger", ledger, "--go", "--linger",
                    ]
                        + (openFirst ? ["--open-first"] : []))
            }
            let walls = ChildProcess.stampedeWalls(children)
            overheads.append(walls.maximum - 200_000_000)
            medians.append(walls.median - 200_000_000)
            generations.append(Ledger(path: ledger).lines().count)
        }
        let allOnce = generations.allSatisfy { $0 == 1 }
        report.add(
            BenchRow(
                section: "crossprocess", name: "stampede generations (8 processes)\(suffix)",
                note: "per round: \(generations.map(String.init).joined(separator: ","))", met: allOnce,
                target: "exactly 1 per round"))
        var row = BenchRow(
            section: "crossprocess", name: "stampede slowest wall − 200 ms\(suffix)", samples: overheads,
            note: "median process: " + formatNanoseconds(medians.median))
        // Issue 14: ≤ 2 ms with storage open (and below LMDB's write-transaction recipe in the same
        // peers run: Benchmarks/peers/run.sh), ≤ 5 ms with each process's first open included.
        row.target = openFirst ? "≤ 2 ms median of rounds" : "≤ 5 ms median of rounds"
        row.met = overheads.median <= (openFirst ? 2_000_000 : 5_000_000)
        report.add(row)
    }

    /// Wake-up latency: a bare flock hand-off between processes (baseline) and the cache's hand-off from
    /// a generator in this process to a waiting process (includes publishing the 4 KiB entry).
    static func handoff(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: lock hand-off wake-up")
        let trials = context.quick ? 30 : 150
        let directory = context.directory("handoff")
        let lockPath = directory.path + "/raw.lock"
        let rawWaiter = try ChildProcess(try Floors.program(context), ["flock-wait", "--file", lockPath])
        _ = rawWaiter.readLine(timeout: ChildProcess.benchPatience)  // READY
        var raw = Samples()
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        for _ in 0..<trials {
            flock(fd, LOCK_EX)
            rawWaiter.send("WAIT")
            _ = rawWaiter.readLine(timeout: ChildProcess.benchPatience)  // BLOCKING
            usleep(20_000)  // let it block in flock
            let released = monotonicNanoseconds()
            flock(fd, LOCK_UN)
            if let line = rawWaiter.readLine(timeout: ChildProcess.benchPatience), let granted = UInt64(line) {
                raw.append(Double(Int64(granted) - Int64(released)))
            }
        }
        close(fd)
        rawWaiter.finish()
        report.add(BenchRow(section: "crossprocess", name: floorName("flock hand-off"), samples: raw))

        let cacheDirectory = directory.appendingPathComponent("cache")
        let holder = YCache(storageDirectory: cacheDirectory)
        let waiter = try ChildProcess(
            context.executable, ["worker", "handoff-wait", "--directory", cacheDirectory.path])
        _ = waiter.readLine(timeout: ChildProcess.benchPatience)  // READY
        var wake = Samples()
        var afterHolder = Samples()
        for trial in 0..<trials {
            let key = CacheKey(namespace: "handoff", identity: "h\(trial)")
            let stamp = Stamp()
            let waiterInput = waiter
            _ = try await holder.data(for: key) {
                waiterInput.send("GET h\(trial)")
                try await Task.sleep(for: .milliseconds(20))  // the waiter reaches the lock and blocks
                stamp.set(monotonicNanoseconds())
                return Data(count: 4096)
            }
            let holderReturned = monotonicNanoseconds()
            if let line = waiter.readLine(timeout: ChildProcess.benchPatience),
                let returned = UInt64(line.split(separator: " ")[0])
            {
                wake.append(Double(Int64(returned) - Int64(stamp.value)))
                afterHolder.append(Double(Int64(returned) - Int64(holderReturned)))
            }
        }
        waiter.finish()
        // Issue 14's hand-off target, from the holder's release. The holder's call returns a few µs after
        // its release (it then only fills its memory layer), so this slightly flatters the figure.
        var released = BenchRow(
            section: "crossprocess", name: "holder's call returns → waiting process returns", samples: afterHolder,
            note: "after the publish and the lock release; can be negative")
        released.baseline = floorName("flock hand-off")
        released.ratio = afterHolder.median / raw.median
        released.target = "p50 ≤ 150 µs, p99 ≤ 2 ms (from the call's return: a lower bound of the release's)"
        released.met = afterHolder.median <= 150_000 && afterHolder.p99 <= 2_000_000
        report.add(released)
        var row = BenchRow(
            section: "crossprocess", name: "YCache generator returns → waiting process returns", samples: wake,
            note: "includes publishing the 4 KiB entry")
        row.baseline = floorName("flock hand-off")
        row.ratio = wake.median / raw.median
        row.target = "median ≤ 300 µs, p99 ≤ 5 ms"
        row.met = wake.median <= 300_000 && wake.p99 <= 5_000_000
        report.add(row)
    }

    /// Throughput of 1, 2 and 4 processes: pure storage hits (no L1), and a 90/10 Zipf mix (with L1).
    static func throughput(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: throughput (4 KiB values)")
        let duration = context.quick ? 600 : 4000
        let directory = context.directory("throughput")
        // Warm 1,000 keys for the storage-hit run.
        let warm = YCache(storageDirectory: directory, storageMaximumByteCount: nil)
        for index in 0..<1000 {
            _ = try await warm.data(for: CacheKey(namespace: "mix", identity: "k\(index)")) { Data(count: 4096) }
        }
        for (title, extra) in [
            ("storage hits", ["--keys", "1000", "--gets", "100", "--sets", "0", "--memory-budget", "0", "--uniform"]),
            ("90/10 get/set Zipf over 10,000 keys", ["--keys", "10000", "--gets", "90", "--sets", "10"]),
        ] {
            var single: Double = 0
            for processes in [1, 2, 4] {
                let children = try (0..<processes).map { _ in
                    try ChildProcess(
                        context.executable,
                        [
                            "worker", "mix", "--directory", directory.path, "--ops", "100000000", "--duration-ms",
                            "\(duration)", "--budget", "\(1 << 30)", "--go",
                        ] + extra)
                }
                releaseTogether(children)
                var operations = 0.0
                var seconds = 0.0
                var gets = Samples()
                for child in children {
                    if let result = child.readJSON(timeout: ChildProcess.benchPatience) {
                        operations += result["ops"] as? Double ?? 0
                        seconds = max(seconds, (result["elapsedNs"] as? Double ?? 1) / 1e9)
                        if let get = result["get"] as? [String: Any], let p50 = get["p50"] as? Double {
                            gets.append(p50)
                        }
                    }
                    child.finish()
                }
                let rate = operations / max(seconds, 1e-9)
                if processes == 1 { single = rate }
                report.add(
                    BenchRow(
                        section: "crossprocess", name: "\(title), \(processes) process\(processes == 1 ? "" : "es")",
                        note: String(
                            format: "%.0f ops/s total (%.2fx 1 process), get p50 %@", rate, rate / max(single, 1),
                            formatNanoseconds(gets.median))))
            }
        }
    }
}

extension CrossProcessBench {
    /// python-diskcache's published benchmark shape (tests/benchmark_core.py, docs "Cache Benchmarks"):
    /// 100,000 operations per process (5,000 with --quick), gets:sets:deletes = 100:10:1 (90 / 9 / 1 %),
    /// 100 keys drawn uniformly, short values (diskcache: str(count) × randrange(1, 100), 1–495 bytes;
    /// here 5–495 bytes uniformly), the keys pre-filled, the first 1,000 operations per process left out,
    /// gets as plain lookups (a deleted key is a miss). Timings of all processes are merged before taking
    /// percentiles, as diskcache's script does. Run as deployed (64 MiB memory layer per process).
    static func diskcacheMix(_ context: BenchContext) async throws {
        let report = context.report
        let operations = context.quick ? 5_000 : 100_000
        report.section(
            "cross-process: diskcache-shaped mix (\(operations) ops/process, get:set:delete 100:10:1, 100 keys)")
        for (layer, memoryBudget) in [("", 64 << 20)] {
            for processes in [1, 8] {
                let directory = context.directory("diskcache-mix")
                let samplesDirectory = context.directory("diskcache-mix-samples").path
                let filler = YCache(storageDirectory: directory, memoryMaximumCost: 0)
                for index in 0..<100 {
                    let key = CacheKey(namespace: "mix", identity: "k\(index)")
                    try await filler.store(Data("k\(index)".utf8), for: key, codec: DataCodec())
                }
                let children = try (0..<processes).map { number in
                    try ChildProcess(
                        context.executable,
                        [
                            "worker", "mix", "--directory", directory.path, "--keys", "100", "--uniform",
                            "--lookup-only",
                            "--gets", "100", "--sets", "10", "--deletes", "1", "--ops", "\(operations)", "--warmup",
                            "1000",
                            "--size", "495", "--min-size", "5", "--memory-budget", "\(memoryBudget)",
                            "--seed", "\(number + 1)", "--samples", "\(samplesDirectory)/w\(number)", "--go",
                        ])
                }
                let start = monotonicNanoseconds()
                releaseTogether(children)
                var misses = 0
                for child in children {
                    if let result = child.readJSON(timeout: ChildProcess.benchPatience) {
                        misses += result["getMisses"] as? Int ?? 0
                    }
                    child.finish()
                }
                let wall = Double(monotonicNanoseconds() - start)
                let label = "mix 100:10:1, \(processes) process\(processes == 1 ? "" : "es")\(layer):"
                for kind in ["get", "set", "delete"] {
                    var merged = Samples()
                    for number in 0..<processes {
                        merged.append(contentsOf: BenchWorker.readSamples("\(samplesDirectory)/w\(number)-\(kind).f64"))
                    }
                    var note = "n=\(merged.count)"
                    if kind == "get" { note += ", \(misses) misses" }
                    if kind == "delete" { note += String(format: "; wall %.1f s", wall / 1e9) }
                    var row = BenchRow(section: "crossprocess", name: "\(label) \(kind)", samples: merged, note: note)
                    if processes == 8, kind == "set", layer.isEmpty {
                        // diskcache's published 8-process diskcache.Cache figures (docs, "Cache Benchmarks",
                        // Concurrent Access): set p99 21.307 ms, max 1.846 s. Same-run figures: Benchmarks/peers.
                        row.target = "p99 < 21.3 ms and max < 1.85 s (diskcache's published 8-process set)"
                        row.met = merged.p99 < 21_307_000 && merged.maximum < 1_846_000_000
                    }
                    report.add(row)
                }
            }
        }
    }
}

/// A value set by the generator closure and read afterwards (the closure is @Sendable).
final class Stamp: Sendable {
    private let atomic = Atomic<UInt64>(0)
    func set(_ newValue: UInt64) { atomic.store(newValue, ordering: .releasing) }
    var value: UInt64 { atomic.load(ordering: .acquiring) }
}
