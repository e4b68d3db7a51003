// RemoteError.swift: the remote tier's deadline and its one error type, with the classification of what a
// failure does (bypass the server, its writes, or miss one key). Never carries credentials, URLs, keys
// or values.

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

/// Why a remote operation failed. Thrown only inside the remote tier; callers of the tier's facades
/// (``RedisRemoteStore``, ``HTTPRemoteStore``) never see it: they get a miss or "unavailable".
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
    /// The server sent bytes that are not a valid RESP2 reply (or exceed the decoder's limits).
    case protocolViolation(RESPProtocolError)
    /// A bulk reply longer than the value cap allows: the stream was dropped unread. A miss for that key.
    case replyTooLarge
    /// The server answered with an error where the operation needed a result.
    case server(RedisErrorReply)
    /// `AUTH` (or the first command after connecting, when no credentials were given) was refused.
    case authenticationFailed(RedisErrorReply)
    /// A reply of the wrong shape for the command (names the shape only, never content).
    case unexpectedReply(String)
    /// A cluster kept redirecting (`MOVED`/`ASK`) past the bound.
    case tooManyRedirects
    /// No node of the cluster answered `CLUSTER SLOTS` with a usable map.
    case clusterMapUnavailable
    /// An HTTPS transfer failed below HTTP: refused, reset or closed connection, name resolution, TLS
    /// (libcurl's error code only).
    case transport(code: Int)
    /// The HTTP server sent bytes that are not a valid HTTP/1.1 response (names the part only).
    case invalidHTTPResponse(HTTPResponseError)
    /// The HTTP server answered a read with a 5xx status (or 429, too many requests).
    case serverStatus(Int)
    /// The HTTP server refused a write with a status other than 2xx and 413 (5xx, 401, 403, 405, ...).
    case writeRefused(Int)
    /// The HTTP server refused a value as too large (413): that value stays local.
    case payloadTooLarge
    /// The local file a payload is streamed from or into failed (a fault of this host, not the server's).
    case localFile(SystemCallError)
    /// The calling task was cancelled while the operation was in flight.
    case cancelled

    /// What a failure does to the tier.
    enum Scope: Sendable, Equatable {
        /// The server is unreachable, slow, confused or refusing everything: bypass the server.
        case server
        /// The server refuses writes (`OOM`, `READONLY`, `MISCONF`): bypass writes, keep reading.
        case writes
        /// Only this key is affected (a value of another Redis type, or too large): a miss.
        case key
    }

    /// What this failure does: see ``Scope``.
    var scope: Scope {
        switch self {
        case .replyTooLarge, .payloadTooLarge, .localFile, .cancelled: return .key
        case .writeRefused: return .writes
        case .server(let reply):
            switch reply.kind {
            case .wrongType: return .key
            case .outOfMemory, .readOnly, .misconfigured: return .writes
            default: return .server
            }
        default: return .server
        }
    }

    /// True for a deadline miss (counted apart from other errors).
    var isTimeout: Bool { self == .timedOut }

    /// What kind of failure this is, as breakers record it and the counters count it.
    var failureKind: RemoteFailureKind {
        switch self {
        case .timedOut: return .timeout
        case .resolutionFailed, .connectFailed, .connectionClosed, .socket, .transport: return .connection
        case .authenticationFailed: return .authentication
        case .server, .serverStatus, .clusterMapUnavailable, .tooManyRedirects:
            return scope == .writes ? .writesRefused : .serverError
        case .writeRefused: return .writesRefused
        default: return .error
        }
    }

    /// The miss a lookup reports for a failure of scope ``Scope/key``.
    var missReason: RemoteMiss {
        switch self {
        case .server: return .wrongType
        case .localFile: return .localFailure
        default: return .tooLarge
        }
    }

    var description: String {
        switch self {
        case .timedOut: return "remote operation timed out"
        case .resolutionFailed(let text): return "could not resolve the remote host: \(text)"
        case .connectFailed(let errno): return "could not connect to the remote server: \(errno)"
        case .connectionClosed: return "the remote server closed the connection"
        case .socket(let error): return "remote socket error: \(error)"
        case .protocolViolation(let error): return "invalid reply from the remote server: \(error)"
        case .replyTooLarge: return "remote reply larger than the value size cap"
        case .server(let reply): return "remote server error: \(reply)"
        case .authenticationFailed(let reply): return "remote authentication failed: \(reply)"
        case .unexpectedReply(let shape): return "unexpected reply from the remote server: \(shape)"
        case .tooManyRedirects: return "too many cluster redirects"
        case .clusterMapUnavailable: return "no cluster node returned a slot map"
        case .transport(let code): return "remote HTTPS transfer failed (libcurl error \(code))"
        case .invalidHTTPResponse(let error): return "invalid reply from the remote HTTP server: \(error)"
        case .serverStatus(let status): return "remote HTTP server error (status \(status))"
        case .writeRefused(let status): return "remote HTTP server refused a write (status \(status))"
        case .payloadTooLarge: return "remote HTTP server refused the value as too large (413)"
        case .localFile(let error): return "local file error while streaming a remote value: \(error)"
        case .cancelled: return "remote operation cancelled"
        }
    }
}
