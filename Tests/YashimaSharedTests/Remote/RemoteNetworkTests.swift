// RemoteNetworkTests.swift: the remote tier between hosts on a real (namespaced) network: three hosts in
// network namespaces of their own, Redis in another, reached over veth links through the wire's delay
// proxy at 10 ms each way (NetworkLab, DelayProxy). Real worker processes (`yashima-stress worker get`
// under `ip netns exec`). One generation per key across hosts (the ledger), every value right, and a
// new process's remote hit pays at least the link's round trip (the lower bound only: a loaded machine
// adds). The measurements are the stress runner's (`yashima-stress --scenario netns`).

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote tier across network namespaces (root)", .networkNamespaces, .redisServer, .serialized)
struct RemoteNetworkTests {
    private static let delay = 10

    /// A lab of three hosts with Redis behind the wire's proxy at `delay` ms each way.
    private struct Network: Sendable {
        let lab: NetworkLab
        let server: RedisProcess
        let proxy: DelayProxy

        /// Stops the proxy and Redis and removes the namespaces, off the cooperative pool (`ip` runs).
        func close() async {
            server.signal(SIGKILL)
            await offPool {
                proxy.stop()
                lab.remove()
            }
        }
    }

    private static func network() async throws -> Network {
        let lab = try await offPool { try NetworkLab.create(hosts: 3) }
        do {
            let server = try await RedisProcess.start(inNamespace: lab.server, address: NetworkLab.serverAddress)
            let proxy = try DelayProxy(
                listeningOn: NetworkLab.serviceAddress, port: 6379, upstream: NetworkLab.serverAddress,
                upstreamPort: 6379, delay: .milliseconds(delay), namespace: lab.wire)
            return Network(lab: lab, server: server, proxy: proxy)
        } catch {
            await offPool { lab.remove() }
            throw error
        }
    }

    private static let url = "redis://\(NetworkLab.serviceAddress):6379"

    private static func worker(_ lab: NetworkLab, host: Int, directory: String, _ extra: [String]) throws
        -> ChildProcess
    {
        try lab.spawn(
            inHost: host, productsDirectory().appendingPathComponent("yashima-stress").path,
            ["worker", "get", "--directory", directory, "--remote", url, "--remote-timeout-ms", "5000"] + extra)
    }

    @Test("8 processes on 3 hosts miss the same keys over a 10 ms link: one generation per key, values right")
    func stampedeAcrossHosts() async throws {
        let network = try await Self.network()
        let (lab, proxy) = (network.lab, network.proxy)
        defer {  // a failure's path (idempotent after close())
            network.server.signal(SIGKILL)
            proxy.stop()
            lab.remove()
        }
        let hosts = (0..<3).map { TemporaryDirectory("netns-host-\($0)") }
        let ledger = hosts[0].path + ".ledger"
        defer { unlink(ledger) }
        let keys = 4
        let children = try (0..<8).map { index in
            try Self.worker(
                lab, host: index % 3, directory: hosts[index % 3].path,
                [
                    "--key", "stampede", "--count", "\(keys)", "--generate-ms", "100", "--size", "20000",
                    "--ledger", ledger, "--go", "--open-first",
                ])
        }
        #expect(await startTogether(children))
        var results: [[String: Any]] = []
        for child in children {
            for _ in 0..<keys {
                guard let line = await child.json(timeout: 120) else { break }
                results.append(line)
            }
            #expect(await child.exitStatus(timeout: 120) == 0)
        }
        #expect(results.count == keys * 8)
        #expect(results.allSatisfy { $0["correct"] as? Bool == true })
        let generations = Ledger(path: ledger).lines()
        #expect(generations.count == keys, "generations: \(generations)")
        #expect(Set(generations.map { $0.split(separator: " ")[0] }).count == keys)
        let origins = results.map { $0["origin"] as? String ?? "?" }
        #expect(origins.filter { $0 == "generated" }.count == keys)
        #expect(origins.filter { $0 == "remote" }.count == keys * 2)  // once per key on each other host
        #expect(results.allSatisfy { $0["remoteErrors"] as? Int == 0 })
        #expect(proxy.statistics.connections >= 3)  // every host went through the link (not loopback)
        await network.close()
    }

    @Test("a new process's remote hit over a 10 ms link takes at least a round trip")
    func remoteHitPaysTheLink() async throws {
        let network = try await Self.network()
        let (lab, proxy) = (network.lab, network.proxy)
        defer {  // a failure's path (idempotent after close())
            network.server.signal(SIGKILL)
            proxy.stop()
            lab.remove()
        }
        let (writer, reader) = (TemporaryDirectory("netns-writer"), TemporaryDirectory("netns-reader"))
        let generating = try Self.worker(lab, host: 0, directory: writer.path, ["--key", "hit"])
        let generated = try #require(await generating.json(timeout: 120))
        #expect(generated["origin"] as? String == "generated")
        #expect(await generating.exitStatus(timeout: 120) == 0)
        let reading = try Self.worker(lab, host: 1, directory: reader.path, ["--key", "hit", "--open-first"])
        let hit = try #require(await reading.json(timeout: 120))
        #expect(hit["origin"] as? String == "remote" && hit["correct"] as? Bool == true)
        let elapsed = try #require(hit["elapsedNs"] as? Double)
        // Its connection's handshake and its GET: two round trips of 20 ms on this link.
        #expect(elapsed >= 2 * 2 * Double(Self.delay) * 1e6, "a remote hit over the link took \(elapsed / 1e6) ms")
        #expect(await reading.exitStatus(timeout: 120) == 0)
        await network.close()
    }
}
