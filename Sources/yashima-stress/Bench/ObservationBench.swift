// Section "observation": how long a publish in one process takes to reach an observer in another, while
// other processes write many entries into the same directory. Baseline: a bare inotify reader in another
// process seeing a plain write-temp-and-rename (the floor the kernel and the wake-up give). Also how
// often an idle observer's watcher thread wakes (it should never: it blocks in poll).

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum ObservationBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("observation: publish in process A → change in process B, 2 other processes writing")
        let trials = context.quick ? 60 : 300
        let directory = context.directory("observation")
        let cache = YCache(storageDirectory: directory, storageMaximumByteCount: nil)
        let probe = CacheKey(namespace: "latency", identity: "probe")
        try await cache.store(Data(count: 4096), for: probe, codec: DataCodec())  // its fan-out folder exists
        let rawFolder = directory.path + "/../observation-raw"
        try FileManager.default.createDirectory(atPath: rawFolder + "/watched", withIntermediateDirectories: true)

        // Two writers replace 4 KiB entries of 10,000 keys as fast as they can, all along.
        let writers = try (0..<2).map { index in
            try ChildProcess(
                context.executable,
                [
                    "worker", "mix", "--directory", directory.path, "--keys", "10000", "--gets", "0", "--sets", "100",
                    "--ops", "100000000", "--duration-ms", "600000", "--budget", "\(1 << 30)", "--seed", "\(index + 1)",
                    "--uniform", "--go",
                ])
        }
        releaseTogether(writers)
        defer {
            for writer in writers {
                writer.kill(SIGTERM)
                writer.finish()
            }
        }

        // Baseline: write 4 KiB to a temporary name and rename it into a folder another process watches.
        let waiter = try ChildProcess(
            context.executable, ["worker", "inotify-wait", "--folder", rawFolder + "/watched"])
        _ = waiter.readLine(timeout: ChildProcess.benchPatience)  // READY
        var raw = Samples()
        let block = [UInt8](repeating: 7, count: 4096)
        for trial in 0..<trials {
            let staging = rawFolder + "/staging-\(trial)"
            let start = monotonicNanoseconds()
            let fd = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            _ = block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            rename(staging, rawFolder + "/watched/entry-\(trial)")
            if let line = waiter.readLine(timeout: ChildProcess.benchPatience), let seen = UInt64(line) {
                raw.append(Double(Int64(seen) - Int64(start)))
            }
        }
        waiter.kill(SIGTERM)
        waiter.finish()
        report.add(BenchRow(section: "observation", name: "raw write+rename → inotify reader", samples: raw))

        for (label, arguments) in [
            ("key observer", ["--namespace", "latency", "--key", "probe"]),
            ("namespace observer", ["--namespace", "latency"]),
        ] {
            let observer = try ChildProcess(
                context.executable, ["worker", "observe", "--directory", directory.path] + arguments)
            while let line = observer.readLine(timeout: ChildProcess.benchPatience), line != "READY" {}
            var latency = Samples()
            var stores = Samples()
            for trial in 0..<trials {
                let start = monotonicNanoseconds()
                try await cache.store(Data(count: 4096 + trial % 2), for: probe, codec: DataCodec())
                stores.append(Double(monotonicNanoseconds() - start))
                if let change = observer.readJSON(timeout: ChildProcess.benchPatience),
                    let seen = change["monotonicNs"] as? Int
                {
                    latency.append(Double(Int64(seen) - Int64(start)))
                }
            }
            var idle = "idle wake-ups not measured"
            if label == "namespace observer" {
                idle = idleWakeups(of: observer.pid, writers: writers)
            }
            observer.send("STOP")
            observer.finish()
            var row = BenchRow(
                section: "observation", name: "store in A → \(label) in B", samples: latency,
                note: "the store itself: median \(formatNanoseconds(stores.median)); " + idle)
            row.baseline = "raw write+rename → inotify reader"
            row.ratio = latency.median / raw.median
            row.target = "p50 ≤ 2 ms, p99 ≤ 20 ms"
            row.met = latency.median <= 2_000_000 && latency.p99 <= 20_000_000
            report.add(row)
        }
    }

    /// Voluntary context switches of the observer's watcher thread over one second with nothing changing
    /// (the writers paused by SIGSTOP): each is a wake-up. 0 means it blocks in poll, as designed.
    static func idleWakeups(of pid: Int32, writers: [ChildProcess]) -> String {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        guard
            let task = tasks.first(where: {
                (try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/comm", encoding: .utf8))?
                    .hasPrefix("yashima-observe") == true
            })
        else { return "watcher thread not found" }
        func switches() -> Int? {
            let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
            let line = status?.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
            return line.flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
        }
        for writer in writers { kill(writer.pid, SIGSTOP) }
        defer { for writer in writers { kill(writer.pid, SIGCONT) } }
        usleep(200_000)  // let events already queued drain
        guard let before = switches() else { return "watcher thread gone" }
        usleep(1_000_000)
        guard let after = switches() else { return "watcher thread gone" }
        return "watcher thread idle 1 s: \(after - before) wake-ups"
    }
}
