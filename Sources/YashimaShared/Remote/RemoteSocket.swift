// RemoteSocket.swift: the remote tier's only Swift file calling the C layer for sockets: TCP and Unix,
// non-blocking, close-on-exec, connect, send and receive bounded by a deadline with poll(2), MSG_NOSIGNAL.
// Blocking by design, on RemoteIO threads (why: Docs/Internals.md).

import CFileLock
import CNetwork

/// A connected stream socket. Owned by one thread at a time, except that one thread may `receive`
/// while another `send`s (the subscriber's reader and its subscribe calls): the kernel allows it, and
/// the only shared state, the descriptor, is set once and closed only by the owner.
///
/// Safe to send across threads (`@unchecked Sendable`): the connection pool hands a socket from one
/// thread to the next through a `Mutex`, which orders every access; `descriptor` changes only in
/// `close()`, which the owner calls when no other thread uses the socket.
final class RemoteSocket: @unchecked Sendable {
    private var descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit { close() }

    /// Connects to `address` before `deadline`. Blocking.
    ///
    /// - Throws: ``RemoteError/timedOut``, ``RemoteError/resolutionFailed(_:)`` or
    ///   ``RemoteError/connectFailed(_:)`` (the last address's errno when several were tried).
    static func connect(to address: RemoteAddress, deadline: RemoteDeadline) throws(RemoteError) -> RemoteSocket {
        switch address {
        case .unix(let path):
            var err: Int32 = 0
            let fd = ysh_socket_open(ysh_AF_UNIX, &err)
            guard fd >= 0 else { throw .socket(SystemCallError(operation: "socket", errno: Errno(rawValue: err))) }
            let socket = RemoteSocket(descriptor: fd)
            // A Unix connect completes at once or fails (EAGAIN: the listen backlog is full).
            guard path.withCString({ ysh_socket_connect_unix(fd, $0, &err) }) == 0 else {
                throw .connectFailed(Errno(rawValue: err))
            }
            return socket
        case .tcp(let host, let port):
            var addresses = [ysh_socket_address](repeating: ysh_socket_address(), count: 8)
            var gaiError: Int32 = 0
            var err: Int32 = 0
            let count = host.withCString { name in
                addresses.withUnsafeMutableBufferPointer {
                    ysh_socket_resolve(name, Int32(port), $0.baseAddress, Int32($0.count), &gaiError, &err)
                }
            }
            guard count > 0 else {
                let text = count < 0 ? String(cString: ysh_socket_resolve_error_text(gaiError)) : "no address"
                throw .resolutionFailed(text)
            }
            var lastError = RemoteError.timedOut
            for index in 0..<Int(count) {
                guard !deadline.hasPassed else { throw .timedOut }
                do {
                    return try connect(to: addresses[index], deadline: deadline)
                } catch {
                    lastError = error
                    if error == .timedOut { throw error }
                }
            }
            throw lastError
        }
    }

    private static func connect(
        to address: ysh_socket_address, deadline: RemoteDeadline
    ) throws(RemoteError) -> RemoteSocket {
        var err: Int32 = 0
        let fd = ysh_socket_open(address.family, &err)
        guard fd >= 0 else { throw .socket(SystemCallError(operation: "socket", errno: Errno(rawValue: err))) }
        let socket = RemoteSocket(descriptor: fd)
        var target = address
        if ysh_socket_connect(fd, &target, &err) != 0 {
            guard err == 115 /* EINPROGRESS */ || err == Errno.interrupted.rawValue else {
                throw .connectFailed(Errno(rawValue: err))
            }
            try socket.wait(forWriting: true, deadline: deadline)
            guard ysh_socket_connect_result(fd, &err) == 0 else { throw .connectFailed(Errno(rawValue: err)) }
        }
        guard ysh_socket_set_tcp_options(fd, &err) == 0 else {
            throw .socket(SystemCallError(operation: "setsockopt", errno: Errno(rawValue: err)))
        }
        return socket
    }

    /// Sends every byte of `parts`, in order, before `deadline`. Blocking.
    ///
    /// - Throws: ``RemoteError/timedOut``, ``RemoteError/connectionClosed`` (EPIPE, ECONNRESET) or
    ///   ``RemoteError/socket(_:)``.
    func send(_ parts: [[UInt8]], deadline: RemoteDeadline) throws(RemoteError) {
        for part in parts {
            let result = part.withUnsafeBytes { buffer in
                Result { () throws(RemoteError) in try send(buffer, deadline: deadline) }
            }
            try result.get()
        }
    }

    /// Sends every byte of `bytes` before `deadline`. Blocking.
    ///
    /// - Throws: ``RemoteError/timedOut``, ``RemoteError/connectionClosed`` (EPIPE, ECONNRESET) or
    ///   ``RemoteError/socket(_:)``.
    func send(_ bytes: UnsafeRawBufferPointer, deadline: RemoteDeadline) throws(RemoteError) {
        var offset = 0
        while offset < bytes.count {
            var err: Int32 = 0
            let sent = ysh_socket_send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, &err)
            if sent > 0 {
                offset += sent
            } else if sent < 0 && err == Errno.wouldBlock.rawValue {
                try wait(forWriting: true, deadline: deadline)
            } else {
                throw Self.streamError(err, call: "send")
            }
        }
    }

    /// Reads what is available (at least one byte) into `buffer` before `deadline`. Blocking.
    ///
    /// - Returns: The number of bytes read, always more than 0.
    /// - Throws: ``RemoteError/timedOut``, ``RemoteError/connectionClosed`` at the end of the stream,
    ///   or ``RemoteError/socket(_:)``.
    func receive(into buffer: UnsafeMutableRawBufferPointer, deadline: RemoteDeadline) throws(RemoteError) -> Int {
        while true {
            var err: Int32 = 0
            let count = ysh_socket_recv(descriptor, buffer.baseAddress, buffer.count, &err)
            if count > 0 { return count }
            if count == 0 { throw .connectionClosed }
            guard err == Errno.wouldBlock.rawValue else { throw Self.streamError(err, call: "recv") }
            try wait(forWriting: false, deadline: deadline)
        }
    }

    /// True when reading would not block: bytes, the end of the stream or an error are pending. An idle
    /// pooled connection must have nothing pending; if it has, the server closed it or sent something
    /// unasked, and it is not reused.
    var hasPendingInput: Bool {
        guard descriptor >= 0 else { return true }
        var err: Int32 = 0
        return ysh_socket_poll(descriptor, 0, 0, &err) != 0
    }

    /// Shuts the stream down in both directions without closing the descriptor: a thread blocked in
    /// `receive` on it wakes with ``RemoteError/connectionClosed``. Safe while another thread uses the
    /// socket (the descriptor number stays this socket's until `close`).
    func shutdown() {
        guard descriptor >= 0 else { return }
        var err: Int32 = 0
        _ = ysh_socket_shutdown(descriptor, &err)
    }

    /// Closes the descriptor (idempotent). Only the owner calls it, when no other thread uses the socket.
    func close() {
        guard descriptor >= 0 else { return }
        var err: Int32 = 0
        _ = ysh_close(descriptor, &err)
        descriptor = -1
    }

    private func wait(forWriting: Bool, deadline: RemoteDeadline) throws(RemoteError) {
        while true {
            guard let milliseconds = deadline.pollMilliseconds else { throw .timedOut }
            var err: Int32 = 0
            let ready = ysh_socket_poll(descriptor, forWriting ? 1 : 0, milliseconds, &err)
            if ready == 1 { return }
            if ready < 0 && err != Errno.interrupted.rawValue {
                throw .socket(SystemCallError(operation: "poll", errno: Errno(rawValue: err)))
            }
        }
    }

    private static func streamError(_ err: Int32, call: String) -> RemoteError {
        // EPIPE, ECONNRESET, ENOTCONN: the peer is gone.
        if err == 32 || err == 104 || err == 107 { return .connectionClosed }
        return .socket(SystemCallError(operation: call, errno: Errno(rawValue: err)))
    }
}
