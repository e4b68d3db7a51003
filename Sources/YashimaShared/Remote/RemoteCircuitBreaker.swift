// RemoteCircuitBreaker.swift: closed, open for a cooldown after one failure, half-open with exactly one
// probe; a failed probe doubles the cooldown (to a maximum), so a dead server costs one probe per cooldown.

import Synchronization

/// A circuit breaker with a half-open single probe. Thread-safe.
final class RemoteCircuitBreaker: Sendable {
    /// The breaker's position.
    enum State: Equatable, Sendable {
        /// Calls go through.
        case closed
        /// Calls are bypassed until the monotonic time `until` (nanoseconds).
        case open(until: Int64)
        /// One probe is in flight; other calls are bypassed.
        case halfOpen
    }

    /// What a caller may do.
    enum Admission: Equatable, Sendable {
        /// Make the call; report its outcome with ``record(success:admission:)``. `isProbe` is true for
        /// the single call after a cooldown.
        case proceed(isProbe: Bool)
        /// Do not call the backend: it is considered down.
        case bypass
    }

    private struct Status {
        var state: State = .closed
        var cooldown: Int64
    }

    /// The first cooldown after a failure, in nanoseconds.
    let initialCooldown: Int64
    /// The longest cooldown after repeated failed probes, in nanoseconds.
    let maximumCooldown: Int64
    private let now: @Sendable () -> Int64
    private let status: Mutex<Status>

    /// Creates a closed breaker.
    ///
    /// - Parameters:
    ///   - cooldown: How long the breaker stays open after the first failure.
    ///   - maximumCooldown: The cap on the doubled cooldown after failed probes.
    ///   - now: The monotonic clock in nanoseconds (tests pass their own).
    init(
        cooldown: Duration, maximumCooldown: Duration? = nil,
        now: @escaping @Sendable () -> Int64 = { Syscall.monotonicNanoseconds }
    ) {
        initialCooldown = max(1, cooldown.remoteNanoseconds)
        self.maximumCooldown = max(initialCooldown, (maximumCooldown ?? cooldown * 8).remoteNanoseconds)
        self.now = now
        status = Mutex(Status(cooldown: initialCooldown))
    }

    /// The breaker's position now (an open breaker past its cooldown still reads `.open`).
    var state: State { status.withLock { $0.state } }

    /// Decides whether a call may go to the backend.
    func admit() -> Admission {
        let time = now()
        return status.withLock { status in
            switch status.state {
            case .closed: return .proceed(isProbe: false)
            case .halfOpen: return .bypass
            case .open(let until):
                guard time >= until else { return .bypass }
                status.state = .halfOpen
                return .proceed(isProbe: true)
            }
        }
    }

    /// Reports the outcome of an admitted call.
    ///
    /// A failure while closed opens the breaker; the probe's outcome closes or reopens it. Outcomes of
    /// calls admitted before the breaker opened change nothing once it is open or half-open (they are
    /// old news), except that their failures do not shorten an open period either.
    func record(success: Bool, admission: Admission) {
        let time = now()
        status.withLock { status in
            let isProbe = admission == .proceed(isProbe: true)
            switch (status.state, isProbe, success) {
            case (.closed, false, false):
                status.state = .open(until: time &+ status.cooldown)
            case (.halfOpen, true, true):
                status.state = .closed
                status.cooldown = initialCooldown
            case (.halfOpen, true, false):
                status.cooldown = min(maximumCooldown, status.cooldown &* 2)
                status.state = .open(until: time &+ status.cooldown)
            default:
                break
            }
        }
    }
}
