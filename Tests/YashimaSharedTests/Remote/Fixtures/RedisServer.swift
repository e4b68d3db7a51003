// A real redis-server per test: started on a Unix socket in a fresh /tmp folder (or a free TCP port on
// loopback), `--save "" --appendonly no`, ready once it answers PING, stopped with SIGTERM then
// SIGKILL (the process, the folder and the port retry are ServerProcess.swift's). Tests can SIGKILL, SIGSTOP/SIGCONT and restart it (empty). Never the system's instance on
// 6379: every server gets its own socket or a port found free. When redis-server is missing the
// suites skip, unless YASHIMA_REQUIRE_REDIS=1 (CI), where starting one fails the test.

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

enum RedisAvailability {
    /// The redis-server executable, if installed (`YASHIMA_REDIS_SERVER` names another one; a path that
    /// does not exist plays a machine without Redis).
    static let serverPath = serverExecutable(
        "redis-server", named: "YASHIMA_REDIS_SERVER",
        candidates: ["/usr/bin/redis-server", "/usr/local/bin/redis-server"])

    /// True when CI requires Redis (a missing server then fails instead of skipping).
    static var required: Bool { serverRequired(by: "YASHIMA_REQUIRE_REDIS") }

    /// Whether Redis suites run: always when required (and then fail without a server).
    static var enabled: Bool { serverPath != nil || required }
}

/// The trait of every suite that starts redis-server.
extension Trait where Self == ConditionTrait {
    static var redisServer: Self {
        .enabled(
            if: RedisAvailability.enabled,
            "redis-server not found: skipped (install it, or set YASHIMA_REQUIRE_REDIS=1 to fail instead)")
    }
}

struct RedisFixtureError: Error, CustomStringConvertible {
    let description: String
}

/// One redis-server process.
final class RedisServer: Sendable {
    /// A private folder under /tmp (short, so the socket path fits sun_path).
    let directory: String
    /// Where it listens.
    let address: RemoteAddress
    /// `--requirepass`, if any.
    let password: String?
    private let arguments: [String]
    private let process = ServerProcess()

    private init(directory: String, address: RemoteAddress, password: String?, arguments: [String]) {
        self.directory = directory
        self.address = address
        self.password = password
        self.arguments = arguments
    }

    /// Starts a server and waits until it answers.
    ///
    /// - Parameters:
    ///   - tcp: Listen on a free loopback port (IPv4 and IPv6) instead of a Unix socket.
    ///   - port: A specific port (the cluster fixture checks the bus port too).
    ///   - password: `--requirepass`.
    ///   - extraArguments: More `--option value` arguments (ACL users, maxmemory, cluster mode).
    static func start(
        tcp: Bool = false, port: Int? = nil, password: String? = nil, extraArguments: [String] = []
    ) async throws -> RedisServer {
        guard RedisAvailability.serverPath != nil else {
            throw RedisFixtureError(description: "redis-server not found and YASHIMA_REQUIRE_REDIS=1")
        }
        let directory = try makeServerFolder("/tmp/ysr-XXXXXX")
        // Another process may take a probed port before the server binds it (only then is it retried).
        return try await startRetryingTakenPorts(retrying: tcp && port == nil) {
            let address: RemoteAddress
            var arguments = [
                "--save", "", "--appendonly", "no", "--dir", directory, "--logfile", "\(directory)/redis.log",
            ]
            if tcp {
                let chosen = port ?? RedisServer.freePort()
                address = .tcp(host: "127.0.0.1", port: chosen)
                arguments += ["--port", String(chosen), "--bind", "127.0.0.1", "-::1"]
            } else {
                address = .unix(path: "\(directory)/redis.sock")
                arguments += ["--port", "0", "--unixsocket", "\(directory)/redis.sock", "--unixsocketperm", "700"]
            }
            if let password { arguments += ["--requirepass", password] }
            let server = RedisServer(
                directory: directory, address: address, password: password, arguments: arguments + extraArguments)
            try await server.restart()
            return server
        }
    }

    /// A URL for this server (no credentials).
    var url: String {
        switch address {
        case .unix(let path): return "redis+unix://\(path)"
        case .tcp(let host, let port): return "redis://\(host):\(port)"
        }
    }

    /// An endpoint with the given credentials (default: the server's password, if any).
    func endpoint(database: Int = 0, user: String? = nil, password: String? = nil) -> RedisEndpoint {
        let secret = password ?? self.password
        return RedisEndpoint(
            address: address, database: database,
            credentials: secret.map { RedisCredentials(user: user, password: Array($0.utf8)) })
    }

    /// The TCP port (0 for a Unix socket).
    var port: Int {
        if case .tcp(_, let port) = address { return port }
        return 0
    }

    var processID: Int32 { process.processID }

    /// Sends `signal` to the server.
    func signal(_ signal: Int32) {
        let pid = processID
        if pid > 0 { Glibc.kill(pid, signal) }
    }

    /// SIGKILL, then waits for the exit.
    func kill() async { await process.kill() }

    /// SIGSTOP: the server hangs (connections stay open, nothing is answered).
    func pause() { signal(SIGSTOP) }

    /// SIGCONT.
    func resume() { signal(SIGCONT) }

    /// Starts the server again (killing it first if running): empty, same socket or port.
    func restart() async throws {
        await kill()
        guard let executable = RedisAvailability.serverPath else {
            throw RedisFixtureError(description: "redis-server not found")
        }
        let exit = try await process.launch(executable, arguments)
        try await waitUntilReady(exit)
    }

    /// SIGCONT, SIGTERM, up to 3 s, then SIGKILL.
    func stop() async { await process.terminate() }

    /// Runs one command as an administrator (the server's password) on a fresh connection.
    @discardableResult
    func run(_ arguments: [String]) async throws -> RESPValue {
        try await run(RESPCommand(arguments: arguments.map { Array($0.utf8) }))
    }

    /// Runs one command as an administrator on a fresh connection.
    @discardableResult
    func run(_ command: RESPCommand) async throws -> RESPValue {
        let endpoint = endpoint()
        return try await offPool {
            let connection = try RedisConnection.open(
                to: endpoint, limits: .forValues(upTo: 64 << 20), connectTimeout: .seconds(2),
                deadline: .after(.seconds(5)))
            defer { connection.close() }
            return try connection.execute(command, deadline: .after(.seconds(5)))
        }
    }

    /// The server's log (for failure messages).
    var log: String { (try? String(contentsOfFile: "\(directory)/redis.log", encoding: .utf8)) ?? "" }

    private func waitUntilReady(_ exit: ProcessExit) async throws {
        let endpoint = endpoint()
        let ready = await process.waitUntilReady(exit, every: 10_000) {
            guard
                let connection = try? RedisConnection.open(
                    to: endpoint, limits: .forValues(upTo: 1024), connectTimeout: .milliseconds(200),
                    deadline: .after(.milliseconds(500))),
                let reply = try? connection.execute(RESPCommand("PING"), deadline: .after(.milliseconds(500)))
            else { return false }
            connection.close()
            return reply == .simpleString("PONG")
        }
        guard ready else {
            throw RedisFixtureError(
                description: "redis-server not ready (\(exit.statusDescription)): \(log.suffix(500))")
        }
    }

    /// A loopback port that is free now (and, with `withBus`, port + 10000 too, for cluster mode).
    static func freePort(withBus: Bool = false) -> Int {
        for _ in 0..<100 {
            let port = Int.random(in: 20000...29999)
            if isFree(port) && (!withBus || isFree(port + 10000)) { return port }
        }
        return Int.random(in: 20000...29999)
    }

    private static func isFree(_ port: Int) -> Bool { loopbackSocket(port: port) { bind($0, $1, $2) } }

    deinit {
        process.killNow()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
