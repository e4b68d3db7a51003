// A tiny TCP server on loopback that misbehaves on purpose, for fault tests the real server cannot
// stage: it closes a connection in the middle of a reply, never answers, or answers garbage. Listening,
// accepting and stopping are LoopbackServer's; each connection is served on a thread of its own. Counts
// accepted connections, so a test can tell that a broken connection was not reused.

import Foundation
import Glibc
import Synchronization

final class MisbehavingServer: Sendable {
    enum Behaviour: Sendable {
        /// Reads a request, sends the first bytes of a bulk reply, closes.
        case closeMidReply
        /// Reads a request, announces `bytes` as a bulk reply, sends half of them, closes.
        case closeMidBulk([UInt8])
        /// Reads requests and never answers (holds the connection open until stopped).
        case neverAnswer
        /// Answers every request with bytes that are not RESP.
        case garbage
        /// Answers with a bulk string header announcing `length` bytes (and nothing more).
        case announceBulk(length: Int)
        /// Answers every request with `-MOVED 0 127.0.0.1:<its own port>`: a redirect loop.
        case movedToSelf
    }

    private let server: LoopbackServer
    private let behaviour: Behaviour

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        server = try LoopbackServer(backlog: 16)
        server.start { [self] client in serve(client) }
    }

    /// The port on 127.0.0.1.
    var port: Int { server.port }

    /// Connections accepted so far.
    var acceptedCount: Int { server.acceptedCount }

    var url: String { "redis://127.0.0.1:\(port)" }

    private func serve(_ client: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !server.isStopped {
            var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) > 0 else { continue }
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            switch behaviour {
            case .closeMidReply:
                send(client, "$100\r\nhalf a rep", 16, Int32(MSG_NOSIGNAL))
                shutdown(client, Int32(SHUT_RDWR))
                return
            case .closeMidBulk(let bytes):
                let half = Array("$\(bytes.count)\r\n".utf8) + bytes.prefix(bytes.count / 2)
                _ = half.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                shutdown(client, Int32(SHUT_RDWR))
                return
            case .neverAnswer:
                continue
            case .garbage:
                send(client, "!garbage\r\n", 10, Int32(MSG_NOSIGNAL))
            case .announceBulk(let length):
                let header = Array("$\(length)\r\n".utf8)
                _ = header.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            case .movedToSelf:
                let bytes = Array("-MOVED 0 127.0.0.1:\(port)\r\n".utf8)
                _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    /// Stops accepting and ends every connection.
    func stop() { server.stop() }

    deinit { server.stop() }
}
