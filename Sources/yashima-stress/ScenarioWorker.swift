// `worker scenario --name N --plan P --index I --phase PH`: one worker process of a stress scenario. Loads
// the plan the orchestrator wrote, runs the scenario's worker side, and prints one `RESULT` JSON line.
// Owns the worker's channel to the orchestrator: READY/GO and STOP lines on stdin (read on a dedicated
// thread; EOF means the orchestrator is gone, so the worker exits), PROGRESS and RESULT lines on stdout.

import Foundation
import Glibc
import Synchronization
import YashimaShared

enum ScenarioWorker {
    static func run(_ arguments: inout Arguments) async throws -> Int32 {
        guard let name = arguments.string("name") else {
            throw ArgumentError(description: "worker scenario needs --name")
        }
        guard let planPath = arguments.string("plan") else {
            throw ArgumentError(description: "worker scenario needs --plan")
        }
        let index = try arguments.int("index", default: 0, range: 0...1_000_000)!
        let phase = arguments.string("phase") ?? "main"
        try arguments.rejectUnknown()
        guard let scenario = ScenarioCatalog.named(name) else {
            throw ArgumentError(description: "unknown scenario '\(name)'")
        }
        let plan = try ScenarioPlan.load(from: planPath)
        let control = ControlChannel()
        control.start()
        let worker = WorkerContext(plan: plan, index: index, phase: phase, control: control)
        do {
            try await scenario.work(worker)
        } catch {
            worker.tally.error("\(phase) worker \(index) stopped: \(error)")
        }
        await worker.stopTicker()
        do { try worker.writeEvents() } catch { worker.tally.error("writing events: \(error)") }
        var result = worker.tally.snapshot()
        result.corruptEntries += worker.corruptEntriesSeen()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = String(decoding: try encoder.encode(result), as: UTF8.self)
        WorkerOutput.send("RESULT " + json)
        return 0
    }
}

/// Everything a scenario's worker side needs: the plan, its index and phase, the tally, the checker.
final class WorkerContext: Sendable {
    let plan: ScenarioPlan
    let index: Int
    let phase: String
    let tally = Tally()
    let expected: ExpectedValues
    let ledger: Ledger
    let control: ControlChannel
    let pid = getpid()
    private let caches = Mutex<[YCache]>([])
    private let events = Mutex<[String]>([])
    private let ticker = Mutex<Task<Void, Never>?>(nil)

    init(plan: ScenarioPlan, index: Int, phase: String, control: ControlChannel) {
        self.plan = plan
        self.index = index
        self.phase = phase
        self.control = control
        expected = ExpectedValues(seed: plan.seed)
        ledger = Ledger(path: plan.ledgerPath)
    }

    /// A cache on the scenario's directory (or `directory`). `budget` nil means the plan's budget (or
    /// the library default).
    func makeCache(budget: Int? = nil, memoryBudget: Int? = nil, directory: String? = nil) -> YCache {
        let cache = YCache(
            configuration: YCache.Configuration(
                storageDirectory: URL(fileURLWithPath: directory ?? plan.cacheDirectory),
                memoryMaximumCost: memoryBudget ?? 64 << 20,
                storageMaximumByteCount: budget ?? plan.budget ?? 128 << 20, sharing: plan.sharing, remote: remote))
        caches.withLock { $0.append(cache) }
        return cache
    }

    /// The plan's remote tier (`--remote`), if any; a URL the orchestrator accepted is valid here too.
    private var remote: YCache.Remote? {
        guard let url = plan.remote else { return nil }
        var options = YCache.Remote.Options(keyPrefix: plan.remoteKeyPrefix ?? "yashima")
        if let timeout = plan.settings["remoteTimeoutMs"] {
            options.operationTimeout = .milliseconds(timeout)
            options.connectTimeout = .milliseconds(timeout)
        }
        if let cooldown = plan.settings["remoteCooldownMs"] { options.breakerCooldown = .milliseconds(cooldown) }
        if let lease = plan.settings["remoteLeaseMs"] {
            options.leaseTimeToLive = .milliseconds(lease)
            options.leaseRecheckInterval = .milliseconds(max(10, lease / 4))
        }
        return try? WorkerSetup.makeRemote(url, options: options)
    }

    func corruptEntriesSeen() -> Int {
        caches.withLock { $0.reduce(0) { $0 + $1.statistics.corruptEntries } }
    }

    /// A deterministic generator for this worker (seed, scenario, index, phase and `salt`).
    func random(_ salt: UInt64 = 0) -> SplitMix64 {
        var mix = plan.seed ^ 0x5DEE_CE66_D1CE_4E5B
        for byte in (plan.scenario + "/" + phase).utf8 { mix = (mix ^ UInt64(byte)) &* 0x0100_0000_01B3 }
        return SplitMix64(seed: mix ^ (UInt64(index) &* 0x9E37_79B9_7F4A_7C15) ^ (salt &* 0xD6E8_FEB8_6659_FD93))
    }

    /// Announces READY and waits for the orchestrator's GO (the start barrier). Starts the progress
    /// ticker the first time.
    func awaitGo() async {
        WorkerOutput.send("READY")
        while let line = await control.next() {
            if line == "GO" { break }
        }
        ticker.withLock { ticker in
            guard ticker == nil else { return }
            let tally = self.tally
            ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(250))  // cancelled: the loop ends
                    WorkerOutput.send("PROGRESS \(tally.operations)")
                }
            }
        }
    }

    func stopTicker() async {
        let task = ticker.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    /// Records one line for the judge (timestamps of reads, removals, generations), written to
    /// `logs/<phase>-<index>.events` when the worker finishes.
    func event(_ line: String) {
        events.withLock { $0.append(line) }
    }

    func writeEvents() throws {
        let lines = events.withLock { $0 }
        let path = plan.logDirectory + "/\(phase)-\(index).events"
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
    }

    /// True once the orchestrator sent STOP.
    var stopRequested: Bool { control.stopRequested }

    func send(_ line: String) { WorkerOutput.send(line) }

    /// Runs `body` and returns its result with the elapsed monotonic nanoseconds.
    func timed<T>(_ body: () async throws -> T) async rethrows -> (T, UInt64) {
        let start = monotonicNanoseconds()
        let value = try await body()
        return (value, monotonicNanoseconds() - start)
    }

    /// Get-or-generate `key`, counted in the tally and checked. Unexpected errors are counted too.
    @discardableResult
    func fetch(
        _ cache: YCache, _ key: CacheKey, options: YCache.Options = .default, hooks: GeneratorHooks? = nil
    ) async -> Fetched? {
        let start = monotonicNanoseconds()
        do {
            let fetched = try await expected.fetch(cache, key, options: options, hooks: hooks ?? recordingHooks(key))
            tally.record(
                fetched, nanoseconds: monotonicNanoseconds() - start,
                describe: "\(StressKey.label(key)) from \(fetched.source)")
            return fetched
        } catch {
            tally.error("\(StressKey.label(key)): \(error)")
            return nil
        }
    }

    /// Fetches the keys `order` names all at once (one task each), each generation recorded and delayed
    /// by `delayMilliseconds` (and with `announce`, announced: see `recordingHooks`); with
    /// `recordingDigests`, lists `round/index=digest` under "digests" for the judge's
    /// every-process-saw-one-value check.
    func fetchAtOnce(
        _ cache: YCache, order: [Int], delayMilliseconds: Int, recordingDigests: Bool, round: Int,
        announce: Bool = false, key: @escaping @Sendable (_ index: Int) -> CacheKey
    ) async {
        await withTaskGroup(of: Void.self) { group in
            for index in order {
                group.addTask {
                    let key = key(index)
                    let hooks = self.recordingHooks(key, delayMilliseconds: delayMilliseconds, announce: announce)
                    guard let fetched = await self.fetch(cache, key, hooks: hooks), recordingDigests else { return }
                    self.tally.list("digests", "\(round)/\(index)=\(Digest.hex(fetched.digest))")
                }
            }
        }
    }

    /// Hooks that record one ledger line per generation (and optionally wait, to widen races); with
    /// `announce`, a `GENERATING <label>` line to the orchestrator right after the ledger's (chaos kills
    /// on it).
    func recordingHooks(_ key: CacheKey, delayMilliseconds: Int = 0, extra: String = "", announce: Bool = false)
        -> GeneratorHooks
    {
        let ledger = self.ledger
        let label = StressKey.label(key)
        let line = "gen \(label) \(pid) \(phase)" + (extra.isEmpty ? "" : " " + extra)
        return GeneratorHooks(willGenerate: {
            ledger.record(line)
            if announce { WorkerOutput.send("GENERATING \(label)") }
            if delayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(delayMilliseconds)) }
        })
    }
}

/// Lines from the orchestrator on stdin, read on a dedicated thread (never the cooperative pool).
final class ControlChannel: Sendable {
    private struct State {
        var lines: [String] = []
        var waiter: CheckedContinuation<String?, Never>?
    }

    private let state = Mutex(State())
    private let stop = Atomic<Bool>(false)

    var stopRequested: Bool { stop.load(ordering: .relaxed) }

    func start() {
        let thread = Thread { [self] in
            while let line = readLine() { deliver(line) }
            // The orchestrator closed our stdin: it died or gave up on us. Nobody will read our results.
            _exit(3)
        }
        thread.stackSize = 256 * 1024
        thread.start()
    }

    private func deliver(_ line: String) {
        if line == "STOP" {
            stop.store(true, ordering: .relaxed)
            return
        }
        let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.lines.append(line)
            return nil
        }
        waiter?.resume(returning: line)
    }

    /// The next line (other than STOP) from the orchestrator.
    func next() async -> String? {
        await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let ready = state.withLock { state -> String? in
                if !state.lines.isEmpty { return state.lines.removeFirst() }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Worker stdout: whole lines, one write(2) each under a lock, so tasks never interleave.
enum WorkerOutput {
    private static let lock = Mutex(())

    static func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        lock.withLock { _ in
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let written = write(1, raw.baseAddress! + offset, raw.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return  // the orchestrator is gone; nothing to do
                    }
                    offset += written
                }
            }
        }
    }
}

/// A wait that ignores cancellation and does not block a thread (for generators that "ignore
/// cancellation", as real ones sometimes do).
func uncancellableSleep(milliseconds: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { continuation.resume() }
    }
}
