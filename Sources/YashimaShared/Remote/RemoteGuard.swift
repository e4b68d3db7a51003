// RemoteGuard.swift: what every remote backend shares: timeouts, circuit breakers, read-only mode, the value
// cap, statistics, and the rule that a remote failure is never thrown. Backends hand it closures that
// throw RemoteError (blocking ones run on RemoteIO threads).

/// Settings every remote backend shares.
struct RemotePolicy: Hashable, Sendable {
    /// The most one operation may take, connecting included: the most a caller ever waits for the
    /// remote tier before it is bypassed. Wall-clock from the call, however busy the machine or the
    /// remote I/O threads: time queued counts, and a call still queued at its deadline ends unmade
    /// (RemoteIO). The caller's task then runs when its executor has a thread for it.
    var operationTimeout: Duration = .seconds(1)
    /// The most connecting may take (within the operation's timeout).
    var connectTimeout: Duration = .milliseconds(500)
    /// Values whose envelope would be larger stay local (never stored, and longer replies are not
    /// read). Default 64 MiB.
    var maximumValueBytes = 64 << 20
    /// Never write: no stores, removals or leases; lookups only.
    var readOnly = false
    /// How long the tier is bypassed after a failure, before one probe call.
    var breakerCooldown: Duration = .seconds(5)
    /// The longest bypass after repeated failed probes (the cooldown doubles up to this).
    var maximumBreakerCooldown: Duration = .seconds(60)
    /// `removeAll()` deletes every remote value of the cache too (Redis; an opt-in).
    var removeAllRemotely = false

    /// What is wrong with these settings, if anything (every backend's configuration checks this).
    enum Problem: Equatable, Sendable {
        /// A timeout or the cooldown is under 1 ms.
        case invalidTimeout
        /// The value cap is negative or 2 GiB or more.
        case invalidValueCap
    }

    /// The first problem of these settings, or nil when they are valid.
    var problem: Problem? {
        guard operationTimeout.remoteMilliseconds >= 1, connectTimeout.remoteMilliseconds >= 1,
            breakerCooldown.remoteMilliseconds >= 1
        else { return .invalidTimeout }
        guard maximumValueBytes >= 0, maximumValueBytes <= Int(Int32.max) else { return .invalidValueCap }
        return nil
    }
}

/// Whether an operation reads or writes (writes have their own breaker and honour read-only mode).
enum RemoteAccess: Sendable {
    /// Lookups, lease checks, subscriptions.
    case read
    /// Stores, removals, leases.
    case write
}

/// The outcome of a guarded call: never an error.
enum RemoteAttempt<Value: Sendable>: Sendable {
    /// The backend answered.
    case completed(Value)
    /// The backend answered that this key cannot be served (another Redis type, a value beyond the
    /// cap): a miss, not a fault of the backend.
    case keyFailure(RemoteError)
    /// Not called (breaker open, read-only) or failed: behave as if there were no remote tier.
    case unavailable
}

/// Guards a backend's calls. One pair of breakers (reads, writes) per scope (a shard, or a cluster).
final class RemoteGuard: Sendable {
    /// The shared settings.
    let policy: RemotePolicy
    /// The counters calls update.
    let statistics: RemoteStatistics
    /// The threads calls run on.
    private let io: RemoteIO
    private let readBreakers: [RemoteCircuitBreaker]
    private let writeBreakers: [RemoteCircuitBreaker]

    /// Creates a guard for `scopes` independent servers.
    ///
    /// - Parameter labels: What each scope is (a server without credentials, or a cluster's seeds): its
    ///   breakers' names in the machine's shared state and in `yashima stats`. Scopes with the same label
    ///   in two processes (or two caches) share their breakers once a board is attached.
    /// - Parameter io: The threads asynchronous calls run on (tests pass a pool of their own).
    init(
        policy: RemotePolicy, scopes: Int, labels: [String] = [], statistics: RemoteStatistics,
        now: @escaping @Sendable () -> Int64 = { Syscall.monotonicNanoseconds }, io: RemoteIO = .shared
    ) {
        self.policy = policy
        self.io = io
        self.statistics = statistics
        // A probe is one guarded call: its deadline is the operation timeout, set before it is queued.
        let probeWindow = policy.operationTimeout * 2
        let named = (0..<max(1, scopes)).map { $0 < labels.count ? labels[$0] : "unnamed remote \($0)" }
        self.labels = named
        let make = { (scope: Int, access: String) in
            RemoteCircuitBreaker(
                cooldown: policy.breakerCooldown, maximumCooldown: policy.maximumBreakerCooldown,
                probeWindow: probeWindow, label: named[scope] + " " + access, board: statistics.board, now: now)
        }
        readBreakers = (0..<max(1, scopes)).map { make($0, "reads") }
        writeBreakers = (0..<max(1, scopes)).map { make($0, "writes") }
    }

    /// What each scope is (its breakers' labels without the direction).
    let labels: [String]

    /// Makes every breaker of this guard part of the chain member `id` (shown by `yashima stats`).
    func join(member id: UInt64) {
        for breaker in readBreakers + writeBreakers { breaker.join(member: id) }
    }

    /// The breaker of one scope and access (tests and diagnostics).
    func breaker(scope: Int, access: RemoteAccess) -> RemoteCircuitBreaker {
        access == .read ? readBreakers[scope] : writeBreakers[scope]
    }

    /// True when an envelope of `byteCount` bytes may be stored.
    func admitsValue(ofSize byteCount: Int) -> Bool { byteCount <= policy.maximumValueBytes }

    /// Runs `operation` on a remote I/O thread unless bypassed, with a deadline of the operation
    /// timeout from now (set before the hop, so time queued counts). Never throws. The deadline is
    /// wall-clock from this call: a call no I/O thread takes by then (all busy with other calls) ends at
    /// the deadline unmade, and one that runs keeps to it (and to its backend's later bounds, such as an
    /// HTTP transfer's). The caller's task resumes when its executor has a thread for it: a cooperative
    /// pool kept busy by other work delays that, not the remote tier.
    func perform<Value: Sendable>(
        scope: Int, access: RemoteAccess,
        _ operation: @escaping @Sendable (RemoteDeadline) throws(RemoteError) -> Value
    ) async -> RemoteAttempt<Value> {
        await withCheckedContinuation { continuation in
            start(scope: scope, access: access, operation) { continuation.resume(returning: $0) }
        }
    }

    /// `perform` without waiting for it: `completion` gets the attempt on the I/O thread (or at once, on
    /// the calling thread, when the call is bypassed).
    func start<Value: Sendable>(
        scope: Int, access: RemoteAccess,
        _ operation: @escaping @Sendable (RemoteDeadline) throws(RemoteError) -> Value,
        completion: @escaping @Sendable (RemoteAttempt<Value>) -> Void
    ) {
        guard let admission = admit(scope: scope, access: access) else {
            completion(.unavailable)
            return
        }
        let deadline = RemoteDeadline.after(policy.operationTimeout)
        io.submit(deadline: deadline.nanoseconds) {
            completion(
                self.finish(
                    scope: scope, access: access, admission: admission,
                    Result { () throws(RemoteError) in
                        try operation(deadline)
                    }))
        } onExpiry: {
            // Every I/O thread was busy until the deadline: the server was never called, so the breakers
            // get no verdict (a probe's window lets another caller probe); the caller has its timeout.
            self.statistics.add(.timeouts)
            completion(.unavailable)
        }
    }

    /// Runs `operation` on the calling thread (already off the cooperative pool) unless bypassed.
    /// Blocking.
    ///
    /// - Parameters:
    ///   - deadline: The caller's own deadline, if earlier than the operation timeout. A timeout caused by
    ///     it says nothing about the server: it is not counted against the breaker.
    ///   - ignoringBreaker: Call even when the breaker is open (a lease's release after a failed store:
    ///     waiters on other hosts gain more from it than it costs); its outcome still counts.
    func performBlocking<Value: Sendable>(
        scope: Int, access: RemoteAccess, deadline: RemoteDeadline? = nil, ignoringBreaker: Bool = false,
        _ operation: (RemoteDeadline) throws(RemoteError) -> Value
    ) -> RemoteAttempt<Value> {
        let limit = RemoteDeadline.after(policy.operationTimeout)
        let callerBound = deadline.map { $0 < limit } ?? false
        if callerBound && deadline!.hasPassed { return .unavailable }
        let admission: RemoteCircuitBreaker.Admission
        if ignoringBreaker && !(access == .write && policy.readOnly) {
            admission = .proceed(isProbe: false)
        } else {
            guard let admitted = admit(scope: scope, access: access) else { return .unavailable }
            admission = admitted
        }
        let effective = callerBound ? deadline! : limit
        return finish(
            scope: scope, access: access, admission: admission, callerBound: callerBound,
            Result { () throws(RemoteError) in try operation(effective) })
    }

    private func admit(scope: Int, access: RemoteAccess) -> RemoteCircuitBreaker.Admission? {
        if access == .write && policy.readOnly {
            statistics.add(.bypassed)
            return nil
        }
        let admission = breaker(scope: scope, access: access).admit()
        guard admission != .bypass else {
            statistics.add(.bypassed)
            return nil
        }
        return admission
    }

    /// Classifies an admitted call's result: records it with the breakers and counts it.
    private func finish<Value: Sendable>(
        scope: Int, access: RemoteAccess, admission: RemoteCircuitBreaker.Admission, callerBound: Bool = false,
        _ result: Result<Value, RemoteError>
    ) -> RemoteAttempt<Value> {
        let own = breaker(scope: scope, access: access)
        switch result {
        case .success(let value):
            own.record(success: true, admission: admission)
            // A server that answered a write answers reads too (the converse does not hold: a read-only
            // replica): a write's success closes the read breaker a server failure opened with it. Without
            // this, get-or-generate (whose Redis lookup goes with the lease, a write) never probes reads.
            if access == .write { readBreakers[scope].closeBecauseServerAnswered() }
            return .completed(value)
        case .failure(let error):
            if (error.isTimeout && callerBound) || error == .cancelled {
                // The caller's deadline or cancellation, not the server, ended it: no verdict (a probe
                // ends neutral).
                own.record(success: true, admission: admission)
                return .unavailable
            }
            if access == .write && error != .payloadTooLarge { statistics.add(.failedWrites) }
            let kind = error.failureKind
            switch error.scope {
            case .key:
                own.record(success: true, admission: admission)
                return .keyFailure(error)
            case .writes:
                statistics.add(.errors)
                writeBreakers[scope].record(
                    success: false, admission: access == .write ? admission : .proceed(isProbe: false), failure: kind)
                if access == .read { own.record(success: true, admission: admission) }
                return .unavailable
            case .server:
                statistics.add(error.isTimeout ? .timeouts : .errors)
                if kind == .authentication { statistics.add(.authenticationFailures) }
                if kind == .connection { statistics.add(.connectionFailures) }
                if kind == .throttled { statistics.add(.throttled) }
                // A throttle's Retry-After holds both breakers open that long, for every process (I17).
                let backOff = error.retryAfterNanoseconds
                own.record(success: false, admission: admission, failure: kind, backOff: backOff)
                // The server itself is down, slow or refusing: the other direction would fail the same way.
                let other = access == .read ? writeBreakers[scope] : readBreakers[scope]
                other.record(success: false, admission: .proceed(isProbe: false), failure: kind, backOff: backOff)
                return .unavailable
            }
        }
    }
}
