// Scenario "netns" (opt-in, root): three hosts in network namespaces of their own, Redis and SeaweedFS's S3
// gateway in another, reached over veth links through delay-injecting proxies (NetworkLab, DelayProxy) at
// each one-way delay of the profile (smoke 0 and 10 ms, standard also 50 ms), first with Redis as the remote
// tier, then with S3 alone (its leases conditional writes). Measures a remote hit, a miss with generation and
// an 8-process, 3-host stampede, in round trips (a raw GET over the same path, same run: `redis`'s from the
// worker, S3's by `curl --aws-sigv4`); judges each key generated exactly once across hosts (I16) and every
// value right.

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum NetnsScenario: Scenario {
    static let name = "netns"
    static let summary =
        "hosts in network namespaces, Redis behind a 0/10(/50) ms proxy: hit, miss, 3-host stampede in RTTs (root)"

    static let hosts = 3
    static let stampedeProcesses = 8
    private static let spec = PayloadSpec(kind: .data, size: 4096)

    /// The S3 gateway's port in the server's namespace (and the proxy's on the wire).
    static let s3Port = 8333

    /// The keys' namespace for one backend (`s3`: 1 in the plan) and delay.
    static func namespace(s3: Bool, delay: Int) -> String { s3 ? "netns-s3-d\(delay)" : "netns-d\(delay)" }

    static func stampedeKey(s3: Bool, delay: Int, round: Int) -> CacheKey {
        StressKey.make(namespace(s3: s3, delay: delay), "stampede-r\(round)", spec)
    }

    // MARK: Worker

    static func work(_ worker: WorkerContext) async throws {
        if worker.phase.hasPrefix("measure") {
            try await measure(worker)
        } else {
            try await stampede(worker)
        }
    }

    /// One process on host 0: raw GETs through the proxy and direct (the floors), then remote hits (the
    /// local copy removed before each), then misses that generate at once.
    private static func measure(_ worker: WorkerContext) async throws {
        let (delay, samples, s3) = (worker.plan["delayMs"], worker.plan["samples"], worker.plan["s3"] == 1)
        if s3 {
            try await measureS3Floors(worker, samples: samples)
        } else {
            guard let url = worker.plan.remote, let raw = RawRedis(url: url),
                let direct = RawRedis(url: "redis://\(NetworkLab.serverAddress):6379")
            else { throw ArgumentError(description: "cannot reach Redis through the proxy and directly") }
            let rawKey = "netns-raw-\(getpid())"
            guard raw.set(rawKey, Data(count: spec.size)) else { throw ArgumentError(description: "raw SET failed") }
            await worker.awaitGo()
            for (name, client) in [("rawGet", raw), ("directGet", direct)] {
                for round in 0..<(samples + 2) {
                    let start = monotonicNanoseconds()
                    let count = client.get(rawKey)
                    let elapsed = monotonicNanoseconds() - start
                    guard count == spec.size else {
                        throw ArgumentError(description: "raw GET returned \(count) bytes")
                    }
                    if round >= 2 { worker.tally.list(name, "\(elapsed)") }
                }
            }
        }
        // A value another host stored; this host's reader has no memory layer and loses its local copy
        // before each lookup. The process's connection is open already (the writer's).
        let namespace = namespace(s3: s3, delay: delay)
        let hit = StressKey.make(namespace, "hit", spec)
        let writer = worker.makeCache(directory: worker.plan.cacheDirectory + "-\(namespace)-writer")
        guard await worker.fetch(writer, hit)?.source == .generated else {
            throw ArgumentError(description: "the writer did not generate \(StressKey.label(hit))")
        }
        let reader = worker.makeCache(memoryBudget: 0, directory: worker.plan.cacheDirectory + "-\(namespace)-reader")
        try reader.openStorage()
        for round in 0...samples {
            try await reader.removeAll(in: namespace)
            let start = monotonicNanoseconds()
            let fetched = await worker.fetch(reader, hit)
            let elapsed = monotonicNanoseconds() - start
            guard fetched?.origin == .remote else {
                throw ArgumentError(description: "expected a remote hit, got \(String(describing: fetched?.origin))")
            }
            if round > 0 { worker.tally.list("hit", "\(elapsed)") }
        }
        for index in 0..<samples {
            let key = StressKey.make(namespace, "miss-\(index)", spec)
            let start = monotonicNanoseconds()
            let fetched = await worker.fetch(reader, key)
            let elapsed = monotonicNanoseconds() - start
            guard fetched?.source == .generated else {
                throw ArgumentError(description: "expected a generation, got \(String(describing: fetched?.source))")
            }
            worker.tally.list("miss", "\(elapsed)")
        }
    }

    /// One of the stampede's processes (host = index % 3): in each round, at GO, get the round's key; the
    /// generator takes `generateMs` (timed, and recorded in the ledger).
    private static func stampede(_ worker: WorkerContext) async throws {
        let (delay, rounds, generate) = (worker.plan["delayMs"], worker.plan["rounds"], worker.plan["generateMs"])
        let s3 = worker.plan["s3"] == 1
        let host = worker.index % hosts
        let cache = worker.makeCache(
            directory: worker.plan.cacheDirectory + "-\(namespace(s3: s3, delay: delay))-host\(host)")
        try cache.openStorage()
        for round in 0..<rounds {
            let key = stampedeKey(s3: s3, delay: delay, round: round)
            let (ledger, line) = (worker.ledger, "gen \(StressKey.label(key)) \(worker.pid) \(worker.phase)")
            let tally = worker.tally
            let hooks = GeneratorHooks(willGenerate: {
                ledger.record(line)
                let start = monotonicNanoseconds()
                try await Task.sleep(for: .milliseconds(generate), tolerance: .zero)
                tally.list("generator", "\(round) \(monotonicNanoseconds() - start)")
            })
            await worker.awaitGo()
            let start = monotonicNanoseconds()
            let fetched = await worker.fetch(cache, key, hooks: hooks)
            let end = monotonicNanoseconds()
            guard let fetched else { continue }
            let origin = fetched.origin?.rawValue ?? "?"
            worker.tally.list("stampede", "\(round) \(host) \(end - start) \(end) \(origin)")
            worker.tally.list("digests", "\(round)/0=\(Digest.hex(fetched.digest))")
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        if let reason = NetworkLab.unavailableReason {
            if NetworkLab.isRequired {
                run.fail("network namespaces required (YASHIMA_REQUIRE_NETNS=1) but unavailable: \(reason)")
            } else {
                run.note("skipped: \(reason)")
            }
            return
        }
        guard RedisProcess.executablePath != nil else {
            if RedisProcess.isRequired { run.fail("redis-server required (YASHIMA_REQUIRE_REDIS=1) but not found") }
            run.note("skipped: no redis-server installed")
            return
        }
        if run.plan.remote != nil { run.note("--remote ignored: this scenario starts its own servers in a namespace") }
        let lab = try NetworkLab.create(hosts: hosts)
        defer { lab.remove() }
        let server = try await RedisProcess.start(inNamespace: lab.server, address: NetworkLab.serverAddress)
        defer { server.signal(SIGKILL) }  // and its deinit reaps it
        let proxy = try DelayProxy(
            listeningOn: NetworkLab.serviceAddress, port: 6379, upstream: NetworkLab.serverAddress, upstreamPort: 6379,
            delay: .zero, namespace: lab.wire)
        defer { proxy.stop() }
        run.launchPrefix = { lab.execPrefix(in: lab.hosts[$0 % hosts]) }
        run.setting("remoteTimeoutMs", 5000)  // a loaded machine must not make a call time out (and bypass)
        let delays = run.profile.isSmoke ? [0, 10] : [0, 10, 50]
        var table: [Figures] = []
        run.useRemote("redis://\(NetworkLab.serviceAddress):6379")
        for delay in delays { table.append(try await phases(run, lab, proxy, delay: delay, s3: false)) }
        var s3Proxy: DelayProxy?
        if let weed = await startSeaweed(run, lab) {
            let s3 = try DelayProxy(
                listeningOn: NetworkLab.serviceAddress, port: s3Port, upstream: NetworkLab.serverAddress,
                upstreamPort: s3Port, delay: .zero, namespace: lab.wire)
            s3Proxy = s3
            // The workers (and `worker get`) take the credentials from the standard variables.
            setenv("AWS_ACCESS_KEY_ID", SeaweedServer.accessKeyID, 1)
            setenv("AWS_SECRET_ACCESS_KEY", SeaweedServer.secretAccessKey, 1)
            run.useRemote(
                "s3://\(SeaweedServer.bucket)/netns-\(getpid())?endpoint=http://\(NetworkLab.serviceAddress):\(s3Port)"
                    + "&region=us-east-1")
            for delay in delays {
                do {
                    table.append(try await phases(run, lab, s3, delay: delay, s3: true))
                } catch {
                    run.fail("S3 at \(delay) ms: \(error); weed's log ends: \(weed.log.suffix(600))")
                }
            }
            s3.stop()
            await weed.stop()
        }
        let counts = run.generationCounts()
        let extra = counts.filter { $0.value != 1 }.map { "\($0.key) ×\($0.value)" }.sorted()
        run.expect(
            extra.isEmpty, "keys not generated exactly once across hosts: " + extra.prefix(8).joined(separator: ", "))
        run.generations(expected: counts.count, seen: counts.values.reduce(0, +))
        for (name, forwarder) in [("Redis", proxy), ("S3", s3Proxy)] {
            guard let statistics = forwarder?.statistics else { continue }
            run.note(
                "3 hosts, Redis and S3 in network namespaces (veth links; \(lab.hosts.count) host namespaces, a wire, "
                    + "a server at \(NetworkLab.serverAddress)), each server behind a delay proxy on the wire; \(name)'s "
                    + "proxy forwarded \(statistics.connections) connections, its own lateness mean "
                    + formatNanoseconds(Double(statistics.latenessTotalNanoseconds) / Double(max(1, statistics.chunks)))
                    + ", max " + formatNanoseconds(Double(statistics.latenessMaximumNanoseconds)))
        }
        for line in Figures.table(table) { run.note(line) }
    }

    /// One backend at one delay: the measuring process, the fresh processes' first hits, the stampede.
    @MainActor
    private static func phases(_ run: ScenarioRun, _ lab: NetworkLab, _ proxy: DelayProxy, delay: Int, s3: Bool)
        async throws -> Figures
    {
        let backend = s3 ? "s3" : "redis"
        proxy.delay = .milliseconds(delay)
        run.setting("delayMs", delay)
        run.setting("s3", s3 ? 1 : 0)
        run.setting("samples", delay == 0 ? (s3 ? 50 : 100) : (run.profile.isSmoke ? 20 : 30))
        let phase = s3 ? "s3-\(delay)ms" : "\(delay)ms"
        let measured = try run.runPhase("measure-\(phase)", workers: 1)
        let fresh = try freshProcessHits(run, lab, key: "\(backend)-d\(delay)", count: run.profile.isSmoke ? 3 : 5)
        let rounds = run.setting("rounds", 1 + (run.profile.isSmoke ? 3 : 5))
        let generate = run.setting("generateMs", 200 + 16 * delay)  // longer than the waiters' setup
        let fleet = try run.startPhase("stampede-\(phase)", workers: stampedeProcesses)
        for _ in 1..<rounds { fleet.release(deadline: run.deadline) }
        run.finishPhase(fleet)
        run.expectRightDigests(of: fleet, rounds: rounds, keys: 1) { round, _ in
            stampedeKey(s3: s3, delay: delay, round: round)
        }
        var figures = Figures(backend: backend, delay: delay, generate: generate)
        figures.add(measured)
        figures.freshHit = fresh
        figures.add(stampede: fleet.workers.compactMap(\.result), rounds: rounds)
        return figures
    }

    /// SeaweedFS in the server's namespace, or nil (noted; a failure when CI requires it) without `weed`.
    @MainActor
    private static func startSeaweed(_ run: ScenarioRun, _ lab: NetworkLab) async -> SeaweedServer? {
        guard SeaweedServer.executablePath != nil, curlPath != nil else {
            let reason = "weed or curl not found: the S3 rows skipped"
            if SeaweedServer.isRequired {
                run.fail(reason + " (YASHIMA_REQUIRE_SEAWEEDFS=1)")
            } else {
                run.note(reason)
            }
            return nil
        }
        do {
            let address = NetworkLab.serverAddress
            return try await SeaweedServer.start(inNamespace: lab.server, address: address, port: s3Port)
        } catch {
            run.fail("SeaweedFS did not start in the server's namespace: \(error)")
            return nil
        }
    }

    static let curlPath = ["/usr/bin/curl", "/usr/local/bin/curl"].first(where: FileManager.default.isExecutableFile)

    /// The S3 floors, by `curl --aws-sigv4` (one process, one kept-alive connection, curl's own transfer
    /// times): a 4 KiB object PUT, then `samples` GETs through the proxy and as many directly.
    private static func measureS3Floors(_ worker: WorkerContext, samples: Int) async throws {
        guard let curl = curlPath else { throw ArgumentError(description: "curl not found") }
        let signing = [
            "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
            "\(SeaweedServer.accessKeyID):\(SeaweedServer.secretAccessKey)",
        ]
        let object = "\(SeaweedServer.bucket)/netns-raw-\(getpid())"
        let file = worker.plan.cacheDirectory + "-raw-\(getpid())"
        try Data(count: spec.size).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let proxied = "http://\(NetworkLab.serviceAddress):\(s3Port)/\(object)"
        let direct = "http://\(NetworkLab.serverAddress):\(s3Port)/\(object)"
        guard HTTPRemoteBench.fetch(curl, proxied, times: 1, options: signing + ["-T", file]) != nil else {
            throw ArgumentError(description: "curl --aws-sigv4 could not PUT \(proxied)")
        }
        await worker.awaitGo()
        for (name, url) in [("rawGet", proxied), ("directGet", direct)] {
            guard let times = HTTPRemoteBench.fetch(curl, url, times: samples + 2, options: signing) else {
                throw ArgumentError(description: "curl --aws-sigv4 could not GET \(url)")
            }
            for time in times.dropFirst(2) { worker.tally.list(name, "\(Int(time))") }
        }
    }
}

extension NetnsScenario {
    /// A new process's first remote hit (`worker get`, as a command-line tool's process would: its
    /// connection opened by that lookup), `count` times on host 1, each with an empty directory, after a
    /// process on host 2 generated the value. The lookups' own times (not the processes' start).
    @MainActor
    fileprivate static func freshProcessHits(_ run: ScenarioRun, _ lab: NetworkLab, key: String, count: Int) throws
        -> Samples
    {
        guard let url = run.plan.remote else { return Samples() }
        var samples = Samples()
        for index in 0...count {
            let host = index == 0 ? 2 : 1
            let arguments = [
                "worker", "get", "--directory", run.directory + "/fresh-\(key)-\(index)", "--namespace",
                "netns-fresh", "--key", key, "--open-first", "--remote", url, "--remote-timeout-ms", "5000",
            ]
            let child = try lab.spawn(inHost: host, Fleet.executable, arguments, standardError: .capture)
            let line = child.readJSON(timeout: .seconds(60))
            child.closeInput()
            if child.waitForExit(timeout: .seconds(60)) == nil { child.kill() }
            guard let line, line["correct"] as? Bool == true, let elapsed = line["elapsedNs"] as? Double else {
                run.fail("a fresh process on host \(host) failed: \(line.map { "\($0)" } ?? child.standardErrorText())")
                continue
            }
            let origin = line["origin"] as? String
            if index == 0 {
                run.expect(origin == "generated", "the first fresh process's value came from \(origin ?? "?")")
            } else {
                run.expect(
                    origin == "remote", "a fresh process's value came from \(origin ?? "?"), not the remote tier")
                samples.append(elapsed)
            }
        }
        return samples
    }
}

/// One delay's figures, from the workers' lists (nanoseconds).
private struct Figures {
    let backend: String
    let delay: Int
    let generate: Int
    var rawGet = Samples()
    var directGet = Samples()
    /// A new process's first hit (its connection opened by it).
    var freshHit = Samples()
    var hit = Samples()
    var miss = Samples()
    /// Per measured round: the slowest process's wall minus the generator's own time.
    var slowestOverGenerator = Samples()
    /// Per measured round: the last process's return after the generating process's return.
    var lastAfterHolder = Samples()
    /// Per measured round: the median of the other hosts' processes after the generating process.
    var otherHostsAfterHolder = Samples()

    init(backend: String, delay: Int, generate: Int) {
        self.backend = backend
        self.delay = delay
        self.generate = generate
    }

    private static func samples(_ list: [String]?) -> Samples {
        Samples((list ?? []).compactMap { Double($0) })
    }

    mutating func add(_ results: [WorkerResult]) {
        for result in results {
            rawGet.append(contentsOf: Self.samples(result.lists["rawGet"]))
            directGet.append(contentsOf: Self.samples(result.lists["directGet"]))
            hit.append(contentsOf: Self.samples(result.lists["hit"]))
            miss.append(contentsOf: Self.samples(result.lists["miss"]))
        }
    }

    /// The stampede's rounds but the first (connections opened, scripts loaded: a warm-up).
    mutating func add(stampede results: [WorkerResult], rounds: Int) {
        struct Finish {
            let host: Int
            let wall: Double
            let end: Double
            let generated: Bool
        }
        var finishes: [Int: [Finish]] = [:]
        var generators: [Int: Double] = [:]
        for result in results {
            for entry in result.lists["stampede"] ?? [] {
                let words = entry.split(separator: " ")
                guard words.count == 5, let round = Int(words[0]), let host = Int(words[1]),
                    let wall = Double(words[2]), let end = Double(words[3])
                else { continue }
                finishes[round, default: []].append(
                    Finish(host: host, wall: wall, end: end, generated: words[4] == "generated"))
            }
            for entry in result.lists["generator"] ?? [] {
                let words = entry.split(separator: " ")
                if words.count == 2, let round = Int(words[0]), let time = Double(words[1]) { generators[round] = time }
            }
        }
        for round in 1..<rounds {
            guard let all = finishes[round], let holder = all.first(where: \.generated),
                let generator = generators[round]
            else { continue }
            slowestOverGenerator.append((all.map(\.wall).max() ?? 0) - generator)
            lastAfterHolder.append((all.map(\.end).max() ?? 0) - holder.end)
            let others = Samples(all.filter { $0.host != holder.host }.map { $0.end - holder.end })
            otherHostsAfterHolder.append(others.median)
        }
    }

    /// The table's lines: milliseconds, and round trips (a raw GET through the proxy, this run).
    static func table(_ rows: [Figures]) -> [String] {
        func cell(_ value: Double, _ rtt: Double, _ delay: Int) -> String {
            let text = String(format: "%.2f ms", value / 1e6)
            guard delay > 0, rtt > 0 else { return text + String(format: " (%.1f×GET)", value / rtt) }
            return text + String(format: " = %.2f RTT", value / rtt)
        }
        var lines = [
            "remote | one-way delay | raw GET (direct) | remote hit (a new process's first) | miss + generate "
                + "| stampede: slowest − generator | last after holder | other hosts after holder (median)"
        ]
        for row in rows {
            let rtt = row.rawGet.median
            lines.append(
                "\(row.backend) | \(row.delay) ms | "
                    + String(format: "%.2f ms (%.2f ms)", rtt / 1e6, row.directGet.median / 1e6) + " | "
                    + cell(row.hit.median, rtt, row.delay) + " (" + cell(row.freshHit.median, rtt, row.delay) + ") | "
                    + cell(row.miss.median, rtt, row.delay) + " | "
                    + cell(row.slowestOverGenerator.median, rtt, row.delay) + " | "
                    + cell(row.lastAfterHolder.median, rtt, row.delay) + " | "
                    + cell(row.otherHostsAfterHolder.median, rtt, row.delay)
                    + " (generator \(row.generate) ms, \(row.slowestOverGenerator.count) rounds, medians)")
        }
        return lines
    }
}
