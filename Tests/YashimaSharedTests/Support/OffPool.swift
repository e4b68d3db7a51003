// Blocking waits (a child's output, its exit) without holding a thread of Swift's cooperative pool. The
// pool has one thread per core (two on CI); a test that blocks one starves every other test's
// continuations, so a trivial async test took a minute in a full run. Blocking work runs on a thread
// of its own, and the test awaits it: its #expect calls stay in its own task, where Swift Testing
// attributes them.

import Foundation

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
