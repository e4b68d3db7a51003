// RemoteRemovalTests.swift: a removal that cannot reach the remote tier does not report success (issue 32):
// with the server hung (SIGSTOP), its breaker then open, or the server killed, `remove(for:)` removes the
// local copies and throws `remoteRemovalIncomplete`, and the remote copy is indeed still there once the
// server is back (which is why it must not say success); `removeAll()` with `removeAllRemotely` the same.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Remote removals that fail are reported", .redisServer, .serialized)
struct RemoteRemovalTests {
    private let codec = DataCodec()

    /// Whether `cache`'s directory alone (no remote tier, a fresh process's view) holds `key`.
    private func storedLocally(_ key: CacheKey, in directory: TemporaryDirectory) async throws -> Bool {
        let local = YCache(storageDirectory: directory.url)
        let options = YCache.Options(lookupPolicy: .cacheOnly)
        do {
            _ = try await local.value(for: key, codec: codec, options: options) { Data() }
            return true
        } catch YCache.Error.cacheMiss {
            return false
        }
    }

    @Test("hung, then its breaker open, then killed: removed locally, the failure thrown, the remote copy kept")
    func unreachable() async throws {
        let server = try await RedisServer.start()
        let (one, two) = (TemporaryDirectory("rm-fail-one"), TemporaryDirectory("rm-fail-two"))
        let remote = try testRemote(server) {
            $0.operationTimeout = .milliseconds(300)
            $0.breakerCooldown = .seconds(600)  // open for the rest of the test once a call failed
        }
        let first = YCache(storageDirectory: one.url, remote: remote)
        let keys = (0..<3).map { CacheKey(namespace: "rm-fail", identity: "k\($0)") }
        for (index, key) in keys.enumerated() {
            _ = try await first.value(for: key, codec: codec) { payload(40, seed: UInt8(index)) }
        }
        // A removal that reaches the server succeeds; one of an absent key says false. Neither throws.
        let healthy = CacheKey(namespace: "rm-fail", identity: "healthy")
        _ = try await first.value(for: healthy, codec: codec) { payload(8) }
        #expect(try await first.remove(for: healthy, codec: codec))
        #expect(try await first.remove(for: healthy, codec: codec) == false)

        await server.pause()  // hung: the delete times out
        #expect(await reportsIncomplete { _ = try await first.remove(for: keys[0], codec: codec) })
        #expect(try await storedLocally(keys[0], in: one) == false)
        // The breaker is open now: the delete is not even tried, and that is not a success either.
        #expect(await reportsIncomplete { _ = try await first.remove(for: keys[1], codec: codec) })
        #expect(try await storedLocally(keys[1], in: one) == false)
        server.resume()

        // What the thrown error warns of: the remote copy the open breaker kept the delete from is still
        // there, and another host (or this one, with a fresh breaker) fetches it back. (The timed-out
        // delete sat in the stopped server's socket buffer: it may have run once the server resumed.)
        let second = YCache(storageDirectory: two.url, remote: try testRemote(server))
        let back = try await second.resolve(for: keys[1], codec: codec) { Data() }
        #expect(back.origin == .remote && back.value == payload(40, seed: 1))

        await server.kill()  // refused: a fresh cache (closed breaker) pays one failed call
        let third = YCache(storageDirectory: one.url, remote: try testRemote(server))
        #expect(await reportsIncomplete { _ = try await third.remove(for: keys[2], codec: codec) })
        #expect(try await storedLocally(keys[2], in: one) == false)
        await server.stop()
    }

    @Test("removeAll with removeAllRemotely and the server down: local entries removed, the failure thrown")
    func removeAllUnreachable() async throws {
        let server = try await RedisServer.start()
        let directory = TemporaryDirectory("rm-all-fail")
        let remote = try testRemote(server) { $0.removeAllRemotely = true }
        let cache = YCache(storageDirectory: directory.url, remote: remote)
        let key = CacheKey(namespace: "rm-all", identity: "k")
        _ = try await cache.value(for: key, codec: codec) { payload(30) }
        try await cache.removeAll()  // reachable: no error
        _ = try await cache.value(for: key, codec: codec) { payload(31) }
        await server.kill()
        #expect(await reportsIncomplete { try await cache.removeAll() })
        #expect(try await storedLocally(key, in: directory) == false)
        await server.stop()
    }
}
