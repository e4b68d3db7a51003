// The lifecycle API: metadata and contains (no decoding, no LRU use), remove and removeAll, listing,
// store and putInMemory, statistics, the memory LRU through YCache, and removal epochs seen by another
// instance's memory (I10; two instances in one process stand in for two processes here).

import Foundation
import Testing

@testable import YashimaShared

@Suite("YCache lifecycle")
struct YCacheLifecycleTests {
    static let codec = StringCodec()

    // MARK: Inspecting

    @Test("metadata and contains never decode, and report nothing for a missing entry")
    func metadataWithoutDecoding() async throws {
        let (dir, writer) = makeCache("life-meta")
        let (codec, key) = (CountingCodec(), CacheKey("counted"))
        #expect(try await writer.value(for: key, codec: codec) { "payload" } == "payload")
        #expect(codec.calls.encodes.value == 1)

        let fresh = YCache(storageDirectory: dir.url)
        let metadata = try #require(try await fresh.metadata(for: key, codec: codec))
        #expect(metadata.byteCount == 7)
        #expect(metadata.codecIdentifier == "counting-v1")
        #expect(metadata.keyStableIdentifier == key.stableIdentifier)
        #expect(try await fresh.contains(for: key, codec: codec))
        #expect(codec.calls.decodes.value == 0)
        #expect(try await fresh.peek(for: key, codec: codec) == nil)  // not loaded into memory either

        #expect(try await fresh.metadata(for: CacheKey("missing"), codec: codec) == nil)
        #expect(try await fresh.contains(for: CacheKey("missing"), codec: codec) == false)
        #expect(try await fresh.contains(for: key, codec: Self.codec) == false)  // another codec, another entry
        #expect(codec.calls.decodes.value == 0)
        #expect(try await fresh.value(for: key, codec: codec) { "x" } == "payload")
        #expect(codec.calls.decodes.value == 1)
    }

    @Test("metadata and contains see values kept only in memory")
    func metadataFromMemory() async throws {
        let (dir, cache) = makeCache("life-meta-memory")
        let key = CacheKey("memory-only")
        _ = try await cache.value(for: key, codec: Self.codec, options: .init(writePolicy: .memoryOnly)) { "m" }
        #expect(try await cache.contains(for: key, codec: Self.codec))
        #expect(try await cache.metadata(for: key, codec: Self.codec)?.keyStableIdentifier == key.stableIdentifier)
        #expect(try await YCache(storageDirectory: dir.url).contains(for: key, codec: Self.codec) == false)
    }

    @Test("entries lists keys equal to the originals, codec identifiers and sizes, per namespace")
    func entries() async throws {
        let (dir, cache) = makeCache("life-entries")
        let thumb = CacheKey(namespace: "thumbnail", identity: "video-42").variant("size", "320x180").version("r", 3)
        let other = CacheKey(namespace: "thumbnail", identity: "video-43")
        let doc = CacheKey(namespace: "docs", identity: "readme")
        _ = try await cache.string(for: thumb) { "t" }
        _ = try await cache.data(for: other) { Data(count: 5000) }
        _ = try await cache.string(for: doc) { "d" }

        let listed = try await YCache(storageDirectory: dir.url).entries(in: "thumbnail")
        #expect(Set(listed.map(\.key)) == [thumb, other])
        let byKey = Dictionary(uniqueKeysWithValues: listed.map { ($0.key, $0) })
        #expect(byKey[thumb]?.metadata.codecIdentifier == "string-utf8-v1")
        #expect(byKey[other]?.metadata.codecIdentifier == "data-v1")
        #expect(byKey[other]?.metadata.byteCount == 5000)
        #expect(byKey[thumb]?.metadata.keyStableIdentifier == thumb.stableIdentifier)
        #expect(byKey[thumb]?.key.variants.map(\.value) == ["320x180"])
        #expect(
            byKey[other]?.allocatedByteCount
                == EntryFile.chargedBytes(
                    payloadByteCount: 5000, keyByteCount: other.canonicalBytes.count, codecByteCount: 7))
        #expect(try await cache.entries().count == 3)
        #expect(try await cache.entries(in: "docs").map(\.key) == [doc])
        #expect(try await cache.entries(in: "nothing").isEmpty)
    }

    // MARK: Writing

    @Test("store then value returns the stored value without generating; store replaces")
    func storeThenValue() async throws {
        let (dir, cache) = makeCache("life-store")
        let key = CacheKey("stored")
        let calls = Counter()
        try await cache.store("first", for: key, codec: Self.codec)
        #expect(
            try await cache.value(for: key, codec: Self.codec) {
                calls.increment()
                return "generated"
            } == "first")
        let fresh = YCache(storageDirectory: dir.url)
        #expect(
            try await fresh.value(for: key, codec: Self.codec) {
                calls.increment()
                return "generated"
            } == "first")
        try await cache.store("second", for: key, codec: Self.codec, options: .init(expiry: .after(.seconds(3600))))
        #expect(try await cache.peek(for: key, codec: Self.codec) == "second")
        #expect(try await fresh.value(for: key, codec: Self.codec) { "generated" } == "second")  // its copy went
        #expect(try await fresh.metadata(for: key, codec: Self.codec)?.expiresAt != nil)
        #expect(calls.value == 0)

        try await cache.store("memory", for: CacheKey("m"), codec: Self.codec, options: .init(writePolicy: .memoryOnly))
        #expect(try await cache.peek(for: CacheKey("m"), codec: Self.codec) == "memory")
        #expect(try await fresh.valueIfCached(for: CacheKey("m"), codec: Self.codec) == nil)
    }

    @Test("putInMemory is seen by peek and lookups here, never by storage")
    func putInMemory() async throws {
        let dir = TemporaryDirectory("life-put")
        let cache = YCache(storageDirectory: dir.url, memoryMaximumCost: 100)
        let key = CacheKey("put")
        try await cache.putInMemory("here", for: key, codec: Self.codec)
        #expect(try await cache.peek(for: key, codec: Self.codec) == "here")
        #expect(try await cache.value(for: key, codec: Self.codec) { "generated" } == "here")
        #expect(entryFiles(in: dir.url).isEmpty)
        #expect(try await YCache(storageDirectory: dir.url).peek(for: key, codec: Self.codec) == nil)
        try await cache.putInMemory("too big", for: CacheKey("big"), codec: Self.codec, cost: .units(101))
        #expect(try await cache.peek(for: CacheKey("big"), codec: Self.codec) == nil)
    }

    @Test("peek reads memory only, never storage")
    func peekIsMemoryOnly() async throws {
        let dir = TemporaryDirectory("life-peek")
        _ = try await YCache(storageDirectory: dir.url).value(for: CacheKey("p"), codec: Self.codec) { "stored" }
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.peek(for: CacheKey("p"), codec: Self.codec) == nil)
        #expect(fresh.statistics.storageHits == 0)
    }

    // MARK: Removing

    @Test("remove drops one key's entry for one codec, in memory and storage")
    func remove() async throws {
        let (dir, cache) = makeCache("life-remove")
        let key = CacheKey("r")
        _ = try await cache.string(for: key) { "s" }
        _ = try await cache.data(for: key) { Data([1]) }
        _ = try await cache.string(for: CacheKey("other")) { "o" }
        try await cache.remove(for: key, codec: Self.codec)
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
        #expect(try await cache.valueIfCached(for: key, codec: DataCodec()) == Data([1]))
        #expect(try await cache.valueIfCached(for: CacheKey("other"), codec: Self.codec) == "o")
        #expect(entryFiles(in: dir.url).count == 2)
        try await cache.remove(for: CacheKey("never-stored"), codec: Self.codec)
    }

    @Test("removeAll(in:) drops one namespace everywhere and keeps the others")
    func removeAllInNamespace() async throws {
        let (dir, cache) = makeCache("life-remove-ns")
        let gone = [CacheKey("a", namespace: "gone"), CacheKey("b", namespace: "gone").variant("v", 1)]
        let kept = [CacheKey("a", namespace: "kept"), CacheKey("a")]
        for key in gone + kept { _ = try await cache.string(for: key) { key.identity } }
        try await cache.removeAll(in: "gone")
        for key in gone {
            #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
            #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
        }
        for key in kept {
            #expect(try await cache.peek(for: key, codec: Self.codec) == key.identity)
            #expect(
                try await stored(in: dir, key, Self.codec) == key.identity)
        }
        #expect(try await cache.storageUsage().entryCount == 2)
    }

    @Test("removeAll drops everything, in memory and storage")
    func removeAll() async throws {
        let (dir, cache) = makeCache("life-remove-all")
        for index in 0..<5 { _ = try await cache.string(for: CacheKey("\(index)", namespace: "n\(index % 2)")) { "v" } }
        try await cache.removeAll()
        #expect(entryFiles(in: dir.url).isEmpty)
        #expect(cache.engine.memoryTier.store.count == 0)
        #expect(
            try await cache.storageUsage()
                == YCache.StorageUsage(byteCount: 0, entryCount: 0, maximumByteCount: 128 << 20))
        #expect(try await cache.string(for: CacheKey("0", namespace: "n0")) { "again" } == "again")
    }

    // MARK: Removal epochs across instances (I10)

    @Test("a removal through another instance is seen by this instance's memory")
    func epochsAcrossInstances() async throws {
        let dir = TemporaryDirectory("life-epochs")
        let mine = YCache(storageDirectory: dir.url)
        let theirs = YCache(storageDirectory: dir.url)
        let key = CacheKey("k", namespace: "alpha")
        let neighbour = CacheKey("k", namespace: "beta")
        _ = try await mine.string(for: key) { "v" }
        _ = try await mine.string(for: neighbour) { "n" }

        try await theirs.remove(for: key, codec: Self.codec)
        #expect(try await mine.peek(for: key, codec: Self.codec) == nil)
        #expect(try await mine.valueIfCached(for: key, codec: Self.codec) == nil)
        #expect(try await mine.peek(for: neighbour, codec: Self.codec) == "n")

        _ = try await mine.string(for: key) { "v2" }
        try await theirs.removeAll(in: "alpha")
        #expect(try await mine.peek(for: key, codec: Self.codec) == nil)
        #expect(try await mine.peek(for: neighbour, codec: Self.codec) == "n")

        _ = try await mine.string(for: key) { "v3" }
        try await theirs.store("from theirs", for: key, codec: Self.codec)
        #expect(try await mine.peek(for: key, codec: Self.codec) == nil)
        #expect(try await mine.valueIfCached(for: key, codec: Self.codec) == "from theirs")

        try await theirs.removeAll()
        #expect(try await mine.peek(for: key, codec: Self.codec) == nil)
        #expect(try await mine.peek(for: neighbour, codec: Self.codec) == nil)
    }

    // MARK: Memory LRU through YCache

    @Test("the memory cost bound evicts the least recently used value")
    func memoryCostLRU() async throws {
        let dir = TemporaryDirectory("life-lru-cost")
        let cache = YCache(storageDirectory: dir.url, memoryMaximumCost: 10)  // StringCodec: cost = UTF-8 bytes
        _ = try await cache.string(for: CacheKey("a")) { "aaaa" }
        _ = try await cache.string(for: CacheKey("b")) { "bbbb" }
        #expect(try await cache.peek(for: CacheKey("a"), codec: Self.codec) == "aaaa")  // "b" is now the oldest
        _ = try await cache.string(for: CacheKey("c")) { "cccc" }
        #expect(try await cache.peek(for: CacheKey("b"), codec: Self.codec) == nil)
        #expect(try await cache.peek(for: CacheKey("a"), codec: Self.codec) == "aaaa")
        #expect(try await cache.peek(for: CacheKey("c"), codec: Self.codec) == "cccc")
        #expect(cache.engine.memoryTier.store.totalCost == 8)
        // Evicted from memory is not removed: storage still has it.
        #expect(try await cache.resolve(for: CacheKey("b"), codec: Self.codec) { "x" }.source == .storage)
    }

    @Test("the memory count bound evicts the least recently used value")
    func memoryCountLRU() async throws {
        let dir = TemporaryDirectory("life-lru-count")
        let cache = YCache(storageDirectory: dir.url, memoryMaximumEntryCount: 2)
        _ = try await cache.string(for: CacheKey("a")) { "a" }
        _ = try await cache.string(for: CacheKey("b")) { "b" }
        _ = try await cache.string(for: CacheKey("a")) { "x" }  // a memory hit: "a" is recent
        _ = try await cache.string(for: CacheKey("c")) { "c" }
        #expect(try await cache.peek(for: CacheKey("b"), codec: Self.codec) == nil)
        #expect(try await cache.peek(for: CacheKey("a"), codec: Self.codec) == "a")
        #expect(cache.engine.memoryTier.store.count == 2)
    }

    // MARK: Statistics

    @Test("statistics count memory hits, storage hits, generations and write failures")
    func statistics() async throws {
        let (dir, cache) = makeCache("life-stats")
        #expect(cache.statistics == CacheStatistics())
        _ = try await cache.string(for: CacheKey("a")) { "a" }
        _ = try await cache.string(for: CacheKey("a")) { "x" }
        _ = try await cache.string(for: CacheKey("a")) { "x" }
        _ = try await cache.valueIfCached(for: CacheKey("none"), codec: Self.codec)
        var expected = CacheStatistics()
        expected.generations = 1
        expected.memoryHits = 2
        #expect(cache.statistics == expected)

        let fresh = YCache(storageDirectory: dir.url)
        _ = try await fresh.string(for: CacheKey("a")) { "x" }
        _ = try await fresh.string(for: CacheKey("a")) { "x" }
        #expect(fresh.statistics.storageHits == 1)
        #expect(fresh.statistics.memoryHits == 1)
        #expect(fresh.statistics.generations == 0)
        // A storage write that fails (the storage path is a file) under best effort: counted, value kept.
        let blocked = TemporaryDirectory("life-stats-blocked")
        try writeFile(Data("a file".utf8), to: blocked.url)
        let failing = YCache(storageDirectory: blocked.url)
        _ = try await failing.value(
            for: CacheKey("b"), codec: Self.codec, options: .init(writeFailurePolicy: .bestEffort)
        ) {
            "b"
        }
        #expect(failing.statistics.writeFailures == 1)
        #expect(failing.statistics.generations == 1)
    }
}
