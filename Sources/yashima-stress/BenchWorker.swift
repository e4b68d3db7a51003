// Worker commands used only by the benchmarks: a raw flock hand-off waiter (the baseline), a cache
// hand-off waiter, and a throughput loop. Each prints JSON lines; none judges anything.

import Foundation
import Glibc
import YashimaShared

enum BenchWorker {
    /// `worker flock-wait --file F`: for each "WAIT" line, block in flock(LOCK_EX) on F, then print the
    /// monotonic time the lock was granted, and release it.
    static func flockWait(_ arguments: inout Arguments) throws -> Int32 {
        guard let file = arguments.string("file") else { throw ArgumentError(description: "--file is required") }
        try arguments.rejectUnknown()
        emit("READY")
        while let line = readLine(), line == "WAIT" {
            let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return 1 }
            emit("BLOCKING")
            flock(fd, LOCK_EX)
            let granted = monotonicNanoseconds()
            flock(fd, LOCK_UN)
            close(fd)
            emit("\(granted)")
        }
        return 0
    }

    /// `worker handoff-wait --directory D`: for each "GET <identity>" line, get-or-generate that key
    /// (another process is generating it) and print the monotonic time the call returned.
    static func handoffWait(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        emit("READY")
        while let line = readLine(), line.hasPrefix("GET ") {
            let key = CacheKey(namespace: "handoff", identity: String(line.dropFirst(4)))
            let resolution = try await cache.resolve(for: key, codec: DataCodec()) { Data(count: 4096) }
            let returned = monotonicNanoseconds()
            emit("\(returned) \(resolution.source.rawValue)")
        }
        return 0
    }

    /// `worker mix`: a read/write mix over `--keys` keys with a Zipf-like skew for `--ops` operations
    /// (or `--duration-ms`); prints counts and per-kind latency percentiles.
    static func mix(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let keyCount = try arguments.int("keys", default: 10_000, range: 1...10_000_000)!
        let operations = try arguments.int("ops", default: 10_000, range: 1...100_000_000)!
        let durationMilliseconds = try arguments.int("duration-ms")
        let readShare = try arguments.int("gets", default: 90, range: 0...1_000_000)!
        let writeShare = try arguments.int("sets", default: 10, range: 0...1_000_000)!
        let deleteShare = try arguments.int("deletes", default: 0, range: 0...1_000_000)!
        let size = try arguments.int("size", default: 4096, range: 0...(64 << 20))!
        let uniform = arguments.flag("uniform")
        let go = arguments.flag("go")
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        var generator = SplitMix64(seed: setup.seed ^ UInt64(getpid()))
        let zipf = ZipfSampler(count: keyCount, exponent: 0.99)
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0) })
        let total = readShare + writeShare + deleteShare
        var gets = Samples()
        var sets = Samples()
        var deletes = Samples()
        if go { awaitGo() }
        let started = monotonicNanoseconds()
        let deadline = durationMilliseconds.map { started + UInt64($0) * 1_000_000 }
        var done = 0
        while done < operations {
            if let deadline, done % 64 == 0, monotonicNanoseconds() >= deadline { break }
            let index = uniform ? Int(generator.next() % UInt64(keyCount)) : zipf.sample(&generator)
            let key = CacheKey(namespace: "mix", identity: "k\(index)")
            let roll = Int(generator.next() % UInt64(max(1, total)))
            let start = monotonicNanoseconds()
            if roll < readShare {
                _ = try await cache.value(for: key, codec: DataCodec()) { payload }
                gets.append(Double(monotonicNanoseconds() - start))
            } else if roll < readShare + writeShare {
                try await cache.store(payload, for: key, codec: DataCodec())
                sets.append(Double(monotonicNanoseconds() - start))
            } else {
                try await cache.remove(for: key, codec: DataCodec())
                deletes.append(Double(monotonicNanoseconds() - start))
            }
            done += 1
        }
        let elapsed = Double(monotonicNanoseconds() - started)
        func summary(_ samples: Samples) -> [String: Any] {
            guard samples.count > 0 else { return ["count": 0] }
            return [
                "count": samples.count, "p50": samples.median, "p90": samples.percentile(90), "p99": samples.p99,
                "max": samples.maximum,
            ]
        }
        emit(
            jsonLine([
                "ops": done, "elapsedNs": elapsed, "get": summary(gets), "set": summary(sets),
                "delete": summary(deletes),
            ]))
        return 0
    }
}

/// Samples ranks 0..<count with probability ∝ 1/(rank+1)^s (inverse CDF over a precomputed table).
struct ZipfSampler {
    private let cumulative: [Double]

    init(count: Int, exponent: Double) {
        var running = 0.0
        var table = [Double]()
        table.reserveCapacity(count)
        for rank in 1...count {
            running += 1 / pow(Double(rank), exponent)
            table.append(running)
        }
        cumulative = table.map { $0 / running }
    }

    func sample(_ generator: inout SplitMix64) -> Int {
        let u = Double(generator.next() >> 11) / Double(1 << 53)
        var low = 0
        var high = cumulative.count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] < u { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
