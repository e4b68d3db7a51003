// The hidden `worker` subcommand: one process of a multi-process run. `worker get` and `worker remove`
// are single operations used by the cross-process tests (`worker serve`, a long-lived one, is in
// ServeWorker.swift); scenario workers live in Scenarios/.
// Workers print one JSON object per line on stdout; "READY" lines synchronise start (`--go`).

import Foundation
import Glibc
@_spi(Testing) import YashimaShared

/// Options every worker understands.
struct WorkerSetup {
    var directory: URL
    var seed: UInt64
    var ledger: Ledger?
    var budget: Int?
    var memoryBudget: Int?
    /// `--free-space-floor BYTES` (0: none); the library's default floor without it.
    var freeSpaceFloor: YCache.FreeSpaceFloor? = .standard
    var sharing: StorageSharingMode
    /// `--remote URL` (`redis://…`, `redis+unix://…`, `http://…`), with `--remote-leases URL` (Redis
    /// leases for an HTTP remote), `--remote-lease-ms` (the lease TTL) and `--remote-timeout-ms` (the
    /// operation timeout).
    var remote: YCache.Remote?

    init(_ arguments: inout Arguments) throws {
        guard let directory = arguments.string("directory") else {
            throw ArgumentError(description: "worker needs --directory")
        }
        self.directory = URL(fileURLWithPath: directory)
        seed = try arguments.uint64("seed") ?? 1
        ledger = arguments.string("ledger").map(Ledger.init(path:))
        budget = try arguments.int("budget")
        memoryBudget = try arguments.int("memory-budget")
        if let floor = try arguments.int("free-space-floor") { freeSpaceFloor = floor > 0 ? .bytes(Int64(floor)) : nil }
        switch arguments.string("sharing") ?? "private" {
        case "private": sharing = .privateToUser
        case "group": sharing = .groupShared
        case let other: throw ArgumentError(description: "--sharing must be private or group, not '\(other)'")
        }
        remote = try Self.remote(&arguments)
    }

    /// The remote tier `--remote` and its options describe, if any.
    static func remote(_ arguments: inout Arguments) throws -> YCache.Remote? {
        let leaseMilliseconds = try arguments.int("remote-lease-ms", default: nil, range: 30...3_600_000)
        let timeoutMilliseconds = try arguments.int("remote-timeout-ms", default: nil, range: 1...600_000)
        let leases = arguments.string("remote-leases")
        guard let url = arguments.string("remote") else { return nil }
        var options = YCache.Remote.Options()
        if let leaseMilliseconds {
            options.leaseTimeToLive = .milliseconds(leaseMilliseconds)
            options.leaseRecheckInterval = .milliseconds(max(10, leaseMilliseconds / 4))
        }
        if let timeoutMilliseconds {
            options.operationTimeout = .milliseconds(timeoutMilliseconds)
            options.connectTimeout = .milliseconds(timeoutMilliseconds)
        }
        return try makeRemote(url, leases: leases, options: options)
    }

    /// A remote tier from a URL (`s3://…`: S3; `http…`: HTTP, with `leases` on Redis if given; else Redis).
    static func makeRemote(_ url: String, leases: String? = nil, options: YCache.Remote.Options) throws
        -> YCache.Remote
    {
        do {
            if url.hasPrefix("s3://") { return try .s3(url, options: options) }  // credentials: AWS_* variables
            guard url.hasPrefix("http") else { return try .redis(url, options: options) }
            guard let leases else { return try .http(url, options: options) }
            return try .http(url, leases: .redis(leases, options: options), options: options)
        } catch {
            throw ArgumentError(description: "--remote: \(error.description)")
        }
    }

    func makeCache() -> YCache {
        YCache(
            configuration: YCache.Configuration(
                storageDirectory: directory, memoryMaximumCost: memoryBudget ?? 64 * 1024 * 1024,
                storageMaximumByteCount: budget ?? 128 * 1024 * 1024, storageFreeSpaceFloor: freeSpaceFloor,
                sharing: sharing, remote: remote))
    }
}

/// Prints a line and flushes at once, so a parent reading the pipe sees it immediately.
func emit(_ line: String) {
    print(line)
    fflush(nil)
}

/// Blocks until the parent writes a line on stdin (the start barrier), after announcing READY.
func awaitGo() {
    emit("READY")
    _ = readLine()
}

func jsonLine(_ object: [String: Any]) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
        let text = String(data: data, encoding: .utf8)
    else { return "{}" }
    return text
}

enum WorkerCommand {
    static func run(_ words: [String]) async throws -> Int32 {
        guard let command = words.first else { throw ArgumentError(description: "worker needs a command") }
        var arguments = try Arguments(
            Array(words.dropFirst()),
            flagNames: [
                "go", "announce", "announce-wait", "process-local", "all", "refresh", "uniform", "lookup-only",
                "open-first", "current", "no-cache", "linger", "terse",
                "read", "pause", "exhaust-inotify-instances", "keep-going", "lazy-open",
            ])
        switch command {
        case "get": return try await get(&arguments)
        case "remove": return try await remove(&arguments)
        case "churn": return try await churn(&arguments)
        case "scenario": return try await ScenarioWorker.run(&arguments)
        case "handoff-wait": return try await BenchWorker.handoffWait(&arguments)
        case "mix": return try await BenchWorker.mix(&arguments)
        case "first-hit": return try await BenchWorker.firstHit(&arguments)
        case "l1-footprint": return try await BenchWorker.l1Footprint(&arguments)
        case "observe": return try await ObserveWorker.observe(&arguments)
        case "cycle": return try await ObserveWorker.cycle(&arguments)
        case "inotify-wait": return try ObserveWorker.inotifyWait(&arguments)
        case "serve": return try await ServeWorker.run(&arguments)
        case "sigbus-probe": return try SigbusProbe.run(&arguments)
        case "hold-many": return try await WaitWorker.holdMany(&arguments)
        case "fill": return try await BenchWorker.fill(&arguments)
        case "scale-hits": return try await BenchWorker.scaleHits(&arguments)
        case "stampede-rounds": return try await StampedeBench.worker(&arguments)
        case "instr": return try await InstructionsBench.worker(&arguments)
        case "wait-many": return try await WaitWorker.waitMany(&arguments)
        default: throw ArgumentError(description: "unknown worker command '\(command)'")
        }
    }

    /// `worker get`: get-or-generate one or more keys, checking every value against the expected bytes.
    static func get(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let namespace = arguments.string("namespace") ?? "stress"
        let identity = arguments.string("key") ?? "key"
        let count = try arguments.int("count", default: 1, range: 1...1_000_000)!
        let size = try arguments.int("size", default: 4096, range: 0...(1 << 30))!
        let generateMilliseconds = try arguments.int("generate-ms", default: 0, range: 0...3_600_000)!
        let timeout = try arguments.int("timeout-ms")
        let announce = arguments.flag("announce")
        let announceWait = arguments.flag("announce-wait")
        let go = arguments.flag("go")
        let processLocal = arguments.flag("process-local")
        let refresh = arguments.flag("refresh")
        let openFirst = arguments.flag("open-first")
        let linger = arguments.flag("linger")
        // `--terse`: the stampede's `DONE` line (writeStampedeLine) instead of the JSON line.
        let terse = arguments.flag("terse")
        // `--keep-going`: a typed error is a line like any other (`"error"`), and the next key is looked up.
        let keepGoing = arguments.flag("keep-going")
        let writeFailure = arguments.string("write-failure") ?? "throw"
        guard writeFailure == "throw" || writeFailure == "best-effort" else {
            throw ArgumentError(description: "--write-failure must be throw or best-effort, not '\(writeFailure)'")
        }
        try arguments.rejectUnknown()

        let cache = setup.makeCache()
        // `--open-first`: open the storage directory before the start barrier, as a long-running process
        // would have, so the timed call measures the miss and not the one-time open.
        if openFirst { try cache.openStorage() }
        var options = YCache.Options()
        options.crossProcess = processLocal ? .processLocal : .coordinate
        options.crossProcessWaitTimeout = timeout.map { .milliseconds($0) }
        if refresh { options.lookupPolicy = .refresh }
        options.writeFailurePolicy = writeFailure == "throw" ? .throwError : .bestEffort
        if go {
            // The result line's JSON (JSONSerialization with sorted keys loads ICU's collation data, about
            // 2 ms of CPU the first time): made once before the barrier, so a process that has returned
            // does not spend that CPU while the others it races on 2 cores are still waking (issue 14).
            _ = jsonLine(["key": "", "correct": true, "elapsedNs": UInt64(0), "pid": 0, "shared": false])
            awaitGo()
        }
        let seed = setup.seed
        let ledger = setup.ledger
        let pid = getpid()
        var allCorrect = true
        var failed = false
        for index in 0..<count {
            let key = CacheKey(namespace: namespace, identity: count == 1 ? identity : "\(identity)-\(index)")
            let expected = Payload.bytes(seed, key: key, kind: .data, size: size)
            let start = DispatchTime.now().uptimeNanoseconds
            let generatorStarted = Stamp()
            let resolution: YCache.Resolved<Data>
            do {
                let lookup = {
                    try await cache.resolve(for: key, codec: DataCodec(), options: options) {
                        let started = monotonicNanoseconds()
                        generatorStarted.set(started)
                        if announce { emit("GENERATING \(key.identity)") }
                        ledger?.record("\(key.namespace)/\(key.identity) data \(pid)")
                        if generateMilliseconds > 0 {
                            try await sleepExactly(until: started + UInt64(generateMilliseconds) * 1_000_000)
                        }
                        return expected
                    }
                }
                // `--announce-wait`: "WAITING <key>" the moment the lookup starts waiting for another process's
                // generation, so a test orders on it instead of sleeping.
                resolution =
                    announceWait
                    ? try await CrossProcessWaitObservation.observing({ emit("WAITING \(key.identity)") }, lookup)
                    : try await lookup()
            } catch let error as YCache.Error {
                // A typed error as one JSON line (the case name first), for tests that expect one.
                let name = Mirror(reflecting: error).children.first?.label ?? error.description
                emit(jsonLine(["key": key.identity, "error": name, "description": error.description]))
                guard keepGoing else { return 3 }
                failed = true
                continue
            }
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            let returned = monotonicNanoseconds()
            let correct = resolution.value == expected
            allCorrect = allCorrect && correct
            if terse {
                writeStampedeLine(finished: returned, holdStarted: generatorStarted.value, correct: correct)
                continue
            }
            emit(
                jsonLine([
                    "key": key.identity, "source": resolution.source.rawValue, "origin": resolution.origin.rawValue,
                    "shared": resolution.wasSharedGeneration, "correct": correct, "elapsedNs": elapsed,
                    "pid": Int(pid), "finishedMonotonicNs": Int(DispatchTime.now().uptimeNanoseconds),
                    "lockFailures": cache.statistics.crossProcessLockFailures,
                    "repairs": cache.statistics.auxiliaryFileRepairs,
                    "remoteErrors": cache.statistics.remoteErrors + cache.statistics.remoteTimeouts,
                    "remoteLeaseWaits": cache.statistics.remoteLeaseWaits,
                    "remoteLeaseTakeovers": cache.statistics.remoteLeaseTakeovers,
                    "remoteHits": cache.statistics.remoteHits, "remoteMisses": cache.statistics.remoteMisses,
                    "remotePuts": cache.statistics.remotePuts,
                ]))
        }
        // `--linger`: stay until stdin closes, so this process's exit (a whole Swift process's teardown,
        // milliseconds of CPU) does not run while sibling processes of a stampede are still waking.
        if linger { while readLine() != nil {} }
        return allCorrect ? (failed ? 3 : 0) : 1
    }

    /// `worker churn`: generate and remove the same key over and over. The generator writes "start" and
    /// "end" monotonic times to the ledger, so overlapping generations (two lock holders) are visible.
    static func churn(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let identity = arguments.string("key") ?? "churn"
        let rounds = try arguments.int("rounds", default: 50, range: 1...1_000_000)!
        let go = arguments.flag("go")
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        let key = CacheKey(namespace: "churn", identity: identity)
        let expected = Payload.bytes(setup.seed, key: key, kind: .data, size: 1024)
        let ledger = setup.ledger
        let pid = getpid()
        if go { awaitGo() }
        var wrong = 0
        for _ in 0..<rounds {
            let value = try await cache.value(for: key, codec: DataCodec()) {
                let start = DispatchTime.now().uptimeNanoseconds
                try await Task.sleep(for: .microseconds(200))
                let end = DispatchTime.now().uptimeNanoseconds
                ledger?.record("\(start) \(end) \(pid)")
                return expected
            }
            if value != expected { wrong += 1 }
            try await cache.remove(for: key, codec: DataCodec())
        }
        emit(jsonLine(["wrong": wrong, "pid": Int(pid)]))
        return wrong == 0 ? 0 : 1
    }

    /// `worker remove`: remove a key, a namespace (`--namespace` with no `--key`), or everything (`--all`).
    static func remove(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let namespace = arguments.string("namespace") ?? "stress"
        let identity = arguments.string("key")
        let all = arguments.flag("all")
        let go = arguments.flag("go")
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        if go { awaitGo() }
        if all {
            try await cache.removeAll()
        } else if let identity {
            try await cache.remove(for: CacheKey(namespace: namespace, identity: identity), codec: DataCodec())
        } else {
            try await cache.removeAll(in: namespace)
        }
        emit(jsonLine(["removed": true]))
        return 0
    }
}
