// LeaseRenewal.swift: keeps a lease alive while its generator runs (I16): renews at a third of the TTL on a
// thread of its own, stops when told, reports a lost lease once. A lost lease does not stop the generator
// (its value is right; only exactly-once across hosts is lost).

import Foundation

/// A running renewal loop for one lease. Dropping it without ``stop()`` stops it too.
final class LeaseRenewal: Sendable {
    /// Where the loop is.
    enum State: Equatable, Sendable {
        /// Renewing.
        case running
        /// The lease was found lost (reported once through `onLost`).
        case lost
        /// Stopped by ``stop()``.
        case stopped
    }

    private let core: Core

    /// Starts renewing on a new thread.
    ///
    /// - Parameters:
    ///   - timeToLive: The lease's TTL: how long renewals may fail before it counts as lost.
    ///   - interval: Time between renewals (a third of the TTL).
    ///   - renew: One renewal attempt. Blocking, with its own deadline.
    ///   - onLost: Called once, from the renewal thread, when the lease is lost.
    init(
        timeToLive: Duration, interval: Duration, renew: @escaping @Sendable () -> RemoteLeaseRenewal,
        onLost: @escaping @Sendable () -> Void = {}
    ) {
        let core = Core()
        self.core = core
        let ttl = timeToLive.remoteNanoseconds
        let thread = Thread { core.run(ttlNanoseconds: ttl, interval: interval, renew: renew, onLost: onLost) }
        thread.name = "yashima-lease-renewal"
        thread.stackSize = 256 * 1024
        thread.start()
    }

    deinit { core.requestStop() }

    /// The loop's state now.
    var current: State { core.current }

    /// True once the lease was found lost.
    var isLost: Bool { current == .lost }

    /// Stops renewing without waiting for a renewal in flight (which can only extend a lease this process
    /// still holds: harmless before its release, a no-op after it). The holder's store-and-release must
    /// not wait behind a renewal that a hung server holds for an operation timeout.
    ///
    /// - Returns: The final state: `.lost` if the lease was lost before, else `.stopped`.
    @discardableResult
    func stopNow() -> State { core.requestStop() }

    /// Stops renewing and waits until the loop has ended (at most one renewal in flight, bounded by the
    /// operation timeout). The calling task is suspended, not blocked.
    ///
    /// - Returns: The final state: `.lost` if the lease was lost before, else `.stopped`.
    @discardableResult
    func stop() async -> State {
        let final = core.requestStop()
        await core.waitUntilFinished()
        return final
    }

    /// The loop's state, shared by the renewal thread and the owner.
    ///
    /// Safe to share (`@unchecked Sendable`): every stored property is read and written only while
    /// `condition` is locked.
    private final class Core: @unchecked Sendable {
        private let condition = NSCondition()
        private var state = State.running
        private var finished = false
        private var finishWaiters: [CheckedContinuation<Void, Never>] = []

        var current: State {
            condition.lock()
            defer { condition.unlock() }
            return state
        }

        /// Asks the loop to stop; returns the state it ends in.
        @discardableResult
        func requestStop() -> State {
            condition.lock()
            defer { condition.unlock() }
            if state == .running { state = .stopped }
            condition.broadcast()
            return state
        }

        func waitUntilFinished() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                condition.lock()
                if finished {
                    condition.unlock()
                    continuation.resume()
                } else {
                    finishWaiters.append(continuation)
                    condition.unlock()
                }
            }
        }

        func run(
            ttlNanoseconds ttl: Int64, interval: Duration, renew: @Sendable () -> RemoteLeaseRenewal,
            onLost: @Sendable () -> Void
        ) {
            var lastRenewed = Syscall.monotonicNanoseconds
            while sleep(interval) {
                let outcome = renew()
                let now = Syscall.monotonicNanoseconds
                if outcome == .renewed {
                    lastRenewed = now
                    continue
                }
                if outcome == .unavailable && now - lastRenewed < ttl { continue }
                condition.lock()
                let report = state == .running
                if report { state = .lost }
                condition.unlock()
                if report { onLost() }
                break
            }
            condition.lock()
            finished = true
            let waiters = finishWaiters
            finishWaiters = []
            condition.unlock()
            for waiter in waiters { waiter.resume() }
        }

        /// Sleeps for `interval` unless stopped first; true when the loop should renew.
        private func sleep(_ interval: Duration) -> Bool {
            let until = RemoteDeadline.after(interval)
            condition.lock()
            defer { condition.unlock() }
            while state == .running && !until.hasPassed {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(until.remainingNanoseconds) / 1e9))
            }
            return state == .running
        }
    }
}
