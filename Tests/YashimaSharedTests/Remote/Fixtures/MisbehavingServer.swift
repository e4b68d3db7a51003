// A tiny TCP server on loopback that misbehaves on purpose, for fault tests the real server cannot
// stage: it closes a connection in the middle of a reply, never answers, or answers garbage. A thread
// of its own accepts; each connection is served on another thread. Counts accepted connections, so a
// test can tell that a broken connection was not reused.

import Foundation
import Glibc
import Synchronization

final class MisbehavingServer: Sendable {
    enum Behaviour: Sendable {
        /// Reads a request, sends the first bytes of a bulk reply, closes.
        case closeMidReply
        /// Reads requests and never answers (holds the connection open until stopped).
        case neverAnswer
        /// Answers every request with bytes that are not RESP.
        case garbage
        /// Answers with a bulk string header announcing `length` bytes (and nothing more).
        case announceBulk(length: Int)
        /// Answers every request with `-MOVED 0 127.0.0.1:<its own port>`: a redirect loop.
        case movedToSelf
    }

    let port: Int
    private let listener: Int32
    private let behaviour: Behaviour
    private let stopped = Atomic<Bool>(false)
    private let accepted = Atomic<Int>(0)
    private let held = Mutex<[Int32]>([])
    private let acceptorDone = Mutex<Bool>(false)

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RedisFixtureError(description: "socket failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw RedisFixtureError(description: "bind failed")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    var acceptedCount: Int { accepted.load(ordering: .relaxed) }

    var url: String { "redis://127.0.0.1:\(port)" }

    private func acceptLoop() {
        while !stopped.load(ordering: .relaxed) {
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            accepted.add(1, ordering: .relaxed)
            held.withLock { $0.append(client) }
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
        acceptorDone.withLock { $0 = true }
    }

    private func serve(_ client: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !stopped.load(ordering: .relaxed) {
            var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) > 0 else { continue }
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            switch behaviour {
            case .closeMidReply:
                send(client, "$100\r\nhalf a rep", 16, Int32(MSG_NOSIGNAL))
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

    func stop() {
        stopped.store(true, ordering: .relaxed)
        while !acceptorDone.withLock({ $0 }) { usleep(1000) }
        let clients = held.withLock { $0 }
        for fd in clients { shutdown(fd, Int32(SHUT_RDWR)) }
        usleep(100_000)  // the serving threads poll every 50 ms and see `stopped`
        for fd in clients { close(fd) }
        close(listener)
    }

    deinit {
        if !stopped.load(ordering: .relaxed) { stop() }
    }
}
