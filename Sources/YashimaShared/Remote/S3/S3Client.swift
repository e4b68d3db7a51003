// S3Client.swift: S3 requests over the library's HTTP/1.1 client (HTTPPlainTransport, kept alive; libcurl
// for https://), each signed with SigV4 (the payload's SHA-256, or UNSIGNED-PAYLOAD for a streamed body);
// S3's failures as the tier classifies them (S3Failure; a throttle, 429 or 503 SlowDown, is the shared
// RemoteError.throttled with its Retry-After); a small sink for answers read whole (leases, lists).

import Foundation

/// An S3 failure, as ``RemoteError/backend(_:)`` carries it. Names statuses only (never a key or a body).
enum S3Failure: RemoteBackendFailure, Equatable {
    /// 401 or 403: the credentials or the signature were refused (a wrong secret), or access is denied.
    case denied(status: Int)
    /// The server answered a read with a 5xx status (429 and 503 `SlowDown` are ``RemoteError/throttled``).
    case serverStatus(Int)
    /// The server refused a write with a status other than 2xx, 412 and 413.
    case writeRefused(Int)
    /// An answer of the wrong shape (a lease object that is not one, a list that does not parse).
    case unexpectedAnswer(String)

    var scope: RemoteError.Scope {
        if case .writeRefused = self { return .writes }
        return .server
    }

    var failureKind: RemoteFailureKind {
        switch self {
        case .denied: return .authentication
        case .serverStatus: return .serverError
        case .writeRefused: return .writesRefused
        case .unexpectedAnswer: return .error
        }
    }

    var description: String {
        switch self {
        case .denied(let status): return "the S3 server refused the credentials or the signature (status \(status))"
        case .serverStatus(let status): return "S3 server error (status \(status))"
        case .writeRefused(let status): return "the S3 server refused a write (status \(status))"
        case .unexpectedAnswer(let what): return "unexpected answer from the S3 server: \(what)"
        }
    }
}

extension RemoteError {
    /// An S3 failure, wrapped.
    static func s3(_ failure: S3Failure) -> RemoteError { .backend(failure) }
}

/// Signs and sends requests to one bucket. Thread-safe; every call blocks a RemoteIO thread.
struct S3Client: Sendable {
    let configuration: S3Configuration
    let signer: SigV4Signer
    let transport: any HTTPTransport

    init(configuration: S3Configuration) {
        self.configuration = configuration
        signer = SigV4Signer(credentials: configuration.credentials, region: configuration.region, service: "s3")
        let headers: [(name: String, value: String)] = [("Accept-Encoding", "identity")]
        if configuration.endpoint.isSecure {
            transport = HTTPSecureTransport(
                origin: "https://\(configuration.hostHeader)", headers: headers,
                connectTimeout: configuration.policy.connectTimeout)
        } else {
            transport = HTTPPlainTransport(
                address: configuration.address, host: configuration.hostHeader, headers: headers,
                connectTimeout: configuration.policy.connectTimeout)
        }
    }

    /// A signed request for `key` (the bucket itself when nil).
    func request(
        _ method: String, key: String?, query: [(name: String, value: String)] = [],
        headers extra: [(name: String, value: String)] = [], body: HTTPRequestBody = .none
    ) -> HTTPRequest {
        let path =
            key.map(configuration.path(ofKey:)) ?? (configuration.virtualHosted ? "/" : "/\(configuration.bucket)")
        let payloadHash: String
        switch body {
        case .none: payloadHash = SigV4Signer.emptyPayloadHash
        case .bytes(let bytes): payloadHash = SHA256.hash(bytes).hex
        case .stream: payloadHash = SigV4Signer.unsignedPayload
        }
        let time = SigV4Time(realtimeNanoseconds: Syscall.realtimeNanoseconds)
        var signed: [(name: String, value: String)] = [
            ("x-amz-content-sha256", payloadHash), ("x-amz-date", time.stamp),
        ]
        if let token = configuration.credentials.sessionToken { signed.append(("x-amz-security-token", token)) }
        let signature = signer.sign(
            method: method, path: path, query: query, headers: signed + [("Host", configuration.hostHeader)],
            payloadHash: payloadHash, time: time)
        let encodedQuery = query.map {
            SigV4Signer.encode($0.name, keepingSlash: false) + "=" + SigV4Signer.encode($0.value, keepingSlash: false)
        }.joined(separator: "&")
        let target = SigV4Signer.encode(path, keepingSlash: true) + (query.isEmpty ? "" : "?" + encodedQuery)
        return HTTPRequest(
            method: method, path: target, headers: signed + [("Authorization", signature.authorization)] + extra,
            body: body)
    }

    /// Sends `request` and reads a small answer whole (at most `limit` body bytes kept). Blocking.
    func exchange(
        _ request: HTTPRequest, deadline: RemoteDeadline, cancellation: HTTPCancellation, limit: Int = 64 << 10
    ) throws(RemoteError) -> S3Answer {
        let sink = S3AnswerSink(limit: limit)
        var clock = HTTPTransferClock(
            deadline: deadline, stall: configuration.policy.operationTimeout,
            transferDeadline: .after(configuration.transferTimeout))
        let outcome = try transport.send(request, sink: sink, clock: &clock, cancellation: cancellation)
        if outcome.status == 401 || outcome.status == 403 { throw .s3(.denied(status: outcome.status)) }
        // Throttled (429, 503 SlowDown): whatever the request, every process backs off for its Retry-After.
        if let throttle = RemoteError.throttle(status: outcome.status, retryAfter: sink.retryAfter, body: sink.body) {
            throw throttle
        }
        return S3Answer(status: outcome.status, entityTag: sink.entityTag, body: sink.body)
    }
}

/// A small answer read whole.
struct S3Answer: Sendable {
    let status: Int
    /// The `ETag` (quotes included), when given.
    let entityTag: String?
    let body: [UInt8]
}

/// Keeps the head's status and ETag and the first `limit` body bytes.
final class S3AnswerSink: HTTPResponseSink {
    private let limit: Int
    private(set) var entityTag: String?
    private(set) var retryAfter: HTTPRetryAfter?
    private(set) var body: [UInt8] = []

    init(limit: Int) { self.limit = limit }

    func begin(_ head: HTTPResponseHead) -> Bool {
        entityTag = head.entityTag
        retryAfter = head.retryAfter
        return true
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.count + bytes.count <= limit else { return false }
        body += bytes
        return true
    }
}
