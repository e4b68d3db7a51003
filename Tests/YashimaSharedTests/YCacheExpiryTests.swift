// Per-entry expiry: `.after`, `.at`, expired entries as misses in memory and in storage (never
// returned), `removeExpired()`, and expiry in metadata and listings. No test waits for time to pass:
// entries are written already expired, or far from expiring, or read with an explicit clock.

import Foundation
import Testing

@testable import YashimaShared

@Suite("YCache expiry")
struct YCacheExpiryTests {
    static let codec = StringCodec()

    @Test("after: metadata reports the expiry; the entry is served until then, from memory and storage")
    func after() async throws {
        let (dir, cache) = makeCache("expiry-after")
        let key = CacheKey("hour")
        let before = Date()
        let resolution = try await cache.resolve(
            for: key, codec: Self.codec, options: .init(expiry: .after(.seconds(3600)))
        ) {
            "v"
        }
        let metadata = try #require(resolution.metadata)
        let expiresAt = try #require(metadata.expiresAt)
        #expect(expiresAt.timeIntervalSince(before) >= 3599)
        #expect(expiresAt.timeIntervalSince(before) <= 3600 + 300)
        #expect(try await cache.resolve(for: key, codec: Self.codec) { "other" }.source == .memory)
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.resolve(for: key, codec: Self.codec) { "other" }.source == .storage)
        #expect(try await fresh.metadata(for: key, codec: Self.codec)?.expiresAt == metadata.expiresAt)
        #expect(try await cache.metadata(for: key, codec: Self.codec)?.expiresAt == metadata.expiresAt)
    }

    @Test("at: a future date is reported as is")
    func atFuture() async throws {
        let (dir, cache) = makeCache("expiry-at")
        let date = Date(timeIntervalSince1970: 4_000_000_000)
        let key = CacheKey("dated")
        _ = try await cache.value(for: key, codec: Self.codec, options: .init(expiry: .at(date))) { "v" }
        let metadata = try #require(try await YCache(storageDirectory: dir.url).metadata(for: key, codec: Self.codec))
        #expect(abs(try #require(metadata.expiresAt).timeIntervalSince(date)) < 0.000_01)
        #expect(try await cache.metadata(for: CacheKey("never"), codec: Self.codec) == nil)
        _ = try await cache.value(for: CacheKey("never"), codec: Self.codec) { "v" }
        #expect(try await cache.metadata(for: CacheKey("never"), codec: Self.codec)?.expiresAt == nil)
    }

    @Test(
        "a value already expired when stored is returned to its generating caller only, never again",
        arguments: [
            CacheExpiry.at(Date(timeIntervalSinceNow: -60)), .at(Date(timeIntervalSince1970: 0)), .after(.zero),
            .after(.seconds(-5)),
        ])
    func alreadyExpired(_ expiry: CacheExpiry) async throws {
        let (dir, cache) = makeCache("expiry-past")
        let key = CacheKey("past")
        let options = YCache.Options(expiry: expiry)
        let calls = Counter()
        let generate: @Sendable () async throws -> String = { "v\(calls.increment())" }
        #expect(try await cache.value(for: key, codec: Self.codec, options: options, generate) == "v1")
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
        #expect(try await cache.contains(for: key, codec: Self.codec) == false)
        #expect(try await cache.metadata(for: key, codec: Self.codec) == nil)
        #expect(try await cache.value(for: key, codec: Self.codec, options: options, generate) == "v2")
        #expect(try await stored(in: dir, key, Self.codec) == nil)
        #expect(try await cache.entries().isEmpty)
    }

    @Test("an expired entry on disk is a miss that is removed, never returned, and regenerated")
    func expiredInStorage() async throws {
        let dir = TemporaryDirectory("expiry-storage")
        let key = CacheKey("stale", namespace: "expiry")
        let writer = YCache(storageDirectory: dir.url)
        _ = try await writer.value(for: key, codec: Self.codec) { "fresh" }
        let url = try writer.entryURL(key, Self.codec)
        // The same entry, but expired a second ago (a valid file: checksums match).
        let expired = EntryBytes.make(
            key: key, codec: Self.codec.identifier, payload: Array("stale".utf8),
            expiresAt: Syscall.realtimeNanoseconds - 1_000_000_000)
        try replaceFile(at: url, with: Data(expired))

        let reader = YCache(storageDirectory: dir.url)
        #expect(try await reader.metadata(for: key, codec: Self.codec) == nil)
        #expect(
            try await reader.valueIfCached(for: key, codec: Self.codec, options: .init(readFailurePolicy: .throwError))
                == nil)
        #expect(!fileExists(url))
        #expect(reader.statistics.corruptEntries == 0)
        try replaceFile(at: url, with: Data(expired))
        #expect(
            try await YCache(storageDirectory: dir.url).value(for: key, codec: Self.codec) { "regenerated" }
                == "regenerated")
        #expect(try await stored(in: dir, key, Self.codec) == "regenerated")
    }

    @Test("an expired memory item is a miss and is dropped")
    func expiredInMemory() async throws {
        let (_, cache) = makeCache("expiry-memory")
        let key = CacheKey("memory")
        try await cache.putInMemory("old", for: key, codec: Self.codec, expiry: .at(Date(timeIntervalSinceNow: -1)))
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
        #expect(cache.engine.memoryTier.store.count == 0)
        try await cache.putInMemory("live", for: key, codec: Self.codec, expiry: .after(.seconds(3600)))
        #expect(try await cache.peek(for: key, codec: Self.codec) == "live")
    }

    @Test("removeExpired removes and counts only expired entries")
    func removeExpired() async throws {
        let (dir, cache) = makeCache("expiry-remove")
        let past = YCache.Options(expiry: .at(Date(timeIntervalSinceNow: -10)))
        let future = YCache.Options(expiry: .after(.seconds(3600)))
        for index in 0..<3 {
            _ = try await cache.value(for: CacheKey("expired-\(index)"), codec: Self.codec, options: past) { "x" }
        }
        _ = try await cache.value(for: CacheKey("live-timed"), codec: Self.codec, options: future) { "x" }
        _ = try await cache.value(for: CacheKey("live-forever"), codec: Self.codec) { "x" }
        #expect(entryFiles(in: dir.url).count == 5)
        #expect(try await cache.removeExpired() == 3)
        #expect(entryFiles(in: dir.url).count == 2)
        #expect(Set(try await cache.entries().map(\.key.identity)) == ["live-timed", "live-forever"])
        #expect(try await cache.removeExpired() == 0)
        #expect(try await cache.storageUsage().entryCount == 2)
    }

    @Test("expiry instants: overflow and far dates mean never; the past clamps to already expired")
    func expiryInstants() {
        let now: Int64 = 1_700_000_000_000_000_000
        #expect(CacheExpiry.never.expiresAtNanoseconds(now: now) == nil)
        #expect(CacheExpiry.after(.seconds(2)).expiresAtNanoseconds(now: now) == now + 2_000_000_000)
        #expect(CacheExpiry.after(.milliseconds(1)).expiresAtNanoseconds(now: now) == now + 1_000_000)
        #expect(CacheExpiry.after(.seconds(Int64.max)).expiresAtNanoseconds(now: now) == nil)
        #expect(CacheExpiry.after(.seconds(9_223_372_036) + .milliseconds(900)).expiresAtNanoseconds(now: now) == nil)
        #expect(CacheExpiry.after(.seconds(Int64.min)).expiresAtNanoseconds(now: now).map { $0 <= now } == true)
        #expect(CacheExpiry.at(.distantFuture).expiresAtNanoseconds(now: now) == nil)
        #expect(CacheExpiry.at(Date(timeIntervalSince1970: 0)).expiresAtNanoseconds(now: now) == 1)
        #expect(CacheExpiry.at(.distantPast).expiresAtNanoseconds(now: now) == 1)
        #expect(CacheExpiry.at(Date(timeIntervalSince1970: -1e12)).expiresAtNanoseconds(now: now) == 1)
        let expired = CacheExpiry.after(.seconds(-1)).expiresAtNanoseconds(now: now)
        #expect(expired.map { $0 <= now } == true)
    }
}
