// Section "remote": a remote hit through YCache (the value on Redis, not in local storage or memory:
// lookup, verify, decode, publish locally) at 4 KiB and 1 MiB, against its C floor in the same run: the C
// floor's `GET` of the same size (Benchmarks/floors/redis.c, one blocking connection of the same socket
// kind), back to back and in the hit's place (after the same local work), plus the C floor's miss and
// publish of the same value (publish.c) next to each hit; the library's own local miss-and-publish (a
// cache without a remote tier) beside them. The server: `--remote URL` (redis:// or redis+unix://), else a
// redis-server started here on a Unix socket, else the section is skipped with a note. Then three hosts
// (storage directories) of three worker processes each miss one key together: one generation per round.

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum RemoteBench {
    static func run(_ context: BenchContext, url given: String?) async throws {
        let report = context.report
        report.section("remote: hit from Redis (not in local storage) vs the C floor's GET + publish")
        var server: RedisProcess?  // SIGKILLed when it goes (its deinit): at the end of the section
        defer { withExtendedLifetime(server) {} }
        let url: String
        if let given {
            url = given
        } else if let started = await startServer(in: context.base) {
            (server, url) = (started, started.url)
        } else {
            report.add(BenchRow(section: "remote", name: "remote section", note: "skipped: no redis-server found"))
            return
        }
        let remote = try YCache.Remote.redis(
            url, options: .init(operationTimeout: .seconds(5), keyPrefix: "ys-bench-\(getpid())"))
        let iterations = context.quick ? 100 : 400
        for (label, size) in [("4 KiB", 4096), ("1 MiB", 1 << 20)] {
            let value = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            // The C floor's connection: GET of a value of the same size, SET by it first.
            let get = try FloorServer(
                context, "redis",
                redisFloorAddress(url) + ["--key", "ys-bench-raw-\(getpid())-\(size)", "--size", "\(size)"])
            try get.run("G 10")
            _ = get.takeSamples()
            try get.run("G \(iterations)")
            let backToBack = get.takeSamples()
            report.add(BenchRow(section: "remote", name: floorName("GET \(label), back to back"), samples: backToBack))
            // One host publishes the value; another (memory off) reads it, its local copy removed each time.
            let key = CacheKey(namespace: "bench-remote", identity: label)
            let writer = YCache(storageDirectory: context.directory("remote-writer"), remote: remote)
            try await writer.store(value, for: key, codec: DataCodec())
            let reader = YCache(
                storageDirectory: context.directory("remote-reader"), remote: remote, memoryMaximumCost: 0,
                storageMaximumByteCount: nil)
            // A GET back to back finds the server hot; the hit's own GET comes after a local miss and
            // publish, when the server has been idle that long: so the floor's GET is measured in the hit's
            // place (the same work before it, in alternate rounds), and that is the one the target uses.
            let paired = try await hitsPairedWithLocalMisses(
                context, value: value, key: key, rounds: iterations + 10, warmUp: 10, folder: "remote-local",
                floor: {
                    try await reader.removeAll(in: "bench-remote")  // as before a hit
                    return try get.run("G 1")
                }
            ) {
                try await reader.removeAll(in: "bench-remote")  // local only: the remote value stays
                let start = monotonicNanoseconds()
                let resolution = try await reader.resolve(for: key, codec: DataCodec()) { Data() }
                let elapsed = Double(monotonicNanoseconds() - start)
                guard resolution.origin == .remote, resolution.value.count == size else {
                    throw ArgumentError(description: "remote bench: expected a remote hit, got \(resolution.origin)")
                }
                return elapsed
            }
            let (hits, misses) = (paired.hits, paired.misses)
            report.add(
                BenchRow(section: "remote", name: floorName("GET \(label), in the hit's place"), samples: paired.floors)
            )
            report.add(BenchRow(section: "remote", name: rawPublishRow(label), samples: paired.rawPublishes))
            report.add(
                BenchRow(section: "remote", name: "local miss+publish \(label) (no remote tier)", samples: misses),
                comparedTo: rawPublishRow(label))
            let floor = floorName("GET \(label) in the hit's place + miss+publish")
            report.add(
                BenchRow(
                    section: "remote", name: floor, samples: sumOfOrderStatistics(paired.floors, paired.rawPublishes)))
            let withLocalMiss = sumOfOrderStatistics(paired.floors, misses)
            report.add(
                BenchRow(
                    section: "remote", name: "Redis remote hit \(label) (YCache, then in local storage)", samples: hits,
                    note: String(
                        format: "%.2fx the C GET + the library's own local miss+publish; load %@",
                        hits.median / withLocalMiss.median, loadAverage())),
                comparedTo: floor, limit: size <= 4096 ? 1.5 : 1.2,
                targetText: size <= 4096 ? "≤ 1.5x the C floor" : "≤ 1.2x the C floor")
        }
        try await hostStampede(context, url: url)
    }

    /// `rounds` remote hits (`hit` returns its time), each right after a local miss of `key` and publish
    /// of `value` (a cache without a remote tier, memory off, the entry removed before each; the generator
    /// returns at once): what a remote hit shares with a generation, measured next to it (the disk's
    /// speed drifts during a run). With `floor`, each round measures it first in the hit's place (after
    /// a local miss of its own, not counted), so that it finds the server as idle as the hit does. The
    /// first `warmUp` rounds are not counted.
    static func hitsPairedWithLocalMisses(
        _ context: BenchContext, value: Data, key: CacheKey, rounds: Int, warmUp: Int, folder: String,
        floor: (() async throws -> Double)? = nil, hit: () async throws -> Double
    ) async throws -> PairedHits {
        let local = YCache(
            storageDirectory: context.directory(folder), memoryMaximumCost: 0, storageMaximumByteCount: nil)
        let raw = try FloorServer(
            context, "publish",
            ["--dir", context.directory(folder + "-raw").path, "--size", "\(value.count)", "--same"])
        var paired = PairedHits()
        func localMiss() async throws -> Double {
            try await local.removeAll(in: key.namespace)
            let start = monotonicNanoseconds()
            _ = try await local.value(for: key, codec: DataCodec()) { value }
            return Double(monotonicNanoseconds() - start)
        }
        for round in 0..<rounds {
            if let floor {
                _ = try await localMiss()  // the misses counted are those next to the hits
                let floorElapsed = try await floor()
                if round >= warmUp { paired.floors.append(floorElapsed) }
            }
            let rawElapsed = try raw.run("P 1")
            let elapsed = try await localMiss()
            let hitElapsed = try await hit()
            if round >= warmUp {
                paired.rawPublishes.append(rawElapsed)
                paired.misses.append(elapsed)
                paired.hits.append(hitElapsed)
            }
        }
        return paired
    }

    /// What `hitsPairedWithLocalMisses` measured, round by round side by side.
    struct PairedHits {
        var hits = Samples()
        /// A local miss and publish through YCache (no remote tier) right before each hit.
        var misses = Samples()
        /// The filesystem's own floor of that publish (the C floor, publish.c), right before each local miss.
        var rawPublishes = Samples()
        /// The caller's `floor`, when given.
        var floors = Samples()
    }

    /// The row of the C publish floor's samples at `label`.
    static func rawPublishRow(_ label: String) -> String {
        floorName("miss + lock + write + rename \(label), one name")
    }

    /// The C floor's address options for a Redis URL (redis+unix:///path or redis://host:port).
    static func redisFloorAddress(_ url: String) throws -> [String] {
        if url.hasPrefix("redis+unix://") {
            return ["--socket", String(url.dropFirst("redis+unix://".count).prefix { $0 != "?" })]
        }
        let rest = url.dropFirst("redis://".count).prefix { $0 != "/" }
        guard url.hasPrefix("redis://"), !rest.contains("@"), let host = rest.split(separator: ":").first else {
            throw ArgumentError(
                description: "the C Redis floor takes redis://host:port or redis+unix://path, not \(url)")
        }
        let port = rest.split(separator: ":").dropFirst().first.map(String.init) ?? "6379"
        return ["--host", String(host), "--port", port]
    }

    /// The floor of a remote hit: the i-th smallest sample of each added (so its median is the sum of
    /// the medians: a round trip and a local miss-and-publish, each as fast as measured).
    static func sumOfOrderStatistics(_ first: Samples, _ second: Samples) -> Samples {
        Samples(zip(first.values.sorted(), second.values.sorted()).map { $0 + $1 })
    }

    /// Three hosts (storage directories) of three processes each miss one key together (200 ms
    /// generator, one Redis): the slowest process's wall time minus the generator's, and the
    /// generations per round (exactly one in total: the remote lease).
    static func hostStampede(_ context: BenchContext, url: String) async throws {
        let report = context.report
        var overheads = Samples()
        var medians = Samples()
        var generations: [Int] = []
        for round in 0..<(context.quick ? 2 : 5) {
            let ledger = context.base + "/host-stampede-\(round).ledger"
            let key = "hot-\(getpid())-\(round)"  // a fresh key on the shared server each round
            let hosts = (0..<3).map { context.directory("host-\($0)-\(round)").path }
            let children = try (0..<9).map { index in
                try ChildProcess(
                    context.executable,
                    [
                        "worker", "get", "--directory", hosts[index / 3],
                        "--key", key, "--generate-ms", "200", "--ledger", ledger, "--go", "--linger", "--open-first",
                        "--remote", url,
                    ])
            }
            let walls = ChildProcess.stampedeWalls(children)
            overheads.append(walls.maximum - 200_000_000)
            medians.append(walls.median - 200_000_000)
            generations.append(Ledger(path: ledger).lines().count)
        }
        report.add(
            BenchRow(
                section: "remote", name: "3 hosts × 3 processes miss one key: generations",
                note: "per round: \(generations.map(String.init).joined(separator: ","))",
                met: generations.allSatisfy { $0 == 1 }, target: "exactly 1 per round"))
        report.add(
            BenchRow(
                section: "remote", name: "3-host stampede slowest wall − 200 ms", samples: overheads,
                note: "median process: " + formatNanoseconds(medians.median)))
    }

    /// A redis-server on a Unix socket in `base` (the tests' fixture, ChildProcesses), if one is
    /// installed. Socket mode 777: the hosts scenario's workers may run as other users (`--users`); the
    /// server is this run's own, with nothing in it worth protecting, and killed at the end.
    static func startServer(in base: String) async -> RedisProcess? {
        try? await RedisProcess.start(folder: base, socketMode: "777")
    }
}

/// The raw baseline: one blocking connection, `SET` and `GET` with a minimal RESP reader.
final class RawRedis {
    private let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)

    init?(url: String) {
        if url.hasPrefix("redis+unix://") {
            let path = String(url.dropFirst("redis+unix://".count).prefix { $0 != "?" })
            descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard descriptor >= 0, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in bytes.enumerated() { raw[index] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard connected == 0 else {
                close(descriptor)
                return nil
            }
        } else {
            let rest = url.dropFirst("redis://".count).prefix { $0 != "/" }
            let parts = rest.split(separator: ":")
            guard url.hasPrefix("redis://"), let host = parts.first, !rest.contains("@") else { return nil }
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var found: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(String(host), parts.count > 1 ? String(parts[1]) : "6379", &hints, &found) == 0,
                let info = found
            else { return nil }
            defer { freeaddrinfo(found) }
            descriptor = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard descriptor >= 0, connect(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
                if descriptor >= 0 { close(descriptor) }
                return nil
            }
        }
    }

    deinit { close(descriptor) }

    /// `SET key value`; true on `+OK`.
    func set(_ key: String, _ value: Data) -> Bool {
        var command = Array("*3\r\n$3\r\nSET\r\n$\(key.utf8.count)\r\n\(key)\r\n$\(value.count)\r\n".utf8)
        command += value
        command += Array("\r\n".utf8)
        guard send(command) else { return false }
        return readLine().first == UInt8(ascii: "+")
    }

    /// `GET key`: the byte count of the value read (all of it), or -1.
    func get(_ key: String) -> Int {
        guard send(Array("*2\r\n$3\r\nGET\r\n$\(key.utf8.count)\r\n\(key)\r\n".utf8)) else { return -1 }
        let header = readLine()
        guard header.first == UInt8(ascii: "$"), let count = Int(String(decoding: header.dropFirst(), as: UTF8.self))
        else { return -1 }
        var value = [UInt8](repeating: 0, count: count + 2)
        guard readExactly(&value, from: 0) else { return -1 }
        return count
    }

    private var pending: [UInt8] = []

    private func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, 0) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    /// One line without its CRLF.
    private func readLine() -> [UInt8] {
        while true {
            if let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[..<end].dropLast())
                pending.removeFirst(end + 1)
                return line
            }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { return [] }
            pending += buffer[0..<count]
        }
    }

    /// Fills `target` from `offset` (pending bytes first, then the socket).
    private func readExactly(_ target: inout [UInt8], from offset: Int) -> Bool {
        var filled = min(pending.count, target.count)
        target.replaceSubrange(0..<filled, with: pending[0..<filled])
        pending.removeFirst(filled)
        while filled < target.count {
            let count = target[filled...].withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            filled += count
        }
        return true
    }
}
