// Worker commands used only by the benchmarks: a cache hand-off waiter, a fresh process's first hit, a
// directory filler and a throughput loop (the floors they are compared with are in C: Benchmarks/floors).
// Each prints JSON lines; none judges anything.

import Foundation
import Glibc
import YashimaShared

enum BenchWorker {
    /// `worker fill --directory D --from A --count N [--size S]`: gets-or-generates the keys `scale/e<i>`
    /// for i in A ..< A + N with S-byte values (memory layer off, no budget): fills a directory for the
    /// scale bench, or tops one up (present keys are hits). Prints how many it generated.
    static func fill(_ arguments: inout Arguments) async throws -> Int32 {
        guard let directory = arguments.string("directory") else { throw ArgumentError(description: "--directory") }
        let from = try arguments.int("from", default: 0, range: 0...100_000_000)!
        let count = try arguments.int("count", default: 1000, range: 1...100_000_000)!
        let size = try arguments.int("size", default: 1024, range: 0...(1 << 20))!
        try arguments.rejectUnknown()
        let cache = YCache(
            storageDirectory: URL(fileURLWithPath: directory), memoryMaximumCost: 0, storageMaximumByteCount: nil)
        let before = cache.statistics.generations
        for index in from..<(from + count) {
            _ = try await cache.data(for: ScaleKeys.key(index)) { ScaleKeys.payload(index, size: size) }
        }
        emit(jsonLine(["generated": cache.statistics.generations - before]))
        return 0
    }

    /// `worker scale-hits --directory D --keys N --probes P`: P storage hits on random keys among the
    /// first N of a `fill`ed directory (memory layer off), for profiling; prints the median.
    static func scaleHits(_ arguments: inout Arguments) async throws -> Int32 {
        guard let directory = arguments.string("directory") else { throw ArgumentError(description: "--directory") }
        let keys = try arguments.int("keys", default: 1000, range: 1...100_000_000)!
        let probes = try arguments.int("probes", default: 100_000, range: 1...100_000_000)!
        try arguments.rejectUnknown()
        let cache = YCache(
            storageDirectory: URL(fileURLWithPath: directory), memoryMaximumCost: 0, storageMaximumByteCount: nil)
        var random = SplitMix64(seed: 7)
        var samples = Samples()
        var misses = 0
        for _ in 0..<probes {
            let key = ScaleKeys.key(Int(random.next() % UInt64(keys)))
            let start = monotonicNanoseconds()
            if try await cache.valueIfCached(for: key, codec: DataCodec()) == nil { misses += 1 }
            samples.append(Double(monotonicNanoseconds() - start))
        }
        emit(jsonLine(["medianNs": samples.median, "misses": misses]))
        return 0
    }

    /// `worker first-hit --directory D --key K [--no-cache]`: a fresh process's one lookup: opens the
    /// existing cache directory and gets one stored value (a storage hit), then exits; with `--no-cache`
    /// the same process does nothing (the baseline of the bench's first-open row). Prints nothing on a
    /// hit; exits 1 when the lookup was not a storage hit.
    static func firstHit(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let identity = arguments.string("key") ?? "first"
        let noCache = arguments.flag("no-cache")
        try arguments.rejectUnknown()
        if noCache { return 0 }
        let cache = setup.makeCache()
        let value = try await cache.valueIfCached(
            for: CacheKey(namespace: "first", identity: identity), codec: DataCodec())
        return value == nil ? 1 : 0
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

    /// `worker mix`: a read/write/delete mix over `--keys` keys (Zipf-like skew, or `--uniform`) for
    /// `--ops` operations (or `--duration-ms`); prints counts and per-kind latency percentiles.
    /// `--lookup-only` makes gets plain lookups (`valueIfCached`, a miss returns nothing, as diskcache's
    /// `get` does) instead of get-or-generate; `--min-size` draws each set's size uniformly from
    /// `--min-size...--size`; `--warmup N` leaves the first N operations out of the timings; `--samples
    /// PREFIX` also writes every timing as raw Float64 nanoseconds to PREFIX-get.f64, -set.f64, -delete.f64
    /// so the parent can merge processes before taking percentiles.
    static func mix(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let keyCount = try arguments.int("keys", default: 10_000, range: 1...10_000_000)!
        let operations = try arguments.int("ops", default: 10_000, range: 1...100_000_000)!
        let durationMilliseconds = try arguments.int("duration-ms")
        let readShare = try arguments.int("gets", default: 90, range: 0...1_000_000)!
        let writeShare = try arguments.int("sets", default: 10, range: 0...1_000_000)!
        let deleteShare = try arguments.int("deletes", default: 0, range: 0...1_000_000)!
        let size = try arguments.int("size", default: 4096, range: 0...(64 << 20))!
        let minimumSize = try arguments.int("min-size", default: size, range: 0...size)!
        let warmup = try arguments.int("warmup", default: 0, range: 0...100_000_000)!
        let samplesPrefix = arguments.string("samples")
        let uniform = arguments.flag("uniform")
        let lookupOnly = arguments.flag("lookup-only")
        let go = arguments.flag("go")
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        // Distinct streams per process: the seed is spread over the high bits, the pid fills the low ones
        // (a plain seed ^ pid collides for neighbouring pids and seeds).
        var generator = SplitMix64(seed: (setup.seed &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(getpid()))
        let zipf = uniform ? nil : ZipfSampler(count: keyCount, exponent: 0.99)
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0) })
        let total = readShare + writeShare + deleteShare
        var gets = Samples()
        var sets = Samples()
        var deletes = Samples()
        var misses = 0
        if go { awaitGo() }
        let started = monotonicNanoseconds()
        let deadline = durationMilliseconds.map { started + UInt64($0) * 1_000_000 }
        var done = 0
        while done < operations {
            if let deadline, done % 64 == 0, monotonicNanoseconds() >= deadline { break }
            let index = zipf?.sample(&generator) ?? Int(generator.next() % UInt64(keyCount))
            // A fresh key per operation, built outside the timed call (as diskcache's benchmark encodes its key).
            let key = CacheKey(namespace: "mix", identity: "k\(index)")
            let roll = Int(generator.next() % UInt64(max(1, total)))
            let recorded = done >= warmup
            if roll < readShare {
                let start = monotonicNanoseconds()
                if lookupOnly {
                    let value = try await cache.valueIfCached(for: key, codec: DataCodec())
                    let elapsed = Double(monotonicNanoseconds() - start)
                    if recorded {
                        gets.append(elapsed)
                        if value == nil { misses += 1 }
                    }
                } else {
                    _ = try await cache.value(for: key, codec: DataCodec()) { payload }
                    if recorded { gets.append(Double(monotonicNanoseconds() - start)) }
                }
            } else if roll < readShare + writeShare {
                let value =
                    minimumSize == size
                    ? payload : payload.prefix(minimumSize + Int(generator.next() % UInt64(size - minimumSize + 1)))
                let start = monotonicNanoseconds()
                try await cache.store(value, for: key, codec: DataCodec())
                if recorded { sets.append(Double(monotonicNanoseconds() - start)) }
            } else {
                let start = monotonicNanoseconds()
                try await cache.remove(for: key, codec: DataCodec())
                if recorded { deletes.append(Double(monotonicNanoseconds() - start)) }
            }
            done += 1
        }
        let elapsed = Double(monotonicNanoseconds() - started)
        if let samplesPrefix {
            for (samples, kind) in [(gets, "get"), (sets, "set"), (deletes, "delete")] {
                try samples.values.withUnsafeBytes { Data($0) }.write(
                    to: URL(fileURLWithPath: "\(samplesPrefix)-\(kind).f64"))
            }
        }
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
                "delete": summary(deletes), "getMisses": misses, "memoryHits": cache.statistics.memoryHits,
                "storageHits": cache.statistics.storageHits, "writeFailures": cache.statistics.writeFailures,
                "corruptEntries": cache.statistics.corruptEntries,
                "lockFailures": cache.statistics.crossProcessLockFailures,
            ]))
        return 0
    }

    /// `worker l1-footprint --items N`: resident-set growth per memory-layer entry of a fresh process
    /// (N one-byte values put in memory only); prints `{"bytesPerEntry": x}`.
    static func l1Footprint(_ arguments: inout Arguments) async throws -> Int32 {
        let items = try arguments.int("items", default: 50_000, range: 1...10_000_000)!
        try arguments.rejectUnknown()
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("unused-\(getpid())")
        let cache = YCache(storageDirectory: directory, memoryMaximumCost: nil, storageMaximumByteCount: nil)
        let before = ScaleBench.residentBytes()
        for index in 0..<items {
            try await cache.putInMemory(
                Data([1]), for: CacheKey(namespace: "m", identity: "item-\(index)"), codec: DataCodec())
        }
        let growth = ScaleBench.residentBytes() - before
        emit(jsonLine(["bytesPerEntry": Double(growth) / Double(items), "items": items]))
        withExtendedLifetime(cache) {}
        removeTree(directory.path)  // the cache may have created its (unused) storage folder
        return 0
    }

    /// Reads timings written by `worker mix --samples`.
    static func readSamples(_ path: String) -> Samples {
        guard let data = FileManager.default.contents(atPath: path) else { return Samples() }
        let values = data.withUnsafeBytes { raw in
            (0..<(raw.count / 8)).map { raw.loadUnaligned(fromByteOffset: $0 * 8, as: Double.self) }
        }
        return Samples(values)
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

/// The keys and values of the scale bench's directories.
enum ScaleKeys {
    static func key(_ index: Int) -> CacheKey { CacheKey(namespace: "scale", identity: "e\(index)") }

    static func payload(_ index: Int, size: Int) -> Data {
        Data(repeating: UInt8(truncatingIfNeeded: index), count: size)
    }
}

/// A stampede process's result in one write(2), nothing built or flushed through stdio: `DONE <finished>
/// <hold started, 0 when this process did not hold> <1 when its value was right, else 0> [<CPU ns>]`,
/// monotonic nanoseconds, and with `cpu` the CPU time (user + system) the process spent on its lookup. So
/// a process that has its value costs its siblings, still waking on 2 cores, nothing more.
func writeStampedeLine(finished: UInt64, holdStarted: UInt64, correct: Bool, cpu: UInt64? = nil) {
    let line = "DONE \(finished) \(holdStarted) \(correct ? 1 : 0)" + (cpu.map { " \($0)" } ?? "") + "\n"
    var bytes = Array(line.utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

/// This process's CPU time so far (user + system, every thread), nanoseconds.
func processCPUNanoseconds() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func nanoseconds(_ time: timeval) -> UInt64 { UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_usec) * 1000 }
    return nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime)
}

/// Sleeps until the monotonic time `until` (nanoseconds) as exactly as the bare-flock floor's holder does
/// (`clock_nanosleep` to an absolute time), so that a stampede's generator takes what it says. Task.sleep
/// alone overshot a 200 ms sleep by 0.15–0.25 ms here (Dispatch's timer, then a pool thread; with its
/// default leeway up to ~3 ms), which the stampede timed as hand-off. So: Task.sleep to 2 ms before, then
/// `clock_nanosleep` the rest, blocking one pool thread for at most 2 ms (a benchmark worker, no library).
func sleepExactly(until: UInt64) async throws {
    let margin: UInt64 = 2_000_000
    let now = monotonicNanoseconds()
    if until > now + margin {
        try await Task.sleep(for: .nanoseconds(until - margin - now), tolerance: .zero)
    }
    var deadline = timespec(tv_sec: Int(until / 1_000_000_000), tv_nsec: Int(until % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) == EINTR {}
}
