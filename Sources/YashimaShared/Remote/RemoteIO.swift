// RemoteIO.swift: a few long-lived threads for the remote tier's blocking calls, so the cooperative pool
// never blocks on a socket: a hop is an enqueue and a signal, not a thread start. Each call keeps the
// caller's deadline, so time queued counts.

import Foundation

/// The remote tier's I/O threads.
///
/// Safe to share (`@unchecked Sendable`): `queue`, `idleThreads`, `threadCount` and `ownerProcessID` are
/// read and written only while `condition` is locked.
final class RemoteIO: @unchecked Sendable {
    /// The process's I/O threads for remote calls.
    static let shared = RemoteIO(maximumThreads: 8)

    /// The most threads (so the most blocking calls in flight at once).
    let maximumThreads: Int
    private let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var idleThreads = 0
    private var threadCount = 0
    /// The process whose threads these are: a forked child has none of them and starts its own.
    private var ownerProcessID = Syscall.processID

    /// A parked thread exits after this long without work.
    private static let idleExitSeconds = 30.0

    init(maximumThreads: Int) {
        self.maximumThreads = maximumThreads
    }

    /// Runs blocking `body` on an I/O thread and returns its result; the calling task is suspended, not
    /// blocked.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// Runs blocking `body` on an I/O thread and calls nothing back (fire and forget).
    func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        let processID = Syscall.processID
        if processID != ownerProcessID {
            ownerProcessID = processID
            threadCount = 0
            idleThreads = 0
        }
        queue.append(job)
        var startThread = false
        if idleThreads > 0 { condition.signal() }
        if queue.count > idleThreads && threadCount < maximumThreads {
            threadCount += 1
            startThread = true
        }
        condition.unlock()
        if startThread {
            let thread = Thread { [self] in work() }
            thread.name = "yashima-remote-io"
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }

    private func work() {
        condition.lock()
        while true {
            if !queue.isEmpty {
                let job = queue.removeFirst()
                condition.unlock()
                job()
                condition.lock()
                continue
            }
            idleThreads += 1
            let signalled = condition.wait(until: Date(timeIntervalSinceNow: Self.idleExitSeconds))
            idleThreads -= 1
            if !signalled && queue.isEmpty {
                threadCount -= 1
                condition.unlock()
                return
            }
        }
    }
}
