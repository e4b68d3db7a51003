// The listening half of the tests' hand-made TCP servers (FaultyHTTPServer, MisbehavingServer): a socket
// bound to 127.0.0.1 on a port the kernel picks, a thread of its own that accepts and serves each
// connection on another thread, the connections it holds (so `stop` can end them), and stopping: the
// acceptor ends, every held connection is shut down and closed, then the listener.

import Foundation
import Glibc
import Synchronization

/// A loopback TCP listener that hands each accepted connection to `serve` on a thread of its own.
/// Serving threads watch ``isStopped`` (polling with a short timeout) and return when it turns true.
final class LoopbackServer: Sendable {
    /// The port on 127.0.0.1.
    let port: Int
    private let listener: Int32
    private let stopped = Atomic<Bool>(false)
    private let accepted = Atomic<Int>(0)
    private let held = Mutex<[Int32]>([])
    /// False while the accepting thread runs.
    private let acceptorDone = Mutex<Bool>(true)

    /// Binds and listens with `backlog`; accepts once ``start(_:)`` is called.
    init(backlog: Int32) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RedisFixtureError(description: "socket failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopbackAddress(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw RedisFixtureError(description: "bind failed")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Accepts on a thread of its own; each connection is served by `serve` on another thread, which
    /// may return at any time (``stop()`` closes what is held). Call once.
    func start(_ serve: @escaping @Sendable (Int32) -> Void) {
        acceptorDone.withLock { $0 = false }
        Thread { [self] in acceptLoop(serve) }.start()
    }

    /// True once ``stop()`` began: serving threads return.
    var isStopped: Bool { stopped.load(ordering: .relaxed) }

    /// Connections accepted so far.
    var acceptedCount: Int { accepted.load(ordering: .relaxed) }

    private func acceptLoop(_ serve: @escaping @Sendable (Int32) -> Void) {
        while !isStopped {
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            accepted.add(1, ordering: .relaxed)
            held.withLock { $0.append(client) }
            Thread { serve(client) }.start()
        }
        acceptorDone.withLock { $0 = true }
    }

    /// Closes `client` at once (and forgets it, so `stop` does not close a reused descriptor number).
    func closeNow(_ client: Int32) {
        held.withLock { fds in
            fds.removeAll { $0 == client }
            close(client)
        }
    }

    /// Stops listening (a connection to the port is refused from now on: a listening socket shut down
    /// stops listening) and shuts every held connection down at once (a client blocked on one wakes);
    /// a thread of its own then waits for the acceptor to end, gives the serving threads (which poll
    /// every 50 ms) time to see `stopped`, and closes the descriptors. Idempotent, and never blocks its
    /// caller (a test's task on the cooperative pool).
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        held.withLock { fds in for fd in fds { shutdown(fd, Int32(SHUT_RDWR)) } }
        Thread { [self] in
            while !acceptorDone.withLock({ $0 }) { usleep(1000) }
            usleep(100_000)  // the serving threads poll every 50 ms and see `stopped`
            // Only what is still held: a serving thread's closeNow may have closed (and the kernel reused)
            // a descriptor meanwhile.
            held.withLock { fds in
                for fd in fds { close(fd) }
                fds.removeAll()
            }
            close(listener)
        }.start()
    }
}

/// 127.0.0.1:`port` as a `sockaddr_in` (port 0: the kernel picks one at bind).
func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}
