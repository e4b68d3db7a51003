// Scenario 7, cancellation churn: many tasks per worker request a few shared keys with
// `.cancelWhenNoWaiters` and about half are cancelled while they wait. Values carry a token naming the
// generation that made them, and generators log how they ended (ok, aborted, completed after being
// cancelled): no cancelled result may be stored or returned, and no task may hang.

import Foundation
import Glibc
import Synchronization
import YashimaShared

enum CancellationScenario: Scenario {
    static let name = "cancellation"
    static let summary = "tasks cancelled while waiting (.cancelWhenNoWaiters): no cancelled result stored, none hang"

    static let tokenSize = 16
    private static let sizes = [1_000, 5_000, 30_000]

    static func key(round: Int, index: Int) -> CacheKey {
        StressKey.make("cancel-r\(round)", "k\(index)", PayloadSpec(kind: .data, size: sizes[index % sizes.count]))
    }

    /// The generation token at the end of a value: `<pid>-<counter>`.
    static func token(of value: Data) -> String? {
        guard value.count >= tokenSize else { return nil }
        let tail = Array(value.suffix(tokenSize))
        let pid = tail[0..<8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        let counter = tail[8..<16].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return "\(UInt64(littleEndian: pid))-\(UInt64(littleEndian: counter))"
    }

    /// True when `value` is the key's payload followed by a token.
    static func isCorrect(_ value: Data, _ key: CacheKey, _ expected: ExpectedValues) -> Bool {
        guard let spec = StressKey.spec(of: key), value.count == spec.size + tokenSize else { return false }
        return value.prefix(spec.size) == expected.bytes(key, spec)
    }

    // MARK: Worker

    private final class Counter: Sendable {
        private let value = Atomic<UInt64>(0)
        func next() -> UInt64 { value.wrappingAdd(1, ordering: .relaxed).newValue }
    }

    private struct TaskPlan: Sendable {
        let key: Int
        let cancel: Bool
        let cancelAfterMilliseconds: Int
        let generateMilliseconds: Int
        let ignoresCancellation: Bool
    }

    static func work(_ worker: WorkerContext) async throws {
        let rounds = worker.plan["rounds"]
        let keys = worker.plan["keys"]
        let tasks = worker.plan["tasks"]
        let cancelPercent = worker.plan["cancelPercent"]
        let cache = worker.makeCache()
        try cache.openStorage()
        let counter = Counter()
        for round in 0..<rounds {
            var random = worker.random(UInt64(round))
            let plans = (0..<tasks).map { _ in
                TaskPlan(
                    key: random.below(keys), cancel: random.chance(cancelPercent),
                    cancelAfterMilliseconds: random.below(60),
                    generateMilliseconds: 20 + random.below(60), ignoresCancellation: random.chance(50))
            }
            await worker.awaitGo()
            await withTaskGroup(of: Void.self) { group in
                for plan in plans {
                    group.addTask { await request(worker, cache, counter, key(round: round, index: plan.key), plan) }
                }
            }
        }
    }

    private static func request(
        _ worker: WorkerContext, _ cache: YCache, _ counter: Counter, _ key: CacheKey, _ plan: TaskPlan
    ) async {
        var options = YCache.Options()
        options.singleFlightPolicy = .cancelWhenNoWaiters
        let label = StressKey.label(key)
        let spec = StressKey.spec(of: key)!
        let payload = worker.expected.bytes(key, spec)
        let ledger = worker.ledger
        let pid = worker.pid
        let phase = worker.phase
        let start = monotonicNanoseconds()
        let call = Task {
            try await cache.resolve(for: key, codec: DataCodec(), options: options) {
                let number = counter.next()
                let token = "\(pid)-\(number)"
                ledger.record("gen \(label) \(pid) \(phase) \(token)")
                if plan.ignoresCancellation {
                    await uncancellableSleep(milliseconds: plan.generateMilliseconds)
                } else {
                    do {
                        try await Task.sleep(for: .milliseconds(plan.generateMilliseconds))
                    } catch {
                        ledger.record("done \(token) aborted")
                        throw error
                    }
                }
                // Completing after cancellation is allowed; storing or sharing that result is not.
                ledger.record("done \(token) \(Task.isCancelled ? "cancelled" : "ok")")
                var value = payload
                withUnsafeBytes(of: UInt64(UInt32(bitPattern: pid)).littleEndian) { value.append(contentsOf: $0) }
                withUnsafeBytes(of: number.littleEndian) { value.append(contentsOf: $0) }
                return value
            }
        }
        if plan.cancel {
            // only our own task can cancel this
            try? await Task.sleep(for: .milliseconds(plan.cancelAfterMilliseconds))
            call.cancel()
        }
        switch await call.result {
        case .success(let resolution):
            let fetched = Fetched(
                source: resolution.source, shared: resolution.wasSharedGeneration,
                correct: isCorrect(resolution.value, key, worker.expected), metadata: resolution.metadata, digest: 0)
            worker.tally.record(
                fetched, nanoseconds: monotonicNanoseconds() - start, describe: "\(label) from \(resolution.source)")
            if let token = token(of: resolution.value) { worker.tally.list("received", token) }
        case .failure(let error) where error is CancellationError:
            worker.tally.operation(nanoseconds: monotonicNanoseconds() - start)
            worker.tally.count("cancelled")
            if !plan.cancel { worker.tally.error("\(label): cancelled although nobody cancelled it") }
        case .failure(let error):
            worker.tally.error("\(label): \(error)")
        }
    }

    // MARK: Judge

    @MainActor static func run(_ run: ScenarioRun) async throws {
        let rounds = run.setting("rounds", smoke: 14, standard: 24)
        run.setting("keys", smoke: 10, standard: 16)
        run.setting("tasks", smoke: 20, standard: 32)
        run.setting("cancelPercent", 50)
        let fleet = try run.startPhase("churn", workers: run.workerCount)
        for _ in 1..<rounds { fleet.release(deadline: run.deadline) }
        run.finishPhase(fleet)

        // How every generation ended, from the ledger.
        var status: [String: String] = [:]
        var generations = 0
        for words in run.ledgerRecords("gen") where words.count >= 5 {
            status[String(words[4])] = "unfinished"
            generations += 1
        }
        for words in run.ledgerRecords("done") where words.count >= 3 { status[String(words[1])] = String(words[2]) }
        let completedAfterCancel = status.values.filter { $0 == "cancelled" }.count
        let aborted = status.values.filter { $0 == "aborted" }.count

        // Nobody received a value from a cancelled generation (or from none at all).
        let results = fleet.workers.compactMap(\.result)
        var badReceived: [String] = []
        for token in results.flatMap({ $0.lists["received"] ?? [] }) where status[token] != "ok" {
            badReceived.append("\(token) (\(status[token] ?? "unknown generation"))")
        }
        run.countWrongValues(badReceived.count)
        run.expect(
            badReceived.isEmpty,
            "values from generations that did not complete normally were returned: "
                + badReceived.prefix(5).joined(separator: ", "))

        // Storage holds only results of generations that completed without being cancelled.
        let judge = run.judgeCache()
        var cacheOnly = YCache.Options()
        cacheOnly.lookupPolicy = .cacheOnly
        var stored = 0
        var storedBad: [String] = []
        for entry in try await judge.entries() {
            stored += 1
            let label = StressKey.label(entry.key)
            do {
                let value = try await judge.value(for: entry.key, codec: DataCodec(), options: cacheOnly) { Data() }
                guard isCorrect(value, entry.key, run.expected), let token = token(of: value) else {
                    storedBad.append("\(label): wrong bytes")
                    continue
                }
                if status[token] != "ok" {
                    storedBad.append("\(label): token \(token) (\(status[token] ?? "unknown generation"))")
                }
            } catch {
                storedBad.append("\(label): unreadable (\(error))")
            }
        }
        run.countWrongValues(storedBad.count)
        run.expect(
            storedBad.isEmpty, "storage holds results it must not: " + storedBad.prefix(5).joined(separator: "; "))

        let cancelled = results.reduce(0) { $0 + ($1.counters["cancelled"] ?? 0) }
        run.generations(expected: nil, seen: generations)
        run.note(
            "\(rounds) rounds; \(cancelled) requests cancelled while waiting; generations: \(generations) "
                + "(\(aborted) aborted, \(completedAfterCancel) completed after cancellation, none of them stored or returned)"
        )
        run.note("\(stored) entries in storage, each from a generation that completed normally")
    }
}
