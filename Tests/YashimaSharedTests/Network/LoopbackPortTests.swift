// The ports the tests' servers are started on: probed free, and below the kernel's ephemeral range, where
// no outgoing connection's local port can take one between the probe and the server's bind (a Redis
// Cluster node's bus port, port + 10000, once was: CI failed with "Address already in use"). And whether a
// port is a given process's own: a SeaweedFS server is ready only once it holds all its ports itself (another
// test's server on one of them answered for it, and that test checked the other server's values).

import ChildProcesses
import Foundation
import Glibc
import Testing

@Suite("Loopback ports for the tests' servers")
struct LoopbackPortTests {
    /// The first port of `net.ipv4.ip_local_port_range`.
    static func ephemeralStart() throws -> Int {
        let text = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        return try #require(text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) })
    }

    @Test("a server's port, and a cluster node's bus port (+10000), lie below the ephemeral range")
    func portsBelowTheEphemeralRange() throws {
        let start = try Self.ephemeralStart()
        try #require(start > 20000, "this machine's ephemeral range starts at \(start)")
        for _ in 0..<200 {
            let port = Loopback.freePort()
            #expect(port >= 1024 && port < start, "port \(port)")
            let node = Loopback.freePort(withBus: true)
            #expect(node >= 1024 && node + 10000 < start, "cluster port \(node), bus \(node + 10000)")
        }
    }

    @Test("a start that fails (a port taken before the bind) is tried again, up to five times")
    func takenPortsAreRetried() async throws {
        let attempts = Counter()
        let started = try await startRetryingTakenPorts { () async throws -> Int in
            guard attempts.increment() >= 3 else { throw ServerError("bind: Address already in use") }
            return 7
        }
        #expect(started == 7 && attempts.value == 3)
        let failures = Counter()
        await #expect(throws: ServerError.self) {
            try await startRetryingTakenPorts { () async throws -> Int in
                failures.increment()
                throw ServerError("bind: Address already in use")
            }
        }
        #expect(failures.value == 5)
    }

    /// A close-on-exec TCP socket listening on 127.0.0.1 at a free port, or nil.
    static func listen() -> (descriptor: Int32, port: Int)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            return nil
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("a port is a process's own only while that process itself listens on it")
    func listeningIsPerProcess() async throws {
        // Listeners opened first push the ones checked past /proc/net/tcp's first page (27 lines).
        var before: [Int32] = []
        for _ in 0..<100 { before.append(try #require(Self.listen()).descriptor) }
        defer { for fd in before { close(fd) } }
        let (fd, port) = try #require(Self.listen())
        let (other, otherPort) = try #require(Self.listen())
        let me = getpid()
        #expect(Loopback.isListening(processID: me, on: [port]))
        #expect(Loopback.isListening(processID: me, on: [port, otherPort]))
        // Another process, even one whose listener answers a connect on the same machine, holds none of it.
        let child = try ChildProcess("/bin/sleep", ["30"])
        #expect(!Loopback.isListening(processID: child.pid, on: [port]))
        child.kill()
        _ = await child.exitAwaited()
        close(other)
        #expect(!Loopback.isListening(processID: me, on: [port, otherPort]), "one port no longer listened on")
        #expect(Loopback.isListening(processID: me, on: [port]))
        close(fd)
        #expect(!Loopback.isListening(processID: me, on: [port]))
        #expect(!Loopback.isListening(processID: 0, on: [port]))
    }

    @Test("a paused server process has every thread stopped when pause returns, and runs again after SIGCONT")
    func pauseWaitsForEveryThread() async throws {
        let python = try FormatSpecTests.python3()
        // Eight threads spinning in user mode: the kernel stops them one by one, not when the signal is sent.
        let script = """
            import threading
            def spin():
                while True: pass
            for _ in range(8): threading.Thread(target=spin, daemon=True).start()
            print("ready", flush=True)
            threading.Event().wait()
            """
        let server = ServerProcess()
        let threads: @Sendable () -> Int = {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.processID)/task"))?.count ?? 0
        }
        try await server.launch(python.path, ["-c", script], every: 10_000, until: { threads() >= 9 }, log: { "" })
        let pid = server.processID
        for _ in 0..<20 {
            await server.pause()
            #expect(ServerProcess.isStopped(pid))
            kill(pid, SIGCONT)
            usleep(2000)
            #expect(!ServerProcess.isStopped(pid), "running again after SIGCONT")
        }
        await server.kill()
    }
}
