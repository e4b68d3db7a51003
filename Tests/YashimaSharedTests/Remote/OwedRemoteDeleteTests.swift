// OwedRemoteDeleteTests.swift: a remote delete that could not be made is owed (issue 32). When a removal's
// delete, a write window's clean-up delete, or a write's own remote store fails, the remote tier may keep a
// value older than the directory's (or one it removed); the directory records the debt, and no lookup on
// this machine takes the key from the remote tier until a delete succeeds. Each case fails without the
// record: the old value comes back from Redis as a remote hit.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Remote deletes that fail are owed", .redisServer, .serialized)
struct OwedRemoteDeleteTests {
    private let codec = DataCodec()

    /// Options under which a hung server makes one call time out and then keeps the breaker open long
    /// enough for the steps after it (a breaker test: its cooldown is what it relies on).
    private static func failing(_ options: inout YCache.Remote.Options) {
        options.operationTimeout = .milliseconds(300)
        options.breakerCooldown = .seconds(4)
    }

    /// The cooldown above, and then some: after it the breaker lets calls through again.
    private static func waitOutBreaker() async throws { try await Task.sleep(for: .seconds(5)) }

    @Test("a removal whose remote delete was never sent: this machine's next miss generates, and pays the debt")
    func removal() async throws {
        let server = try await RedisServer.start()
        let (directory, elsewhere) = (TemporaryDirectory("owed-rm"), TemporaryDirectory("owed-rm-host2"))
        let cache = YCache(storageDirectory: directory.url, remote: try testRemote(server, Self.failing))
        let (probe, gone) = (
            CacheKey(namespace: "owed", identity: "probe"), CacheKey(namespace: "owed", identity: "gone")
        )
        _ = try await cache.value(for: probe, codec: codec) { payload(40, seed: 1) }
        _ = try await cache.value(for: gone, codec: codec) { payload(40, seed: 2) }

        await server.pause()
        // The first delete times out and opens the breaker; the second is then never sent.
        #expect(await reportsIncomplete { _ = try await cache.remove(for: probe, codec: codec) })
        #expect(await reportsIncomplete { _ = try await cache.remove(for: gone, codec: codec) })
        server.resume()
        let context = try cache.storageContext()
        let identity = EntryIdentity(key: gone, codecIdentifier: codec.identifier)
        #expect(context.directory.owesRemoteDelete(identity))

        // The removed value is indeed still in Redis: another host (its own directory, its own breaker)
        // fetches it, as the thrown error warns.
        let host2 = YCache(storageDirectory: elsewhere.url, remote: try testRemote(server))
        #expect(try await host2.resolve(for: gone, codec: codec) { Data() }.origin == .remote)

        try await Self.waitOutBreaker()
        let fresh = YCache(storageDirectory: directory.url, remote: try testRemote(server))
        let again = try await fresh.resolve(for: gone, codec: codec) { payload(40, seed: 9) }
        #expect(again.origin == .generated && again.value == payload(40, seed: 9))
        #expect(context.directory.owesRemoteDelete(identity) == false)
        await server.stop()
    }

    @Test("a store the remote tier never took: after the local entry is dropped, the older remote value is not a hit")
    func storeNotLanded() async throws {
        let server = try await RedisServer.start()
        let directory = TemporaryDirectory("owed-store")
        let cache = YCache(storageDirectory: directory.url, remote: try testRemote(server, Self.failing))
        let (probe, key) = (CacheKey(namespace: "owed", identity: "probe"), CacheKey(namespace: "owed", identity: "k"))
        try await cache.store(payload(50, seed: 1), for: key, codec: codec)  // v1, locally and in Redis

        await server.pause()
        // A lookup that times out opens the breaker (the caller still gets its value).
        #expect(try await cache.value(for: probe, codec: codec) { payload(8) } == payload(8))
        try await cache.store(payload(50, seed: 2), for: key, codec: codec)  // v2: local only, Redis keeps v1
        server.resume()
        #expect(
            try cache.storageContext().directory.owesRemoteDelete(
                EntryIdentity(key: key, codecIdentifier: codec.identifier)))

        // A cache may drop any entry (trim does): the file goes, and with it this machine's copy of v2.
        #expect(unlink(try cache.entryURL(key, codec).path) == 0)
        try await Self.waitOutBreaker()
        let fresh = YCache(storageDirectory: directory.url, remote: try testRemote(server))
        let got = try await fresh.resolve(for: key, codec: codec) { payload(50, seed: 3) }
        // v1 would be older than v2, which a caller has seen: a miss (generated) is the right answer.
        #expect(got.value != payload(50, seed: 1))
        #expect(got.origin == .generated && got.value == payload(50, seed: 3))
        await server.stop()
    }
}

@Suite("The owed-delete record of a write window")
struct OwedWriteWindowTests {
    private let key = CacheKey(namespace: "owed", identity: "window")

    @Test("a disturbed window whose clean-up delete fails owes it; settling pays it only when a delete succeeds")
    func disturbedWindow() async throws {
        let directory = TemporaryDirectory("owed-window")
        let context = try YCache(storageDirectory: directory.url).storageContext()
        let identity = EntryIdentity(key: key, codecIdentifier: DataCodec().identifier)
        let slots = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
        let owed = { context.directory.owesRemoteDelete(identity) }

        // Undisturbed: no clean-up is needed, so a failing delete is never called and nothing is owed.
        guard let quiet = RemoteWriteWindow(context.directory, slots: slots, identity: identity) else {
            Issue.record("no window could be opened")
            return
        }
        await quiet.close(
            own: [0],
            deleteRemote: {
                Issue.record("no clean-up was needed"); return false
            })
        #expect(owed() == false)

        // Another write of the slot opened and closed inside: the clean-up delete fails, the key is owed.
        guard let window = RemoteWriteWindow(context.directory, slots: slots, identity: identity) else {
            Issue.record("no window could be opened")
            return
        }
        let other = try context.directory.state.openKeyWindow(slots)
        _ = other.close()
        await window.close(own: [0], deleteRemote: { false })
        #expect(owed())

        #expect(await RemoteWriteWindow.settle(identity, slots: slots, in: context.directory) { false } == false)
        #expect(owed())
        #expect(await RemoteWriteWindow.settle(identity, slots: slots, in: context.directory) { true })
        #expect(owed() == false)
        // The record is one file in the directory's own folder, gone once paid.
        let folder = directory.url.appendingPathComponent(Directory.owedDeletesFolder).path
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }
}
