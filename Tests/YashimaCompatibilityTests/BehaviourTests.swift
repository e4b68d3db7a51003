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

    // MARK: Errors

    @Test("a codec's encode error reaches the caller as it threw it, under every write policy; nothing is stored")
    func encodeErrorsPassThrough() async throws {
        let directory = ScratchDirectory("encode-error")
        let cache = YCache(storageDirectory: directory.url)
        let codec = FailingCodec(failsToEncode: true)
        let key = compatKey("unencodable")
        await #expect(throws: CodecFailure.cannotEncode) { try await cache.value(for: key, codec: codec) { "v" } }
        await #expect(throws: CodecFailure.cannotEncode) {
            try await cache.value(for: key, codec: codec, options: .init(writeFailurePolicy: .bestEffort)) { "v" }
        }
        await #expect(throws: CodecFailure.cannotEncode) { try await cache.store("v", for: key, codec: codec) }
        await #expect(throws: CodecFailure.cannotEncode) {
            try await cache.store("v", for: key, codec: codec, options: .init(writePolicy: .memoryOnly))
        }
        await #expect(throws: CodecFailure.cannotEncode) { try await cache.putInMemory("v", for: key, codec: codec) }
        #expect(try await cache.peek(for: key, codec: codec) == nil)
        #expect(directory.entryFiles.isEmpty)
        await #expect(throws: EncodingError.self) {
            let _: Double = try await cache.codable(for: compatKey("nan")) { .nan }  // JSON has no NaN
        }
    }

    @Test("a codec's decode error is a miss by default and reaches the caller as it threw it under .throwError")
    func decodeErrorsPassThrough() async throws {
        let directory = ScratchDirectory("decode-error")
        let codec = FailingCodec()
        let key = compatKey("undecodable")
        try await YCache(storageDirectory: directory.url).store("stored", for: key, codec: codec)
        await #expect(throws: CodecFailure.cannotDecode) {
            try await YCache(storageDirectory: directory.url).valueIfCached(
                for: key, codec: codec, options: .init(readFailurePolicy: .throwError))
        }
        try await YCache(storageDirectory: directory.url).store("stored", for: key, codec: codec)
        let lenient = YCache(storageDirectory: directory.url)
        #expect(try await lenient.resolve(for: key, codec: codec) { "again" }.source == .generated)
        // Bytes that are not JSON under the JSON codec's identifier: the decoder's own error.
        let json = CodableCodec<[String: Int]>()
        let identical = FixedIdentifierCodec(identifier: json.identifier, wrapped: DataCodec())
        try await YCache(storageDirectory: directory.url).store(
            Data("not json".utf8), for: compatKey("json"), codec: identical)
        await #expect(throws: DecodingError.self) {
            try await YCache(storageDirectory: directory.url).valueIfCached(
                for: compatKey("json"), codec: json, options: .init(readFailurePolicy: .throwError))
        }
    }

    // MARK: optionalValue

    @Test("optionalValue rethrows a generator's cacheMiss, except under .cacheOnly, which never generates")
    func optionalValueCacheMiss() async throws {
        let directory = ScratchDirectory("optional-miss")
        let cache = YCache(storageDirectory: directory.url)
        let codec = PlainTextCodec()
        await #expect(throws: YCache.Error.cacheMiss) {
            _ = try await cache.optionalValue(for: compatKey("miss"), codec: codec) { throw YCache.Error.cacheMiss }
        }
        await #expect(throws: YCache.Error.cacheMiss) {
            _ = try await cache.using(codec).optionalValue(for: compatKey("miss")) { throw YCache.Error.cacheMiss }
        }
        #expect(try await cache.valueIfCached(for: compatKey("miss"), codec: codec) == nil)
        let calls = CallCounter()
        let cached = try await cache.optionalValue(
            for: compatKey("never"), codec: codec, options: .init(lookupPolicy: .cacheOnly)
        ) {
            _ = await calls.next()
            return "should not run"
        }
        #expect(cached == nil)
        #expect(await calls.count == 0)
        #expect(try await cache.optionalValue(for: compatKey("nil"), codec: codec) { nil } == nil)
        #expect(try await cache.optionalValue(for: compatKey("nil"), codec: codec) { "later" } == "later")
        #expect(try await cache.valueIfCached(for: compatKey("nil"), codec: codec) == "later")
    }

    // MARK: Value types

    @Test("a value of another type under the same key and codec identifier in memory is valueTypeMismatch")
    func valueTypeMismatch() async throws {
        let directory = ScratchDirectory("mismatch")
        let cache = YCache(storageDirectory: directory.url)
        let text = PlainTextCodec(identifier: "compat-shared-id-v1")
        let number = NumberCodec(identifier: "compat-shared-id-v1")
        let key = compatKey("typed")
        try await cache.store("text", for: key, codec: text)
        await #expect(throws: YCache.Error.valueTypeMismatch) { try await cache.peek(for: key, codec: number) }
        await #expect(throws: YCache.Error.valueTypeMismatch) { try await cache.value(for: key, codec: number) { 1 } }
        await #expect(throws: YCache.Error.valueTypeMismatch) {
            try await cache.valueIfCached(for: key, codec: number)
        }
        await #expect(throws: YCache.Error.valueTypeMismatch) {
            try await cache.optionalValue(for: key, codec: number) { 1 }
        }
        await #expect(throws: YCache.Error.valueTypeMismatch) {
            try await cache.using(number).value(for: key, options: .init(lookupPolicy: .cacheOnly)) { 1 }
        }
        // The memory copy is not disturbed, contains/metadata do not decode, and a refresh skips memory.
        #expect(try await cache.peek(for: key, codec: text) == "text")
        #expect(try await cache.contains(for: key, codec: number))
        #expect(try await cache.refresh(for: key, codec: number) { 7 } == 7)
        #expect(try await cache.peek(for: key, codec: number) == 7)
        await #expect(throws: YCache.Error.valueTypeMismatch) { try await cache.peek(for: key, codec: text) }
    }

    // MARK: Identities

    @Test("codec identifiers and entry identities are Yashima's: the property-list identifier, golden vectors")
    func identities() async throws {
        let typeName = String(reflecting: [String: Int].self)
        #expect(typeName == "Swift.Dictionary<Swift.String, Swift.Int>")
        #expect(CodableCodec<[String: Int]>(format: .json).identifier == "codable-json-v1:" + typeName)
        #expect(
            CodableCodec<[String: Int]>(format: .propertyList).identifier == "codable-property-list-binary-v1:"
                + typeName)
        #expect(DataCodec().identifier == "data-v1")

        let key = CacheKey(namespace: "thumbnail", identity: "video-42").variant("size", "320x180").variant("scale", 2)
            .version("renderer", 3)
        #expect(key.stableIdentifier == "a02bbdf6fd55ad4512872772211b170d6693e8e80faefb18344ca7a3b0bd7791")
        // The entry file is named by the entry identity (SHA-256 of the key's canonical form and the codec).
        let expected = [
            "data-v1": "5f3a3ae57d96bbf2e16e62da269509d4f1638e6650f243676087636fb8a6a0a4",
            "json": "c6106aeab7508c242253011beb2770390537cd631ad0a65eaa8dcb7e794f6025",
            "plist": "c4d9bd50f4c74b9b21f4f732653e09295f216af33fe4025e945bf3266d64e1c6",
        ]
        for (name, identity) in expected {
            let directory = ScratchDirectory("identity-\(name)")
            let cache = YCache(storageDirectory: directory.url)
            switch name {
            case "data-v1": try await cache.store(Data([1]), for: key, codec: DataCodec())
            case "json": try await cache.store(["a": 1], for: key, codec: CodableCodec<[String: Int]>(format: .json))
            default:
                try await cache.store(["a": 1], for: key, codec: CodableCodec<[String: Int]>(format: .propertyList))
            }
            #expect(directory.entryFiles.map(\.lastPathComponent) == [identity + ".entry"], "\(name)")
        }
    }
}

/// Integers as decimal text, with an identifier the test chooses (to share it with another codec).
struct NumberCodec: CacheCodec {
    var identifier: String

    func encode(_ value: Int) throws -> Data { Data(String(value).utf8) }
    func decode(_ data: Data) throws -> Int {
        guard let value = Int(String(decoding: data, as: UTF8.self)) else { throw CodecFailure.cannotDecode }
        return value
    }
}

/// Another codec's bytes under an identifier the test chooses (to plant an entry another codec reads).
struct FixedIdentifierCodec<Wrapped: CacheCodec>: CacheCodec {
    var identifier: String
    var wrapped: Wrapped

    func encode(_ value: Wrapped.Value) throws -> Data { try wrapped.encode(value) }
    func decode(_ data: Data) throws -> Wrapped.Value { try wrapped.decode(data) }
}
