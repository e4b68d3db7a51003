// RemoteError.swift: the remote tier's deadline and its one error type, with the classification of what a
// failure does (bypass the server, its writes, or miss one key); backends' own failures are wrapped in it
// (RemoteBackendFailure). Never carries credentials, URLs, keys or values.

/// A point on the monotonic clock by which a remote operation must finish.
///
/// Every blocking remote call takes one and gives up with ``RemoteError/timedOut`` once it passes, so
/// a caller waits at most its timeout whatever the server does (hangs, trickles bytes, or never
/// accepts).
struct RemoteDeadline: Comparable, Sendable {
    /// `CLOCK_MONOTONIC` nanoseconds.
    let nanoseconds: Int64

    /// A deadline `duration` from now.
    static func after(_ duration: Duration) -> RemoteDeadline {
        RemoteDeadline(nanoseconds: Syscall.monotonicNanoseconds &+ duration.remoteNanoseconds)
    }

    /// A deadline that never passes (the subscriber's idle reads).
    static let distantFuture = RemoteDeadline(nanoseconds: Int64.max / 2)

    /// Nanoseconds left (0 once passed).
    var remainingNanoseconds: Int64 { max(0, nanoseconds - Syscall.monotonicNanoseconds) }

    /// True once the deadline has passed.
    var hasPassed: Bool { Syscall.monotonicNanoseconds >= nanoseconds }

    /// Milliseconds left for `poll(2)`, rounded up so a wait never spins on 0 before the deadline; nil
    /// once the deadline has passed.
    var pollMilliseconds: Int32? {
        let remaining = nanoseconds - Syscall.monotonicNanoseconds
        guard remaining > 0 else { return nil }
        return Int32(min(Int64(Int32.max), (remaining + 999_999) / 1_000_000))
    }

    /// The earlier of this deadline and one `duration` from now.
    func capped(at duration: Duration) -> RemoteDeadline { min(self, .after(duration)) }

    static func < (lhs: RemoteDeadline, rhs: RemoteDeadline) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating; negative durations give 0).
    var remoteNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? Int64.max / 2 : min(Int64.max / 2, whole + attoseconds / 1_000_000_000)
    }

    /// The duration in whole milliseconds (saturating at 0).
    var remoteMilliseconds: Int64 { remoteNanoseconds / 1_000_000 }
}

/// A backend's own failure (RESP, Redis replies, HTTP statuses, S3 error codes), carried by
/// ``RemoteError/backend(_:)``: it says what it does to the tier, in the shared words of ``RemoteError``.
protocol RemoteBackendFailure: Error, Sendable, CustomStringConvertible {
    /// What this failure does to the tier (see ``RemoteError/Scope``).
    var scope: RemoteError.Scope { get }
    /// What kind of failure this is, as breakers record it and the counters count it.
    var failureKind: RemoteFailureKind { get }
    /// The miss a lookup reports for a failure of scope ``RemoteError/Scope/key``.
    var missReason: RemoteMiss { get }
    /// True when `other` is the same failure (for ``RemoteError``'s equality).
    func isSame(as other: any RemoteBackendFailure) -> Bool
}

extension RemoteBackendFailure where Self: Equatable {
    func isSame(as other: any RemoteBackendFailure) -> Bool { (other as? Self) == self }
}

extension RemoteBackendFailure {
    /// Most backend failures are the server's: bypass it.
    var scope: RemoteError.Scope { .server }
    /// Not reached for failures of scope `.server` or `.writes`.
    var missReason: RemoteMiss { .tooLarge }
}

/// Why a remote operation failed. Thrown only inside the remote tier; callers of the tier's stores never
/// see it: they get a miss or "unavailable". The cases are those every backend shares (deadlines,
/// sockets, sizes, local files, cancellation); a backend's own failures come wrapped in
/// ``backend(_:)``, so this type names no backend.
enum RemoteError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The deadline passed (connecting, sending, or waiting for a reply).
    case timedOut
    /// The host name did not resolve (the resolver's message).
    case resolutionFailed(String)
    /// `connect(2)` failed: refused, no such socket, unreachable.
    case connectFailed(Errno)
    /// The server closed the stream (or reset it).
    case connectionClosed
    /// A socket call failed otherwise.
    case socket(SystemCallError)
    /// A reply longer than the value cap allows: the stream was dropped unread. A miss for that key.
    case replyTooLarge
    /// The server refused a value as too large (HTTP 413, S3 `EntityTooLarge`): that value stays local.
    case payloadTooLarge
    /// The local file a payload is streamed from or into failed (a fault of this host, not the server's).
    case localFile(SystemCallError)
    /// The calling task was cancelled while the operation was in flight.
    case cancelled
    /// The server is throttling: HTTP `status` 429, or 503 with `Retry-After` or S3's `SlowDown`;
    /// `retryAfter` is how long it asked clients to stay away (nanoseconds from the answer), when it said.
    case throttled(status: Int, retryAfter: Int64?)
    /// A failure in the backend's own terms (``RedisFailure``, ``HTTPFailure``, ``S3Failure``).
    case backend(any RemoteBackendFailure)

    /// What a failure does to the tier.
    enum Scope: Sendable, Equatable {
        /// The server is unreachable, slow, confused or refusing everything: bypass the server.
        case server
        /// The server refuses writes (`OOM`, `READONLY`, `MISCONF`, an HTTP write refused): bypass writes,
        /// keep reading.
        case writes
        /// Only this key is affected (a value of another Redis type, or too large): a miss.
        case key
    }

    /// What this failure does: see ``Scope``.
    var scope: Scope {
        switch self {
        case .replyTooLarge, .payloadTooLarge, .localFile, .cancelled: return .key
        case .backend(let failure): return failure.scope
        default: return .server
        }
    }

    /// True for a deadline miss (counted apart from other errors).
    var isTimeout: Bool { self == .timedOut }

    /// What kind of failure this is, as breakers record it and the counters count it.
    var failureKind: RemoteFailureKind {
        switch self {
        case .timedOut: return .timeout
        case .resolutionFailed, .connectFailed, .connectionClosed, .socket: return .connection
        case .throttled: return .throttled
        case .backend(let failure): return failure.failureKind
        default: return .error
        }
    }

    /// How long the server asked every client to stay away (a throttle's `Retry-After`, nanoseconds).
    var retryAfterNanoseconds: Int64? {
        if case .throttled(_, let retryAfter) = self { return retryAfter }
        return nil
    }

    /// The miss a lookup reports for a failure of scope ``Scope/key``.
    var missReason: RemoteMiss {
        switch self {
        case .localFile: return .localFailure
        case .backend(let failure): return failure.missReason
        default: return .tooLarge
        }
    }

    static func == (lhs: RemoteError, rhs: RemoteError) -> Bool {
        switch (lhs, rhs) {
        case (.timedOut, .timedOut), (.connectionClosed, .connectionClosed), (.replyTooLarge, .replyTooLarge),
            (.payloadTooLarge, .payloadTooLarge), (.cancelled, .cancelled):
            return true
        case (.resolutionFailed(let a), .resolutionFailed(let b)): return a == b
        case (.connectFailed(let a), .connectFailed(let b)): return a == b
        case (.socket(let a), .socket(let b)), (.localFile(let a), .localFile(let b)): return a == b
        case (.backend(let a), .backend(let b)): return a.isSame(as: b)
        case (.throttled(let a, let x), .throttled(let b, let y)): return a == b && x == y
        default: return false
        }
    }

    var description: String {
        switch self {
        case .timedOut: return "remote operation timed out"
        case .resolutionFailed(let text): return "could not resolve the remote host: \(text)"
        case .connectFailed(let errno): return "could not connect to the remote server: \(errno)"
        case .connectionClosed: return "the remote server closed the connection"
        case .socket(let error): return "remote socket error: \(error)"
        case .replyTooLarge: return "remote reply larger than the value size cap"
        case .payloadTooLarge: return "the remote server refused the value as too large"
        case .localFile(let error): return "local file error while streaming a remote value: \(error)"
        case .cancelled: return "remote operation cancelled"
        case .throttled(let status, let retryAfter):
            let wait = retryAfter.map { ", retry after \($0 / 1_000_000_000) s" } ?? ""
            return "the remote server is throttling requests (status \(status)\(wait))"
        case .backend(let failure): return failure.description
        }
    }
}
