// Runs blocking work (scans, trim, anything that may wait on another process) on a dedicated thread and
// resumes the caller when it is done, so the cooperative pool (2 threads on 2 cores) never blocks.

import Foundation

enum BlockingWork {
    /// Called on the caller's task each time `run` hands work to a thread: tests observe with it which
    /// operations leave the pool (a task-local, so tests running in parallel do not see each other's).
    @TaskLocal static var observer: (@Sendable () -> Void)?

    /// The stack of a thread running blocking work (scans, trims, large writes). Here rather than in
    /// Policy: Support sits below Core.
    static let threadStackSize = 512 * 1024

    /// Runs `body` on a new thread and returns its result. The caller's task is suspended, not blocked.
    /// - Parameter stackSize: The thread's stack (the `yashima` tool's work, formatting included, takes 1 MiB).
    static func run<T: Sendable>(stackSize: Int = threadStackSize, _ body: @escaping @Sendable () -> T) async -> T {
        observer?()
        return await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.stackSize = stackSize
            thread.start()
        }
    }
}
