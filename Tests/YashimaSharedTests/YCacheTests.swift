// YCache get-or-generate through the public API: where values come from, lookup and write policies,
// the Typed view and the conveniences over any codec, odd keys, and zero or negative budgets.

import Foundation
import Testing

@testable import YashimaShared

@Suite("YCache")
struct YCacheTests {
    static let codec = StringCodec()

    struct Point: Codable, Equatable, Sendable {
        var x: Int
        var label: String
    }

    // MARK: Get or generate

    @Test("memory, then storage, then generate; the metadata describes the stored value")
    func sources() async throws {
        let (dir, cache) = makeCache("ycache-sources")
        let key = CacheKey(namespace: "n", identity: "i").variant("w", 1)
        let before = Date()
        let generated = try await cache.resolve(for: key, codec: Self.codec) { "value" }
        #expect(generated.source == .generated)
        #expect(!generated.wasSharedGeneration)
        let metadata = try #require(generated.metadata)
        #expect(metadata.keyStableIdentifier == key.stableIdentifier)
        #expect(metadata.codecIdentifier == "string-utf8-v1")
        #expect(metadata.byteCount == 5)
        #expect(metadata.expiresAt == nil)
        #expect(abs(metadata.createdAt.timeIntervalSince(before)) < 300)
        let memory = try await cache.resolve(for: key, codec: Self.codec) { "other" }
        #expect(memory.source == .memory)
        #expect(memory.metadata == generated.metadata)
        let storage = try await YCache(storageDirectory: dir.url).resolve(for: key, codec: Self.codec) { "other" }
        #expect(storage.source == .storage)
        #expect(storage.value == "value")
        #expect(storage.metadata?.createdAt == metadata.createdAt)
        #expect(storage.metadata?.byteCount == 5)
    }

    @Test("the same key under two codecs is two entries")
    func codecIsPartOfIdentity() async throws {
        let (dir, cache) = makeCache("ycache-codecs")
        let key = CacheKey("shared-key")
        #expect(try await cache.string(for: key) { "text" } == "text")
        #expect(try await cache.data(for: key) { Data([1, 2]) } == Data([1, 2]))
        #expect(entryFiles(in: dir.url).count == 2)
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.string(for: key) { "x" } == "text")
        #expect(try await fresh.data(for: key) { Data() } == Data([1, 2]))
    }

    // MARK: Policies

    @Test("cacheOnly never generates: a miss throws cacheMiss, a hit is returned")
    func cacheOnly() async throws {
        let (dir, cache) = makeCache("ycache-cacheonly")
        let key = CacheKey("k")
        let options = YCache.Options(lookupPolicy: .cacheOnly)
        let calls = Counter()
        await #expect(throws: YCache.Error.cacheMiss) {
            try await cache.value(for: key, codec: Self.codec, options: options) {
                calls.increment()
                return "v"
            }
        }
        #expect(try await cache.optionalValue(for: key, codec: Self.codec, options: options) { "v" } == nil)
        #expect(calls.value == 0)
        _ = try await cache.value(for: key, codec: Self.codec) { "v" }
        #expect(
            try await YCache(storageDirectory: dir.url).value(for: key, codec: Self.codec, options: options) { "x" }
                == "v")
    }

    @Test("refresh regenerates although a value is cached, and the new value replaces it everywhere")
    func refresh() async throws {
        let (dir, cache) = makeCache("ycache-refresh")
        let other = YCache(storageDirectory: dir.url)
        let key = CacheKey("r")
        _ = try await cache.value(for: key, codec: Self.codec) { "old" }
        #expect(try await other.value(for: key, codec: Self.codec) { "x" } == "old")  // now in other's memory
        #expect(try await cache.refresh(for: key, codec: Self.codec) { "new" } == "new")
        #expect(try await cache.peek(for: key, codec: Self.codec) == "new")
        #expect(try await other.value(for: key, codec: Self.codec) { "x" } == "new")  // I10: its copy went
        let viaOption = try await cache.resolve(for: key, codec: Self.codec, options: .init(lookupPolicy: .refresh)) {
            "newer"
        }
        #expect(viaOption.source == .generated)
        #expect(try await stored(in: dir, key, Self.codec) == "newer")
    }

    @Test("writePolicy memoryOnly keeps the value in this process; disabled keeps it nowhere")
    func writePolicies() async throws {
        let (dir, cache) = makeCache("ycache-write")
        let memoryOnly = CacheKey("memory-only")
        _ = try await cache.value(for: memoryOnly, codec: Self.codec, options: .init(writePolicy: .memoryOnly)) { "m" }
        #expect(try await cache.peek(for: memoryOnly, codec: Self.codec) == "m")
        #expect(try await stored(in: dir, memoryOnly, Self.codec) == nil)

        let disabled = CacheKey("disabled")
        let calls = Counter()
        for _ in 0..<2 {
            _ = try await cache.value(for: disabled, codec: Self.codec, options: .init(writePolicy: .disabled)) {
                "d\(calls.increment())"
            }
        }
        #expect(calls.value == 2)
        #expect(try await cache.peek(for: disabled, codec: Self.codec) == nil)
        #expect(entryFiles(in: dir.url).isEmpty)

        // A storage hit under .disabled is returned but not copied into memory.
        _ = try await YCache(storageDirectory: dir.url).value(for: CacheKey("s"), codec: Self.codec) { "s" }
        let disabledWrites = YCache.Options(writePolicy: .disabled)
        let hit = try await cache.resolve(for: CacheKey("s"), codec: Self.codec, options: disabledWrites) { "x" }
        #expect(hit.source == .storage)
        #expect(try await cache.peek(for: CacheKey("s"), codec: Self.codec) == nil)
    }

    @Test("an explicit cost decides what fits in memory")
    func explicitCost() async throws {
        let dir = TemporaryDirectory("ycache-cost")
        let cache = YCache(storageDirectory: dir.url, memoryMaximumCost: 100)
        _ = try await cache.value(for: CacheKey("a"), codec: Self.codec, options: .init(cost: .units(60))) { "a" }
        _ = try await cache.value(for: CacheKey("b"), codec: Self.codec, options: .init(cost: .units(60))) { "b" }
        #expect(try await cache.peek(for: CacheKey("a"), codec: Self.codec) == nil)
        #expect(try await cache.peek(for: CacheKey("b"), codec: Self.codec) == "b")
        _ = try await cache.value(for: CacheKey("c"), codec: Self.codec, options: .init(cost: .units(101))) { "c" }
        #expect(try await cache.peek(for: CacheKey("c"), codec: Self.codec) == nil)
        #expect(try await cache.peek(for: CacheKey("b"), codec: Self.codec) == "b")
    }

    // MARK: Codecs

    @Test("the Typed view forwards every call with its codec")
    func typed() async throws {
        let (dir, cache) = makeCache("ycache-typed")
        let points = cache.using(CodableCodec(Point.self))
        let key = CacheKey("p")
        let point = Point(x: 3, label: "three")
        #expect(try await points.value(for: key) { point } == point)
        #expect(try await points.resolve(for: key) { Point(x: 0, label: "") }.source == .memory)
        #expect(try await points.peek(for: key) == point)
        #expect(try await points.valueIfCached(for: key) == point)
        #expect(try await points.contains(for: key))
        #expect(try await points.metadata(for: key)?.codecIdentifier == points.codec.identifier)
        #expect(try await points.refresh(for: key) { Point(x: 4, label: "four") } == Point(x: 4, label: "four"))
        try await points.store(Point(x: 5, label: "five"), for: key)
        #expect(
            try await YCache(storageDirectory: dir.url).using(CodableCodec(Point.self)).valueIfCached(for: key)
                == Point(x: 5, label: "five"))
        try await points.putInMemory(Point(x: 6, label: "six"), for: CacheKey("memory"))
        #expect(try await points.peek(for: CacheKey("memory")) == Point(x: 6, label: "six"))
        #expect(try await points.optionalValue(for: CacheKey("none")) { nil } == nil)
        try await points.remove(for: key)
        #expect(try await points.valueIfCached(for: key) == nil)
        #expect(points.cache === cache)
    }

    @Test("data, string and codable conveniences store with their standard codecs")
    func conveniences() async throws {
        let (dir, cache) = makeCache("ycache-conv")
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0) })
        #expect(try await cache.data(for: CacheKey("d")) { bytes } == bytes)
        #expect(try await cache.string(for: CacheKey("s")) { "héllo\0wörld" } == "héllo\0wörld")
        let point = Point(x: 1, label: "one")
        #expect(try await cache.codable(for: CacheKey("j")) { point } == point)
        #expect(try await cache.codable(for: CacheKey("p"), format: .propertyList) { [point] } == [point])

        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.valueIfCached(for: CacheKey("d"), codec: DataCodec()) == bytes)
        #expect(try await fresh.valueIfCached(for: CacheKey("s"), codec: StringCodec()) == "héllo\0wörld")
        #expect(try await fresh.valueIfCached(for: CacheKey("j"), codec: CodableCodec(Point.self)) == point)
        #expect(
            try await fresh.valueIfCached(for: CacheKey("p"), codec: CodableCodec([Point].self, format: .propertyList))
                == [point])
        // The JSON entry is not visible through the property-list codec: the format is in the identity.
        #expect(
            try await fresh.valueIfCached(for: CacheKey("j"), codec: CodableCodec(Point.self, format: .propertyList))
                == nil)
        let calls = Counter()
        _ = try await fresh.codable(for: CacheKey("j"), as: Point.self) {
            calls.increment()
            return point
        }
        #expect(calls.value == 0)
    }

    // MARK: Bad input

    static let oddKeyCases: [CacheKey] = [
        CacheKey(namespace: "a/b", identity: "../../etc/passwd"),
        CacheKey("..", namespace: ".."),
        CacheKey("/").version("/", "/"),
        CacheKey("with\0nul", namespace: "\0").variant("x\0y", "\0"),
        CacheKey("", namespace: ""),
        CacheKey(String(repeating: "h", count: 1 << 20)),
        CacheKey("v").variant(String(repeating: "/..", count: 1000), String(repeating: "\0", count: 1000)),
    ]

    @Test("odd and huge key text is just data: stored, found, listed, never a path", arguments: oddKeyCases)
    func oddKeys(_ key: CacheKey) async throws {
        let (dir, cache) = makeCache("ycache-oddkey")
        #expect(try await cache.value(for: key, codec: Self.codec) { "odd" } == "odd")
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.resolve(for: key, codec: Self.codec) { "regenerated" }.source == .storage)
        #expect(try await fresh.entries(in: key.namespace).map(\.key) == [key])
        // Only the layout's own names appear under the root; the entry is named by its identity.
        let all = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? []
        let known = [
            "layout", "state", "trim.lock", Directory.entriesFolder, Directory.locksFolder, Directory.stagingFolder,
        ]
        #expect(all.allSatisfy { path in known.contains { path == $0 || path.hasPrefix($0 + "/") } }, "\(all)")
        let entry = try #require(entryFiles(in: dir.url).first)
        #expect(
            entry.lastPathComponent == EntryIdentity(key: key, codecIdentifier: Self.codec.identifier).hex + ".entry")
        try await fresh.remove(for: key, codec: Self.codec)
        #expect(try await stored(in: dir, key, Self.codec) == nil)
    }

    // MARK: Budgets

    @Test("a storage budget of 0 or less stores nothing but still returns values", arguments: [0, -5])
    func zeroStorageBudget(_ budget: Int) async throws {
        let dir = TemporaryDirectory("ycache-zero-storage")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: budget)
        #expect(try await cache.value(for: CacheKey("k"), codec: Self.codec) { "v" } == "v")
        #expect(try await cache.peek(for: CacheKey("k"), codec: Self.codec) == "v")
        #expect(entryFiles(in: dir.url).isEmpty)
        #expect(try await stored(in: dir, CacheKey("k"), Self.codec) == nil)
        try await cache.trimStorageIfNeeded()
        #expect(
            try await cache.storageUsage() == YCache.StorageUsage(byteCount: 0, entryCount: 0, maximumByteCount: 0))
    }

    @Test("a memory budget of 0 or less keeps nothing in memory; storage still serves", arguments: [0, -1])
    func zeroMemoryBudget(_ budget: Int) async throws {
        let dir = TemporaryDirectory("ycache-zero-memory")
        let cache = YCache(storageDirectory: dir.url, memoryMaximumCost: budget)
        #expect(try await cache.value(for: CacheKey("k"), codec: Self.codec) { "v" } == "v")
        #expect(try await cache.peek(for: CacheKey("k"), codec: Self.codec) == nil)
        #expect(try await cache.resolve(for: CacheKey("k"), codec: Self.codec) { "x" }.source == .storage)
        try await cache.putInMemory("m", for: CacheKey("free"), codec: Self.codec, cost: .units(0))
        #expect(
            try await cache.peek(for: CacheKey("free"), codec: Self.codec) == nil,
            "a cost-0 value slipped into a 0 budget")
        #expect(cache.engine.memoryTier.store.count == 0)
    }

    @Test("a memory entry-count bound of 0 keeps nothing in memory")
    func zeroMemoryCount() async throws {
        let dir = TemporaryDirectory("ycache-zero-count")
        let cache = YCache(storageDirectory: dir.url, memoryMaximumEntryCount: 0)
        #expect(try await cache.value(for: CacheKey("k"), codec: Self.codec) { "v" } == "v")
        #expect(try await cache.peek(for: CacheKey("k"), codec: Self.codec) == nil)
        #expect(try await cache.resolve(for: CacheKey("k"), codec: Self.codec) { "x" }.source == .storage)
    }

    @Test("a large payload is checksummed and written off the cooperative pool; a small one inline")
    func largeWritesLeaveThePool() async throws {
        let dir = TemporaryDirectory("ycache-large-write")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        try cache.openStorage()
        let handedOff = Counter()
        try await BlockingWork.$observer.withValue({ _ = handedOff.increment() }) {
            let large = Data(count: Policy.offPoolWriteThreshold)
            try await cache.store(large, for: CacheKey("large"), codec: DataCodec())
            #expect(handedOff.value == 1, "the large store ran its write on the calling thread")
            _ = try await cache.data(for: CacheKey("large-generated")) { large }
            #expect(handedOff.value == 2, "the large generation ran its write on the calling thread")
            try await cache.store(Data(count: 4096), for: CacheKey("small"), codec: DataCodec())
            #expect(handedOff.value == 2, "a small write paid for a thread")
        }
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.data(for: CacheKey("large")) { Data() }.count == Policy.offPoolWriteThreshold)
    }
}
