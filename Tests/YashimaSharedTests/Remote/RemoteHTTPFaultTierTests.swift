// RemoteHTTPFaultTierTests.swift: the HTTP remote tier through YCache when things break in the middle of
// a reply or of a production (FaultyHTTPServer, real files, no mocks). A server that closes the
// connection halfway through a value's body, in memory or streamed into a staging file: the call returns
// the generated value, the breakers open (the store after the generation is bypassed, and so is the
// next key's lookup, at no cost to the server), no staging file stays behind, and after the cooldown one
// probe finds the server back. The storage root renamed away, or deleted, while a large remote value is
// streaming into a staging file of it (the server holds the body halfway until the test has replaced
// the root): the value is published in the root the production opened or the publish fails with a typed
// error, never a wrong value at the path, never a staging file left in either root; and a staged entry
// renamed through another root's handle fails without touching that root.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote tier through YCache: HTTP faults mid-reply and a replaced root", .serialized)
struct RemoteHTTPFaultTierTests {
    private let codec = DataCodec()

    /// The HTTP store of `cache`'s remote tier.
    private static func httpStore(_ cache: YCache) throws -> HTTPRemoteStore {
        try #require(cache.remoteValues as? HTTPRemoteStore)
    }

    /// `payload` sealed as the remote value of `key` (signed as `cache`'s tier signs).
    private func envelope(_ payload: Data, for key: CacheKey, in cache: YCache) throws -> [UInt8] {
        let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
        return RemoteEnvelope.seal(
            payload, identity: identity.digest, createdAt: Syscall.realtimeNanoseconds, expiresAt: 0,
            secret: try Self.httpStore(cache).secret)
    }

    /// A cache over `root` whose remote tier is `server` over HTTP (a 120 s stall limit unless given).
    private static func cache(
        _ root: TemporaryDirectory, on server: FaultyHTTPServer, timeout: Duration = .seconds(120),
        breakerCooldown: Duration = .seconds(5)
    ) throws -> YCache {
        let remote = try YCache.Remote.http(
            server.url, options: .init(operationTimeout: timeout, breakerCooldown: breakerCooldown))
        return YCache(storageDirectory: root.url, remote: remote)
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
        let cache = try Self.cache(host, on: server, timeout: .seconds(30), breakerCooldown: .seconds(600))
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
        // A cooldown longer than the generation and its store take on a loaded machine: a store made after
        // it would be a write probe, whose answer (the server answers writes) closes the read breaker too.
        let cache = try Self.cache(host, on: server, timeout: .seconds(30), breakerCooldown: .seconds(3))
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

    /// Starts a lookup of `key` on a cache over `root` whose server holds a 3 MiB value's body halfway;
    /// returns once the body is half in the staging file, with the cache, the running call and the value.
    private func heldLookup(
        _ root: TemporaryDirectory, key: CacheKey, options: YCache.Options = YCache.Options(),
        server: FaultyHTTPServer, hold: FaultyHTTPServer.HeldBody, generated: Data? = nil
    ) async throws -> (YCache, Task<YCache.Resolved<Data>, any Error>, Data) {
        let cache = try Self.cache(root, on: server)
        let value = payload(3 << 20, seed: 6)
        server.change(to: .holdMidBody(try envelope(value, for: key, in: cache), hold))
        let codec = codec
        let call = Task {
            try await cache.resolve(for: key, codec: codec, options: options) {
                guard let generated else {
                    Issue.record("generated although the remote value came")
                    return Data()
                }
                return generated
            }
        }
        #expect(await hold.reached.wait(within: 120))
        // The staging file is made once the value's header is read (it announces a payload to stream).
        #expect(await eventually(within: 120) { Self.staging(root.url).count == 1 }, "\(Self.staging(root.url))")
        return (cache, call, value)
    }

    @Test(
        "the root renamed away and replaced while a large value streams: the new root's own value is the answer, nothing lands in the old"
    )
    func rootReplacedDuringStreamedLookup() async throws {
        let server = try FaultyHTTPServer(.status(404))
        defer { server.stop() }
        let root = TemporaryDirectory("http-replaced")
        let aside = TemporaryDirectory("http-replaced-aside")
        let key = CacheKey(namespace: "replaced", identity: "k")
        let hold = FaultyHTTPServer.HeldBody()
        let (cache, call, _) = try await heldLookup(root, key: key, server: server, hold: hold)
        // Another process replaces the root: the old one renamed aside, a new one made at the path, with
        // another value of the key in it.
        #expect(rename(root.path, aside.path) == 0)
        let replacement = YCache(storageDirectory: root.url)
        let other = payload(1000, seed: 8)
        try await replacement.store(other, for: key, codec: codec)
        hold.release()
        let resolved = try await call.value
        // The remote value came after the root the path names got a value of its own: that one is the
        // answer (a remote value refused for a write of its slot since its fetch is never returned, I10).
        #expect(resolved.origin == .storage && resolved.value == other)
        // The production checked the root again before publishing (I13): nothing was published in the root
        // renamed away, and its staging file went.
        let old = try await YCache(storageDirectory: aside.url).valueIfCached(for: key, codec: codec)
        #expect(old == nil)
        #expect(Self.staging(aside.url).isEmpty, "\(Self.staging(aside.url))")
        // In the root the path names, the value stored there meanwhile stays (a lookup's publish adds only
        // where no live entry is), whole; no staging file came into it.
        let new = try await YCache(storageDirectory: root.url).resolve(for: key, codec: codec) { Data() }
        #expect(new.origin == .storage && new.value == other)
        #expect(Self.staging(root.url).isEmpty, "\(Self.staging(root.url))")
        // The first cache goes on with the root's value.
        let again = try await cache.resolve(for: key, codec: codec) { Data() }
        #expect(again.value == other)
    }

    @Test(
        "the root deleted while a large value streams: the root made again, the value generated there, no staging file",
        arguments: [CacheWriteFailurePolicy.throwError, .bestEffort])
    func rootDeletedDuringStreamedLookup(policy: CacheWriteFailurePolicy) async throws {
        let server = try FaultyHTTPServer(.status(404))
        defer { server.stop() }
        let root = TemporaryDirectory("http-deleted")
        let key = CacheKey(namespace: "deleted", identity: "k")
        let hold = FaultyHTTPServer.HeldBody()
        let fresh = payload(1000, seed: 9)
        let (cache, call, _) = try await heldLookup(
            root, key: key, options: YCache.Options(writeFailurePolicy: policy), server: server, hold: hold,
            generated: fresh)
        try FileManager.default.removeItem(at: root.url)
        hold.release()
        let resolved = try await call.value
        // The publish checked the root again (I13) and made the directory again. A remote value is published
        // only where no write of its key came since its fetch's epochs, which a new root's state file cannot
        // vouch for (another instance), and a refused one is not the answer: generated anew, published there.
        #expect(resolved.origin == .generated && resolved.value == fresh)
        #expect(cache.statistics.writeFailures == 0)
        #expect(try await YCache(storageDirectory: root.url).valueIfCached(for: key, codec: codec) == fresh)
        #expect(Self.staging(root.url).isEmpty, "\(Self.staging(root.url))")
    }

    @Test("a staged entry renamed through another root's handle fails, and that root is untouched")
    func stagedRenameAcrossRootsFails() async throws {
        let (first, second) = (TemporaryDirectory("staged-a"), TemporaryDirectory("staged-b"))
        let one = try Directory(path: first.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        let two = try Directory(path: second.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        let key = CacheKey(namespace: "staged", identity: "k")
        let expectation = EntryExpectation(key: key, codecIdentifier: codec.identifier)
        let value = payload(5000, seed: 3)
        let checksum = value.withUnsafeBytes { CRC32C.checksum($0) }
        let (relative, fd) = try EntryFile(directory: one).createStagingFile().get()
        defer { Syscall.close(fd) }
        let headerBytes = EntryFormat.encodeHeader(
            keyBytes: expectation.keyBytes, codecIdentifier: codec.identifier,
            entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest,
            payloadByteCount: value.count, payloadChecksum: checksum, createdAtNanoseconds: 1,
            expiresAtNanoseconds: 0)
        #expect(throws: Never.self) {
            try (headerBytes + value).withUnsafeBytes { try Syscall.write(fd, $0, at: 0).get() }
        }
        let header = EntryFormat.Header(
            keyByteCount: expectation.keyBytes.count, codecByteCount: expectation.codecBytes.count,
            payloadByteCount: Int64(value.count), createdAtNanoseconds: 1, expiresAtNanoseconds: 0,
            payloadChecksum: checksum, entryIdentity: expectation.identity.digest,
            keyStableDigest: expectation.keyDigest)
        let usage = (two.state.usage, two.state.payloadBytes)
        let path = two.entryPath(for: expectation.identity)
        let result = EntryFile(directory: two).publishStaged(
            relative, descriptor: fd, header: header, to: path, expectation: expectation)
        guard case .failure(let error) = result else {
            Issue.record("renamed across roots")
            return
        }
        #expect(error.errno == .noSuchFile, "\(error)")
        #expect(entryFiles(in: second.url).isEmpty)
        #expect(Self.staging(second.url).isEmpty)
        #expect(two.state.usage == usage.0 && two.state.payloadBytes == usage.1)
        // The staging file is still in its own root, for its owner to publish there or unlink.
        #expect(Self.staging(first.url) == [String(relative.dropFirst("tmp/".count))])
        #expect(entryFiles(in: first.url).isEmpty)
        let published = EntryFile(directory: one).publishStaged(
            relative, descriptor: fd, header: header, to: one.entryPath(for: expectation.identity),
            expectation: expectation)
        #expect((try? published.get()) != nil)
        let read = try await YCache(storageDirectory: first.url).resolve(for: key, codec: codec) { Data() }
        #expect(read.origin == .storage && read.value == value)
    }
}
