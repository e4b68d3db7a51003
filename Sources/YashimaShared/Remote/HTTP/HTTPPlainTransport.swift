// HTTPPlainTransport.swift: `http://` requests on the tier's own HTTP/1.1 client: the request head built from
// precomputed header bytes, connections kept alive in a process-wide pool per server (the most recently used
// healthy one), one retry on a new connection when a kept one turns out closed before any answer.

import Synchronization

/// Requests to one `http://` server over kept-alive connections. Thread-safe. A dump shows header names
/// only (the `Authorization` header and custom headers may hold secrets).
final class HTTPPlainTransport: HTTPTransport, CustomReflectable {
    private let pool: HTTPConnectionPool
    /// `Host` and every header sent with each request, CRLF-terminated lines.
    private let fixedHeaders: [UInt8]
    private let headerNames: [String]
    private let connectTimeout: Duration

    /// A transport to `address` sending `headers` with every request, and `host` as `Host` (the address
    /// when nil).
    init(
        address: RemoteAddress, host: String? = nil, headers: [(name: String, value: String)], connectTimeout: Duration
    ) {
        pool = HTTPConnectionPool.shared(for: address)
        var lines = "Host: \(host ?? "\(address)")\r\n"
        for (name, value) in headers { lines += "\(name): \(value)\r\n" }
        fixedHeaders = Array(lines.utf8)
        headerNames = headers.map(\.name)
        self.connectTimeout = connectTimeout
    }

    var customMirror: Mirror { Mirror(self, children: ["headers": headerNames.sorted()]) }

    func send(
        _ request: HTTPRequest, sink: (any HTTPResponseSink)?, clock: inout HTTPTransferClock,
        cancellation: HTTPCancellation
    ) throws(RemoteError) -> HTTPExchangeOutcome {
        let head = self.head(of: request)
        var retried = false
        while true {
            guard !cancellation.isCancelled else { throw .cancelled }
            let connection = try pool.checkOut(deadline: clock.next.capped(at: connectTimeout))
            guard cancellation.use(connection.socket) else {
                connection.close()
                throw .cancelled
            }
            do throws(RemoteError) {
                let outcome = try connection.exchange(
                    head: head, body: request.body, isHead: request.method == "HEAD", sink: sink, clock: &clock)
                cancellation.use(nil)
                pool.checkIn(connection)
                return outcome
            } catch {
                cancellation.use(nil)
                connection.close()
                if cancellation.isCancelled { throw .cancelled }
                // A kept connection the server closed meanwhile (idle timeout, request limit): once more on a
                // new one. Every method the backend sends is idempotent.
                guard error == .connectionClosed, connection.completedExchanges > 0, !connection.responseStarted,
                    !retried
                else { throw error }
                retried = true
                if case .stream(let stream) = request.body { stream.rewind() }
            }
        }
    }

    /// The request line, the fixed headers, this request's headers and the body's length.
    private func head(of request: HTTPRequest) -> [UInt8] {
        var head = Array("\(request.method) \(request.path) HTTP/1.1\r\n".utf8)
        head += fixedHeaders
        var text = ""
        for (name, value) in request.headers { text += "\(name): \(value)\r\n" }
        if request.method == "PUT" {
            text += "Content-Type: application/octet-stream\r\nContent-Length: \(request.body.byteCount)\r\n"
        }
        head += Array((text + "\r\n").utf8)
        return head
    }
}

/// Idle connections to one server, shared by the process (see ``shared(for:)``). Blocking.
final class HTTPConnectionPool: Sendable {
    /// The server.
    let address: RemoteAddress
    private let idle = Mutex<[HTTPConnection]>([])
    private let opened = Atomic<Int>(0)

    /// The most idle connections kept per server.
    static let maximumIdle = 8
    /// Idle connections older than this are closed at checkout instead of reused (servers close idle
    /// connections after a while: nginx after 75 s).
    static let maximumIdleNanoseconds: Int64 = 30 * 1_000_000_000

    private init(address: RemoteAddress) { self.address = address }

    private static let registry = Mutex<[RemoteAddress: HTTPConnectionPool]>([:])

    /// The process's pool for `address` (created on first use).
    static func shared(for address: RemoteAddress) -> HTTPConnectionPool {
        registry.withLock { pools in
            if let pool = pools[address] { return pool }
            let pool = HTTPConnectionPool(address: address)
            pools[address] = pool
            return pool
        }
    }

    /// How many connections this pool has opened (tests: kept connections are reused).
    var openedCount: Int { opened.load(ordering: .relaxed) }

    /// The most recently used healthy idle connection, or a new one connected before `deadline`.
    func checkOut(deadline: RemoteDeadline) throws(RemoteError) -> HTTPConnection {
        let now = Syscall.monotonicNanoseconds
        while let candidate = idle.withLock({ $0.popLast() }) {
            if now - candidate.idleSince < Self.maximumIdleNanoseconds, candidate.isReusable { return candidate }
            candidate.close()
        }
        guard !deadline.hasPassed else { throw .timedOut }
        let connection = try HTTPConnection.open(to: address, deadline: deadline)
        opened.add(1, ordering: .relaxed)
        return connection
    }

    /// Keeps `connection` for the next request if it is reusable and there is room; else closes it.
    func checkIn(_ connection: HTTPConnection) {
        guard connection.isKeepable else {
            connection.close()
            return
        }
        connection.idleSince = Syscall.monotonicNanoseconds
        let kept = idle.withLock { connections -> Bool in
            guard connections.count < Self.maximumIdle else { return false }
            connections.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    /// Closes every idle connection (tests).
    func drain() {
        let dropped = idle.withLock { connections in
            defer { connections.removeAll() }
            return connections
        }
        for connection in dropped { connection.close() }
    }
}
