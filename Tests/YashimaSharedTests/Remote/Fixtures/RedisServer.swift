// The tests' redis-server: ChildProcesses' RedisProcess (a Unix socket in a fresh /tmp folder, or a free
// loopback port; never the system's 6379), with what the tests need of the library: its address and
// endpoint, and commands run as an administrator. Suites skip without redis-server unless
// YASHIMA_REQUIRE_REDIS=1 (CI), where starting one fails the test.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

/// The trait of every suite that starts redis-server.
extension Trait where Self == ConditionTrait {
    static var redisServer: Self {
        .enabled(
            if: RedisProcess.executablePath != nil || RedisProcess.isRequired,
            "redis-server not found: skipped (install it, or set YASHIMA_REQUIRE_REDIS=1 to fail instead)")
    }

    /// The trait of every suite that starts nginx.
    static var nginxServer: Self {
        .enabled(
            if: NginxServer.executablePath != nil || NginxServer.isRequired,
            "nginx not found: skipped (install it, or set YASHIMA_REQUIRE_NGINX=1 to fail instead)")
    }
}

struct RedisFixtureError: Error, CustomStringConvertible {
    let description: String
}

/// One redis-server process.
final class RedisServer: Sendable {
    let process: RedisProcess
    /// Where it listens.
    let address: RemoteAddress

    private init(_ process: RedisProcess) {
        self.process = process
        address = process.socketPath.map { .unix(path: $0) } ?? .tcp(host: "127.0.0.1", port: process.port)
    }

    /// Starts a server and waits until it answers (see `RedisProcess.start`).
    static func start(
        tcp: Bool = false, port: Int? = nil, password: String? = nil, extraArguments: [String] = []
    ) async throws -> RedisServer {
        RedisServer(
            try await RedisProcess.start(tcp: tcp, port: port, password: password, extraArguments: extraArguments))
    }

    var directory: String { process.directory }
    var password: String? { process.password }
    var url: String { process.url }
    var port: Int { process.port }
    var processID: Int32 { process.processID }
    var log: String { process.log }
    func signal(_ signal: Int32) { process.signal(signal) }
    func kill() async { await process.kill() }
    func pause() async { await process.pause() }
    func resume() { process.resume() }
    func restart() async throws { try await process.restart() }
    func stop() async { await process.stop() }

    /// A loopback port that is free now (and, with `withBus`, port + 10000 too, for cluster mode).
    static func freePort(withBus: Bool = false) -> Int { Loopback.freePort(withBus: withBus) }

    /// An endpoint with the given credentials (default: the server's password, if any).
    func endpoint(database: Int = 0, user: String? = nil, password: String? = nil) -> RedisEndpoint {
        let secret = password ?? self.password
        return RedisEndpoint(
            address: address, database: database,
            credentials: secret.map { RedisCredentials(user: user, password: Array($0.utf8)) })
    }

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
}
