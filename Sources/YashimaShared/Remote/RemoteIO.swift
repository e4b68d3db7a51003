// RemoteIO.swift: a few long-lived threads for the remote tier's blocking calls, so the cooperative pool
// never blocks on a socket: a hop is an enqueue and a signal, not a thread start. A call with a deadline
// that finds every thread busy is ended at its deadline by the expiry thread, never run late: the remote
// tier's operation timeout is wall-clock from the call, whatever the calls ahead of it are doing.

import Foundation
import Synchronization

/// The remote tier's I/O threads.
///
/// Safe to share (`@unchecked Sendable`): `queue`, `idleThreads`, `threadCount` and `ownerProcessID` are
/// read and written only while `condition` is locked; `expiring`, `expiryThreadRuns` and
/// `expiryOwnerProcessID` only while `expiry` is locked.
final class RemoteIO: @unchecked Sendable {
    /// The process's I/O threads for remote calls.
    static let shared = RemoteIO(maximumThreads: 8)

    /// The most threads (so the most blocking calls in flight at once).
    let maximumThreads: Int
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var idleThreads = 0
    private var threadCount = 0
    /// The process whose threads these are: a forked child has none of them and starts its own.
    private var ownerProcessID = Syscall.processID
    /// Queued calls with a deadline, for the expiry thread, and whether that thread runs.
    private let expiry = NSCondition()
    private var expiring: [Job] = []
    private var expiryThreadRuns = false
    private var expiryOwnerProcessID = Syscall.processID

    /// A parked thread exits after this long without work.
    private static let idleExitSeconds = 30.0
    /// The longest single wait of the expiry thread: a wall-clock jump (NSCondition waits for a `Date`)
    /// moves an expiry by at most this much.
    private static let expiryWaitSeconds = 0.05

    /// One queued call: run by an I/O thread, or expired by the expiry thread, whichever claims it first.
    private final class Job: Sendable {
        let body: @Sendable () -> Void
        let deadline: Int64
        let onExpiry: (@Sendable () -> Void)?
        private let claimed = Atomic<Bool>(false)

        init(_ body: @escaping @Sendable () -> Void, deadline: Int64, onExpiry: (@Sendable () -> Void)?) {
            self.body = body
            self.deadline = deadline
            self.onExpiry = onExpiry
        }

        /// True for the one caller that may act on the job.
        func claim() -> Bool { !claimed.exchange(true, ordering: .acquiringAndReleasing) }

        /// True once an I/O thread or the expiry thread took the job.
        var isClaimed: Bool { claimed.load(ordering: .acquiring) }
    }

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

    /// Runs blocking `job` on an I/O thread and calls nothing back (fire and forget).
    func submit(_ job: @escaping @Sendable () -> Void) {
        enqueue(Job(job, deadline: .max, onExpiry: nil))
    }

    /// Runs blocking `job` on an I/O thread if one takes it before `deadline` (monotonic nanoseconds);
    /// otherwise `job` never runs and `onExpiry` is called instead, on the expiry thread, at the deadline.
    /// Exactly one of the two is called.
    func submit(
        deadline: Int64, _ job: @escaping @Sendable () -> Void, onExpiry: @escaping @Sendable () -> Void
    ) {
        enqueue(Job(job, deadline: deadline, onExpiry: onExpiry))
    }

    private func enqueue(_ job: Job) {
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
        // More jobs queued than threads free to take them: this one may wait, so its deadline is watched.
        let waits = job.onExpiry != nil && queue.count > idleThreads + (startThread ? 1 : 0)
        condition.unlock()
        if startThread {
            let thread = Thread { [self] in work() }
            thread.name = "yashima-remote-io"
            thread.stackSize = 256 * 1024
            thread.start()
        }
        if waits { watch(job) }
    }

    private func work() {
        condition.lock()
        while true {
            if !queue.isEmpty {
                let job = queue.removeFirst()
                condition.unlock()
                if job.claim() { job.body() }
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

    // MARK: Expiry

    /// Hands `job` to the expiry thread (started when none runs).
    private func watch(_ job: Job) {
        expiry.lock()
        let processID = Syscall.processID
        if processID != expiryOwnerProcessID {
            expiryOwnerProcessID = processID
            expiryThreadRuns = false
        }
        expiring.append(job)
        let start = !expiryThreadRuns
        expiryThreadRuns = true
        expiry.signal()
        expiry.unlock()
        guard start else { return }
        let thread = Thread { [self] in expire() }
        thread.name = "yashima-remote-expiry"
        thread.stackSize = 128 * 1024
        thread.start()
    }

    /// Ends each watched job whose deadline passed before an I/O thread took it; exits once none is left.
    private func expire() {
        expiry.lock()
        while true {
            let now = Syscall.monotonicNanoseconds
            expiring.removeAll { $0.isClaimed }  // taken by an I/O thread in time
            let due = expiring.filter { $0.deadline <= now }
            expiring.removeAll { $0.deadline <= now }
            if !due.isEmpty {
                expiry.unlock()
                for job in due where job.claim() { job.onExpiry?() }
                expiry.lock()
                continue
            }
            guard let next = expiring.map(\.deadline).min() else {
                expiryThreadRuns = false
                expiry.unlock()
                return
            }
            let seconds = min(Self.expiryWaitSeconds, Double(next - now) / 1e9)
            _ = expiry.wait(until: Date(timeIntervalSinceNow: seconds))
        }
    }
}
