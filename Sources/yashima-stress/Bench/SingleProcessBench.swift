// Section "single": one process. Storage hits against raw read(2) and raw mmap+touch of the same bytes,
// memory hits, writes against a raw write-temp+rename, and the cost of contains/metadata.

import Foundation
import Glibc
import Synchronization
import YashimaShared

enum SingleProcessBench {
    static let sizes = [4 << 10, 64 << 10, 1 << 20, 16 << 20]

    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("single process: storage hits vs raw reads (page cache warm)")
        let directory = context.directory("single")
        let rawDirectory = directory.appendingPathComponent("raw").path
        mkdir(rawDirectory, 0o700)
        // memoryMaximumCost 0: every lookup is a storage hit from an empty L1 (as a fresh YCache sees it).
        let cache = YCache(
            storageDirectory: directory.appendingPathComponent("cache"), memoryMaximumCost: 0,
            storageMaximumByteCount: nil)
        // Publish every payload first, then let ctimes age past the coarse-timestamp window once, so
        // repeat hits use the verified-inode cache (one 2.1 s wait instead of one per size).
        for size in sizes {
            let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try payload.write(to: URL(fileURLWithPath: rawDirectory + "/payload-\(size)"))
            _ = try await cache.data(for: CacheKey(namespace: "bench", identity: "payload-\(size)")) { payload }
        }
        try await Task.sleep(for: .milliseconds(2100))
        for size in sizes {
            let iterations =
                context.quick ? max(20, min(2000, (64 << 20) / size / 4)) : max(50, min(10_000, (256 << 20) / size / 4))
            let rounds = context.quick ? 3 : 5
            let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let rawPath = rawDirectory + "/payload-\(size)"
            let key = CacheKey(namespace: "bench", identity: "payload-\(size)")
            let label = formatBytes(size)
            var buffer = [UInt8](repeating: 0, count: size)
            let read = measure(rounds: rounds, iterations: iterations) { rawRead(rawPath, &buffer) }
            report.add(BenchRow(section: "single", name: "raw open+read(2)+close \(label)", samples: read))
            let mapped = measure(rounds: rounds, iterations: iterations) { rawMapTouch(rawPath) }
            report.add(BenchRow(section: "single", name: "raw open+mmap+touch+munmap \(label)", samples: mapped))
            let faster =
                read.median <= mapped.median ? "raw open+read(2)+close \(label)" : "raw open+mmap+touch+munmap \(label)"
            let hit = try await measureAsync(rounds: rounds, iterations: iterations) {
                let value = try await cache.data(for: key) { payload }
                touchPages(value)
            }
            // Issue 14: ≤ 2x the faster raw baseline at every size (≥ 1 MiB keeps its older 1.5x).
            let limit = size >= (1 << 20) ? 1.5 : 2.0
            report.add(
                BenchRow(section: "single", name: "YCache storage hit +touch \(label)", samples: hit),
                comparedTo: faster, limit: limit)
            if size >= 1 << 20 {
                // First read of files this process has not verified yet: the payload checksum runs.
                let fresh = try await firstReads(
                    cache, size: size, count: context.quick ? 4 : (size > 1 << 20 ? 8 : 16))
                report.add(
                    BenchRow(section: "single", name: "YCache first storage hit (CRC) \(label)", samples: fresh),
                    comparedTo: faster)
            }
        }

        try await executors(context)

        report.section("single process: memory hits, writes, inspection")
        let memoryCache = YCache(
            storageDirectory: directory.appendingPathComponent("memory"), storageMaximumByteCount: nil)
        let small = Data(count: 4096)
        let memoryKey = CacheKey(namespace: "bench", identity: "memory")
        _ = try await memoryCache.data(for: memoryKey) { small }
        let memory = try await measureAsync(rounds: 5, iterations: context.quick ? 20_000 : 100_000) {
            _ = try await memoryCache.data(for: memoryKey) { small }
        }
        var memoryRow = BenchRow(section: "single", name: "YCache memory hit", samples: memory)
        memoryRow.target = "< 2 µs"
        memoryRow.met = memory.median < 2_000
        report.add(memoryRow)

        // New keys into a directory in use: fan-out folders are made on first use, so the directory is
        // warmed with 1,024 tiny entries first (its 256 entry and 256 lock folders then nearly all exist).
        for size in [4 << 10, 1 << 20] {
            let label = formatBytes(size)
            let count = size > 65536 ? (context.quick ? 40 : 150) : (context.quick ? 200 : 2000)
            let (raw, cached) = try await newKeyWrites(
                in: directory.appendingPathComponent("writes-\(size)"), size: size, count: count, warmUp: 1024)
            report.add(BenchRow(section: "single", name: "raw write-temp+rename \(label)", samples: raw))
            report.add(
                BenchRow(section: "single", name: "YCache generate+publish \(label)", samples: cached),
                comparedTo: "raw write-temp+rename \(label)", limit: 1.3)
        }
        // The first writes into a fresh directory also make its fan-out folders (two per key at most).
        do {
            let (raw, cached) = try await newKeyWrites(
                in: directory.appendingPathComponent("writes-fresh"), size: 4 << 10, count: 256, warmUp: 0)
            report.add(BenchRow(section: "single", name: "raw write-temp+rename 4 KiB, fresh folder", samples: raw))
            report.add(
                BenchRow(section: "single", name: "YCache generate+publish 4 KiB, fresh directory", samples: cached),
                comparedTo: "raw write-temp+rename 4 KiB, fresh folder")
        }

        // Replacing: the same 100 names written over and over (what `store` on existing keys and the
        // diskcache-shaped mix do). On ext4 a rename over an existing file starts writeback of the new
        // file's data (auto_da_alloc), so both sides pay for it.
        do {
            let size = 4 << 10
            let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 3) })
            let count = context.quick ? 200 : 1000
            let replaceDirectory = directory.appendingPathComponent("replace")
            let writer = YCache(storageDirectory: replaceDirectory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
            try writer.openStorage()
            let rawTarget = replaceDirectory.path + "/raw"
            mkdir(rawTarget, 0o700)
            var rawSamples = Samples()
            var cacheSamples = Samples()
            for index in 0..<(count + 100) {
                let key = CacheKey(namespace: "bench", identity: "replace-\(index % 100)")
                for turn in index % 2 == 0 ? [0, 1] : [1, 0] {
                    let start = monotonicNanoseconds()
                    if turn == 0 {
                        rawWriteRename(directory: rawTarget, name: "r\(index % 100)", payload)
                        if index >= 100 { rawSamples.append(Double(monotonicNanoseconds() - start)) }
                    } else {
                        try await writer.store(payload, for: key, codec: DataCodec())
                        if index >= 100 { cacheSamples.append(Double(monotonicNanoseconds() - start)) }
                    }
                }
            }
            report.add(
                BenchRow(section: "single", name: "raw write-temp+rename over existing 4 KiB", samples: rawSamples))
            report.add(
                BenchRow(section: "single", name: "YCache store replacing 4 KiB", samples: cacheSamples),
                comparedTo: "raw write-temp+rename over existing 4 KiB", limit: 1.3)
        }

        let inspectKey = CacheKey(namespace: "bench", identity: "payload-4096")
        let contains = try await measureAsync(rounds: 3, iterations: context.quick ? 2000 : 10_000) {
            _ = try await cache.contains(for: inspectKey, codec: DataCodec())
        }
        report.add(BenchRow(section: "single", name: "YCache contains (header read)", samples: contains))
        let metadata = try await measureAsync(rounds: 3, iterations: context.quick ? 2000 : 10_000) {
            _ = try await cache.metadata(for: inspectKey, codec: DataCodec())
        }
        report.add(BenchRow(section: "single", name: "YCache metadata (header read)", samples: metadata))
    }

    /// The same storage hit (4 KiB, memory layer off) called from the main actor, from an actor and from
    /// a detached task, in alternating rounds (issue 25: the main actor's ≤ 1.3x the detached task's).
    /// Each caller loops on its own executor, so what differs is only where the call starts.
    static func executors(_ context: BenchContext) async throws {
        let report = context.report
        report.section("single process: a 4 KiB storage hit by where its caller runs")
        let cache = YCache(
            storageDirectory: context.directory("executors").appendingPathComponent("cache"), memoryMaximumCost: 0,
            storageMaximumByteCount: nil)
        let key = CacheKey(namespace: "bench", identity: "executors")
        let payload = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        _ = try await cache.data(for: key) { payload }
        try await Task.sleep(for: .milliseconds(2100))  // past the coarse-timestamp window (see `run`)
        let iterations = context.quick ? 2000 : 10_000
        let caller = HitCaller()
        var main = Samples()
        var actor = Samples()
        var detached = Samples()
        for round in 0..<(context.quick ? 3 : 6) {
            let order = round % 2 == 0 ? [0, 1, 2] : [2, 1, 0]
            for which in order {
                switch which {
                case 0: main.append(contentsOf: try await mainActorHits(cache, key, iterations))
                case 1: actor.append(contentsOf: try await caller.hits(cache, key, iterations))
                default:
                    detached.append(
                        contentsOf: try await Task.detached { try await detachedHits(cache, key, iterations) }.value)
                }
            }
        }
        report.add(BenchRow(section: "single", name: "storage hit 4 KiB from a detached task", samples: detached))
        report.add(
            BenchRow(section: "single", name: "storage hit 4 KiB from an actor", samples: actor),
            comparedTo: "storage hit 4 KiB from a detached task")
        report.add(
            BenchRow(section: "single", name: "storage hit 4 KiB from the main actor", samples: main),
            comparedTo: "storage hit 4 KiB from a detached task", limit: 1.3)
    }

    @MainActor
    private static func mainActorHits(_ cache: YCache, _ key: CacheKey, _ iterations: Int) async throws -> Samples {
        try await timedHits(cache, key, iterations)
    }

    private static func detachedHits(_ cache: YCache, _ key: CacheKey, _ iterations: Int) async throws -> Samples {
        try await timedHits(cache, key, iterations)
    }

    /// Times the first read of `count` freshly published entries of `size` bytes.
    /// Times `count` new-key writes of `size` bytes through YCache and as a raw write-temp+rename, after
    /// `warmUp` untimed 1-byte entries in the same directory.
    private static func newKeyWrites(
        in writeDirectory: URL, size: Int, count: Int, warmUp: Int
    ) async throws -> (raw: Samples, cached: Samples) {
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0) })
        let writer = YCache(storageDirectory: writeDirectory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
        try writer.openStorage()
        for index in 0..<warmUp {
            _ = try await writer.data(for: CacheKey(namespace: "bench", identity: "warm-\(index)")) { Data([1]) }
        }
        let rawTarget = writeDirectory.path + "/raw"
        mkdir(rawTarget, 0o700)
        var rawSamples = Samples()
        var cacheSamples = Samples()
        // Interleave raw and cache writes, alternating which goes first, so both see the same machine
        // state (writeback of the previous file lands on whichever write comes next).
        for index in 0..<count {
            let key = CacheKey(namespace: "bench", identity: "write-\(size)-\(index)")
            for turn in index % 2 == 0 ? [0, 1] : [1, 0] {
                let start = monotonicNanoseconds()
                if turn == 0 {
                    rawWriteRename(directory: rawTarget, name: "w\(index)", payload)
                    rawSamples.append(Double(monotonicNanoseconds() - start))
                } else {
                    _ = try await writer.data(for: key) { payload }
                    cacheSamples.append(Double(monotonicNanoseconds() - start))
                }
            }
        }
        return (rawSamples, cacheSamples)
    }

    private static func firstReads(_ cache: YCache, size: Int, count: Int) async throws -> Samples {
        var samples = Samples()
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        var keys: [CacheKey] = []
        for index in 0..<count {
            let key = CacheKey(namespace: "bench", identity: "fresh-\(size)-\(index)")
            keys.append(key)
            _ = try await cache.data(for: key) { payload }
        }
        for key in keys {
            let start = monotonicNanoseconds()
            let value = try await cache.data(for: key) { payload }
            touchPages(value)
            samples.append(Double(monotonicNanoseconds() - start))
        }
        return samples
    }
}

/// Reads one byte per 4 KiB page, as a caller using the value would.
@inline(never)
func touchPages(_ data: Data) {
    data.withUnsafeBytes { raw in
        var sum: UInt8 = 0
        var offset = 0
        while offset < raw.count {
            sum &+= raw[offset]
            offset += 4096
        }
        blackHole(sum)
    }
}

/// Keeps a computed value alive: an atomic store the optimizer cannot drop. (A generic `@inline(never)`
/// function was not enough: its specialization had the argument removed as dead, and with it every
/// page-touching load, so the "+touch" rows measured no page faults at all.)
func blackHole(_ value: UInt8) { benchSink.store(value, ordering: .relaxed) }

private let benchSink = Atomic<UInt8>(0)

/// Baseline: open + fstat + read(2) into a reused buffer + close.
@inline(never)
func rawRead(_ path: String, _ buffer: inout [UInt8]) {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    var info = stat()
    fstat(fd, &info)
    let size = Int(info.st_size)
    buffer.withUnsafeMutableBytes { raw in
        var done = 0
        while done < size {
            let n = read(fd, raw.baseAddress! + done, size - done)
            if n <= 0 { break }
            done += n
        }
    }
    close(fd)
}

/// Baseline: open + fstat + mmap + touch every page + munmap + close.
@inline(never)
func rawMapTouch(_ path: String) {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    var info = stat()
    fstat(fd, &info)
    let size = Int(info.st_size)
    if let pointer = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), pointer != MAP_FAILED {
        var sum: UInt8 = 0
        var offset = 0
        while offset < size {
            sum &+= pointer.load(fromByteOffset: offset, as: UInt8.self)
            offset += 4096
        }
        blackHole(sum)
        munmap(pointer, size)
    }
    close(fd)
}

/// Baseline: create a temp file, write the bytes, close, rename into place (no fsync).
@inline(never)
func rawWriteRename(directory: String, name: String, _ payload: Data) {
    let temp = directory + "/." + name + ".tmp"
    let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return }
    payload.withUnsafeBytes { raw in
        var done = 0
        while done < raw.count {
            let n = write(fd, raw.baseAddress! + done, raw.count - done)
            if n <= 0 { break }
            done += n
        }
    }
    close(fd)
    rename(temp, directory + "/" + name)
}

/// Times `iterations` storage hits of `key` on the caller's executor (one warm-up call first).
nonisolated(nonsending) func timedHits(_ cache: YCache, _ key: CacheKey, _ iterations: Int) async throws -> Samples {
    var samples = Samples()
    for index in 0...iterations {
        let start = monotonicNanoseconds()
        let value = try await cache.data(for: key) { Data() }
        let elapsed = Double(monotonicNanoseconds() - start)
        blackHole(value.first ?? 0)
        if index > 0 { samples.append(elapsed) }
    }
    return samples
}

/// An actor whose methods call the cache (the bench's "from an actor" caller).
actor HitCaller {
    func hits(_ cache: YCache, _ key: CacheKey, _ iterations: Int) async throws -> Samples {
        try await timedHits(cache, key, iterations)
    }
}
