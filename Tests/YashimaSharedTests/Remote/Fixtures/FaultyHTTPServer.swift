// A tiny HTTP/1.1 server on loopback that fails on purpose, for faults nginx cannot stage: it answers
// every request with one status (a 500, say, on a kept-alive connection; or with headers and a body: a
// throttle's Retry-After and S3's SlowDown), resets or closes the
// connection in the middle of a body, stalls in the middle of a body, holds a body halfway until the
// test releases it, never answers, closes without answering, or trickles a body a byte at a time (or
// answers a plain 200 with a body, a server that recovered). A thread accepts; each connection is served on another thread.
// Counts requests, so a test can tell that bypassed calls never reached it.

import Foundation
import Glibc
import Synchronization

final class FaultyHTTPServer: Sendable {
    enum Behaviour: Sendable {
        /// Reads each request (and its body) and answers with `status` and a short body, keeping the
        /// connection.
        case status(Int)
        /// Reads each request and answers with `status`, the header lines `headers` (`Retry-After: 2`) and
        /// `body`, keeping the connection (a throttling S3 server: 503 with an XML `SlowDown` body).
        case answer(Int, headers: [String], body: String)
        /// Answers 200 with `body`'s length, sends its first half, then resets the connection.
        case resetMidBody([UInt8])
        /// Answers 200 with `body`'s length, sends its first half, then closes the connection (a FIN).
        case closeMidBody([UInt8])
        /// Answers 200 with `body`'s length, sends its first half, opens `hold.reached`, waits for
        /// `hold.release()`, sends the rest and keeps the connection.
        case holdMidBody([UInt8], HeldBody)
        /// Answers 200 with `body`, keeping the connection.
        case body([UInt8])
        /// Answers 200 with `body`'s length, sends its first half, then nothing (holds the connection).
        case stallMidBody([UInt8])
        /// Reads requests and never answers.
        case hang
        /// Reads a request and closes the connection without a byte.
        case closeWithoutAnswer
        /// Answers 200 with `body`'s length, then sends it one byte every 50 ms.
        case trickle([UInt8])
    }

    /// The signals of a `.holdMidBody` reply: the test waits for `reached`, then calls `release()`.
    final class HeldBody: Sendable {
        /// Opened once the first half of a body was sent.
        let reached = Gate()
        private let released = Atomic<Bool>(false)

        /// Lets the server send the rest of the body.
        func release() { released.store(true, ordering: .releasing) }

        var isReleased: Bool { released.load(ordering: .acquiring) }
    }

    private let server: LoopbackServer
    private let behaviour: Mutex<Behaviour>
    private let requests = Atomic<Int>(0)

    init(_ behaviour: Behaviour) throws {
        self.behaviour = Mutex(behaviour)
        server = try LoopbackServer(backlog: 64)
        server.start { [self] client in serve(client) }
    }

    /// The port on 127.0.0.1.
    var port: Int { server.port }

    /// A URL with a path prefix on this server.
    var url: String { "http://127.0.0.1:\(port)/cache" }

    /// Changes how the next requests are answered (a server that recovers).
    func change(to behaviour: Behaviour) { self.behaviour.withLock { $0 = behaviour } }

    /// Requests read so far.
    var requestCount: Int { requests.load(ordering: .relaxed) }

    /// Reads one request (head and body) into `pending`; false when the connection ended or we stop.
    private func readRequest(_ client: Int32, _ pending: inout [UInt8]) -> Bool {
        func fill() -> Bool {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !server.isStopped {
                var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 50) > 0 else { continue }
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { return false }
                pending += buffer[0..<count]
                return true
            }
            return false
        }
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = pending.indices.dropLast(3).first { pending[$0..<($0 + 4)].elementsEqual(separator) }
            if headEnd == nil && !fill() { return false }
        }
        let head = String(decoding: pending[..<headEnd!], as: UTF8.self).lowercased()
        pending.removeFirst(headEnd! + 4)
        requests.add(1, ordering: .relaxed)
        if head.contains("transfer-encoding: chunked") {
            let end = Array("0\r\n\r\n".utf8)
            while !(pending.count >= 5 && pending.suffix(5).elementsEqual(end)) {
                if !fill() { return false }
            }
            pending.removeAll()
        } else if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
            let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
        {
            while pending.count < length { if !fill() { return false } }
            pending.removeFirst(length)
        }
        return true
    }

    private func send(_ client: Int32, _ text: String) { send(client, Array(text.utf8)) }

    private func send(_ client: Int32, _ bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        _ = bytes.withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func head(_ body: [UInt8]) -> String { "HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n" }

    private func serve(_ client: Int32) {
        var pending: [UInt8] = []
        while readRequest(client, &pending) {
            switch behaviour.withLock({ $0 }) {
            case .status(let status):
                send(client, "HTTP/1.1 \(status) Fault\r\nContent-Length: 5\r\n\r\nfault")
                continue
            case .answer(let status, let headers, let body):
                let lines = headers.map { $0 + "\r\n" }.joined()
                send(client, "HTTP/1.1 \(status) Fault\r\n\(lines)Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
                continue
            case .body(let body):
                send(client, head(body))
                send(client, body)
                continue
            case .holdMidBody(let body, let hold):
                send(client, head(body))
                send(client, body.prefix(body.count / 2))
                hold.reached.open()
                // Waits for the test's explicit signal (polled: this is a plain thread, not a task).
                while !hold.isReleased && !server.isStopped { usleep(2_000) }
                send(client, body.dropFirst(body.count / 2))
                continue
            case .closeMidBody(let body):
                send(client, head(body))
                send(client, body.prefix(body.count / 2))
                closeNow(client)
            case .resetMidBody(let body):
                send(client, head(body))
                send(client, body.prefix(body.count / 2))
                // Linger 0: close sends a reset instead of a FIN.
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                closeNow(client)
            case .stallMidBody(let body):
                send(client, head(body))
                send(client, body.prefix(body.count / 2))
                while !server.isStopped { usleep(20_000) }
            case .hang:
                while !server.isStopped { usleep(20_000) }
            case .closeWithoutAnswer:
                closeNow(client)
            case .trickle(let body):
                send(client, head(body))
                for byte in body where !server.isStopped {
                    send(client, [byte])
                    usleep(50_000)
                }
            }
            return
        }
    }

    /// Closes `client` at once (see LoopbackServer.closeNow).
    private func closeNow(_ client: Int32) { server.closeNow(client) }

    /// Stops accepting and ends every connection.
    func stop() { server.stop() }

    deinit { server.stop() }
}
