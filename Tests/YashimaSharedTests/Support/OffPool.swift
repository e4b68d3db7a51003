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

/// A started process's exit, awaited without any thread waiting: Foundation reaps the child on its own
/// thread, then calls `terminationHandler` (after `isRunning` is false and the status is set).
final class ProcessExit: Sendable {
    private let gate = Gate()
    private let status = ExitStatus()

    /// Sets `process.terminationHandler`. Call before `process.run()`: the handler runs only if set first.
    init(_ process: Process) {
        let (gate, status) = (gate, status)
        process.terminationHandler = { process in
            let reason = process.terminationReason == .uncaughtSignal ? "signal" : "exit status"
            status.text.withLock { $0 = "\(reason) \(process.terminationStatus)" }
            gate.open()
        }
    }

    var hasExited: Bool { gate.isOpen }

    /// How the process ended (`exit status 1`, `signal 9`), for failure messages; `running` until then.
    var statusDescription: String { status.text.withLock { $0 } ?? "running" }

    /// The status text, in a class so the termination handler can capture it.
    private final class ExitStatus: Sendable {
        let text = Mutex<String?>(nil)
    }

    /// Suspends until the process has exited.
    func wait() async { await gate.wait() }

    /// Suspends until the process has exited (true) or `seconds` have passed (false). Records no issue:
    /// the caller decides what a timeout means.
    func wait(within seconds: Double) async -> Bool {
        let exited = gate
        let done = Gate()  // opened by whichever comes first
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            done.open()
        }
        Task {
            await exited.wait()
            done.open()
        }
        await done.wait()
        timer.cancel()
        return exited.isOpen
    }
}
