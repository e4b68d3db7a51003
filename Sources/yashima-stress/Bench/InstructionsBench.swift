// Section "instructions": user-space instructions per operation, counted by valgrind's callgrind, for the
// memory hit, the storage hit (random keys over 1,000 entries of 1 KiB) and the miss+publish of a new 4 KiB
// key, beside the C floors' counted the same way. Each operation runs twice under callgrind in a fresh
// process (`worker instr`), with two operation counts after the same warm-up; the difference divided by
// the difference of counts is the cost of one operation, start-up and warm-up cancelling out. Counts do
// not move with the machine's load, so CI checks them against recorded ceilings (`--ceilings FILE`:
// Benchmarks/instructions/ceilings.json), a regression guard this machine's noise cannot break.

import ChildProcesses
import Foundation
import Glibc
@_spi(Operator) import YashimaShared

enum InstructionsBench {
    /// One counted operation: its worker arguments, its C floor's, and the two operation counts.
    struct Operation {
        let name: String
        let worker: [String]
        let floor: [String]
        let counts: (Int, Int)
        /// Operations the C floor's count includes beyond the worker's `--count` (its warm-up reads).
        var floorExtra = 0
    }

    static func run(_ context: BenchContext, ceilings: String?) async throws -> Bool {
        let report = context.report
        report.section("instructions: user-space instructions per operation (callgrind, difference of two runs)")
        let candidates: [String] = ["/usr/bin/valgrind", "/usr/local/bin/valgrind"]
        guard let valgrind = candidates.first(where: { access($0, X_OK) == 0 }) else {
            report.add(BenchRow(section: "instructions", name: "instructions", note: "skipped: valgrind not found"))
            return ceilings == nil
        }
        let program = try Floors.program(context)
        let executable = try strippedCopy(context)
        // The storage hit's directory: 1,000 entries of 1 KiB, aged past the coarse-timestamp window (a hit
        // on an entry younger than that verifies its payload each time).
        let entries = context.directory("instructions-entries").path
        let prepare = try ChildProcess(
            context.executable,
            ["worker", "instr", "--op", "prepare", "--directory", entries, "--paths", entries + ".paths"])
        guard prepare.waitForExit(timeout: .seconds(600)) == .exited(0) else {
            throw ArgumentError(description: "instructions: preparing the entries failed")
        }
        try await Task.sleep(for: .milliseconds(2100))
        let publishFolder = context.directory("instructions-publish").path
        let operations = [
            Operation(
                name: "memory hit 4 KiB", worker: ["--op", "memory-hit"], floor: ["count-memory"],
                counts: (2000, 32_000)),
            Operation(
                name: "storage hit 1 KiB, random of 1,000",
                worker: ["--op", "storage-hit", "--directory", entries],
                floor: ["count-read", "--paths", entries + ".paths"],
                counts: (1000, 6000), floorExtra: 1000),
            // A one-lookup process (a `yashima run` hit, a test runner's child): the directory opened by its
            // lookup, everything that costs included (what the first lookup's rehearsal must not be paid in).
            Operation(
                name: "open + first 1 KiB hit, opened by the lookup",
                worker: ["--op", "first-hit", "--lazy-open", "--directory", entries],
                floor: ["count-read", "--paths", entries + ".paths"], counts: (0, 1)),
            Operation(
                name: "miss+publish 4 KiB, new key", worker: ["--op", "miss-publish", "--directory", publishFolder],
                floor: ["count-publish", "--dir", publishFolder + "/floor", "--size", "4096"], counts: (100, 600)),
        ]
        var recorded: [String: Double] = [:]
        if let ceilings {
            guard let data = FileManager.default.contents(atPath: ceilings),
                let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                let table = object["ceilings"] as? [String: Any]
            else { throw ArgumentError(description: "--ceilings: cannot read \(ceilings)") }
            for (name, value) in table { recorded[name] = (value as? [String: Any])?["ceiling"] as? Double }
        }
        var withinCeilings = true
        for operation in operations {
            let started = monotonicNanoseconds()
            let floor = try perOperation(valgrind, operation.counts) { count in
                removeTree(publishFolder + "/floor")
                return [program] + operation.floor + ["--count", "\(count + operation.floorExtra)"]
            }
            let counted = try perOperation(valgrind, operation.counts) { count in
                removeTree(publishFolder + "/cache")
                return [executable, "worker", "instr"] + operation.worker + ["--count", "\(count)"]
            }
            let seconds = Double(monotonicNanoseconds() - started) / 1e9
            let floorRow = floorName("\(operation.name), instructions")
            report.add(BenchRow(section: "instructions", name: floorRow, note: String(format: "%.0f Ir/op", floor)))
            var row = BenchRow(
                section: "instructions", name: "\(operation.name), instructions",
                note: String(
                    format: "%.0f Ir/op, %.1fx the C floor (4 runs: %.0f s)", counted, counted / floor, seconds))
            row.baseline = floorRow
            row.ratio = counted / floor
            if let ceiling = recorded[operation.name] {
                row.target = String(format: "≤ %.0f Ir/op (recorded ceiling)", ceiling)
                row.met = counted <= ceiling
                withinCeilings = withinCeilings && counted <= ceiling
            } else if ceilings != nil {
                row.target = "a recorded ceiling"
                row.met = false
                withinCeilings = false
            }
            report.add(row)
        }
        return withinCeilings
    }

    /// A copy of this executable without its debug information, in the floors' build folder: valgrind 3.19
    /// cannot read the DWARF 5 the Swift toolchain writes ("unhandled dwarf2 abbrev form code 0x25", then it
    /// gives up). The symbol table stays, so profiles still name every function.
    static func strippedCopy(_ context: BenchContext) throws -> String {
        let copy = Floors.buildDirectory(context.base) + "/yashima-stress-stripped"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["objcopy", "--strip-debug", context.executable, copy]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ArgumentError(description: "instructions: objcopy --strip-debug failed (binutils installed?)")
        }
        return copy
    }

    /// Instructions per operation: two callgrind runs of `command(count)`, (Ir₂ − Ir₁) / (count₂ − count₁).
    static func perOperation(_ valgrind: String, _ counts: (Int, Int), _ command: (Int) -> [String]) throws
        -> Double
    {
        let first = try collected(valgrind, command(counts.0))
        let second = try collected(valgrind, command(counts.1))
        return Double(second - first) / Double(counts.1 - counts.0)
    }

    /// The instructions callgrind collected over a whole run of `command` (every thread).
    static func collected(_ valgrind: String, _ command: [String]) throws -> Int {
        let out = (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/callgrind-\(getpid()).out"
        defer { unlink(out) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: valgrind)
        process.arguments = ["--tool=callgrind", "--dump-instr=no", "--callgrind-out-file=" + out] + command
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_DETERMINISTIC_HASHING"] = "1"  // the same probes in every run
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let line = text.split(separator: "\n").last(where: { $0.contains("Collected :") }),
            let count = Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "")
        else {
            throw ArgumentError(
                description: "callgrind failed on \(command.joined(separator: " ")): \(text.suffix(600))")
        }
        return count
    }

    /// `worker instr --op memory-hit|storage-hit|miss-publish|first-miss|first-hit|prepare [--directory D]
    /// [--count N] [--entries E] [--lazy-open]` (E entries for prepare and storage-hit, 1,000 unless given): the
    /// counted loop (no timing, nothing printed). `prepare` fills D with E entries of 1 KiB and writes
    /// their paths to `--paths` for the C floor. storage-hit first reads every entry once (the first read
    /// of a file verifies its payload), then N random hits; miss-publish warms a fresh directory with 1,024
    /// one-byte entries (its fan-out folders), then publishes N new 4 KiB keys. memory-hit-new-key and
    /// storage-hit-new-key build each lookup's key (a key with one variant, a key of two strings) as a caller
    /// that makes its key per call does.
    static func worker(_ arguments: inout Arguments) async throws -> Int32 {
        let operation = arguments.string("op") ?? ""
        let directory = URL(fileURLWithPath: arguments.string("directory") ?? NSTemporaryDirectory())
        let count = try arguments.int("count", default: 1000, range: 0...100_000_000)!
        let pathsFile = arguments.string("paths")
        // How many entries `prepare` makes and `storage-hit` picks from (1,000 in the bench; more to see what
        // a hit costs once the per-process caches no longer hold every key: Benchmarks/results).
        let entryCount = try arguments.int("entries", default: 1000, range: 1...10_000_000)!
        // first-miss, first-hit: the first lookup opens the directory itself (no `openStorage()` first).
        let lazyOpen = arguments.flag("lazy-open")
        try arguments.rejectUnknown()
        let codec = DataCodec()
        switch operation {
        case "prepare":
            let cache = YCache(storageDirectory: directory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
            for index in 0..<entryCount {
                _ = try await cache.data(for: ScaleKeys.key(index)) { ScaleKeys.payload(index, size: 1024) }
            }
            guard let pathsFile else { return 0 }
            let storage = try cache.storageOperator()
            var random = SplitMix64(seed: 11)
            let paths = (0..<(entryCount + 6000)).map { index in
                let key = ScaleKeys.key(index < entryCount ? index : Int(random.next() % UInt64(entryCount)))
                return directory.path + "/" + storage.entryPath(for: key, codecIdentifier: codec.identifier)
            }
            try (paths.joined(separator: "\n") + "\n").write(toFile: pathsFile, atomically: true, encoding: .utf8)
        case "memory-hit":
            let cache = YCache(
                storageDirectory: directory.appendingPathComponent("memory"), storageMaximumByteCount: nil)
            let key = CacheKey(namespace: "bench", identity: "memory")
            let value = Data(count: 4096)
            for _ in 0..<(count + 1) {
                blackHole(UInt8(truncatingIfNeeded: try await cache.data(for: key) { value }.count))
            }
        case "memory-hit-new-key":
            // The memory hit of a caller that builds its key for every lookup (not in the ceilings: what
            // building a key costs beside the hit, Benchmarks/results).
            let cache = YCache(
                storageDirectory: directory.appendingPathComponent("memory"), storageMaximumByteCount: nil)
            let value = Data(count: 4096)
            for _ in 0..<(count + 1) {
                let key = CacheKey(namespace: "bench", identity: "memory").variant("size", 320)
                blackHole(UInt8(truncatingIfNeeded: try await cache.data(for: key) { value }.count))
            }
        case "storage-hit", "storage-hit-new-key":
            let cache = YCache(storageDirectory: directory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
            // The keys are made first (the C floor's paths are too): what is counted is the lookup;
            // storage-hit-new-key builds each lookup's key instead (not in the ceilings).
            let newKeys = operation == "storage-hit-new-key"
            let keys = newKeys ? [] : (0..<entryCount).map(ScaleKeys.key)
            var random = SplitMix64(seed: 11)
            for index in 0..<(entryCount + count) {
                let picked = index < entryCount ? index : Int(random.next() % UInt64(entryCount))
                let key = newKeys ? ScaleKeys.key(picked) : keys[picked]
                guard try await cache.valueIfCached(for: key, codec: codec) != nil else { return 1 }
            }
        case "miss-publish":
            let cache = YCache(
                storageDirectory: directory.appendingPathComponent("cache"), memoryMaximumCost: 0,
                storageMaximumByteCount: nil)
            let payload = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            for index in 0..<1024 {
                _ = try await cache.data(for: CacheKey(namespace: "warm", identity: "w\(index)")) { Data([1]) }
            }
            for index in 0..<count {
                _ = try await cache.data(for: CacheKey(namespace: "publish", identity: "p\(index)")) { payload }
            }
        case "first-miss", "first-hit":
            // A fresh process's first lookups (profile.sh): the directory opened, then `count` misses of new
            // keys (first-miss) or hits of distinct prepared entries (first-hit), as deployed (memory layer
            // and budget on). Counts 0 and 1 differ by the first lookup with everything it sets up. With
            // --lazy-open the first lookup opens the directory (count 1 is then the whole of a one-lookup
            // process's cache work).
            let cache = YCache(storageDirectory: directory)
            if !lazyOpen { try cache.openStorage() }
            let payload = Data(count: 4096)
            for index in 0..<count {
                if operation == "first-miss" {
                    _ = try await cache.data(for: CacheKey(namespace: "first", identity: "f\(index)")) { payload }
                } else if try await cache.valueIfCached(for: ScaleKeys.key(index), codec: codec) == nil {
                    return 1
                }
            }
        default:
            throw ArgumentError(
                description: "--op must be memory-hit, storage-hit (either -new-key), miss-publish, first-miss, "
                    + "first-hit or prepare")
        }
        return 0
    }
}
