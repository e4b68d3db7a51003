// NetworkLabTests.swift: the network-namespace harness (ChildProcesses' NetworkLab) as root: hosts reach a
// redis-server in its own namespace over its veth address, directly and through the wire's delay proxy
// (Redis sees the veth addresses, never loopback); the namespaces are gone after removal, after a test
// that threw, and after a process that died (the next lab sweeps them). Skipped, with the reason, where
// namespaces cannot be made (not root, no `ip`); YASHIMA_REQUIRE_NETNS=1 (CI) fails instead.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Trait where Self == ConditionTrait {
    /// The trait of every suite that makes network namespaces.
    static var networkNamespaces: Self {
        .enabled(
            if: NetworkLab.unavailableReason == nil || NetworkLab.isRequired,
            "network namespaces unavailable: \(NetworkLab.unavailableReason ?? ""): skipped (YASHIMA_REQUIRE_NETNS=1 fails instead)"
        )
    }
}

/// One inline Redis command over a new TCP connection to `address`:`port` from namespace `namespace`:
/// the reply's text (a bulk string's content, or the status line), nil when nothing answered in 10 s.
func redisReply(_ command: String, to address: String, port: Int = 6379, from namespace: String) throws -> String? {
    try NetworkNamespace.run(in: namespace) { () -> String? in
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET, address, &target.sin_addr) == 1 else { return nil }
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        let line = Array((command + "\r\n").utf8)
        guard connected == 0, send(fd, line, line.count, 0) == line.count else { return nil }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: reply, as: UTF8.self)
            if let end = text.range(of: "\r\n") {
                let head = text[..<end.lowerBound]
                guard head.hasPrefix("$"), let count = Int(head.dropFirst()) else { return String(head) }
                let body = text[end.upperBound...]
                if body.utf8.count >= count { return String(body.prefix(count)) }
            }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 10_000) > 0 else { return nil }
            let read = recv(fd, &buffer, buffer.count, 0)
            guard read > 0 else { return nil }
            reply += buffer[0..<read]
        }
    }
}

/// The network namespaces that exist now (`/run/netns`).
func existingNamespaces() -> Set<String> {
    Set((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? [])
}

@Suite("Network namespaces (root)", .networkNamespaces, .redisServer, .serialized)
struct NetworkLabTests {
    @Test("hosts reach Redis in its namespace over the veth links, directly and through the wire's proxy")
    func hostsReachTheServer() async throws {
        // Making and removing a lab runs `ip`: off the cooperative pool (the defer is the failure path's).
        let lab = try await offPool { try NetworkLab.create(hosts: 2) }
        defer { lab.remove() }
        let server = try await RedisProcess.start(inNamespace: lab.server, address: NetworkLab.serverAddress)
        defer { server.signal(SIGKILL) }
        let proxy = try DelayProxy(
            listeningOn: NetworkLab.serviceAddress, port: 6379, upstream: NetworkLab.serverAddress,
            upstreamPort: 6379, delay: .zero, namespace: lab.wire)
        defer { proxy.stop() }
        #expect(server.url == "redis://\(NetworkLab.serverAddress):6379")
        for host in lab.hosts.indices {
            let direct = try await offPool {
                try redisReply("CLIENT INFO", to: NetworkLab.serverAddress, from: lab.hosts[host])
            }
            // Redis saw the host's own veth address: the connection crossed the links, not loopback.
            #expect(direct?.contains("addr=\(lab.hostAddress(host)):") == true, "\(direct ?? "no reply")")
            let proxied = try await offPool {
                try redisReply("CLIENT INFO", to: NetworkLab.serviceAddress, from: lab.hosts[host])
            }
            #expect(proxied?.contains("addr=10.0.100.1:") == true, "\(proxied ?? "no reply")")  // the wire's side
        }
        #expect(proxy.statistics.connections == lab.hosts.count)
        #expect(existingNamespaces().isSuperset(of: lab.namespaces))
        await offPool { lab.remove() }
        #expect(existingNamespaces().isDisjoint(with: lab.namespaces), "left: \(existingNamespaces())")
    }

    @Test("a test that throws with a lab still removes it (the lab's deinit)")
    func removedWhenDropped() async throws {
        struct Planned: Error {}
        let (names, thrown) = await offPool { () -> ([String], Bool) in
            var names: [String] = []
            do {
                let lab = try NetworkLab.create(hosts: 1)
                names = lab.namespaces
                guard existingNamespaces().isSuperset(of: names) else { return ([], false) }
                throw Planned()
            } catch {
                return (names, error is Planned)
            }
        }
        #expect(thrown && names.count == 3)
        #expect(existingNamespaces().isDisjoint(with: names), "left: \(existingNamespaces())")
    }

    @Test("namespaces of a process that died are swept by the next lab")
    func staleLabsSwept() async throws {
        let gone = try ChildProcess("/bin/true", [])
        _ = await gone.exitAwaited()
        let stale = "ysl\(gone.pid)n1-w"
        let add = try ChildProcess(try #require(NetworkLab.ipPath), ["netns", "add", stale])
        #expect(await add.exitAwaited() == .exited(0))
        #expect(existingNamespaces().contains(stale))
        let lab = try await offPool { try NetworkLab.create(hosts: 1) }
        await offPool { lab.remove() }
        #expect(!existingNamespaces().contains(stale))
    }
}
