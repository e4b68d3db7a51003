// Yashima's behaviours, checked through the public API only: storage accounting, what stays in memory,
// LRU order, errors, optional generators, value types, codec identities. Each test states the behaviour
// it holds YashimaShared to; where YashimaShared differs on purpose the README's "Coming from Yashima"
// table says so, and the test checks our side of it.

import Foundation
import Glibc
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

    // MARK: LRU order

    /// Three 100-byte values; a budget that holds two of them.
    static let lruBudget = 250
    static func lruValue(_ name: String) -> Data { Data(repeating: UInt8(name.utf8.first!), count: 100) }

    @Test("write A, write B, read A from memory, write C over the budget: B goes, A and C stay")
    func recentReadFromMemoryCounts() async throws {
        let directory = ScratchDirectory("lru-memory")
        let cache = YCache(storageDirectory: directory.url, storageMaximumByteCount: Self.lruBudget)
        try await cache.store(Self.lruValue("A"), for: compatKey("A"), codec: DataCodec())
        try await cache.store(Self.lruValue("B"), for: compatKey("B"), codec: DataCodec())
        let read = try await cache.resolve(for: compatKey("A"), codec: DataCodec()) { Data() }
        #expect(read.source == .memory)
        try await cache.store(Self.lruValue("C"), for: compatKey("C"), codec: DataCodec())
        try await Self.expectStored(["A", "C"], missing: ["B"], in: directory)
    }

    @Test("the same across instances: another instance's storage read of A keeps A over B")
    func recentReadFromStorageCounts() async throws {
        let directory = ScratchDirectory("lru-storage")
        let writer = YCache(storageDirectory: directory.url, storageMaximumByteCount: Self.lruBudget)
        let reader = YCache(storageDirectory: directory.url, storageMaximumByteCount: Self.lruBudget)
        try await writer.store(Self.lruValue("A"), for: compatKey("A"), codec: DataCodec())
        try await writer.store(Self.lruValue("B"), for: compatKey("B"), codec: DataCodec())
        let read = try await reader.resolve(for: compatKey("A"), codec: DataCodec()) { Data() }
        #expect(read.source == .storage)
        try await writer.store(Self.lruValue("C"), for: compatKey("C"), codec: DataCodec())
        try await Self.expectStored(["A", "C"], missing: ["B"], in: directory)
    }

    static func expectStored(_ present: [String], missing: [String], in directory: ScratchDirectory) async throws {
        let cold = YCache(storageDirectory: directory.url, storageMaximumByteCount: nil)
        for name in present {
            #expect(try await cold.valueIfCached(for: compatKey(name), codec: DataCodec()) == lruValue(name), "\(name)")
        }
        for name in missing {
            #expect(try await cold.valueIfCached(for: compatKey(name), codec: DataCodec()) == nil, "\(name)")
        }
    }

    @Test("a read-only workload writes nothing: once seen, hits from memory and storage leave the files as they are")
    func readsDoNotWrite() async throws {
        let directory = ScratchDirectory("lru-read-only")
        let writer = YCache(storageDirectory: directory.url)
        let keys = (0..<5).map { compatKey("read-\($0)") }
        for key in keys { try await writer.store(Data(count: 64), for: key, codec: DataCodec()) }
        let reader = YCache(storageDirectory: directory.url)
        // The first hit of each instance after the writes may mark an entry used (later writes happened).
        for key in keys {
            _ = try await reader.valueIfCached(for: key, codec: DataCodec())
            _ = try await writer.peek(for: key, codec: DataCodec())
        }
        func fileTimes() -> [String: [Int]] {
            var times: [String: [Int]] = [:]
            for file in directory.entryFiles {
                var info = stat()
                if lstat(file.path, &info) == 0 {
                    times[file.path] = [
                        info.st_mtim.tv_sec, info.st_mtim.tv_nsec, info.st_ctim.tv_sec, info.st_ctim.tv_nsec,
                    ]
                }
            }
            return times
        }
        let before = fileTimes()
        #expect(before.count == keys.count)
        for _ in 0..<20 {
            for key in keys {
                #expect(try await reader.valueIfCached(for: key, codec: DataCodec()) != nil)
                #expect(try await writer.peek(for: key, codec: DataCodec()) != nil)
            }
        }
        for key in keys {
            _ = try await YCache(storageDirectory: directory.url).valueIfCached(for: key, codec: DataCodec())
        }
        #expect(fileTimes() == before)
    }
}
