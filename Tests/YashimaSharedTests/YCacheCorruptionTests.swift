// Corrupt entries end to end: a real entry written through YCache is damaged on disk the way another
// writer would (a modified copy renamed over it), then a fresh instance looks it up. Corrupt is a miss
// that removes the file and regenerates, or a typed error under `readFailurePolicy: .throwError`.

import Foundation
import Testing

@testable import YashimaShared

@Suite("YCache corrupt entries")
struct YCacheCorruptionTests {
    static let codec = DataCodec()
    static let strict = YCache.Options(readFailurePolicy: .throwError)

    /// A small payload (read into a buffer) and one past `Policy.mapThreshold` (mapped), made once.
    static let payloads: [Int: Data] = Dictionary(
        uniqueKeysWithValues: [100, 140_000].map { size in
            (size, Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13) }))
        })

    /// Writes an entry through YCache, damages it, and returns the entry URL, the damaged bytes and the
    /// reason a reader must give.
    static func damagedEntry(
        _ damage: EntryDamage, in dir: TemporaryDirectory, key: CacheKey, payloadSize: Int
    ) async throws -> (url: URL, bytes: Data, reason: EntryFormat.Corruption) {
        let payload = payloads[payloadSize]!
        let writer = YCache(storageDirectory: dir.url)
        _ = try await writer.value(for: key, codec: codec) { payload }
        let url = try writer.entryURL(key, codec)
        let entry = Array(try Data(contentsOf: url))
        let damaged = Data(damage.apply(to: entry, key: key, codec: codec.identifier, payload: Array(payload)))
        try replaceFile(at: url, with: damaged)
        let reason = damage.expected(
            entryCount: entry.count, keyCount: key.canonicalBytes.count, codecCount: codec.identifier.utf8.count)
        return (url, damaged, reason)
    }

    @Test(
        "a damaged entry is a miss: a fresh instance replaces it with a regenerated value",
        arguments: EntryDamage.allCases, [100, 140_000])
    func damagedIsMiss(_ damage: EntryDamage, payloadSize: Int) async throws {
        let dir = TemporaryDirectory("corrupt")
        let key = CacheKey("victim", namespace: "corrupt").variant("size", payloadSize)
        let (url, damaged, _) = try await Self.damagedEntry(damage, in: dir, key: key, payloadSize: payloadSize)

        let reader = YCache(storageDirectory: dir.url)
        let calls = Counter()
        let regenerated = try await reader.resolve(for: key, codec: Self.codec) {
            calls.increment()
            return Data("regenerated".utf8)
        }
        #expect(regenerated.source == .generated)
        #expect(regenerated.value == Data("regenerated".utf8))
        #expect(calls.value == 1)
        #expect(reader.statistics.corruptEntries == 1)
        #expect(try Data(contentsOf: url) != damaged, "the corrupt file is still there")
        let again = try await YCache(storageDirectory: dir.url).resolve(for: key, codec: Self.codec) { Data() }
        #expect(again.source == .storage)
        #expect(again.value == Data("regenerated".utf8))
    }

    @Test("a damaged entry found by valueIfCached is removed")
    func damagedIsRemoved() async throws {
        for damage in [EntryDamage.flipKeyBytes, .truncatedByOneByte, .entryOfAnotherKey, .flipPayloadByte] {
            let dir = TemporaryDirectory("corrupt-removed")
            let key = CacheKey("removed", namespace: "corrupt")
            let (url, _, _) = try await Self.damagedEntry(damage, in: dir, key: key, payloadSize: 100)
            let reader = YCache(storageDirectory: dir.url)
            #expect(try await reader.valueIfCached(for: key, codec: Self.codec) == nil)
            #expect(!fileExists(url), "\(damage)")
            #expect(reader.statistics.corruptEntries == 1)
            #expect(try await reader.storageUsage().entryCount == 0)
        }
    }

    @Test(
        "under readFailurePolicy .throwError a damaged entry throws corruptEntry with its reason",
        arguments: EntryDamage.allCases)
    func damagedThrows(_ damage: EntryDamage) async throws {
        let dir = TemporaryDirectory("corrupt-strict")
        let key = CacheKey("strict", namespace: "corrupt")
        let (_, _, reason) = try await Self.damagedEntry(damage, in: dir, key: key, payloadSize: 100)
        let calls = Counter()
        await #expect(throws: YCache.Error.corruptEntry(reason: reason.description)) {
            try await YCache(storageDirectory: dir.url).value(for: key, codec: Self.codec, options: Self.strict) {
                calls.increment()
                return Data()
            }
        }
        #expect(calls.value == 0)
    }

    @Test("valueIfCached under .throwError throws corruptEntry too")
    func damagedThrowsIfCached() async throws {
        let dir = TemporaryDirectory("corrupt-strict-ifcached")
        let key = CacheKey("strict-if-cached", namespace: "corrupt")
        let (_, _, reason) = try await Self.damagedEntry(.flipReserved2, in: dir, key: key, payloadSize: 140_000)
        await #expect(throws: YCache.Error.corruptEntry(reason: reason.description)) {
            try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: Self.codec, options: Self.strict)
        }
    }

    @Test("a payload the codec cannot decode is a miss, or the codec's own error under .throwError")
    func undecodable() async throws {
        let dir = TemporaryDirectory("undecodable")
        let key = CacheKey("undecodable")
        let codec = UndecodableCodec()
        _ = try await YCache(storageDirectory: dir.url).value(for: key, codec: codec) { "stored" }
        let url = try YCache(storageDirectory: dir.url).entryURL(key, codec)
        #expect(fileExists(url))

        await #expect(throws: CodecFailure()) {
            try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec, options: Self.strict)
        }
        _ = try await YCache(storageDirectory: dir.url).value(for: key, codec: codec) { "stored" }
        let reader = YCache(storageDirectory: dir.url)
        #expect(try await reader.valueIfCached(for: key, codec: codec) == nil)
        #expect(!fileExists(url))
        #expect(reader.statistics.corruptEntries == 1)
    }

    @Test("metadata and contains treat a damaged entry as absent without throwing")
    func damagedMetadata() async throws {
        let dir = TemporaryDirectory("corrupt-meta")
        let key = CacheKey("meta", namespace: "corrupt")
        _ = try await Self.damagedEntry(.flipCreatedAt, in: dir, key: key, payloadSize: 100)
        let reader = YCache(storageDirectory: dir.url)
        #expect(try await reader.metadata(for: key, codec: Self.codec) == nil)
        #expect(try await reader.contains(for: key, codec: Self.codec) == false)
        #expect(try await reader.entries().isEmpty)
    }
}
