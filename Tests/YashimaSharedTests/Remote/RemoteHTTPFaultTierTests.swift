// RemoteHTTPFaultTierTests.swift: the HTTP remote tier through YCache when things break in the middle of
// a reply (FaultyHTTPServer, real files, no mocks). A server that closes the connection halfway through
// a value's body, in memory or streamed into a staging file: the call returns the generated value, the
// breakers open (the store after the generation is bypassed, and so is the next key's lookup, at no
// cost to the server), no staging file stays behind, and after the cooldown one probe finds the server
// back.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote tier through YCache: HTTP faults mid-reply", .serialized)
struct RemoteHTTPFaultTierTests {
    private let codec = DataCodec()

    /// The HTTP store of `cache`'s remote tier.
    private static func httpStore(_ cache: YCache) throws -> HTTPRemoteStore {
        try #require(cache.engine.remote?.values as? HTTPRemoteStore)
    }

    /// `payload` sealed as the remote value of `key` (signed as `cache`'s tier signs).
    private func envelope(_ payload: Data, for key: CacheKey, in cache: YCache) throws -> [UInt8] {
        let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
        return RemoteEnvelope.seal(
            payload, identity: identity.digest, createdAt: Syscall.realtimeNanoseconds, expiresAt: 0,
            secret: try Self.httpStore(cache).secret)
    }

    /// The names in `root/tmp` (staging files), empty when the folder is missing.
    private static func staging(_ root: URL) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("tmp").path)) ?? []
    }

    @Test(
        "a server closing the connection mid-body (100 KB in memory, 3 MiB streamed): the generated value, breakers open, no staging file",
        arguments: [100_000, 3 << 20])
    func closedMidReply(size: Int) async throws {
        let server = try FaultyHTTPServer(.status(404))
        defer { server.stop() }
        let host = TemporaryDirectory("http-closed")
        // A cooldown no test outlives: every call after the failure is bypassed.
        let remote = try YCache.Remote.http(
            server.url, options: .init(operationTimeout: .seconds(30), breakerCooldown: .seconds(600)))
        let cache = YCache(storageDirectory: host.url, remote: remote)
        let key = CacheKey(namespace: "closed", identity: "k-\(size)")
        let remoteValue = payload(size, seed: 9)
        server.change(to: .closeMidBody(try envelope(remoteValue, for: key, in: cache)))
        let generated = payload(size, seed: 4)
        let resolved = try await cache.resolve(for: key, codec: codec) { generated }
        #expect(resolved.origin == .generated && resolved.value == generated)
        var statistics = cache.statistics
        #expect(statistics.remoteErrors + statistics.remoteTimeouts == 1, "\(statistics)")
        #expect(statistics.remoteHits == 0 && statistics.remotePuts == 0, "\(statistics)")
        // The failed lookup opened both breakers: the store after the generation was bypassed.
        #expect(statistics.remoteBypassedCalls == 1, "\(statistics)")
        #expect(server.requestCount == 1)
        let store = try Self.httpStore(cache)
        #expect(store.remoteGuard.breaker(scope: 0, access: .read).state != .closed)
        #expect(store.remoteGuard.breaker(scope: 0, access: .write).state != .closed)
        #expect(Self.staging(host.url).isEmpty, "\(Self.staging(host.url))")
        // What was published locally is the generated value, readable without the remote tier.
        let local = try await YCache(storageDirectory: host.url).resolve(for: key, codec: codec) { Data() }
        #expect(local.origin == .storage && local.value == generated)
        // Another key while the breakers are open: lookup and store bypassed, the server never asked.
        let other = CacheKey(namespace: "closed", identity: "other-\(size)")
        let second = try await cache.resolve(for: other, codec: codec) { payload(7) }
        #expect(second.origin == .generated && second.value == payload(7))
        statistics = cache.statistics
        #expect(statistics.remoteBypassedCalls == 3, "\(statistics)")
        #expect(server.requestCount == 1)
        #expect(Self.staging(host.url).isEmpty, "\(Self.staging(host.url))")
    }

    @Test("after a mid-body close, one probe past the cooldown finds the server back: a .remote hit")
    func probeAfterClosedMidReply() async throws {
        let server = try FaultyHTTPServer(.status(404))
        defer { server.stop() }
        let host = TemporaryDirectory("http-probe")
        let remote = try YCache.Remote.http(
            server.url, options: .init(operationTimeout: .seconds(30), breakerCooldown: .milliseconds(100)))
        let cache = YCache(storageDirectory: host.url, remote: remote)
        let (broken, healed) = (
            CacheKey(namespace: "probe", identity: "a"), CacheKey(namespace: "probe", identity: "b")
        )
        server.change(to: .closeMidBody(try envelope(payload(3 << 20, seed: 2), for: broken, in: cache)))
        let first = try await cache.resolve(for: broken, codec: codec) { payload(11) }
        #expect(first.origin == .generated && first.value == payload(11))
        let breaker = try Self.httpStore(cache).remoteGuard.breaker(scope: 0, access: .read)
        guard case .open(let until) = breaker.state else {
            Issue.record("the read breaker did not open: \(breaker.state)")
            return
        }
        // The server recovers, with the value of another key; the cooldown is real time, so wait it out.
        let healedValue = payload(2 << 20, seed: 5)
        server.change(to: .body(try envelope(healedValue, for: healed, in: cache)))
        #expect(await eventually(within: 30) { Syscall.monotonicNanoseconds >= until })
        let requestsBefore = server.requestCount
        let probe = try await cache.resolve(for: healed, codec: codec) {
            Issue.record("generated although the probe found the value")
            return Data()
        }
        #expect(probe.origin == .remote && probe.value == healedValue)
        #expect(server.requestCount > requestsBefore)
        #expect(breaker.state == .closed)
        #expect(cache.statistics.remoteHits == 1)
        #expect(Self.staging(host.url).isEmpty, "\(Self.staging(host.url))")
    }
}
