// Yashima's behaviours, checked through the public API only: storage accounting, what stays in memory,
// LRU order, errors, optional generators, value types, codec identities. Each test states the behaviour
// it holds YashimaShared to; where YashimaShared differs on purpose the README's "Coming from Yashima"
// table says so, and the test checks our side of it.

import Foundation
import Testing
import YashimaShared

@Suite("Yashima behaviours")
struct BehaviourTests {
    // MARK: Storage accounting

    @Test("usage counts payload bytes: a 7-byte budget holds one 5-byte value, the second write trims the first")
    func payloadAccounting() async throws {
        let directory = ScratchDirectory("usage")
        let cache = YCache(storageDirectory: directory.url, storageMaximumByteCount: 7)
        let codec = PlainTextCodec()
        try await cache.store("12345", for: compatKey("first"), codec: codec)
        try await cache.store("abcde", for: compatKey("second"), codec: codec)
        let usage = try await cache.storageUsage()
        #expect(usage.maximumByteCount == 7)
        #expect(usage.byteCount <= 7)
        #expect(usage.entryCount == 1)
        #expect(usage.allocatedByteCount >= 4096)  // the disk measure has its own name
        let cold = YCache(storageDirectory: directory.url)
        #expect(try await cold.valueIfCached(for: compatKey("second"), codec: codec) == "abcde")
        #expect(try await cold.valueIfCached(for: compatKey("first"), codec: codec) == nil)
    }

    @Test("an explicit trim brings the directory down to the budget itself and returns the usage")
    func explicitTrim() async throws {
        let directory = ScratchDirectory("trim")
        let writer = YCache(storageDirectory: directory.url, storageMaximumByteCount: nil)
        for index in 0..<5 {
            try await writer.store(Data(count: 10), for: compatKey("t\(index)"), codec: DataCodec())
        }
        let trimmer = YCache(storageDirectory: directory.url, storageMaximumByteCount: 30)
        let usage = try await trimmer.trimStorageIfNeeded()
        #expect(usage.byteCount == 30 && usage.entryCount == 3 && usage.maximumByteCount == 30)
        #expect(try await trimmer.storageUsage() == usage)
        let unbounded = try await writer.trimStorageIfNeeded()  // no budget: the usage, nothing removed
        #expect(unbounded.entryCount == 3 && unbounded.maximumByteCount == nil)
    }

    // MARK: Memory

    @Test("storing 150 keys one at a time leaves all 150 in memory")
    func memoryKeepsEveryStoredKey() async throws {
        let directory = ScratchDirectory("memory-150")
        let cache = YCache(storageDirectory: directory.url)
        let keys = (0..<150).map { compatKey("item-\($0)") }
        for key in keys { try await cache.store(Data([1]), for: key, codec: DataCodec()) }
        var inMemory = 0
        for key in keys where try await cache.peek(for: key, codec: DataCodec()) != nil { inMemory += 1 }
        #expect(inMemory == 150)
    }

    @Test("a removal by another instance drops exactly that key from this instance's memory")
    func removalByAnotherInstance() async throws {
        let directory = ScratchDirectory("memory-removal")
        let cache = YCache(storageDirectory: directory.url)
        let other = YCache(storageDirectory: directory.url)
        let keys = (0..<150).map { compatKey("item-\($0)") }
        for key in keys { try await cache.store(Data([1]), for: key, codec: DataCodec()) }
        #expect(try await other.remove(for: keys[40], codec: DataCodec()))
        try await other.store(Data([2]), for: keys[41], codec: DataCodec())
        var kept: [CacheKey] = []
        for key in keys where try await cache.peek(for: key, codec: DataCodec()) != nil { kept.append(key) }
        #expect(kept == keys.filter { $0 != keys[40] && $0 != keys[41] })
        #expect(try await cache.valueIfCached(for: keys[40], codec: DataCodec()) == nil)
        #expect(try await cache.valueIfCached(for: keys[41], codec: DataCodec()) == Data([2]))
    }
}
