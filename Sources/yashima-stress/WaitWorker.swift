// Worker commands for waits on many keys at once (issue 24): `hold-many` generates a range of keys and
// holds every key's lock until told to finish (or is killed), `wait-many` gets the same keys while they are
// held and reports its peak thread count and resident-memory growth. Used by the cross-process tests, the
// `waits` stress scenario and the bench's concurrent-waits row.

import Foundation
import Glibc
import Synchronization
@_spi(Testing) import YashimaShared

enum WaitWorker {
    /// The keys both commands use: `<namespace>/w<index>` for `--from` ..< `--from + --keys`.
    private static func keys(_ arguments: inout Arguments) throws -> (String, Range<Int>, Int) {
        let namespace = arguments.string("namespace") ?? "waits"
        let count = try arguments.int("keys", default: 1000, range: 1...1_000_000)!
        let from = try arguments.int("from", default: 0, range: 0...100_000_000)!
        let size = try arguments.int("size", default: 64, range: 0...(1 << 20))!
        return (namespace, from..<(from + count), size)
    }

    /// `worker hold-many`: get-or-generate every key at once with generators that wait for a "RELEASE"
    /// line, so that this process holds every key's lock; prints "HOLDING <n>" once all generators run,
    /// then, after RELEASE, a JSON line with how many values it published.
    static func holdMany(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let (namespace, range, size) = try keys(&arguments)
        try arguments.rejectUnknown()
        raiseDescriptorLimit()  // one locked descriptor per key held
        let cache = setup.makeCache()
        try cache.openStorage()
        let started = WaitCount()
        let release = LineGate()
        let seed = setup.seed
        async let published: Int = tally(range) { index in
            let key = CacheKey(namespace: namespace, identity: "w\(index)")
            let expected = Payload.bytes(seed, key: key, kind: .data, size: size)
            let value = try? await cache.value(for: key, codec: DataCodec()) {
                if started.add() == range.count { emit("HOLDING \(range.count)") }
                await release.wait()
                return expected
            }
            return value == expected
        }.right
        // The RELEASE line is read on a thread of its own: the generators wait on the pool meanwhile.
        let reader = Thread {
            while let line = readLine(), line != "RELEASE" {}
            release.open()
        }
        reader.start()
        let count = await published
        emit(jsonLine(["published": count, "keys": range.count]))
        return count == range.count ? 0 : 1
    }

    /// `worker wait-many`: after READY and a GO line, gets every key at once while another process holds
    /// them; prints "WAITING <n>" once every lookup waits (from the lock-wait observer), then a JSON line:
    /// values right and wrong, generated here (takeovers), peak threads and resident-memory growth over
    /// the process before the lookups.
    static func waitMany(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let (namespace, range, size) = try keys(&arguments)
        try arguments.rejectUnknown()
        raiseDescriptorLimit()  // a build that waits with a thread and a descriptor per key needs them
        let cache = setup.makeCache()
        try cache.openStorage()
        let seed = setup.seed
        let expected = range.map {
            Payload.bytes(seed, key: CacheKey(namespace: namespace, identity: "w\($0)"), kind: .data, size: size)
        }
        awaitGo()
        let sampler = ResourceSampler()
        let waiting = WaitCount()
        let generated = WaitCount()
        let start = monotonicNanoseconds()
        let count = range.count
        let results = await CrossProcessWaitObservation.observing({
            if waiting.add() == count { emit("WAITING \(count)") }
        }) {
            await tally(range) { index in
                let key = CacheKey(namespace: namespace, identity: "w\(index)")
                let value = try? await cache.value(for: key, codec: DataCodec()) {
                    generated.add()
                    return expected[index - range.lowerBound]
                }
                return value == expected[index - range.lowerBound]
            }
        }
        let seconds = Double(monotonicNanoseconds() - start) / 1e9
        let peak = sampler.stop()
        emit(
            jsonLine([
                "keys": count, "right": results.right, "wrong": results.wrong, "generated": generated.value,
                "waited": waiting.value, "peakThreads": peak.threads, "threadsBefore": peak.threadsBefore,
                "rssGrowthBytes": peak.residentBytes - peak.residentBytesBefore, "seconds": seconds,
            ]))
        return results.wrong == 0 && results.right == count ? 0 : 1
    }

    /// Runs `body` for every index of `range` at once, each in a task of its own, and counts its answers.
    /// The tasks are children of groups of at most `chunk` (themselves children of one group): the Swift
    /// runtime finds a finished child in its group's list by walking it, so with one group of 100,000
    /// children 38% of the machine's time during a 100,000-key wait went there, not to the cache. The
    /// walks cost about N × chunk / 2 + (N / chunk)² / 2 steps, least near chunk = (2N)^⅓ (58 at 100,000):
    /// 64 walks a third as far as 256 did, where they were still 5.7% of the waiter's time at 100,000.
    static func tally(
        _ range: Range<Int>, chunk: Int = 64, _ body: @escaping @Sendable (Int) async -> Bool
    ) async -> (right: Int, wrong: Int) {
        await withTaskGroup(of: (right: Int, wrong: Int).self) { chunks in
            for start in stride(from: range.lowerBound, to: range.upperBound, by: chunk) {
                chunks.addTask {
                    await withTaskGroup(of: Bool.self) { group in
                        for index in start..<min(start + chunk, range.upperBound) {
                            group.addTask { await body(index) }
                        }
                        return await group.reduce(into: (right: 0, wrong: 0)) { tally, correct in
                            if correct { tally.right += 1 } else { tally.wrong += 1 }
                        }
                    }
                }
            }
            return await chunks.reduce(into: (right: 0, wrong: 0)) { $0 = ($0.right + $1.right, $0.wrong + $1.wrong) }
        }
    }

    /// Raises the soft descriptor limit to the hard one.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// A counter any task may add to.
final class WaitCount: Sendable {
    private let count = Mutex(0)

    @discardableResult
    func add() -> Int {
        count.withLock {
            $0 += 1; return $0
        }
    }

    var value: Int { count.withLock { $0 } }
}

/// Opened once; tasks waiting on it are resumed then.
final class LineGate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// Samples this process's thread count and resident memory every 2 ms on a thread of its own (counted).
final class ResourceSampler: Sendable {
    struct Peak {
        var threads = 0
        var threadsBefore = 0
        var residentBytes = 0
        var residentBytesBefore = 0
    }

    private let state = Mutex<(peak: Peak, stopped: Bool)>((Peak(), false))
    private let finished = DispatchSemaphore(value: 0)

    init() {
        let (threads, resident) = Self.read()
        state.withLock {
            $0.peak = Peak(
                threads: threads, threadsBefore: threads, residentBytes: resident, residentBytesBefore: resident)
        }
        let thread = Thread { [self] in
            while true {
                let (threads, resident) = Self.read()
                let stop = state.withLock { state -> Bool in
                    state.peak.threads = max(state.peak.threads, threads)
                    state.peak.residentBytes = max(state.peak.residentBytes, resident)
                    return state.stopped
                }
                if stop { break }
                usleep(2000)
            }
            finished.signal()
        }
        thread.stackSize = 64 * 1024
        thread.start()
    }

    /// Stops sampling and returns the peaks.
    func stop() -> Peak {
        state.withLock { $0.stopped = true }
        finished.wait()
        return state.withLock { $0.peak }
    }

    /// Threads and resident bytes from /proc/self/status.
    static func read() -> (threads: Int, residentBytes: Int) {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        var threads = 0
        var resident = 0
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if line.hasPrefix("Threads:"), fields.count > 1 { threads = Int(fields[1]) ?? 0 }
            if line.hasPrefix("VmRSS:"), fields.count > 1 { resident = (Int(fields[1]) ?? 0) * 1024 }
        }
        return (threads, resident)
    }
}
