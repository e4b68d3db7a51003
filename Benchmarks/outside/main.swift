// The bench "from outside": a separate package that depends on YashimaShared by path and calls its public
// API as a user's program would (only the entry files' paths, for the C floor's list, come from the
// operator SPI), measured against the same C floors (Benchmarks/floors) with code of its own: the storage
// hit on random keys, the memory hit, the miss and publish of a new 4 KiB key, the stampede of fresh
// processes (released by a flock barrier, not by lines), and a Redis remote hit. Run by run.sh; prints
// one line per figure: median, floor median, ratio, load average.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func load() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3)
        .joined(separator: " ")
}

func report(_ name: String, _ ours: Double, _ floor: Double, target: Double) {
    let ratio = ours / floor
    print(
        String(
            format: "%-44@ %12.0f ns  floor %12.0f ns  %6.2fx  (target ≤ %.1fx: %@)  load %@", name as NSString, ours,
            floor, ratio, target, ratio <= target ? "met" : "MISSED", load()))
    fflush(nil)
}

/// A C floor serving one command line at a time (`floors` README): READY, then `OK <figure> <failures>`.
final class Floor {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let samples: String
    var pending = Data()

    init(_ program: String, _ arguments: [String]) throws {
        samples = NSTemporaryDirectory() + "/outside-floor-\(UUID().uuidString).f64"
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments + ["--samples", samples]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        guard line() == "READY" else { fatalError("floor \(arguments) did not start") }
    }

    func line() -> String {
        while true {
            if let end = pending.firstIndex(of: 10) {
                let text = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                pending = Data(pending[(end + 1)...])
                return text
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return "" }
            pending.append(chunk)
        }
    }

    @discardableResult
    func run(_ command: String) -> Double {
        input.fileHandleForWriting.write(Data((command + "\n").utf8))
        let reply = line().split(separator: " ")
        guard reply.count == 3, reply[0] == "OK", reply[2] == "0" else { fatalError("floor failed: \(reply)") }
        return Double(reply[1])!
    }

    func takeSamples() -> [Double] {
        let data = FileManager.default.contents(atPath: samples) ?? Data()
        truncate(samples, 0)
        return data.withUnsafeBytes { raw in
            (0..<(raw.count / 8)).map { raw.loadUnaligned(fromByteOffset: $0 * 8, as: Double.self) }
        }
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        unlink(samples)
    }
}

let arguments = CommandLine.arguments
let floors = ProcessInfo.processInfo.environment["FLOORS"] ?? "floors"
let work = ProcessInfo.processInfo.environment["OUTSIDE_WORK"] ?? NSTemporaryDirectory()

/// Storage hits on random keys over `count` entries of 1 KiB, against floors read of the same files.
func storageHits(count: Int) async throws {
    let directory = URL(fileURLWithPath: work + "/hits-\(count)")
    let cache = YCache(storageDirectory: directory, memoryMaximumCost: 0, storageMaximumByteCount: nil)
    let keys = (0..<count).map { CacheKey(namespace: "outside", identity: "k\($0)") }
    for key in keys { _ = try await cache.data(for: key) { Data(repeating: 7, count: 1024) } }
    try await Task.sleep(for: .milliseconds(2100))  // past the window in which a new entry is re-verified
    var random = SystemRandomNumberGenerator()
    let probes = (0..<20_000).map { _ in keys[Int.random(in: 0..<count, using: &random)] }
    let storage = try cache.storageOperator()
    let list = work + "/paths-\(count)"
    try probes.map { storage.entryPath(for: $0, codecIdentifier: DataCodec().identifier) }
        .joined(separator: "\n").appending("\n").write(toFile: list, atomically: true, encoding: .utf8)
    let floor = try Floor(floors, ["read", "--paths", list, "--root", storage.path])
    var ours: [Double] = []
    for chunk in 0..<20 {
        let range = (chunk * 1000)..<((chunk + 1) * 1000)
        if chunk % 2 == 0 { floor.run("R \(range.lowerBound) \(range.upperBound)") }
        for index in range {
            let start = now()
            guard try await cache.valueIfCached(for: probes[index], codec: DataCodec()) != nil else { fatalError() }
            ours.append(Double(now() - start))
        }
        if chunk % 2 == 1 { floor.run("R \(range.lowerBound) \(range.upperBound)") }
    }
    report("storage hit, random keys, \(count) entries", median(ours), median(floor.takeSamples()), target: 2)
}

func memoryHits() async throws {
    let cache = YCache(storageDirectory: URL(fileURLWithPath: work + "/memory"), storageMaximumByteCount: nil)
    let key = CacheKey(namespace: "bench", identity: "memory")
    let value = Data(count: 4096)
    _ = try await cache.data(for: key) { value }
    let floor = try Floor(floors, ["memory"])
    var ours: [Double] = []
    for round in 0..<10 {
        if round % 2 == 0 { floor.run("M 10000") }
        for _ in 0..<10_000 {
            let start = now()
            _ = try await cache.data(for: key) { value }
            ours.append(Double(now() - start))
        }
        if round % 2 == 1 { floor.run("M 10000") }
    }
    report("memory hit 4 KiB", median(ours), median(floor.takeSamples()), target: 2)
}

func missAndPublish() async throws {
    let cache = YCache(
        storageDirectory: URL(fileURLWithPath: work + "/publish"), memoryMaximumCost: 0, storageMaximumByteCount: nil)
    for index in 0..<1024 {
        _ = try await cache.data(for: CacheKey(namespace: "warm", identity: "\(index)")) { Data([1]) }
    }
    let floor = try Floor(floors, ["publish", "--dir", work + "/publish-floor", "--size", "4096"])
    floor.run("P 64")
    _ = floor.takeSamples()
    let value = Data(repeating: 3, count: 4096)
    var ours: [Double] = []
    var theirs: [Double] = []
    for index in 0..<1000 {
        if index % 2 == 0 { theirs.append(floor.run("P 1")) }
        let start = now()
        _ = try await cache.data(for: CacheKey(namespace: "new", identity: "\(index)")) { value }
        ours.append(Double(now() - start))
        if index % 2 == 1 { theirs.append(floor.run("P 1")) }
    }
    report("local miss+publish 4 KiB", median(ours), median(theirs), target: 1.5)
}

/// `stampede-child DIR BARRIER`: opens the cache, says ready, blocks on the barrier lock, then
/// value(for:) with a 200 ms generator; prints the monotonic time it had the value.
func stampedeChild(_ directory: String, _ barrier: String) async throws {
    let cache = YCache(storageDirectory: URL(fileURLWithPath: directory))
    try cache.openStorage()
    let lock = open(barrier, O_RDONLY | O_CLOEXEC)
    print("READY")
    fflush(nil)
    flock(lock, LOCK_SH)  // released when the parent unlocks
    _ = try await cache.data(for: CacheKey(namespace: "stampede", identity: "hot")) {
        // 200 ms exactly, as the C floor's holder sleeps (Task.sleep overshoots by 0.2-3 ms here).
        let until = now() + 200_000_000
        var deadline = timespec(tv_sec: Int(until / 1_000_000_000), tv_nsec: Int(until % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) == EINTR {}
        return Data(count: 4096)
    }
    print(now())
    fflush(nil)
    _ = readLine()
}

func stampede(processes: Int, rounds: Int) throws {
    var ours: [Double] = []
    for round in 0..<rounds {
        let directory = work + "/stampede-\(processes)-\(round)"
        try YCache(storageDirectory: URL(fileURLWithPath: directory)).openStorage()
        let barrier = directory + ".barrier"
        FileManager.default.createFile(atPath: barrier, contents: Data())
        let lock = open(barrier, O_RDONLY | O_CLOEXEC)
        flock(lock, LOCK_EX)
        var children: [(Process, Pipe, Pipe)] = []
        for _ in 0..<processes {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            child.arguments = ["stampede-child", directory, barrier]
            let output = Pipe()
            let input = Pipe()
            child.standardOutput = output
            child.standardInput = input
            try child.run()
            children.append((child, output, input))
        }
        var buffers = [Data](repeating: Data(), count: processes)
        for (index, child) in children.enumerated() {
            while !String(decoding: buffers[index], as: UTF8.self).contains("READY\n") {
                buffers[index].append(child.1.fileHandleForReading.availableData)
            }
        }
        usleep(50_000)  // every child is blocked in flock by now (they said READY just before it)
        let released = now()
        flock(lock, LOCK_UN)
        var last: UInt64 = 0
        for (index, child) in children.enumerated() {
            while String(decoding: buffers[index], as: UTF8.self).split(separator: "\n").count < 2 {
                buffers[index].append(child.1.fileHandleForReading.availableData)
            }
            last = max(last, UInt64(String(decoding: buffers[index], as: UTF8.self).split(separator: "\n")[1])!)
        }
        for child in children {
            try child.2.fileHandleForWriting.close()
            child.0.waitUntilExit()
        }
        close(lock)
        ours.append(Double(last - released) - 200_000_000)
    }
    // The floor: floors stampede-fork (forked children, released by closing a pipe), same N.
    let floor = Process()
    floor.executableURL = URL(fileURLWithPath: floors)
    floor.arguments = ["stampede-fork", "--processes", "\(processes)", "--dir", work, "--rounds", "\(rounds)"]
    let output = Pipe()
    floor.standardOutput = output
    try floor.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    floor.waitUntilExit()
    let floorMedian = Double(text.split(separator: "\n").last!.split(separator: " ").last!)!
    report("stampede, fresh processes, \(processes)", median(ours), floorMedian, target: 3)
}

func redisHits(_ url: String, socket: String) async throws {
    let remote = try YCache.Remote.redis(url)
    let key = CacheKey(namespace: "remote", identity: "4k")
    let value = Data(repeating: 5, count: 4096)
    try await YCache(storageDirectory: URL(fileURLWithPath: work + "/writer"), remote: remote)
        .store(value, for: key, codec: DataCodec())
    let reader = YCache(
        storageDirectory: URL(fileURLWithPath: work + "/reader"), remote: remote, memoryMaximumCost: 0,
        storageMaximumByteCount: nil)
    let get = try Floor(floors, ["redis", "--socket", socket, "--key", "outside-raw", "--size", "4096"])
    let publish = try Floor(floors, ["publish", "--dir", work + "/remote-floor", "--size", "4096", "--same"])
    var ours: [Double] = []
    var gets: [Double] = []
    var publishes: [Double] = []
    for round in 0..<310 {
        try await reader.removeAll(in: "remote")
        let g = get.run("G 1")
        let p = publish.run("P 1")
        let start = now()
        let resolved = try await reader.resolve(for: key, codec: DataCodec()) { Data() }
        let elapsed = Double(now() - start)
        guard resolved.origin == .remote else { fatalError("not a remote hit") }
        if round >= 10 {
            ours.append(elapsed)
            gets.append(g)
            publishes.append(p)
        }
    }
    report("Redis remote hit 4 KiB", median(ours), median(gets) + median(publishes), target: 1.5)
}

switch arguments.dropFirst().first {
case "stampede-child":
    try await stampedeChild(arguments[2], arguments[3])
default:
    print("from outside: \(arguments.dropFirst().joined(separator: " ")); load \(load())")
    try await storageHits(count: 1000)
    try await memoryHits()
    try await missAndPublish()
    // The rounds of the bench's fresh stampede (15 at 8 and 32, 9 at 64), so the medians are as steady.
    for (processes, rounds) in [(8, 15), (32, 15), (64, 9)] { try stampede(processes: processes, rounds: rounds) }
    if arguments.count > 2 { try await redisHits(arguments[1], socket: arguments[2]) }
}
