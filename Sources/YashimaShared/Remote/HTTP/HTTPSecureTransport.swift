// HTTPSecureTransport.swift: `https://` requests on the system's libcurl (easy interface, dlopen'd at first use
// by CNetworkCurl: a process that never talks https never loads it): one easy handle per kept connection,
// HTTP/1.1, the same headers, sinks and bodies as the http:// client; deadlines and cancellation checked in
// libcurl's callbacks (at least about once a second while idle), the whole transfer bounded by libcurl.

import CNetwork
import Glibc
import Synchronization

/// Requests to one `https://` server through libcurl. Thread-safe. A dump shows header names only.
final class HTTPSecureTransport: HTTPTransport, CustomReflectable {
    /// The library loaded for https (Debian's libcurl4, any TLS flavour with this soname).
    static let libraryName = "libcurl.so.4"

    /// Why libcurl could not be loaded, or nil once it is (loaded on first use).
    static let loadFailure: String? = loadFailure(library: libraryName)

    /// Loads `library` unless libcurl is loaded already: nil, or the loader's reason.
    static func loadFailure(library: String) -> String? {
        var message = [CChar](repeating: 0, count: 512)
        guard ysh_curl_load(library, &message, message.count) != 0 else { return nil }
        return String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// What loading `library` would fail with (nil: it opens), whether or not libcurl is loaded already.
    static func openFailure(library: String) -> String? {
        var message = [CChar](repeating: 0, count: 512)
        guard ysh_curl_probe(library, &message, message.count) != 0 else { return nil }
        return String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `https://host:port`.
    private let origin: String
    private let headerLines: [String]
    private let headerNames: [String]
    private let connectTimeout: Duration
    private let idle = Mutex<[CurlHandle]>([])

    /// The most idle handles (kept connections) per transport.
    static let maximumIdle = 8

    /// A transport to `origin` sending `headers` with every request.
    init(origin: String, headers: [(name: String, value: String)], connectTimeout: Duration) {
        self.origin = origin
        headerLines = headers.map { "\($0.name): \($0.value)" }
        headerNames = headers.map(\.name)
        self.connectTimeout = connectTimeout
    }

    var customMirror: Mirror { Mirror(self, children: ["headers": headerNames.sorted()]) }

    func send(
        _ request: HTTPRequest, sink: (any HTTPResponseSink)?, clock: inout HTTPTransferClock,
        cancellation: HTTPCancellation
    ) throws(RemoteError) -> HTTPExchangeOutcome {
        guard Self.loadFailure == nil else { throw .http(.transport(code: CurlCode.failedInit)) }
        guard !cancellation.isCancelled else { throw .cancelled }
        let handle = try checkOut()
        let exchange = CurlExchange(sink: sink, body: request.body, clock: clock, cancellation: cancellation)
        var lines = headerLines + request.headers.map { "\($0.name): \($0.value)" }
        if request.method == "PUT" { lines.append("Content-Type: application/octet-stream") }
        let strings = ([request.method, origin + request.path] + lines).map { strdup($0) }
        defer { for string in strings { free(string) } }
        let headers = strings.dropFirst(2).map { UnsafePointer($0) }
        let code = headers.withUnsafeBufferPointer { headers in
            var settings = ysh_curl_request(
                method: strings[0], url: strings[1], headers: headers.baseAddress, header_count: Int32(headers.count),
                upload_size: request.method == "PUT" ? Int64(request.body.byteCount) : -1,
                connect_timeout_ms: Self.milliseconds(min(clock.next, .after(connectTimeout))),
                timeout_ms: Self.milliseconds(clock.transferDeadline),
                context: Unmanaged.passUnretained(exchange).toOpaque(),
                header: { context, bytes, count in CurlExchange.from(context).header(bytes, count) },
                body: { context, bytes, count in CurlExchange.from(context).body(bytes, count) },
                send: { context, buffer, capacity in CurlExchange.from(context).send(buffer, capacity) },
                progress: { context in CurlExchange.from(context).progress() })
            return withExtendedLifetime(exchange) { ysh_curl_perform(handle.pointer, &settings) }
        }
        checkIn(handle)
        clock = exchange.clock
        return try exchange.outcome(code: Int(code))
    }

    /// Milliseconds until `deadline`, at least 1 (libcurl reads 0 as "no limit").
    private static func milliseconds(_ deadline: RemoteDeadline) -> Int {
        max(1, Int((deadline.remainingNanoseconds + 999_999) / 1_000_000))
    }

    private func checkOut() throws(RemoteError) -> CurlHandle {
        while let handle = idle.withLock({ $0.popLast() }) {
            if handle.processID == Syscall.processID { return handle }
        }
        guard let pointer = ysh_curl_open() else { throw .http(.transport(code: CurlCode.failedInit)) }
        return CurlHandle(pointer)
    }

    private func checkIn(_ handle: CurlHandle) {
        idle.withLock { handles in
            if handles.count < Self.maximumIdle { handles.append(handle) }
        }
    }
}

/// libcurl's codes that the transport tells apart (curl/curl.h).
enum CurlCode {
    static let failedInit = 2
    static let timedOut = 28
}

/// An easy handle and the connection it keeps.
///
/// Safe to send across threads (`@unchecked Sendable`): a handle is used by one thread at a time, handed
/// over through the transport's `Mutex`; libcurl allows a handle to move between threads between
/// transfers.
final class CurlHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The process that made it: a forked child must neither use nor clean up its parent's connection
    /// (a TLS close would end the parent's session), so it leaves the handle alone.
    let processID = Syscall.processID

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit {
        if processID == Syscall.processID { ysh_curl_close(pointer) }
    }
}

/// One transfer's state, called back by libcurl on the transferring thread only.
private final class CurlExchange {
    private let sink: (any HTTPResponseSink)?
    private let body: HTTPRequestBody
    private let cancellation: HTTPCancellation
    private(set) var clock: HTTPTransferClock
    private var head: [UInt8] = []
    private var status: Int?
    private var stopped = false
    private var cancelled = false
    private var timedOut = false
    private var localFailure: SystemCallError?
    private var malformed: HTTPResponseError?
    private var sent = 0
    private var discarded = 0

    init(sink: (any HTTPResponseSink)?, body: HTTPRequestBody, clock: HTTPTransferClock, cancellation: HTTPCancellation)
    {
        self.sink = sink
        self.body = body
        self.clock = clock
        self.cancellation = cancellation
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> CurlExchange {
        Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
    }

    /// A header line (status lines included; trailers after the body are ignored).
    func header(_ bytes: UnsafePointer<CChar>?, _ count: Int) -> Int {
        clock.progressed()
        guard status == nil else { return count }
        let line = UnsafeRawBufferPointer(start: bytes, count: count)
        guard line.elementsEqual("\r\n".utf8) || line.elementsEqual("\n".utf8) else {
            guard head.count + count <= HTTPResponseHead.maximumBytes else {
                malformed = .headTooLarge
                return 0
            }
            head += line
            return count
        }
        let result = head.withUnsafeBytes { bytes in
            Result { () throws(HTTPResponseError) in try HTTPResponseHead.parse(bytes) }
        }
        guard case .success(let parsed) = result else {
            if case .failure(let error) = result { malformed = error }
            return 0
        }
        head = []
        guard parsed.status >= 200 else { return count }  // an interim answer: the real one follows
        status = parsed.status
        if let sink, !sink.begin(parsed) {
            stopped = true
            return 0
        }
        return count
    }

    /// Body bytes.
    func body(_ bytes: UnsafePointer<CChar>?, _ count: Int) -> Int {
        clock.progressed()
        let chunk = UnsafeRawBufferPointer(start: bytes, count: count)
        if let sink {
            guard sink.receive(chunk) else {
                stopped = true
                return 0
            }
        } else {
            discarded += count
            if discarded > HTTPConnection.discardLimit {
                stopped = true
                return 0
            }
        }
        return count
    }

    /// The next request body bytes.
    func send(_ buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> Int {
        let target = UnsafeMutableRawBufferPointer(start: buffer, count: capacity)
        switch body {
        case .none:
            return 0
        case .bytes(let bytes):
            let count = min(capacity, bytes.count - sent)
            bytes.withUnsafeBytes {
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[sent..<(sent + count)]))
            }
            sent += count
            clock.progressed()
            return count
        case .stream(let stream):
            switch stream.fill(target) {
            case .success(let count):
                clock.progressed()
                return count
            case .failure(let error):
                localFailure = error
                return YSH_CURL_READ_ABORT
            }
        }
    }

    /// Deadlines and cancellation: nonzero stops the transfer.
    func progress() -> Int32 {
        if cancellation.isCancelled {
            cancelled = true
            return 1
        }
        if clock.hasPassed {
            timedOut = true
            return 1
        }
        return 0
    }

    /// What the transfer amounts to, from libcurl's code and what the callbacks saw.
    func outcome(code: Int) throws(RemoteError) -> HTTPExchangeOutcome {
        if let localFailure { throw .localFile(localFailure) }
        if cancelled || cancellation.isCancelled { throw .cancelled }
        if timedOut || code == CurlCode.timedOut { throw .timedOut }
        if let malformed { throw .http(.invalidResponse(malformed)) }
        if let status, code == 0 || stopped { return HTTPExchangeOutcome(status: status, stopped: stopped) }
        throw .http(.transport(code: code == 0 ? CurlCode.failedInit : code))
    }
}
