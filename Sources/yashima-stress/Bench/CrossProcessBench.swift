// Section "crossprocess": many processes on one directory. The 8-process stampede (generations and the
// slowest process's overhead), lock hand-off wake-up against a bare flock hand-off, and throughput of
// 1, 2 and 4 processes on storage hits and on mixed workloads.

import Foundation
import Glibc
import Synchronization
import YashimaShared

/// A worker child driven over pipes (the benchmark's own copy of the test helper).
final class BenchChild {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()

    init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    func readLine() -> String? {
        let handle = output.fileHandleForReading
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    func readJSON() -> [String: Any]? {
        while let line = readLine() {
            if line.hasPrefix("{") {
                return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }
        }
        return nil
    }

    func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    /// The child's stdin, for writing from a @Sendable closure.
    var inputHandle: FileHandle { input.fileHandleForWriting }

    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// Starts `children` at a READY/GO barrier.
func releaseTogether(_ children: [BenchChild]) {
    for child in children { while let line = child.readLine(), line != "READY" {} }
    for child in children { child.send("GO") }
}

enum CrossProcessBench {
    static func run(_ context: BenchContext) async throws {
        try await stampede(context)
        try await handoff(context)
        try await throughput(context)
    }

    /// 8 processes × 1 missing key, 200 ms generator, repeated rounds.
    static func stampede(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: 8 processes miss one key (200 ms generator)")
        let rounds = context.quick ? 3 : 10
        var overheads = Samples()
        var generations: [Int] = []
        for round in 0..<rounds {
            let directory = context.directory("stampede-\(round)")
            let ledger = directory.path + "/../stampede-\(round).ledger"
            let children = try (0..<8).map { _ in
                try BenchChild(
                    context.executable,
                    ["worker", "get", "--directory", directory.path, "--key", "hot", "--generate-ms", "200", "--ledger", ledger, "--go"])
            }
            releaseTogether(children)
            var slowest: Double = 0
            for child in children {
                if let result = child.readJSON(), let elapsed = result["elapsedNs"] as? Double {
                    slowest = max(slowest, elapsed)
                }
                child.finish()
            }
            overheads.append(slowest - 200_000_000)
            generations.append(Ledger(path: ledger).lines().count)
        }
        let allOnce = generations.allSatisfy { $0 == 1 }
        report.add(
            BenchRow(
                section: "crossprocess", name: "stampede generations (8 processes)",
                note: "per round: \(generations.map(String.init).joined(separator: ","))", met: allOnce,
                target: "exactly 1 per round"))
        var row = BenchRow(section: "crossprocess", name: "stampede slowest wall − 200 ms", samples: overheads)
        row.target = "≤ 5 ms median"
        row.met = overheads.median <= 5_000_000
        report.add(row)
    }

    /// Wake-up latency: a bare flock hand-off between processes (baseline) and the cache's hand-off from
    /// a generator in this process to a waiting process (includes publishing the 4 KiB entry).
    static func handoff(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: lock hand-off wake-up")
        let trials = context.quick ? 40 : 150
        let directory = context.directory("handoff")
        let lockPath = directory.path + "/raw.lock"
        let rawWaiter = try BenchChild(context.executable, ["worker", "flock-wait", "--file", lockPath])
        _ = rawWaiter.readLine()  // READY
        var raw = Samples()
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        for _ in 0..<trials {
            flock(fd, LOCK_EX)
            rawWaiter.send("WAIT")
            _ = rawWaiter.readLine()  // BLOCKING
            usleep(20_000)  // let it block in flock
            let released = monotonicNanoseconds()
            flock(fd, LOCK_UN)
            if let line = rawWaiter.readLine(), let granted = UInt64(line) {
                raw.append(Double(Int64(granted) - Int64(released)))
            }
        }
        close(fd)
        rawWaiter.finish()
        report.add(BenchRow(section: "crossprocess", name: "raw flock hand-off", samples: raw))

        let cacheDirectory = directory.appendingPathComponent("cache")
        let holder = YCache(storageDirectory: cacheDirectory)
        let waiter = try BenchChild(context.executable, ["worker", "handoff-wait", "--directory", cacheDirectory.path])
        _ = waiter.readLine()  // READY
        var wake = Samples()
        for trial in 0..<trials {
            let key = CacheKey(namespace: "handoff", identity: "h\(trial)")
            let stamp = Stamp()
            let waiterInput = waiter.inputHandle
            _ = try await holder.data(for: key) {
                waiterInput.write(Data("GET h\(trial)\n".utf8))
                try await Task.sleep(for: .milliseconds(20))  // the waiter reaches the lock and blocks
                stamp.set(monotonicNanoseconds())
                return Data(count: 4096)
            }
            if let line = waiter.readLine(), let returned = UInt64(line.split(separator: " ")[0]) {
                wake.append(Double(Int64(returned) - Int64(stamp.value)))
            }
        }
        waiter.finish()
        var row = BenchRow(section: "crossprocess", name: "YCache publish → waiting process returns", samples: wake)
        row.baseline = "raw flock hand-off"
        row.ratio = wake.median / raw.median
        row.target = "median ≤ 300 µs, p99 ≤ 5 ms"
        row.met = wake.median <= 300_000 && wake.p99 <= 5_000_000
        report.add(row)
    }

    /// Throughput of 1, 2 and 4 processes: pure storage hits (no L1), and a 90/10 Zipf mix (with L1).
    static func throughput(_ context: BenchContext) async throws {
        let report = context.report
        report.section("cross-process: throughput (4 KiB values)")
        let duration = context.quick ? 1500 : 4000
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
                    try BenchChild(
                        context.executable,
                        ["worker", "mix", "--directory", directory.path, "--ops", "100000000", "--duration-ms", "\(duration)", "--budget", "\(1 << 30)", "--go"] + extra)
                }
                releaseTogether(children)
                var operations = 0.0
                var seconds = 0.0
                var gets = Samples()
                for child in children {
                    if let result = child.readJSON() {
                        operations += result["ops"] as? Double ?? 0
                        seconds = max(seconds, (result["elapsedNs"] as? Double ?? 1) / 1e9)
                        if let get = result["get"] as? [String: Any], let p50 = get["p50"] as? Double { gets.append(p50) }
                    }
                    child.finish()
                }
                let rate = operations / max(seconds, 1e-9)
                if processes == 1 { single = rate }
                report.add(
                    BenchRow(
                        section: "crossprocess", name: "\(title), \(processes) process\(processes == 1 ? "" : "es")",
                        note: String(format: "%.0f ops/s total (%.2fx 1 process), get p50 %@", rate, rate / max(single, 1), formatNanoseconds(gets.median))))
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
