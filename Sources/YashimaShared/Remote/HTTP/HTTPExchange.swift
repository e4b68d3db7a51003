// HTTPExchange.swift: what every HTTP request in flight obeys, on either transport: its deadlines (the first
// response byte, a stall either way, the whole transfer), its cancellation (which wakes the blocked I/O
// thread at once), and where the response goes (a sink, called in order on that thread). Docs/Internals.md.

import Synchronization

/// Receives a response, in order, on the thread doing the transfer, only while the request runs.
protocol HTTPResponseSink: AnyObject {
    /// The response head. Returns false to stop the transfer (the body is then not read).
    func begin(_ head: HTTPResponseHead) -> Bool
    /// The next body bytes. Returns false to stop the transfer.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool
}

/// The outcome of a request that got an answer.
struct HTTPExchangeOutcome: Sendable, Equatable {
    /// The response status.
    let status: Int
    /// True when the sink stopped the transfer before the body's end.
    let stopped: Bool
}

/// A request's deadlines: the first response byte by the operation deadline, no stall (no byte moving
/// either way) longer than the stall bound, the whole transfer by its own deadline.
struct HTTPTransferClock: Sendable {
    private let headDeadline: RemoteDeadline
    private let stallNanoseconds: Int64
    /// When the whole transfer must be over.
    let transferDeadline: RemoteDeadline
    private var lastProgress = Syscall.monotonicNanoseconds

    /// A clock whose first response byte is due by `deadline`. A clock made after its deadline's
    /// stall window began (a call that waited for an I/O thread) counts that wait as the first stall, so
    /// no wait runs past `deadline` before the first byte moves.
    init(deadline: RemoteDeadline, stall: Duration, transferDeadline: RemoteDeadline) {
        headDeadline = deadline
        stallNanoseconds = max(1, stall.remoteNanoseconds)
        self.transferDeadline = transferDeadline
        lastProgress = min(Syscall.monotonicNanoseconds, deadline.nanoseconds &- stallNanoseconds)
    }

    /// The deadline of the next wait: the later of the head deadline and the stall bound from the last
    /// progress, never after the transfer deadline.
    var next: RemoteDeadline {
        min(
            transferDeadline,
            RemoteDeadline(nanoseconds: max(headDeadline.nanoseconds, lastProgress &+ stallNanoseconds)))
    }

    /// Bytes moved (either way).
    mutating func progressed() { lastProgress = Syscall.monotonicNanoseconds }

    /// True once a wait would be past ``next``.
    var hasPassed: Bool { next.hasPassed }
}

/// The cancellation of one request: set from any thread (the caller's task was cancelled); the I/O thread
/// sees it between steps, and a socket it is blocked on is shut down so it wakes at once.
final class HTTPCancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, socket: RemoteSocket?)>((false, nil))

    init() {}

    /// True once cancelled.
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Cancels: the socket being used, if any, is shut down (the owner still closes it).
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.socket?.shutdown()
        }
    }

    /// Registers the socket the request now uses (nil: none, before it is closed or pooled). False when
    /// already cancelled (the caller then stops).
    @discardableResult
    func use(_ socket: RemoteSocket?) -> Bool {
        state.withLock { state in
            state.socket = socket
            return !state.cancelled
        }
    }
}

/// An HTTP failure, as ``RemoteError/backend(_:)`` carries it: below HTTP (libcurl's code), bytes that
/// are not HTTP/1.1, or a status that fails the call. Names codes and statuses only.
enum HTTPFailure: RemoteBackendFailure, Equatable {
    /// An HTTPS transfer failed below HTTP: refused, reset or closed connection, name resolution, TLS
    /// (libcurl's error code only).
    case transport(code: Int)
    /// The server sent bytes that are not a valid HTTP/1.1 response (names the part only).
    case invalidResponse(HTTPResponseError)
    /// The server answered a read with a 5xx status (or 429, too many requests).
    case serverStatus(Int)
    /// The server refused a write with a status other than 2xx and 413 (5xx, 401, 403, 405, ...).
    case writeRefused(Int)

    var scope: RemoteError.Scope {
        if case .writeRefused = self { return .writes }
        return .server
    }

    var failureKind: RemoteFailureKind {
        switch self {
        case .transport: return .connection
        case .invalidResponse: return .error
        case .serverStatus: return .serverError
        case .writeRefused: return .writesRefused
        }
    }

    var description: String {
        switch self {
        case .transport(let code): return "remote HTTPS transfer failed (libcurl error \(code))"
        case .invalidResponse(let error): return "invalid reply from the remote HTTP server: \(error)"
        case .serverStatus(let status): return "remote HTTP server error (status \(status))"
        case .writeRefused(let status): return "remote HTTP server refused a write (status \(status))"
        }
    }
}

extension RemoteError {
    /// An HTTP failure, wrapped.
    static func http(_ failure: HTTPFailure) -> RemoteError { .backend(failure) }
}
