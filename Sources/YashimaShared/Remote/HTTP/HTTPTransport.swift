// HTTPTransport.swift: what the HTTP backend asks of a transport: one request, blocking, on a RemoteIO
// thread, within its deadlines and until cancelled; `http://` on the tier's own client (HTTPPlainTransport),
// `https://` on the system's libcurl (HTTPSecureTransport). Credentials and custom headers on every request.

/// What a request sends.
enum HTTPRequestBody {
    /// No body.
    case none
    /// These bytes (an envelope sealed in memory).
    case bytes([UInt8])
    /// An envelope streamed from a file or memory as the connection takes it.
    case stream(HTTPEnvelopeStream)

    /// The body's byte count (sent as `Content-Length`).
    var byteCount: Int {
        switch self {
        case .none: return 0
        case .bytes(let bytes): return bytes.count
        case .stream(let stream): return stream.byteCount
        }
    }
}

/// One request: the method, the path, the headers of this request only, the body.
struct HTTPRequest {
    /// `GET`, `HEAD`, `PUT` or `DELETE`.
    let method: String
    /// The path (`/<prefix>/<xx>/<identity hex>`), already safe to send as is.
    let path: String
    /// Headers of this request only (`Range`, `If-Range`).
    var headers: [(name: String, value: String)] = []
    /// What it sends.
    var body: HTTPRequestBody = .none
}

/// Sends requests to one HTTP server. Thread-safe; every call blocks its thread (a RemoteIO thread, never
/// the cooperative pool).
protocol HTTPTransport: Sendable {
    /// Sends `request` and reads its answer into `sink` (nil: the body is discarded), within `clock`'s
    /// deadlines, until `cancellation` says stop. Blocking.
    ///
    /// - Throws: ``RemoteError/timedOut``, ``RemoteError/cancelled``, ``RemoteError/localFile(_:)`` (the
    ///   body's file failed), or a transport failure (connection, protocol, TLS); any status is an
    ///   answer, not an error.
    func send(
        _ request: HTTPRequest, sink: (any HTTPResponseSink)?, clock: inout HTTPTransferClock,
        cancellation: HTTPCancellation
    ) throws(RemoteError) -> HTTPExchangeOutcome
}

/// The transport of a configuration's server: the tier's own client for `http://`, libcurl for `https://`.
func makeHTTPTransport(_ configuration: HTTPRemoteConfiguration) -> any HTTPTransport {
    var headers: [(name: String, value: String)] = [("Accept-Encoding", "identity")]
    if let credentials = configuration.endpoint.credentials {
        headers.append(("Authorization", credentials.authorization))
    }
    headers += configuration.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    if configuration.endpoint.isSecure {
        return HTTPSecureTransport(
            origin: configuration.endpoint.origin, headers: headers,
            connectTimeout: configuration.policy.connectTimeout)
    }
    return HTTPPlainTransport(
        address: configuration.endpoint.address, headers: headers, connectTimeout: configuration.policy.connectTimeout)
}
