// HTTPConnection.swift: one kept-alive HTTP/1.1 connection of the http:// client: a request written (head and
// body, the body stopped as soon as the server answers early), its response read through the decoder into
// the sink, every wait bounded by the request's clock. Any failure leaves it broken: never reused.

/// A connection to one HTTP server, owned by one thread at a time (the pool hands it over).
///
/// Safe to send across threads (`@unchecked Sendable`): the pool hands a connection from one owner to the
/// next through a `Mutex`, which orders every access to its decoder and fields; only `socket.shutdown()`
/// is called from another thread (a cancellation), which the socket allows.
final class HTTPConnection: @unchecked Sendable {
    /// The socket (a cancellation shuts it down from another thread).
    let socket: RemoteSocket
    /// Receives into 256 KiB: a large body goes on in writes of up to that (writing a new file in 64 KiB
    /// pieces cost a third more than in 256 KiB ones on ext4 here).
    private let decoder = HTTPResponseDecoder(capacity: 256 << 10)
    /// The process that opened it: a forked child never uses its parent's connections.
    let processID: Int32
    /// When it was last returned to a pool (monotonic nanoseconds).
    var idleSince: Int64 = 0
    /// Responses read whole on it (0: new).
    private(set) var completedExchanges = 0
    /// True once any byte of the current response arrived.
    private(set) var responseStarted = false
    private var broken = false
    /// The most body bytes of an answer without a sink read to keep the connection; more closes it.
    static let discardLimit = 64 << 10
    /// The most request body bytes sent per `send` (between checks for an early answer).
    static let sendChunk = 256 << 10

    private init(socket: RemoteSocket) {
        self.socket = socket
        processID = Syscall.processID
    }

    deinit { socket.close() }

    /// Connects to `address`. Blocking.
    static func open(to address: RemoteAddress, deadline: RemoteDeadline) throws(RemoteError) -> HTTPConnection {
        HTTPConnection(socket: try RemoteSocket.connect(to: address, deadline: deadline))
    }

    /// True when it may go back to a pool: not broken, the last response read whole with nothing after
    /// it, the server keeping it.
    var isKeepable: Bool {
        !broken && decoder.isComplete && decoder.keepsConnection && decoder.bufferedByteCount == 0
    }

    /// True when it can serve another request: keepable, nothing pending from the server (no end of
    /// stream: it did not close it meanwhile), opened by this process.
    var isReusable: Bool { isKeepable && !socket.hasPendingInput && processID == Syscall.processID }

    /// Closes the socket (the owner only).
    func close() {
        broken = true
        socket.close()
    }

    /// Writes `head` and `body`, then reads the answer into `sink`. Blocking; any throw leaves the
    /// connection broken.
    ///
    /// - Parameters:
    ///   - head: The request head, its empty line included.
    ///   - isHead: The request is a `HEAD` (its answer has no body).
    func exchange(
        head: [UInt8], body: HTTPRequestBody, isHead: Bool, sink: (any HTTPResponseSink)?,
        clock: inout HTTPTransferClock
    ) throws(RemoteError) -> HTTPExchangeOutcome {
        responseStarted = false
        decoder.expectResponse(toHead: isHead)
        do throws(RemoteError) {
            try write(head: head, body: body, clock: &clock)
            let outcome = try read(sink: sink, clock: &clock)
            if decoder.isComplete { completedExchanges += 1 } else { broken = true }
            return outcome
        } catch {
            broken = true
            throw error
        }
    }

    private func write(head: [UInt8], body: HTTPRequestBody, clock: inout HTTPTransferClock) throws(RemoteError) {
        switch body {
        case .none:
            try send(head, clock: &clock)
        case .bytes(let bytes):
            try send(head + bytes, clock: &clock)
        case .stream(let stream):
            try send(head, clock: &clock)
            let buffer = UnsafeMutableRawBufferPointer.allocate(
                byteCount: min(Self.sendChunk, max(1, stream.byteCount)), alignment: 16)
            defer { buffer.deallocate() }
            while !stream.isAtEnd {
                // The server answered already (a 413 before the body, an error): stop sending, read it.
                if socket.hasPendingInput {
                    broken = true  // the body is incomplete: the connection cannot carry another request
                    return
                }
                switch stream.fill(buffer) {
                case .failure(let error): throw .localFile(error)
                case .success(let count):
                    guard count > 0 else { return }
                    try socket.send(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), deadline: clock.next)
                    clock.progressed()
                }
            }
        }
    }

    /// Sends `bytes` whole, a chunk at a time, each within the clock's next deadline.
    private func send(_ bytes: [UInt8], clock: inout HTTPTransferClock) throws(RemoteError) {
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + Self.sendChunk)
            let sent = bytes.withUnsafeBytes { [next = clock.next] buffer in
                Result { () throws(RemoteError) in
                    try socket.send(UnsafeRawBufferPointer(rebasing: buffer[offset..<end]), deadline: next)
                }
            }
            try sent.get()
            clock.progressed()
            offset = end
        }
    }

    private func read(sink: (any HTTPResponseSink)?, clock: inout HTTPTransferClock) throws(RemoteError)
        -> HTTPExchangeOutcome
    {
        var status = 0
        var discarded = 0
        while true {
            let event: HTTPResponseDecoder.Event?
            do throws(HTTPResponseError) {
                event = try decoder.next()
            } catch {
                throw .http(.invalidResponse(error))
            }
            switch event {
            case .head(let head)?:
                status = head.status
                if let sink, !sink.begin(head) { return stop(status) }
            case .body(let bytes)?:
                if let sink {
                    if !sink.receive(bytes) { return stop(status) }
                } else {
                    discarded += bytes.count
                    if discarded > Self.discardLimit { return stop(status) }
                }
            case .end?:
                return HTTPExchangeOutcome(status: status, stopped: false)
            case nil:
                let space = decoder.writableSpace()
                do throws(RemoteError) {
                    let count = try socket.receive(into: space, deadline: clock.next)
                    decoder.didReceive(count)
                    responseStarted = true
                    clock.progressed()
                } catch {
                    guard error == .connectionClosed else { throw error }
                    if decoder.readsUntilClose {
                        decoder.didReachEndOfStream()
                    } else {
                        // Before any byte: maybe a kept connection the server had closed (the caller may retry).
                        throw responseStarted ? .http(.invalidResponse(.truncated)) : .connectionClosed
                    }
                }
            }
        }
    }

    /// The sink (or the discard limit) stopped the body: the rest is not read, the connection not reused.
    private func stop(_ status: Int) -> HTTPExchangeOutcome {
        broken = true
        return HTTPExchangeOutcome(status: status, stopped: true)
    }
}
