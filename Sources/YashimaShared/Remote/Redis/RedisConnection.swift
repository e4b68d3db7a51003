// RedisConnection.swift: one connection to one Redis server: connect, the handshake (AUTH, SELECT, one round
// trip), pipelined commands. Any failure closes it for good (a half-read reply is never reused); error
// replies are results. Blocking with a deadline, off the cooperative pool.

import Synchronization

/// A connection to one Redis server, owned by one thread at a time (the pool hands it over).
///
/// Safe to send across threads (`@unchecked Sendable`): the pool hands a connection from one owner to
/// the next through a `Mutex`, which orders all access to the decoder and socket; `broken` is atomic
/// because the subscriber's reader thread and a thread sending `SUBSCRIBE` may both mark it.
final class RedisConnection: @unchecked Sendable {
    /// The server this connection talks to.
    let endpoint: RedisEndpoint
    private let socket: RemoteSocket
    private let decoder: RESPDecoder
    private let broken = Atomic<Bool>(false)
    /// The process that opened the connection: a forked child never uses its parent's streams.
    let processID: Int32
    /// When the connection was last returned to a pool (monotonic nanoseconds).
    var idleSince: Int64 = 0

    private init(endpoint: RedisEndpoint, socket: RemoteSocket, limits: RESPLimits, processID: Int32) {
        self.endpoint = endpoint
        self.socket = socket
        self.decoder = RESPDecoder(limits: limits)
        self.processID = processID
    }

    deinit { socket.close() }  // the last owner is done with it: only now may the descriptor go

    /// Connects and authenticates. Blocking.
    ///
    /// - Parameters:
    ///   - endpoint: The server, database and credentials.
    ///   - limits: The reply limits (from the value cap).
    ///   - connectTimeout: The most connecting may take, within `deadline`.
    ///   - deadline: When the whole open, handshake included, must be done.
    ///   - ownerProcessID: The process recorded as the owner (tests play a forked child with another pid).
    /// - Throws: Connection errors, ``RedisFailure/authenticationFailed(_:)`` when `AUTH` is refused (or
    ///   the server needs it and none was configured), ``RedisFailure/server(_:)`` when `SELECT` fails.
    static func open(
        to endpoint: RedisEndpoint, limits: RESPLimits, connectTimeout: Duration, deadline: RemoteDeadline,
        ownerProcessID: Int32 = Syscall.processID
    ) throws(RemoteError) -> RedisConnection {
        let socket = try RemoteSocket.connect(to: endpoint.address, deadline: deadline.capped(at: connectTimeout))
        let connection = RedisConnection(endpoint: endpoint, socket: socket, limits: limits, processID: ownerProcessID)
        var handshake: [RESPCommand] = []
        if let credentials = endpoint.credentials {
            if let user = credentials.user {
                handshake.append(RESPCommand("AUTH", user, credentials.password))
            } else {
                handshake.append(RESPCommand("AUTH", credentials.password))
            }
        }
        if endpoint.database != 0 { handshake.append(RESPCommand("SELECT", endpoint.database)) }
        // With nothing to send, the first command will report NOAUTH if the server needs a password.
        guard !handshake.isEmpty else { return connection }
        let replies = try connection.pipeline(handshake, deadline: deadline)
        for (command, reply) in zip(handshake, replies) {
            guard !reply.isOK else { continue }
            connection.close()
            if case .error(let error) = reply {
                if command.name == "AUTH" || error.kind == .noAuthentication {
                    throw .redis(.authenticationFailed(error))
                }
                throw .redis(.server(error))
            }
            throw .redis(.unexpectedReply(reply.shape))
        }
        return connection
    }

    /// True once the connection failed or was closed; it is then never used again.
    var isBroken: Bool { broken.load(ordering: .acquiring) }

    /// True when the connection can go back to a pool: not broken, no reply half read, nothing unasked
    /// pending from the server (an end of stream included), and opened by this process.
    var isReusable: Bool {
        !isBroken && decoder.bufferedByteCount == 0 && !socket.hasPendingInput && processID == Syscall.processID
    }

    /// Sends `commands` in one write and reads one reply per command. Blocking.
    ///
    /// - Returns: The replies in order; error replies are returned, not thrown.
    /// - Throws: Any I/O, deadline or protocol failure, after which the connection is closed.
    func pipeline(_ commands: [RESPCommand], deadline: RemoteDeadline) throws(RemoteError) -> [RESPValue] {
        try send(commands, deadline: deadline)
        var replies: [RESPValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands { replies.append(try readReply(deadline: deadline)) }
        return replies
    }

    /// Sends one command and reads its reply. Blocking.
    func execute(_ command: RESPCommand, deadline: RemoteDeadline) throws(RemoteError) -> RESPValue {
        try pipeline([command], deadline: deadline)[0]
    }

    /// Sends commands without reading replies (the subscriber). Blocking.
    func send(_ commands: [RESPCommand], deadline: RemoteDeadline) throws(RemoteError) {
        guard !isBroken else { throw .connectionClosed }
        do throws(RemoteError) {
            try socket.send(RESPEncoder.encode(commands), deadline: deadline)
        } catch {
            close()
            throw error
        }
    }

    /// Reads the next reply. Blocking. A deadline miss closes the connection (the reply may be half
    /// read).
    func readReply(deadline: RemoteDeadline) throws(RemoteError) -> RESPValue {
        do throws(RemoteError) {
            guard let reply = try nextReply(before: deadline) else { throw RemoteError.timedOut }
            return reply
        } catch {
            close()
            throw error
        }
    }

    /// Reads the next reply, or returns nil when `deadline` passes first *without* closing the
    /// connection: for the subscriber's reader only, which waits for messages with no deadline of its
    /// own and keeps a half-received message buffered across waits. Blocking.
    func nextReply(before deadline: RemoteDeadline) throws(RemoteError) -> RESPValue? {
        guard !isBroken else { throw .connectionClosed }
        do throws(RemoteError) {
            while true {
                if let reply = try decodeNext() { return reply }
                _ = try decoder.withWritableSpace { (buffer) throws(RemoteError) -> Int in
                    try socket.receive(into: buffer, deadline: deadline)
                }
            }
        } catch .timedOut {
            return nil
        } catch {
            close()
            throw error
        }
    }

    /// Marks the connection broken and shuts its stream down (idempotent; safe from any thread: a
    /// reader blocked on it wakes). The descriptor is closed when the last owner lets go (deinit), so
    /// its number is never reused under a thread still polling it.
    ///
    /// In a forked child (another pid than the opener's) the stream is not shut down: `shutdown(2)`
    /// acts on the socket the parent shares, and would cut the parent's connection. The child only
    /// drops its descriptor.
    func close() {
        broken.store(true, ordering: .releasing)
        if processID == Syscall.processID { socket.shutdown() }
    }

    private func decodeNext() throws(RemoteError) -> RESPValue? {
        do throws(RESPProtocolError) {
            return try decoder.next()
        } catch .bulkTooLong {
            throw .replyTooLarge
        } catch {
            throw .redis(.protocolViolation(error))
        }
    }
}
