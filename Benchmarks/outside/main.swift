// The bench "from outside": a separate package that depends on YashimaShared by path and calls its public
// API as a user's program would (only the entry files' paths, for the C floor's list, come from the
// operator SPI), measured against the same C floors (Benchmarks/floors) with code of its own: the storage
// hit on random keys, the memory hit, the miss and publish of a new 4 KiB key, the stampede of fresh
// processes (released both by one flock barrier and by GO lines in turn, the bench's way, each against its
// C floor released the same way), and a Redis remote hit. Run by run.sh; prints one line per figure: median,
// floor median, ratio, load average. OUTSIDE_ONLY=stampede runs the stampedes alone; OUTSIDE_RELEASE=flock
// or lines one release.

import Foundation
import Glibc
import Synchronization
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

func report(_ name: String, _ ours: Double, _ floor: Double, target: Double, note: String = "") {
    let ratio = ours / floor
    print(
        String(
            format: "%-44@ %12.0f ns  floor %12.0f ns  %6.2fx  (target ≤ %.1fx: %@)  load %@", name as NSString, ours,
            floor, ratio, target, ratio <= target ? "met" : "MISSED", load()) + (note.isEmpty ? "" : "  " + note))
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

/// How a stampede's processes are let go: all at once by one `flock` barrier (every one wakes in the same
/// instant), or by a `GO` line written to each in turn, timed from just before the first (the bench's way).
enum Release: String {
    case flock
    case lines
}

/// `stampede-child DIR BARRIER|-`: opens the cache, says READY, then waits for its release (blocks on the
/// barrier lock, or reads a line when the barrier is `-`), then value(for:) with a 200 ms generator; prints
/// `DONE <monotonic time it had the value> <monotonic time its generator started, or 0>`.
func stampedeChild(_ directory: String, _ barrier: String) async throws {
    let cache = YCache(storageDirectory: URL(fileURLWithPath: directory))
    try cache.openStorage()
    let lock = barrier == "-" ? -1 : open(barrier, O_RDONLY | O_CLOEXEC)
    print("READY")
    fflush(nil)
    if lock >= 0 { flock(lock, LOCK_SH) } else { _ = readLine() }  // released by the parent
    let started = Mutex<UInt64>(0)
    _ = try await cache.data(for: CacheKey(namespace: "stampede", identity: "hot")) {
        // 200 ms exactly, as the C floor's holder sleeps (Task.sleep overshoots by 0.2-3 ms here).
        let start = now()
        started.withLock { $0 = start }
        let until = start + 200_000_000
        var deadline = timespec(tv_sec: Int(until / 1_000_000_000), tv_nsec: Int(until % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) == EINTR {}
        return Data(count: 4096)
    }
    print("DONE \(now()) \(started.withLock { $0 })")
    fflush(nil)
    _ = readLine()
}

/// One round: `commands` started, each READY awaited, all released by `release`, every `DONE <finished>
/// <hold started or 0> ...` line read. Returns the last finish from the release and from the hold's start,
/// each minus the 200 ms hold, in nanoseconds.
func stampedeRound(_ commands: [(String, [String])], release: Release, barrier: String?) throws -> (Double, Double) {
    var lock: Int32 = -1
    if let barrier {
        FileManager.default.createFile(atPath: barrier, contents: Data())
        lock = open(barrier, O_RDONLY | O_CLOEXEC)
        flock(lock, LOCK_EX)
    }
    var children: [(Process, Pipe, Pipe)] = []
    for (program, arguments) in commands {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: program)
        child.arguments = arguments
        let output = Pipe()
        let input = Pipe()
        child.standardOutput = output
        child.standardInput = input
        try child.run()
        children.append((child, output, input))
    }
    var buffers = [Data](repeating: Data(), count: children.count)
    func lines(_ index: Int) -> [Substring] { String(decoding: buffers[index], as: UTF8.self).split(separator: "\n") }
    for (index, child) in children.enumerated() {
        while !lines(index).contains("READY") { buffers[index].append(child.1.fileHandleForReading.availableData) }
    }
    let released: UInt64
    switch release {
    case .flock:
        usleep(50_000)  // every child is blocked in flock by now (they said READY just before it)
        released = now()
        flock(lock, LOCK_UN)
    case .lines:
        released = now()
        for child in children { child.2.fileHandleForWriting.write(Data("GO\n".utf8)) }
    }
    // Nothing read while they race: each read would wake this process and take a core from the processes
    // being timed (the bench waits the same way). The hold is 200 ms; the last of 64 is done well within.
    usleep(UInt32(300_000 + 5_000 * children.count))
    var last: UInt64 = 0
    var holdStarted: UInt64 = 0
    for (index, child) in children.enumerated() {
        while !lines(index).contains(where: { $0.hasPrefix("DONE ") }) {
            buffers[index].append(child.1.fileHandleForReading.availableData)
        }
        let done = lines(index).first { $0.hasPrefix("DONE ") }!.split(separator: " ").compactMap { UInt64($0) }
        last = max(last, done[0])
        if done.count > 1, done[1] > 0 { holdStarted = done[1] }
    }
    for child in children {
        try child.2.fileHandleForWriting.close()
        child.0.waitUntilExit()
    }
    if lock >= 0 { close(lock) }
    precondition(holdStarted > 0, "no process reported its hold")
    return (Double(last - released) - 200_000_000, Double(last - holdStarted) - 200_000_000)
}

/// The fresh stampede at `processes`, released by `release`, against its C floor released the same way:
/// with `.flock`, `floors stampede-fork` (forked children let go by closing a pipe); with `.lines`, N
/// exec'd `floors stampede` processes sent GO in turn (the bench's floor). Rounds alternate with the
/// floor's under `.lines`.
func stampede(processes: Int, rounds: Int, release: Release) throws {
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    var ours: [Double] = []
    var oursFromHold: [Double] = []
    var theirs: [Double] = []
    for round in 0..<rounds {
        let directory = work + "/stampede-\(release.rawValue)-\(processes)-\(round)"
        try YCache(storageDirectory: URL(fileURLWithPath: directory)).openStorage()
        let barrier = release == .flock ? directory + ".barrier" : nil
        let child = (me, ["stampede-child", directory, barrier ?? "-"])
        let (fromRelease, fromHold) = try stampedeRound(
            Array(repeating: child, count: processes), release: release, barrier: barrier)
        ours.append(fromRelease)
        oursFromHold.append(fromHold)
        if release == .lines {
            let floorDirectory = work + "/floor-\(processes)-\(round)"
            try FileManager.default.createDirectory(atPath: floorDirectory, withIntermediateDirectories: true)
            let commands = (0..<processes).map { index in
                (
                    floors,
                    [
                        "stampede", "--role", index == 0 ? "holder" : "waiter", "--lock", floorDirectory + "/key.lock",
                        "--data", floorDirectory + "/value",
                    ]
                )
            }
            theirs.append(try stampedeRound(commands, release: .lines, barrier: nil).0)
        }
    }
    if release == .flock {
        let floor = Process()
        floor.executableURL = URL(fileURLWithPath: floors)
        floor.arguments = ["stampede-fork", "--processes", "\(processes)", "--dir", work, "--rounds", "\(rounds)"]
        let output = Pipe()
        floor.standardOutput = output
        try floor.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        floor.waitUntilExit()
        theirs = [Double(text.split(separator: "\n").last!.split(separator: " ").last!)!]
    }
    report(
        "stampede, fresh, \(processes), \(release.rawValue)", median(ours), median(theirs), target: 3,
        note: "from the hold's start \(Int(median(oursFromHold) / 1000)) µs")
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
    // A local miss and publish of the same value (a cache without a remote tier) before the floor's GET
    // and before the hit: each then finds the server and the machine as a hit after a generation does (the
    // bench's "GET in the hit's place").
    let local = YCache(
        storageDirectory: URL(fileURLWithPath: work + "/remote-local"), memoryMaximumCost: 0,
        storageMaximumByteCount: nil)
    func localMiss() async throws {
        try await local.removeAll(in: "remote")
        _ = try await local.data(for: key) { value }
    }
    var ours: [Double] = []
    var gets: [Double] = []
    var publishes: [Double] = []
    for round in 0..<310 {
        try await localMiss()
        try await reader.removeAll(in: "remote")
        let g = get.run("G 1")
        let p = publish.run("P 1")
        try await localMiss()
        try await reader.removeAll(in: "remote")
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
    let stampedeOnly = ProcessInfo.processInfo.environment["OUTSIDE_ONLY"] == "stampede"
    if !stampedeOnly {
        try await storageHits(count: 1000)
        try await memoryHits()
        try await missAndPublish()
    }
    // The rounds of the bench's fresh stampede (15 at 8 and 32, 9 at 64), so the medians are as steady.
    // Released both ways, the outside's (one flock barrier) and the bench's (GO lines in turn).
    let releases = (ProcessInfo.processInfo.environment["OUTSIDE_RELEASE"] ?? "flock,lines").split(separator: ",")
    for release in releases.compactMap({ Release(rawValue: String($0)) }) {
        for (processes, rounds) in [(8, 15), (32, 15), (64, 9)] {
            try stampede(processes: processes, rounds: rounds, release: release)
        }
    }
    if !stampedeOnly, arguments.count > 2 { try await redisHits(arguments[1], socket: arguments[2]) }
}
