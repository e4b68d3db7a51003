// HTTPValueSink.swift: the response side of an HTTP (or S3) lookup across its windows (`Range`, `If-Range`):
// bytes to one RemoteEnvelopeReader, and what each answer amounts to (a hit, a miss, the next window, a
// failure, a throttle with its Retry-After).

import Foundation

/// The response of a lookup's `GET`s. Called by the transport on the transfer's thread, and read by the
/// lookup on that thread between windows.
final class HTTPValueSink: HTTPResponseSink {
    private var reader: RemoteEnvelopeReader
    private let maximumBytes: Int
    private var status = 0
    private var failure: RemoteEnvelopeReader.Failure?
    private var discarded = 0
    /// Bytes of the value received so far (over every window).
    private var received = 0
    /// Bytes received when the current window began.
    private var windowStart = 0
    /// The value's byte count, once a response said.
    private var total: Int?
    /// The value's ETag from the first window, sent as `If-Range` with the next ones.
    private var entityTag: String?
    /// A failed answer's `Retry-After` and first body bytes (a throttle says so there).
    private var retryAfter: HTTPRetryAfter?
    private var errorBody: [UInt8] = []

    /// The most body bytes of a non-2xx answer read (to keep the connection); more stops the transfer.
    static let discardLimit = 64 << 10

    init(reader: RemoteEnvelopeReader, maximumBytes: Int) {
        self.reader = reader
        self.maximumBytes = maximumBytes
    }

    private var isSuccess: Bool { (200..<300).contains(status) }

    /// The headers of the next window's request: `Range` from where the last ended, `If-Range`.
    func nextWindow(size: Int) -> [(name: String, value: String)] {
        windowStart = received
        var headers = [(name: "Range", value: "bytes=\(received)-\(received + size - 1)")]
        if received > 0, let entityTag { headers.append((name: "If-Range", value: entityTag)) }
        return headers
    }

    func begin(_ head: HTTPResponseHead) -> Bool {
        status = head.status
        discarded = 0
        retryAfter = head.retryAfter
        errorBody = []
        guard isSuccess else { return true }
        if status == 206 {
            // The window must start where the last ended and belong to the same value.
            guard let range = head.range, range.first == received, let size = range.total,
                total == nil || total == size
            else {
                failure = .rejected(.truncated)
                return false
            }
            total = size
            if received == 0 { entityTag = head.entityTag }
        } else {
            // The whole value (the server ignores ranges, or the value changed since the first window).
            guard received == 0 else {
                failure = .rejected(.truncated)
                return false
            }
            total = head.expectedLength.map { Int(clamping: $0) }
        }
        if let total, total > maximumBytes {
            failure = .tooLarge
            return false
        }
        return true
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard isSuccess else {
            discarded += bytes.count
            if errorBody.count < 1024 { errorBody += bytes.prefix(1024 - errorBody.count) }
            return discarded <= Self.discardLimit
        }
        if case .failure(let failure) = reader.consume(bytes) {
            self.failure = failure
            return false
        }
        received += bytes.count
        return true
    }

    /// What the answer amounts to once a window's exchange has ended: nil to ask for the next window.
    func lookup(after outcome: HTTPExchangeOutcome) throws(RemoteError) -> RemoteLookup? {
        switch outcome.status {
        case 200..<300:
            if failure == nil, status == 206, let total, received < total {
                guard received > windowStart, !outcome.stopped else { return .miss(.rejected(.truncated)) }
                return nil
            }
            let opened: Result<RemoteEnvelopeReader.Opened, RemoteEnvelopeReader.Failure> =
                failure.map { .failure($0) } ?? reader.finish()
            switch opened {
            case .success(.memory(let value)):
                return HTTPRemoteStore.isExpired(value.expiresAt) ? .miss(.expired) : .hit(value)
            case .success(.file(let value)):
                return HTTPRemoteStore.isExpired(value.expiresAt) ? .miss(.expired) : .hitInFile(value)
            case .failure(.rejected(let rejection)): return .miss(.rejected(rejection))
            case .failure(.tooLarge): throw .replyTooLarge
            case .failure(.staging(let error)): throw .localFile(error)
            }
        case 404, 410: return .miss(.absent)
        case 429, 500..<600:
            if let throttle = RemoteError.throttle(status: outcome.status, retryAfter: retryAfter, body: errorBody) {
                throw throttle
            }
            throw .http(.serverStatus(outcome.status))
        default: return .miss(.refused(status: outcome.status))
        }
    }
}
