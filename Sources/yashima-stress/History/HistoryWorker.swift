// The history scenario's worker side: lanes (concurrent tasks on one YCache) pick random operations on a
// few hot keys through the public API, every write carrying a version of its own (`p<worker>.<lane>#<n>`)
// inside its bytes, and log each call (start before it, end after it) to the process's history file. Once
// every worker is done (the orchestrator's FINAL), each reads every key cache-only.

import Foundation
import YashimaShared

/// What a phase of the history scenario exercises besides the common mix.
enum HistoryMode: String, CaseIterable, Sendable {
    /// The mix alone.
    case plain
    /// Half of the writes expire after 30–230 ms; reads check that nothing returned had expired.
    case expiry
    /// A storage budget a few values wide: publishes trim other keys' entries.
    case trim
    /// The orchestrator SIGKILLs workers at random moments and starts replacements.
    case chaos
    /// A Redis remote tier (its server SIGSTOPped and restarted by the orchestrator).
    case remote

    var summary: String {
        switch self {
        case .plain: return "the mix"
        case .expiry: return "half the writes expire in 30–230 ms"
        case .trim: return "a storage budget a few values wide"
        case .chaos: return "workers SIGKILLed at random and replaced"
        case .remote: return "a Redis remote tier, its server SIGSTOPped and restarted"
        }
    }
}

enum HistoryKeys {
    static let namespaces = ["ha", "hb"]

    static func key(_ index: Int) -> CacheKey {
        CacheKey(namespace: namespaces[index % namespaces.count], identity: "k\(index)")
    }

    static func label(_ key: CacheKey) -> String { "\(key.namespace)/\(key.identity)" }
}

enum HistoryWorker {
    static func work(_ worker: WorkerContext) async throws {
        let mode = HistoryMode.allCases[worker.plan["mode"]]
        let budget = mode == .trim ? worker.plan["trimBudget"] : 256 << 20
        let cache = worker.makeCache(
            budget: budget, memoryBudget: 64 << 20, directory: worker.plan.cacheDirectory + "-" + mode.rawValue)
        let log = try HistoryLogFile(path: "\(worker.plan.logDirectory)/\(worker.phase)-\(worker.index).history")
        try cache.openStorage()
        let keys = (0..<worker.plan["keys"]).map(HistoryKeys.key)
        await worker.awaitGo()
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<worker.plan["lanes"] {
                group.addTask {
                    var lane = HistoryLane(
                        worker: worker, cache: cache, log: log, mode: mode, keys: keys, lane: lane)
                    for _ in 0..<worker.plan["operations"] { await lane.step() }
                }
            }
        }
        let statistics = cache.statistics
        for (name, count) in [
            ("remoteHits", statistics.remoteHits), ("remoteErrors", statistics.remoteErrors),
            ("remoteTimeouts", statistics.remoteTimeouts), ("remoteBypassed", statistics.remoteBypassedCalls),
        ] where count > 0 {
            worker.tally.count(name, count)
        }
        worker.send("OPS-DONE")
        while let line = await worker.control.next(), line != "FINAL" {}
        let process = "p\(worker.index).0"
        for key in keys {
            let start = monotonicNanoseconds()
            do {
                let data = try await cache.valueIfCached(for: key, codec: DataCodec())
                let end = monotonicNanoseconds()
                let (version, flags) = HistoryLane.version(of: data, key: key, worker: worker)
                log.append(
                    HistoryOperation(
                        process: process, call: "final", kind: .final, key: HistoryKeys.label(key), version: version,
                        start: Int64(start), end: Int64(end), flags: flags))
            } catch {
                worker.tally.error("final read of \(HistoryKeys.label(key)): \(error)")
            }
        }
    }
}

/// One lane: a task of a worker, with its own random sequence and version counter.
struct HistoryLane {
    let worker: WorkerContext
    let cache: YCache
    let log: HistoryLogFile
    let mode: HistoryMode
    let keys: [CacheKey]
    let process: String
    private var random: SplitMix64
    private var counter = 0

    init(worker: WorkerContext, cache: YCache, log: HistoryLogFile, mode: HistoryMode, keys: [CacheKey], lane: Int) {
        self.worker = worker
        self.cache = cache
        self.log = log
        self.mode = mode
        self.keys = keys
        process = "p\(worker.index).\(lane)"
        random = worker.random(UInt64(lane + 1))
    }

    private mutating func nextVersion() -> String {
        counter += 1
        return "\(process)#\(counter)"
    }

    private mutating func size() -> Int {
        if mode == .trim { return 6_000 + random.below(24_000) }
        let roll = random.below(100)
        if roll < 70 { return 40 + random.below(400) }
        if roll < 96 { return 2_000 + random.below(18_000) }
        return 150_000 + random.below(50_000)  // mapped (over Policy.mapThreshold)
    }

    private mutating func writeOptions() -> YCache.Options {
        var options = YCache.Options()
        if mode == .expiry && random.chance(50) { options.expiry = .after(.milliseconds(30 + random.below(200))) }
        return options
    }

    mutating func step() async {
        let key = keys[random.below(keys.count)]
        let roll = random.below(100)
        switch roll {
        case 0..<32: await generate(key, refresh: false)
        case 32..<52: await cachedRead(key)
        case 52..<67: await store(key)
        case 67..<75: await generate(key, refresh: true)
        case 75..<87: await remove(key)
        // `removeAll(in:)` is local only: with a remote tier a later miss may fetch the values again (its
        // documented contract), which the checker would count as removed values seen again.
        case 87..<91 where worker.plan.remote == nil: await purge(key.namespace)
        default: await generate(key, refresh: false)
        }
    }

    // MARK: Operations

    /// `value(for:)` (through `resolve`, which also says whether the value expired) or `refresh`: a write
    /// when this call's generator ran and its version came back, else a read of someone else's.
    private mutating func generate(_ key: CacheKey, refresh: Bool) async {
        let label = HistoryKeys.label(key)
        let version = nextVersion()
        let bytes = HistoryValue.bytes(key: label, version: version, size: size())
        let sleep = random.chance(25) ? 1 + random.below(4) : 0
        var options = writeOptions()
        if refresh {
            options.lookupPolicy = .refresh
        } else {
            // Some lookups race without the key's lock: as a process whose wait timed out does, and as an
            // independent generation (`.disabled`, whose caller keeps its own value).
            switch random.below(20) {
            case 0: options.crossProcess = .processLocal
            case 1: options.singleFlightPolicy = .disabled
            default: break
            }
        }
        let call = refresh ? "refresh" : "value"
        let made = Stamp()  // 1 once this call's generator ran
        let (log, process) = (log, process)
        let wallStart = wallNanoseconds()
        let start = Int64(monotonicNanoseconds())
        do {
            let resolved = try await cache.resolve(for: key, codec: DataCodec(), options: options) {
                log.append(
                    HistoryOperation(
                        process: process, call: call, kind: .begin, key: label, version: version, start: start,
                        end: nil))
                made.set(1)
                if sleep > 0 { try await Task.sleep(for: .milliseconds(sleep)) }
                return bytes
            }
            let end = Int64(monotonicNanoseconds())
            var (got, flags) = Self.version(of: resolved.value, key: key, worker: worker)
            let generated = made.value == 1
            if generated && got == version {
                log.append(
                    .init(
                        process: process, call: call, kind: .write, key: label, version: version, start: start, end: end
                    ))
            } else {
                if generated {
                    log.append(
                        .init(
                            process: process, call: call, kind: .write, key: label, version: version, start: start,
                            end: end, flags: [.uncertain]))
                }
                if let expiresAt = resolved.metadata?.expiresAt?.nanosecondsSince1970, expiresAt + 1_000 < wallStart {
                    flags.insert(.expired)
                }
                flags.insert(Self.originFlag(resolved.origin))
                if resolved.wasSharedGeneration { flags.insert(.shared) }
                log.append(
                    .init(
                        process: process, call: call, kind: .read, key: label, version: got, start: start, end: end,
                        flags: flags))
            }
            // Counted by source (a bad value was counted wrong already).
            let fetched = Fetched(
                source: resolved.source, origin: resolved.origin, shared: resolved.wasSharedGeneration, correct: true,
                metadata: resolved.metadata, digest: 0)
            worker.tally.record(fetched, nanoseconds: UInt64(end - start), describe: label)
        } catch {
            let end = Int64(monotonicNanoseconds())
            if made.value == 1 {
                log.append(
                    .init(
                        process: process, call: call, kind: .write, key: label, version: version, start: start,
                        end: end, flags: [.uncertain]))
            }
            worker.tally.error("\(call) \(label): \(error)")
        }
    }

    private mutating func cachedRead(_ key: CacheKey) async {
        let label = HistoryKeys.label(key)
        let start = Int64(monotonicNanoseconds())
        do {
            let data = try await cache.valueIfCached(for: key, codec: DataCodec())
            let end = Int64(monotonicNanoseconds())
            let (version, flags) = Self.version(of: data, key: key, worker: worker)
            log.append(
                .init(
                    process: process, call: "valueIfCached", kind: .read, key: label, version: version, start: start,
                    end: end, flags: flags))
            worker.tally.operation(nanoseconds: UInt64(end - start), miss: data == nil)
        } catch {
            worker.tally.error("valueIfCached \(label): \(error)")
        }
    }

    private mutating func store(_ key: CacheKey) async {
        let label = HistoryKeys.label(key)
        let version = nextVersion()
        let bytes = HistoryValue.bytes(key: label, version: version, size: size())
        let options = writeOptions()
        let start = Int64(monotonicNanoseconds())
        log.append(
            .init(process: process, call: "store", kind: .begin, key: label, version: version, start: start, end: nil))
        do {
            try await cache.store(bytes, for: key, codec: DataCodec(), options: options)
            let end = Int64(monotonicNanoseconds())
            log.append(
                .init(
                    process: process, call: "store", kind: .write, key: label, version: version, start: start, end: end)
            )
            worker.tally.operation(nanoseconds: UInt64(end - start))
        } catch {
            let end = Int64(monotonicNanoseconds())
            log.append(
                .init(
                    process: process, call: "store", kind: .write, key: label, version: version, start: start,
                    end: end, flags: [.uncertain]))
            worker.tally.error("store \(label): \(error)")
        }
    }

    private mutating func remove(_ key: CacheKey) async {
        let label = HistoryKeys.label(key)
        let version = "absent:" + nextVersion()
        let start = Int64(monotonicNanoseconds())
        do {
            _ = try await cache.remove(for: key, codec: DataCodec())
            let end = Int64(monotonicNanoseconds())
            log.append(
                .init(
                    process: process, call: "remove", kind: .remove, key: label, version: version, start: start,
                    end: end))
            worker.tally.operation(nanoseconds: UInt64(end - start))
        } catch YCache.Error.remoteRemovalIncomplete {
            // Removed locally, and the remote delete owed: on this machine that is a removal like any
            // other (no lookup here takes the key from the remote tier until the delete is paid), so it
            // is judged as one. Counted apart: the documented answer to a remote tier that was down.
            let end = Int64(monotonicNanoseconds())
            log.append(
                .init(
                    process: process, call: "remove", kind: .remove, key: label, version: version, start: start,
                    end: end))
            worker.tally.count("removalsOwed")
        } catch {
            worker.tally.error("remove \(label): \(error)")
        }
    }

    private mutating func purge(_ namespace: String) async {
        let version = "absent:" + nextVersion()
        let start = Int64(monotonicNanoseconds())
        do {
            try await cache.removeAll(in: namespace)
            let end = Int64(monotonicNanoseconds())
            log.append(
                .init(
                    process: process, call: "removeAll", kind: .purge, key: namespace, version: version, start: start,
                    end: end))
            worker.tally.operation(nanoseconds: UInt64(end - start))
        } catch {
            worker.tally.error("removeAll(in: \(namespace)): \(error)")
        }
    }

    /// The report's word for where a value came from.
    static func originFlag(_ origin: YCache.Origin) -> HistoryOperation.Flag {
        switch origin {
        case .memory: return .memory
        case .storage: return .storage
        case .remote: return .remote
        default: return .generated
        }
    }

    /// The version a returned value carries (nil for none), flagged `bad` (and counted wrong) when its
    /// bytes are no value of `key`.
    static func version(of data: Data?, key: CacheKey, worker: WorkerContext) -> (String?, Set<HistoryOperation.Flag>) {
        guard let data else { return (nil, []) }
        switch HistoryValue.parse(data, key: HistoryKeys.label(key)) {
        case .version(let version): return (version, [])
        case .bad(let reason):
            worker.tally.wrong("\(HistoryKeys.label(key)): \(reason)")
            return ("bad", [.bad])
        }
    }
}
