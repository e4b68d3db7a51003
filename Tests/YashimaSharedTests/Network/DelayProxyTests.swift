// DelayProxyTests.swift: the tests' delay-injecting TCP proxy (ChildProcesses' DelayProxy) on loopback, in
// front of an echo server: each byte comes back no sooner than the delay each way, in order, one byte at
// a time (never held for a whole message), a delay changed mid-stream reorders nothing, a new
// connection pays the handshake's round trip, and end of stream, resets and refusals pass through.
// Only lower bounds on time are asserted (a loaded machine only adds).

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

@Suite("Delay proxy (loopback)", .serialized)
struct DelayProxyTests {
    /// An echo server on loopback: every byte read is written back; end of stream is answered with end of
    /// stream; with `resetAtOnce`, every connection is reset as soon as it is accepted.
    private static func echoServer(resetAtOnce: Bool = false) throws -> LoopbackServer {
        let server = try LoopbackServer(backlog: 16)
        server.start { [server] fd in
            if resetAtOnce {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                server.closeNow(fd)
                return
            }
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !server.isStopped {
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 50) > 0 else { continue }
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 {
                    shutdown(fd, Int32(SHUT_WR))
                    return
                }
                var offset = 0
                while offset < count {
                    let written = buffer[offset..<count].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
                    guard written > 0 else { return }
                    offset += written
                }
            }
        }
        return server
    }

    private static func proxy(to server: LoopbackServer, delay: Duration, handshake: Bool = false) throws -> DelayProxy
    {
        try DelayProxy(upstream: "127.0.0.1", upstreamPort: server.port, delay: delay, emulatesHandshake: handshake)
    }

    /// A blocking client socket connected to 127.0.0.1:`port`.
    private static func connectClient(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = loopbackAddress(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard fd >= 0, connected == 0 else { throw RedisFixtureError(description: "connect failed: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// What one read returned within 10 s: bytes, end of stream (empty), or the errno of a failure.
    private enum Received: Equatable {
        case bytes([UInt8])
        case end
        case failure(Int32)
        case nothing
    }

    private static func receive(_ fd: Int32, upTo count: Int = 65536) -> Received {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 10_000) > 0 else { return .nothing }
        var buffer = [UInt8](repeating: 0, count: count)
        let read = recv(fd, &buffer, count, 0)
        if read > 0 { return .bytes(Array(buffer[0..<read])) }
        return read == 0 ? .end : .failure(errno)
    }

    private static func elapsedMilliseconds(since start: Int64) -> Double {
        Double(Syscall.monotonicNanoseconds - start) / 1e6
    }

    @Test("each byte comes back no sooner than the delay each way, one at a time, in order")
    func bytesOneAtATime() async throws {
        let server = try Self.echoServer()
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .milliseconds(40))
        defer { proxy.stop() }
        let (times, ordered) = try await offPool { () throws -> ([Double], Bool) in
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            var times: [Double] = []
            var ordered = true
            // Ping-pong, one byte each: a proxy that held bytes until a message was complete would never
            // send this byte back, and the next one is only sent once it came.
            for byte in UInt8(ascii: "a")...UInt8(ascii: "f") {
                let start = Syscall.monotonicNanoseconds
                Self.send(fd, [byte])
                let got = Self.receive(fd, upTo: 1)
                times.append(Self.elapsedMilliseconds(since: start))
                ordered = ordered && got == .bytes([byte])
            }
            return (times, ordered)
        }
        #expect(ordered)
        #expect(times.allSatisfy { $0 >= 80 }, "round trips through a 40 ms proxy: \(times) ms")
        print("delay proxy: 1-byte round trips at 40 ms each way: \(times.map { String(format: "%.1f", $0) }) ms")
        #expect(proxy.statistics.connections == 1)
        #expect(proxy.statistics.bytesUp == 6 && proxy.statistics.bytesDown == 6)
    }

    @Test("a burst in small writes comes back whole and in order, the first byte after the delay")
    func burstInOrder() async throws {
        let server = try Self.echoServer()
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .milliseconds(20))
        defer { proxy.stop() }
        var random = SplitMix(seed: 42)
        let sent = (0..<300_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let chunks = stride(from: 0, to: sent.count, by: 1000).map { Array(sent[$0..<min(sent.count, $0 + 1000)]) }
        let (received, first) = try await offPool { () throws -> ([UInt8], Double) in
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            let start = Syscall.monotonicNanoseconds
            Thread {
                for chunk in chunks { Self.send(fd, chunk) }
            }.start()
            var received: [UInt8] = []
            var first = 0.0
            while received.count < sent.count, case .bytes(let bytes) = Self.receive(fd) {
                if received.isEmpty { first = Self.elapsedMilliseconds(since: start) }
                received += bytes
            }
            return (received, first)
        }
        #expect(received == sent)
        #expect(first >= 40, "the first byte came back after \(first) ms")
    }

    @Test("a delay changed mid-stream: bytes read later never overtake earlier ones")
    func delayChangeKeepsOrder() async throws {
        let server = try Self.echoServer()
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .milliseconds(100))
        defer { proxy.stop() }
        let (got, elapsed) = try await offPool { () throws -> ([UInt8], Double) in
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            let start = Syscall.monotonicNanoseconds
            Self.send(fd, Array("slow".utf8))
            usleep(20_000)  // read by the proxy at 100 ms
            proxy.delay = .zero
            Self.send(fd, Array("fast".utf8))
            var got: [UInt8] = []
            while got.count < 8, case .bytes(let bytes) = Self.receive(fd) { got += bytes }
            return (got, Self.elapsedMilliseconds(since: start))
        }
        #expect(String(decoding: got, as: UTF8.self) == "slowfast")
        #expect(elapsed >= 100, "the last byte came back after \(elapsed) ms")
    }

    @Test("with the handshake played, a new connection's first exchange takes a round trip more")
    func handshakeRoundTrip() async throws {
        let server = try Self.echoServer()
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .milliseconds(30), handshake: true)
        defer { proxy.stop() }
        let (first, second) = try await offPool { () throws -> (Double, Double) in
            let start = Syscall.monotonicNanoseconds
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            Self.send(fd, [1])
            _ = Self.receive(fd)
            let first = Self.elapsedMilliseconds(since: start)
            let again = Syscall.monotonicNanoseconds
            Self.send(fd, [2])
            _ = Self.receive(fd)
            return (first, Self.elapsedMilliseconds(since: again))
        }
        #expect(first >= 120, "connect and first exchange: \(first) ms (4 × 30 ms expected)")
        #expect(second >= 60, "second exchange: \(second) ms")
    }

    @Test("end of stream passes through after the delay, each way")
    func endOfStream() async throws {
        let server = try Self.echoServer()
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .milliseconds(25))
        defer { proxy.stop() }
        let (data, end, elapsed) = try await offPool { () throws -> (Received, Received, Double) in
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            Self.send(fd, [7])
            let start = Syscall.monotonicNanoseconds
            shutdown(fd, Int32(SHUT_WR))
            let data = Self.receive(fd)
            let end = Self.receive(fd)
            return (data, end, Self.elapsedMilliseconds(since: start))
        }
        #expect(data == .bytes([7]))
        #expect(end == .end)
        #expect(elapsed >= 50, "end of stream came back after \(elapsed) ms")
    }

    @Test("a server's reset reaches the client as a reset; a refused connection too, counted")
    func resetsAndRefusals() async throws {
        let server = try Self.echoServer(resetAtOnce: true)
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .milliseconds(10))
        defer { proxy.stop() }
        let reset = try await offPool { () throws -> Received in
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            return Self.receive(fd)
        }
        #expect(reset == .failure(ECONNRESET))

        // Nothing listens on the port the echo server had once it is gone: the upstream refuses.
        let port = server.port
        server.stop()
        let refusing = try DelayProxy(upstream: "127.0.0.1", upstreamPort: port, delay: .zero)
        defer { refusing.stop() }
        let refused = try await offPool { () throws -> Received in
            let fd = try Self.connectClient(refusing.port)
            defer { close(fd) }
            return Self.receive(fd)
        }
        #expect(refused == .failure(ECONNRESET))
        #expect(refusing.statistics.upstreamFailures == 1)
    }

    @Test("stop ends every connection (the client reads end of stream) and is idempotent")
    func stopEndsConnections() async throws {
        let server = try Self.echoServer()
        defer { server.stop() }
        let proxy = try Self.proxy(to: server, delay: .zero)
        let ended = try await offPool { () throws -> Received in
            let fd = try Self.connectClient(proxy.port)
            defer { close(fd) }
            Self.send(fd, [1])
            guard Self.receive(fd) == .bytes([1]) else { return .nothing }
            proxy.stop()
            proxy.stop()
            return Self.receive(fd)
        }
        #expect(ended == .end)
    }
}
