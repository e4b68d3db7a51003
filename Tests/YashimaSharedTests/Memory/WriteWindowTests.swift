// The write windows of I10 and what rests on them: a stamp read inside a window vouches for nothing, a
// memory item is confirmed only under a quiet stamp, a window that changed nothing is undone exactly, a
// lookup's publish leaves an entry stored meanwhile in place (first wins) and every instance converges,
// and memory keys compare codec identifiers byte for byte.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Write windows and per-key linearizability (I10)")
struct WriteWindowTests {
    let codec = StringCodec()

    @Test("a stamp read while a window is open matches nothing; closing hands the writer a stamp that does")
    func windowStamps() throws {
        let dir = TemporaryDirectory("window-stamps")
        let cache = YCache(storageDirectory: dir.url)
        let state = try cache.storageContext().directory.state
        let slots = SharedState.slots(namespace: "n", keyDigest: CacheKey("k").stableDigest)
        let before = state.stamp(slots)
        #expect(before.isQuiet && before.matches(state.stamp(slots)))
        let window = try state.openKeyWindow(slots)
        let inside = state.stamp(slots)
        #expect(!inside.isQuiet)
        #expect(!inside.matches(inside), "a stamp read inside a window vouches for nothing, not even itself")
        #expect(!before.matches(inside))
        let closed = window.close()
        let after = try #require(closed, "nothing else wrote the slot: the writer's own stamp")
        #expect(after.isQuiet && after.matches(state.stamp(slots)))
        #expect(!before.matches(after))
        // Two writers of one slot at once: neither gets a stamp of its own, the slot ends quiet.
        let first = try state.openKeyWindow(slots)
        let second = try state.openKeyWindow(slots)
        let firstClosed = first.close()
        #expect(firstClosed == nil)
        #expect(!state.stamp(slots).isQuiet, "the second window is still open")
        let secondClosed = second.close()
        #expect(secondClosed == nil)
        #expect(state.stamp(slots).isQuiet)
        // A window undone exactly leaves the word as it was: stamps read before still match.
        let quiet = state.stamp(slots)
        try state.openKeyWindow(slots).cancel()
        #expect(quiet.matches(state.stamp(slots)))
    }

    @Test("a memory item is not confirmed inside a window: a rename there is seen at the next lookup")
    func noConfirmationInsideAWindow() async throws {
        let dir = TemporaryDirectory("window-confirm")
        let (reader, writer) = (YCache(storageDirectory: dir.url), YCache(storageDirectory: dir.url))
        let key = CacheKey(namespace: "n", identity: "k")
        try await writer.store("v1", for: key, codec: codec)
        #expect(try await reader.value(for: key, codec: codec) { "generated" } == "v1")
        // Another key of the slot is written meanwhile (its window moves the slot's epochs): the reader's
        // item is unconfirmed from now on.
        let state = try reader.storageContext().directory.state
        let slots = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
        let window = try state.openKeyWindow(slots)
        // Inside the window the reader serves its item after a look at storage (same publish there), and
        // must not confirm it under the busy stamp.
        #expect(try await reader.valueIfCached(for: key, codec: codec) == "v1")
        // The rename of a replacing publish inside that window (the way a writer's rename lands before its
        // window closes): made in a second directory, moved over the entry.
        let scratch = TemporaryDirectory("window-confirm-scratch")
        try await YCache(storageDirectory: scratch.url).store("v2", for: key, codec: codec)
        let entry = try reader.entryURL(key, codec)
        let staged = dir.url.appendingPathComponent("tmp/replacement.staging")
        try FileManager.default.copyItem(
            at: scratch.url.appendingPathComponent(
                try reader.storageContext().directory.entryPath(
                    for: EntryIdentity(key: key, codecIdentifier: codec.identifier)
                ).relative),
            to: staged)
        #expect(rename(staged.path, entry.path) == 0)
        #expect(
            try await reader.valueIfCached(for: key, codec: codec) == "v2",
            "an item confirmed under the busy stamp would still be served here")
        _ = window.close()
        #expect(try await reader.valueIfCached(for: key, codec: codec) == "v2")
    }

    @Test("a lookup's publish leaves a value stored while it generated in place, and every instance agrees")
    func generationLeavesAStoreInPlace() async throws {
        let dir = TemporaryDirectory("first-wins")
        let (a, b) = (YCache(storageDirectory: dir.url), YCache(storageDirectory: dir.url))
        let key = CacheKey(namespace: "n", identity: "raced")
        let (generating, release) = (Gate(), Gate())
        let lookup = Task {
            try await a.value(for: key, codec: codec) {
                generating.open()
                await release.wait()
                return "v1"
            }
        }
        #expect(await generating.wait(within: 60))
        try await b.store("v2", for: key, codec: codec)
        #expect(try await b.value(for: key, codec: codec) { "other" } == "v2")
        release.open()
        // The caller's publish left the stored value in place, and that value is its answer too.
        #expect(try await result(of: lookup, within: 60)?.get() == "v2")
        let c = YCache(storageDirectory: dir.url)
        for cache in [a, b, c] {
            #expect(try await cache.valueIfCached(for: key, codec: codec) == "v2")
        }
    }

    @Test("two codec identifiers that differ only in Unicode normalisation are two entries, also in memory")
    func codecIdentifiersCompareByBytes() async throws {
        let dir = TemporaryDirectory("codec-bytes")
        let cache = YCache(storageDirectory: dir.url)
        let (composed, decomposed) = (NamedCodec("caf\u{E9}"), NamedCodec("cafe\u{301}"))
        #expect(composed.identifier == decomposed.identifier, "Swift's String == calls them equal")
        let key = CacheKey("k")
        try await cache.store("composed", for: key, codec: composed)
        try await cache.store("decomposed", for: key, codec: decomposed)
        #expect(try await cache.valueIfCached(for: key, codec: composed) == "composed")
        #expect(try await cache.valueIfCached(for: key, codec: decomposed) == "decomposed")
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.valueIfCached(for: key, codec: composed) == "composed")
        #expect(try await fresh.valueIfCached(for: key, codec: decomposed) == "decomposed")
    }
}

/// A string codec with a given identifier.
struct NamedCodec: CacheCodec {
    let identifier: String

    init(_ identifier: String) { self.identifier = identifier }

    func encode(_ value: String) throws -> Data { Data(value.utf8) }
    func decode(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}
