// RedisConnectionTests.swift: the client against real redis-server processes: Unix socket, TCP over
// IPv4 and IPv6, pipelining, binary values, SELECT, AUTH with a password or an ACL user (and the typed
// failures), connect errors, deadlines, the pool (reuse, health on checkout, a restarted server), and
// the misbehaving server (a reply cut off, garbage, silence, an oversized bulk): a broken connection
// is dropped, never reused, and no call waits past its deadline.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

private let limits = RESPLimits.forValues(upTo: 1 << 20)

private func open(_ endpoint: RedisEndpoint, timeout: Duration = .seconds(5)) throws(RemoteError) -> RedisConnection {
    try RedisConnection.open(to: endpoint, limits: limits, connectTimeout: .seconds(2), deadline: .after(timeout))
}

private func openError(_ endpoint: RedisEndpoint, timeout: Duration = .seconds(5)) -> RemoteError? {
    do throws(RemoteError) {
        _ = try open(endpoint, timeout: timeout)
        return nil
    } catch {
        return error
    }
}

@Suite("Redis connection", .redisServer)
struct RedisConnectionTests {
    @Test("PING over a Unix socket, TCP IPv4 and TCP IPv6")
    func ping() async throws {
        let unix = try await RedisServer.start()
        let tcp = try await RedisServer.start(tcp: true)
        let endpoints = [
            unix.endpoint(), tcp.endpoint(),
            RedisEndpoint(address: .tcp(host: "::1", port: tcp.port), database: 0, credentials: nil),
            try RedisEndpoint.parse("redis://localhost:\(tcp.port)", environment: [:]),
        ]
        try await offPool {
            for endpoint in endpoints {
                let connection = try open(endpoint)
                #expect(
                    try connection.execute(RESPCommand("PING"), deadline: .after(.seconds(5))) == .simpleString("PONG"))
                #expect(connection.isReusable)
            }
        }
        await unix.stop()
        await tcp.stop()
    }

    @Test("a pipeline of many commands gets its replies in order; values are binary-safe")
    func pipelining() async throws {
        let server = try await RedisServer.start()
        let binary = (0..<256).map { UInt8($0) } + Array("\r\n$-1\r\n*0\r\n".utf8)
        try await offPool {
            let connection = try open(server.endpoint())
            var commands: [RESPCommand] = []
            for index in 0..<200 {
                commands.append(RESPCommand("SET", "k\(index)", binary + index.respBytes))
                commands.append(RESPCommand("GET", "k\(index)"))
            }
            commands.append(RESPCommand("GET", "missing"))
            commands.append(RESPCommand("NOSUCHCOMMAND"))
            commands.append(RESPCommand("PING"))
            let replies = try connection.pipeline(commands, deadline: .after(.seconds(10)))
            #expect(replies.count == commands.count)
            for index in 0..<200 {
                #expect(replies[2 * index].isOK)
                #expect(replies[2 * index + 1] == .bulkString(binary + index.respBytes))
            }
            #expect(replies[400] == .null)
            guard case .error(let error) = replies[401] else {
                Issue.record("expected an error reply")
                return
            }
            #expect(error.code == "ERR")
            #expect(replies[402] == .simpleString("PONG"))
            #expect(connection.isReusable)  // an error reply leaves the stream intact
        }
        await server.stop()
    }

    @Test("SELECT puts keys in the URL's database")
    func select() async throws {
        let server = try await RedisServer.start()
        try await offPool {
            let three = try open(server.endpoint(database: 3))
            #expect(try three.execute(RESPCommand("SET", "where", "db3"), deadline: .after(.seconds(5))).isOK)
            let zero = try open(server.endpoint())
            #expect(try zero.execute(RESPCommand("GET", "where"), deadline: .after(.seconds(5))) == .null)
            #expect(openError(server.endpoint(database: 999))?.description.contains("DB index") == true)
        }
        await server.stop()
    }

    @Test("AUTH with a password: right, missing, wrong; errors never show the password")
    func password() async throws {
        let server = try await RedisServer.start(password: "pa55-word")
        try await offPool {
            let good = try open(server.endpoint())
            #expect(try good.execute(RESPCommand("PING"), deadline: .after(.seconds(5))) == .simpleString("PONG"))
            // Without credentials, the first command says NOAUTH.
            let none = try open(RedisEndpoint(address: server.address, database: 0, credentials: nil))
            guard case .error(let reply) = try none.execute(RESPCommand("PING"), deadline: .after(.seconds(5))) else {
                Issue.record("expected NOAUTH")
                return
            }
            #expect(reply.kind == .noAuthentication)
            // Without credentials and a database to select, the handshake reports it.
            guard
                case .authenticationFailed(let selectReply)? = openError(
                    RedisEndpoint(address: server.address, database: 1, credentials: nil))?.redisFailure
            else {
                Issue.record("expected authenticationFailed")
                return
            }
            #expect(selectReply.kind == .noAuthentication)
            let wrong = openError(server.endpoint(password: "not-the-pa55"))
            guard case .authenticationFailed(let wrongReply)? = wrong?.redisFailure else {
                Issue.record("expected authenticationFailed, got \(String(describing: wrong))")
                return
            }
            #expect(wrongReply.kind == .wrongPassword)
            #expect(!"\(wrong!)".contains("not-the-pa55") && !"\(wrong!)".contains("pa55-word"))
        }
        await server.stop()
    }

    @Test("AUTH as an ACL user, from a URL and from the environment")
    func aclUser() async throws {
        let server = try await RedisServer.start(extraArguments: [
            "--user", "alice", "on", ">al1ce-pw", "~*", "&*", "+@all",
        ])
        guard case .unix(let path) = server.address else { return }
        let fromURL = try RedisEndpoint.parse("redis+unix://alice:al1ce-pw@\(path)", environment: [:])
        let fromEnvironment = try RedisEndpoint.parse(
            "redis+unix://\(path)",
            environment: [RedisEndpoint.userVariable: "alice", RedisEndpoint.passwordVariable: "al1ce-pw"])
        try await offPool {
            for endpoint in [fromURL, fromEnvironment] {
                let connection = try open(endpoint)
                #expect(
                    try connection.execute(RESPCommand("ACL", "WHOAMI"), deadline: .after(.seconds(5)))
                        == .bulkString(Array("alice".utf8)))
            }
            let wrong = openError(server.endpoint(user: "alice", password: "wrong"))
            guard case .authenticationFailed(let reply)? = wrong?.redisFailure else {
                Issue.record("expected authenticationFailed")
                return
            }
            #expect(reply.kind == .wrongPassword)
            guard
                case .authenticationFailed? = openError(server.endpoint(user: "mallory", password: "al1ce-pw"))?
                    .redisFailure
            else {
                Issue.record("an unknown user authenticated")
                return
            }
        }
        await server.stop()
    }

    @Test("connect failures are typed: no socket, refused port, unknown host")
    func connectFailures() async throws {
        let directory = TemporaryDirectory("redis-missing")
        let missing = RedisEndpoint(address: .unix(path: directory.path + "/none.sock"), database: 0, credentials: nil)
        let closedPort = RedisServer.freePort()
        await offPool {
            #expect(openError(missing) == .connectFailed(.noSuchFile))
            #expect(
                openError(
                    RedisEndpoint(address: .tcp(host: "127.0.0.1", port: closedPort), database: 0, credentials: nil))
                    == .connectFailed(Errno(rawValue: 111)))
            guard
                case .resolutionFailed = openError(
                    RedisEndpoint(address: .tcp(host: "no-such-host.invalid", port: 1), database: 0, credentials: nil))
            else {
                Issue.record("expected resolutionFailed")
                return
            }
            let long = RedisEndpoint(
                address: .unix(path: "/" + String(repeating: "x", count: 200)), database: 0, credentials: nil)
            #expect(openError(long) == .connectFailed(Errno(rawValue: 36)))
        }
    }

    @Test("connecting to a listener whose backlog is full fails by the connect timeout")
    func connectTimeout() async throws {
        // A loopback listener that never accepts, with its accept queue filled: the kernel drops further
        // SYNs, so connect stays in progress (the TCP form of a server that is not answering).
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 0) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound)
        let endpoint = RedisEndpoint(
            address: .tcp(host: "127.0.0.1", port: Int(UInt16(bigEndian: address.sin_port))), database: 0,
            credentials: nil)
        let outcome = await offPool { () -> (RemoteError?, Double) in
            var fillers: [RedisConnection] = []
            for _ in 0..<4 {  // fill the accept queue (their handshakes complete, nobody accepts)
                if let filler = try? RedisConnection.open(
                    to: endpoint, limits: limits, connectTimeout: .milliseconds(100),
                    deadline: .after(.milliseconds(100)))
                {
                    fillers.append(filler)
                }
            }
            let start = Syscall.monotonicNanoseconds
            var failure: RemoteError?
            do throws(RemoteError) {
                _ = try RedisConnection.open(
                    to: endpoint, limits: limits, connectTimeout: .milliseconds(200), deadline: .after(.seconds(120)))
            } catch {
                failure = error
            }
            _ = fillers
            return (failure, Double(Syscall.monotonicNanoseconds - start) / 1e9)
        }
        #expect(outcome.0 == .timedOut)
        #expect(outcome.1 < 30, "bounded by the connect timeout, not the deadline (\(outcome.1) s)")
    }

    @Test("a server that never answers fails by the deadline and the connection is dropped")
    func silence() async throws {
        let server = try MisbehavingServer(.neverAnswer)
        defer { server.stop() }
        let endpoint = try RedisEndpoint.parse(server.url, environment: [:])
        try await offPool {
            let connection = try open(endpoint)
            let started = Syscall.monotonicNanoseconds
            #expect(throws: RemoteError.timedOut) {
                _ = try connection.execute(RESPCommand("PING"), deadline: .after(.milliseconds(200)))
            }
            #expect(Syscall.monotonicNanoseconds - started < 30_000_000_000)  // bounded: no hang
            #expect(connection.isBroken && !connection.isReusable)
            #expect(throws: RemoteError.connectionClosed) {
                _ = try connection.execute(RESPCommand("PING"), deadline: .after(.seconds(1)))
            }
        }
    }

    @Test("a reply cut off, garbage, an oversized bulk: typed errors, and the pool opens a new connection")
    func brokenReplies() async throws {
        let cases: [(MisbehavingServer.Behaviour, RemoteError)] = [
            (.closeMidReply, .connectionClosed),
            (.garbage, .redis(.protocolViolation(.unknownType(UInt8(ascii: "!"))))),
            (.announceBulk(length: (1 << 20) + 10_000), .replyTooLarge),
        ]
        for (behaviour, expected) in cases {
            let server = try MisbehavingServer(behaviour)
            defer { server.stop() }
            let pool = RedisConnectionPool(
                endpoint: try RedisEndpoint.parse(server.url, environment: [:]), limits: limits,
                connectTimeout: .seconds(1))
            await offPool {
                for _ in 0..<3 {
                    #expect(throws: expected) {
                        try pool.withConnection(deadline: .after(.seconds(5))) { (connection) throws(RemoteError) in
                            _ = try connection.execute(RESPCommand("GET", "k"), deadline: .after(.seconds(5)))
                        }
                    }
                }
            }
            #expect(pool.openedCount == 3)
            #expect(pool.idleCount == 0)
            #expect(server.acceptedCount == 3)
        }
    }

    @Test("the pool reuses healthy connections, keeps at most maximumIdle, and drops a restarted server's")
    func pool() async throws {
        let server = try await RedisServer.start()
        let pool = RedisConnectionPool(
            endpoint: server.endpoint(), limits: limits, connectTimeout: .seconds(1), maximumIdle: 2)
        let ping = { @Sendable () throws -> RESPValue in
            try pool.withConnection(deadline: .after(.seconds(5))) { (connection) throws(RemoteError) in
                try connection.execute(RESPCommand("PING"), deadline: .after(.seconds(5)))
            }
        }
        let replies = try await offPool { try (0..<10).map { _ in try ping() } }
        #expect(replies == Array(repeating: .simpleString("PONG"), count: 10))
        #expect(pool.openedCount == 1)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<6 { group.addTask { _ = try? await offPool(ping) } }
        }
        #expect(pool.idleCount <= 2)
        // SIGKILL and restart: the pooled connections see the end of stream at checkout and are dropped.
        let before = pool.openedCount
        await server.kill()
        try await server.restart()
        #expect(try await offPool(ping) == .simpleString("PONG"))
        #expect(pool.openedCount == before + 1)
        await server.stop()
    }

    @Test("a forked child's inherited connection is never pooled and never shut down under the parent")
    func forkedChild() async throws {
        // As in ForkTests: no real fork (unsafe in a threaded test process); a connection recorded as
        // opened by another pid plays the child's inherited copy. The server sees whether it was cut.
        let server = try await RedisServer.start()
        func clients() async throws -> Int {
            guard case .bulkString(let list) = try await server.run(["CLIENT", "LIST"]) else { return -1 }
            return String(decoding: list, as: UTF8.self).split(separator: "\n").count
        }
        let inherited = try await offPool {
            try RedisConnection.open(
                to: server.endpoint(), limits: limits, connectTimeout: .seconds(1), deadline: .after(.seconds(5)),
                ownerProcessID: getpid() &+ 1)
        }
        #expect(!inherited.isReusable)
        #expect(try await clients() == 2)  // the inherited connection and the admin's
        inherited.close()
        #expect(inherited.isBroken)
        #expect(try await clients() == 2)  // not shut down: the parent's stream is intact
        await server.stop()
    }

    @Test("sending to a server that died gives an error, never SIGPIPE (MSG_NOSIGNAL)")
    func noSigpipe() async throws {
        let server = try await RedisServer.start()
        let connection = try await offPool { try open(server.endpoint()) }
        await server.kill()
        let large = [UInt8](repeating: 1, count: 4 << 20)
        // The test process ignores SIGPIPE, so a stray one would go unnoticed: block it on this thread
        // instead (a blocked signal stays pending even when ignored) and look for it afterwards. A raw
        // send without MSG_NOSIGNAL on a closed socket pair shows that the check sees one.
        let (failure, pendingAfterClient, pendingAfterRawSend) = await offPool {
            () -> (RemoteError?, Bool, Bool) in
            var pipeSet = sigset_t()
            sigemptyset(&pipeSet)
            sigaddset(&pipeSet, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSet, nil)
            defer { pthread_sigmask(SIG_UNBLOCK, &pipeSet, nil) }
            func pipePending() -> Bool {
                var pending = sigset_t()
                sigpending(&pending)
                return sigismember(&pending, SIGPIPE) == 1
            }
            var failure: RemoteError?
            do throws(RemoteError) {
                for _ in 0..<4 {
                    _ = try connection.execute(RESPCommand("SET", "k", large), deadline: .after(.seconds(5)))
                }
            } catch {
                failure = error
            }
            let afterClient = pipePending()
            var pair: [Int32] = [0, 0]
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair)
            close(pair[1])
            _ = send(pair[0], "x", 1, 0)
            close(pair[0])
            let afterRaw = pipePending()
            var timeout = timespec(tv_sec: 0, tv_nsec: 0)
            while sigtimedwait(&pipeSet, nil, &timeout) == SIGPIPE {}  // consume it before unblocking
            return (failure, afterClient, afterRaw)
        }
        #expect(failure == .connectionClosed)
        #expect(!pendingAfterClient)
        #expect(pendingAfterRawSend)
        await server.stop()
    }
}
