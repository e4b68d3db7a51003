// Deterministic ordering for concurrency tests: gates that hold a generator open until the test lets it
// go, counters, and a bounded wait that fails a test instead of hanging it. No sleeps order events here;
// the only clock is the "does not hang" bound, HangGuard, which load cannot break.

import Foundation
import Synchronization
import Testing

@testable import YashimaShared

/// A one-shot gate: `wait()` suspends until `open()` (and returns at once afterwards).
/// Waiting ignores task cancellation on purpose, so a generator can "ignore cancellation".
final class Gate: Sendable {
    private let state = Mutex<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    var isOpen: Bool { state.withLock { $0.isOpen } }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.isOpen { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Waits for the gate, but gives up after `seconds` (a bound for "does not hang"). True when open.
    func wait(within seconds: Double, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        let gate = self
        let task = Task<Void, any Error> { await gate.wait() }
        return await result(of: task, within: seconds, sourceLocation: sourceLocation) != nil
    }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let count = Mutex(0)

    @discardableResult
    func increment() -> Int {
        count.withLock {
            $0 += 1
            return $0
        }
    }

    var value: Int { count.withLock { $0 } }
}

/// A continuation resumed by whichever of several racers comes first (even one that comes before the
/// continuation exists).
private final class ResumeOnce<T: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<T, Never>)
        case early(T)
        case finished
    }

    private let state = Mutex<State>(.idle)

    func set(_ continuation: CheckedContinuation<T, Never>) {
        let early = state.withLock { state -> T? in
            if case .early(let value) = state {
                state = .finished
                return value
            }
            state = .waiting(continuation)
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(returning value: T) {
        let continuation = state.withLock { state -> CheckedContinuation<T, Never>? in
            switch state {
            case .idle:
                state = .early(value)
                return nil
            case .waiting(let continuation):
                state = .finished
                return continuation
            case .early, .finished:
                return nil
            }
        }
        continuation?.resume(returning: value)
    }
}

/// The tests' "does not hang" bound, for waits in tests that are not about a timeout: it sleeps in short
/// steps and counts the time it asked to sleep, not the time that passed. Each step ends only once the
/// waiting task runs again, so when the rest of a parallel run keeps the cooperative pool busy, or CPU
/// burners slow the machine, the guard stretches with the load; a wait that hangs on a quiet machine
/// still ends after about `seconds`. (Beside the whole suite on a loaded 2-core machine, a resumption
/// measured 84 s late: a wall-clock bound of 30 s failed tests that took milliseconds alone.)
struct HangGuard {
    let seconds: Double
    private var asked = 0.0
    private var step: Double
    private let longestStep: Double

    /// A guard of `seconds` of asked-for sleep, in steps from `firstStep` doubling up to `longestStep`.
    init(seconds: Double, firstStep: Double = 0.001, longestStep: Double = 0.02) {
        self.seconds = seconds
        step = firstStep
        self.longestStep = longestStep
    }

    /// Sleeps one step; false (without sleeping) once the guard is spent.
    mutating func sleep() async -> Bool {
        guard asked < seconds else { return false }
        try? await Task.sleep(for: .seconds(step))
        asked += step
        step = min(longestStep, step * 2)
        return true
    }
}

/// The result of `task`, or nil (and a recorded issue) when it does not finish within `seconds` (a
/// HangGuard). Returns then without waiting for the task, so a hung task fails the test, not the run.
func result<T: Sendable>(
    of task: Task<T, any Error>, within seconds: Double = 30, sourceLocation: SourceLocation = #_sourceLocation
) async -> Result<T, any Error>? {
    let once = ResumeOnce<Result<T, any Error>?>()
    let timer = Task {
        var bound = HangGuard(seconds: seconds, firstStep: 0.05, longestStep: 0.1)
        while await bound.sleep() {
            if Task.isCancelled { return }
        }
        once.resume(returning: nil)
    }
    let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
        once.set(continuation)
        Task {
            let result = await task.result
            once.resume(returning: result)
        }
    }
    timer.cancel()
    if outcome == nil { Issue.record("task did not finish within \(seconds) s", sourceLocation: sourceLocation) }
    return outcome
}

/// Polls `condition` (a state flag, not a clock) until it holds or `seconds` pass (a HangGuard). For states
/// the code under test exposes no continuation for, like "both callers have joined the flight".
func eventually(
    within seconds: Double = 30, sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool
) async -> Bool {
    var bound = HangGuard(seconds: seconds)
    while !condition() {
        guard await bound.sleep() else {
            Issue.record("condition did not hold within \(seconds) s", sourceLocation: sourceLocation)
            return false
        }
    }
    return true
}

extension YCache {
    /// Callers waiting on this cache's in-flight production of `key` for `codec` (test seam).
    func waiters<Codec: CacheCodec>(_ key: CacheKey, _ codec: Codec, refresh: Bool = false) -> Int {
        engine.flights.waiterCount(
            FlightKey(entry: EntryKey(key: key, codecIdentifier: codec.identifier), kind: refresh ? .refresh : .lookup)
        )
    }
}
