// A real redis-server for the tests and the benchmarks: on a Unix socket in a fresh /tmp folder (or a
// given one), on a free loopback port, or inside a network namespace on its veth address (NetworkLab);
// `--save "" --appendonly no`; ready once it answers PING; never the system's instance on 6379. Can be
// SIGKILLed, stopped and restarted (empty).

import Foundation
import Glibc

/// One redis-server process.
public final class RedisProcess: Sendable {
    /// The redis-server executable, if installed (`YASHIMA_REDIS_SERVER` names another one; a path that
    /// does not exist plays a machine without Redis).
    public static let executablePath = serverExecutable(
        "redis-server", named: "YASHIMA_REDIS_SERVER",
        candidates: ["/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"])

    /// True when CI requires Redis (`YASHIMA_REQUIRE_REDIS=1`: a missing server fails instead of skipping).
    public static var isRequired: Bool { serverRequired(by: "YASHIMA_REQUIRE_REDIS") }

    /// Its folder (the socket, the log); removed with the server unless it was given.
    public let directory: String
    /// The Unix socket's path, or nil on TCP.
    public let socketPath: String?
    /// The TCP port on 127.0.0.1 (and ::1), or on `networkAddress`; 0 on a Unix socket alone.
    public let port: Int
    /// `--requirepass`, if any.
    public let password: String?
    /// The network namespace it runs in (nil: this process's).
    public let networkNamespace: String?
    /// The address it listens on in its namespace (nil: loopback, or a Unix socket alone).
    public let networkAddress: String?
    private let arguments: [String]
    private let ownsDirectory: Bool
    private let process = ServerProcess()

    private init(
        directory: String, socketPath: String?, port: Int, password: String?, arguments: [String], ownsDirectory: Bool,
        networkNamespace: String? = nil, networkAddress: String? = nil
    ) {
        self.directory = directory
        self.socketPath = socketPath
        self.port = port
        self.password = password
        self.arguments = arguments
        self.ownsDirectory = ownsDirectory
        self.networkNamespace = networkNamespace
        self.networkAddress = networkAddress
    }

    /// Starts a server and waits until it answers.
    ///
    /// - Parameters:
    ///   - tcp: Listen on a free loopback port (IPv4 and IPv6) instead of a Unix socket.
    ///   - port: A specific port (the cluster fixture checks the bus port too).
    ///   - password: `--requirepass`.
    ///   - folder: The folder for the socket and the log (default: a new private one under /tmp).
    ///   - socketMode: The socket's permissions (`777` lets workers running as other users connect).
    ///   - extraArguments: More `--option value` arguments (ACL users, maxmemory, cluster mode).
    public static func start(
        tcp: Bool = false, port: Int? = nil, password: String? = nil, folder: String? = nil,
        socketMode: String = "700", extraArguments: [String] = []
    ) async throws -> RedisProcess {
        guard executablePath != nil else { throw ServerError("redis-server not found") }
        let directory = try folder ?? makeServerFolder("/tmp/ysr-XXXXXX")
        // Another process may take a probed port before the server binds it (only then is it retried).
        return try await startRetryingTakenPorts(retrying: tcp && port == nil) {
            var arguments = [
                "--save", "", "--appendonly", "no", "--dir", directory, "--logfile", "\(directory)/redis.log",
            ]
            var socketPath: String?
            var chosen = 0
            if tcp {
                chosen = port ?? Loopback.freePort()
                arguments += ["--port", String(chosen), "--bind", "127.0.0.1", "-::1"]
            } else {
                socketPath = "\(directory)/redis.sock"
                arguments += ["--port", "0", "--unixsocket", "\(directory)/redis.sock", "--unixsocketperm", socketMode]
            }
            if let password { arguments += ["--requirepass", password] }
            let server = RedisProcess(
                directory: directory, socketPath: socketPath, port: chosen, password: password,
                arguments: arguments + extraArguments, ownsDirectory: folder == nil)
            try await server.restart()
            return server
        }
    }

    /// Starts a server in network namespace `namespace` (`ip netns exec`), listening on `address`:`port`
    /// there (with protected mode off: its clients come from other namespaces), and on a Unix socket in
    /// its folder, which any namespace reaches: readiness is probed there, and administrators may use it.
    ///
    /// - Parameters:
    ///   - namespace: The network namespace (a ``NetworkLab``'s `server`).
    ///   - address: The address to listen on (``NetworkLab/serverAddress``).
    ///   - port: The TCP port (the namespace's own: 6379 collides with nothing).
    ///   - password: `--requirepass`.
    ///   - extraArguments: More `--option value` arguments.
    public static func start(
        inNamespace namespace: String, address: String, port: Int = 6379, password: String? = nil,
        extraArguments: [String] = []
    ) async throws -> RedisProcess {
        guard executablePath != nil else { throw ServerError("redis-server not found") }
        guard NetworkLab.ipPath != nil else { throw ServerError("ip (iproute2) not found") }
        let directory = try makeServerFolder("/tmp/ysr-XXXXXX")
        var arguments = [
            "--save", "", "--appendonly", "no", "--dir", directory, "--logfile", "\(directory)/redis.log",
            "--port", String(port), "--bind", address, "--protected-mode", "no",
            "--unixsocket", "\(directory)/redis.sock", "--unixsocketperm", "700",
        ]
        if let password { arguments += ["--requirepass", password] }
        let server = RedisProcess(
            directory: directory, socketPath: "\(directory)/redis.sock", port: port, password: password,
            arguments: arguments + extraArguments, ownsDirectory: true, networkNamespace: namespace,
            networkAddress: address)
        try await server.restart()
        return server
    }

    /// A URL for this server (no credentials): its TCP address in its namespace, else its Unix socket,
    /// else loopback.
    public var url: String {
        if let networkAddress { return "redis://\(networkAddress):\(port)" }
        return socketPath.map { "redis+unix://\($0)" } ?? "redis://127.0.0.1:\(port)"
    }

    /// The running server's pid (0 when it does not run).
    public var processID: Int32 { process.processID }

    /// Sends `signal` to the server.
    public func signal(_ signal: Int32) {
        let pid = processID
        if pid > 0 { Glibc.kill(pid, signal) }
    }

    /// SIGKILL, then waits for the exit.
    public func kill() async { await process.kill() }

    /// SIGSTOP: the server hangs (connections stay open, nothing is answered), returning once every thread
    /// of it is stopped (`ServerProcess.pause`).
    public func pause() async { await process.pause() }

    /// SIGCONT.
    public func resume() { signal(SIGCONT) }

    /// Starts the server again (killing it first if running): empty, same socket or port.
    public func restart() async throws {
        await kill()
        guard let executable = Self.executablePath else { throw ServerError("redis-server not found") }
        let (socketPath, port) = (socketPath, port)
        var (program, words) = (executable, arguments)
        if let networkNamespace, let ip = NetworkLab.ipPath {
            (program, words) = (ip, ["netns", "exec", networkNamespace, executable] + arguments)
        }
        // On a loopback port, ready only once this redis-server itself listens there: another test's server
        // that took the port first would answer the ping (SeaweedServer's start says how that went wrong).
        // A socket file is this server's own, and a namespace's port its alone.
        let process = process
        let ownsPort = socketPath != nil || networkNamespace != nil
        try await process.launch(
            program, words, every: 10_000,
            until: {
                Self.answersPing(socketPath: socketPath, port: port)
                    && (ownsPort || Loopback.isListening(processID: process.processID, on: [port]))
            },
            log: { log })
    }

    /// SIGCONT, SIGTERM, up to 3 s, then SIGKILL.
    public func stop() async { await process.terminate() }

    /// The server's log (for failure messages).
    public var log: String { (try? String(contentsOfFile: "\(directory)/redis.log", encoding: .utf8)) ?? "" }

    /// Whether a server at the socket (or port) answers `PING` (`+PONG`, or `-NOAUTH` from one with a
    /// password): one connection, half a second at most.
    static func answersPing(socketPath: String?, port: Int) -> Bool {
        guard let fd = socketPath.map(unixSocket(connectedTo:)) ?? Loopback.connected(port) else { return false }
        defer { close(fd) }
        let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
        guard write(fd, ping, ping.count) == ping.count else { return false }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 500) == 1 else { return false }
        var reply = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &reply, reply.count)
        guard count > 0 else { return false }
        let text = String(decoding: reply[..<count], as: UTF8.self)
        return text.hasPrefix("+PONG") || text.hasPrefix("-NOAUTH")
    }

    /// A close-on-exec Unix stream socket connected to `path`, or nil.
    static func unixSocket(connectedTo path: String) -> Int32? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }

    deinit {
        process.killNow()
        if ownsDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }
}
