// The ports the tests' servers are started on: probed free, and below the kernel's ephemeral range, where
// no outgoing connection's local port can take one between the probe and the server's bind (a Redis
// Cluster node's bus port, port + 10000, once was: CI failed with "Address already in use").

import ChildProcesses
import Foundation
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
}
