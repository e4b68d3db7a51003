// RedisLeaseWait.swift: waiting for another host's lease (I16): subscribe (confirmed), check value and lease
// in one round trip, wait for the release message or the re-check timer, check again; on a thread of its
// own, woken at once by cancellation.

import Foundation

extension RedisRemoteStore {
    /// Waits until `identity`'s lease is released or its value appears, at most `timeout`.
    ///
    /// - Parameter onWaiting: Called (a test seam) each time the waiter starts to block: subscribed, and
    ///   the lease just seen held. A release after this call must be noticed by notification.
    func waitForRelease(
        _ identity: EntryIdentity, timeout: Duration, onWaiting: (@Sendable () -> Void)? = nil
    ) async -> RemoteWaitOutcome {
        statistics.add(.leaseWaits)
        let cancellation = WaitCancellation()
        let started = Syscall.monotonicNanoseconds
        let deadline = RemoteDeadline.after(timeout)
        let outcome = await withTaskCancellationHandler {
            await BlockingWork.run {
                self.waitBlocking(identity, deadline: deadline, cancellation: cancellation, onWaiting: onWaiting)
            }
        } onCancel: {
            cancellation.cancel()
        }
        statistics.add(.leaseWaitNanoseconds, Int(max(0, Syscall.monotonicNanoseconds - started)))
        return outcome
    }

    /// Past a lease's remaining TTL, the milliseconds a waiter adds before it looks again (the server
    /// expires a key at most a millisecond late when it is read).
    static let expiryMargin: Int64 = 3

    /// The wait loop. Blocking.
    private func waitBlocking(
        _ identity: EntryIdentity, deadline: RemoteDeadline, cancellation: WaitCancellation,
        onWaiting: (@Sendable () -> Void)?
    ) -> RemoteWaitOutcome {
        let keys = keys(for: identity)
        let scope = router.scope(for: keys.routingKey)
        guard case .some(var subscription) = subscribe(keys, scope: scope) else { return .unavailable }
        defer { subscription?.close() }
        guard cancellation.attach(subscription) else { return .cancelled }
        var notified = false
        var sawHeld = false
        var rejectionCounted = false
        while true {
            guard !cancellation.isCancelled else { return .cancelled }
            guard !deadline.hasPassed else { return .timedOut }
            let commands = commands
            // Checks and subscriptions get the full operation timeout even near the caller's deadline: a
            // slow server is the breaker's business, and the caller's deadline is checked between calls.
            let attempt = remoteGuard.performBlocking(scope: scope, access: .read) {
                (limit) throws(RemoteError) -> RedisEntryCommands.Check in
                try commands.check(keys, deadline: limit)
            }
            guard case .completed(let check) = attempt else { return .unavailable }
            if let bytes = check.value {
                switch Self.verify(bytes, identity: identity, secret: configuration.secret) {
                case .hit(let value):
                    statistics.add(.hits)
                    return .found(value)
                case .miss(let reason) where !rejectionCounted:
                    // The same stored bytes are seen again on every re-check: counted once per wait.
                    rejectionCounted = true
                    countRejection(reason)
                default: break
                }
            }
            if check.leaseMilliseconds == -2 {
                if sawHeld && !notified { statistics.add(.leaseTakeovers) }
                return .leaseFree(notified: notified)
            }
            // Held (or a key without a TTL, which no holder of this protocol wrote: wait it out). The
            // holder renews it while it generates; one that stopped (finished but could not release,
            // died, cut off) leaves it to expire within the lease TTL: the next check is due then, so a
            // dead holder costs at most its lease's remaining life, not a whole re-check interval more.
            sawHeld = true
            guard !deadline.hasPassed else { return .timedOut }
            var recheck = configuration.waitRecheckInterval
            if check.leaseMilliseconds >= 0 {
                recheck = min(recheck, .milliseconds(check.leaseMilliseconds + Self.expiryMargin))
            }
            let until = min(deadline, .after(recheck))
            notified = false
            onWaiting?()
            if let current = subscription {
                switch current.wait(until: until) {
                case .notified: notified = true
                case .timedOut: break
                case .cancelled: return .cancelled
                case .lost:
                    current.close()
                    guard case .some(let again) = subscribe(keys, scope: scope) else {
                        subscription = nil
                        return .unavailable
                    }
                    subscription = again
                    guard cancellation.attach(again) else { return .cancelled }
                }
            } else if cancellation.sleep(until: until) {
                return .cancelled
            }
        }
    }

    /// Subscribes to `keys`' release channel. `.some(nil)` when the server refuses subscriptions (an
    /// ACL without channel rights: the wait then re-checks on the timer only); nil when the tier is
    /// unavailable.
    private func subscribe(_ keys: RemoteKeys, scope: Int) -> RedisSubscription?? {
        let (router, settings) = (router, settings)
        let attempt = remoteGuard.performBlocking(scope: scope, access: .read) {
            (limit) throws(RemoteError) -> RedisSubscription? in
            let endpoint = try router.subscriptionEndpoint(for: keys.routingKey, deadline: limit)
            do throws(RemoteError) {
                return try RedisSubscriber.shared(for: endpoint, settings: settings).subscribe(
                    keys.channel, deadline: limit)
            } catch {
                if case .server(let reply)? = error.redisFailure, reply.kind == .noPermission { return nil }
                throw error
            }
        }
        switch attempt {
        case .completed(let subscription): return .some(subscription)
        case .keyFailure: return .some(nil)
        case .unavailable: return nil
        }
    }
}

/// Wakes a blocked wait when its task is cancelled.
///
/// Safe to share (`@unchecked Sendable`): `cancelled` and `subscription` are read and written only
/// while `condition` is locked.
final class WaitCancellation: @unchecked Sendable {
    private let condition = NSCondition()
    private var cancelled = false
    private var subscription: RedisSubscription?

    /// Cancels: wakes `sleep` and the attached subscription's wait.
    func cancel() {
        condition.lock()
        cancelled = true
        let attached = subscription
        condition.broadcast()
        condition.unlock()
        attached?.cancel()
    }

    /// True once cancelled.
    var isCancelled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled
    }

    /// Attaches the subscription whose wait `cancel` interrupts; false when already cancelled.
    func attach(_ new: RedisSubscription?) -> Bool {
        condition.lock()
        subscription = new
        let wasCancelled = cancelled
        condition.unlock()
        if wasCancelled { new?.cancel() }
        return !wasCancelled
    }

    /// Sleeps until `deadline` or cancellation; true when cancelled. Blocking.
    func sleep(until deadline: RemoteDeadline) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled && !deadline.hasPassed {
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(deadline.remainingNanoseconds) / 1e9))
        }
        return cancelled
    }
}
