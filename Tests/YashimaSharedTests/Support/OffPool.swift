// Blocking waits (a child's output, its exit) without holding a thread of Swift's cooperative pool. The
// pool has one thread per core (two on CI); a test that blocks one starves every other test's
// continuations, so a trivial async test took a minute in a full run. Blocking work runs on a thread
// of its own, and the test awaits it: its #expect calls stay in its own task, where Swift Testing
// attributes them.

import Foundation
import Synchronization

/// Runs blocking `work` on a new thread (not one of the cooperative pool's) and suspends until it
/// returns, with its value or error.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result(catching: work)) }.start()
    }
}

/// Runs blocking `work` on a new thread (not one of the cooperative pool's) and suspends until it
/// returns.
func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}

/// A task executor with one thread of its own: a test's task whose code blocks on purpose (a generator
/// that must not suspend) runs there, holding no thread of the cooperative pool. The thread lives as
/// long as the process (a test makes one or two).
final class DedicatedThreadExecutor: TaskExecutor {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in run() }
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        ready.signal()
    }

    private func run() {
        while true {
            ready.wait()
            guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
