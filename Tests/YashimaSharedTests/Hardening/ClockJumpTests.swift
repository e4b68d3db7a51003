// Clock jumps (I9, I11): entry mtimes in the future and created times after now. Trim still converges
// (it walks every entry oldest mtime first, whatever the clock says), a hit pulls a future mtime back to
// now so LRU order recovers, and expiry uses only the absolute expiry stored in the header.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: clock jumps")
    struct ClockJumps {
        let dir = TemporaryDirectory("clock")
        static let year: Int64 = 365 * 24 * 3600

        /// Sets a file's mtime to `seconds` since the epoch (without following links).
        func setModified(_ path: String, seconds: Int64) {
            var times = [timespec(tv_sec: Int(seconds), tv_nsec: 0), timespec(tv_sec: Int(seconds), tv_nsec: 0)]
            _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
        }

        func modified(_ path: String) -> Int64 { Int64(Hardening.linkStatus(path)?.st_mtim.tv_sec ?? 0) }

        var now: Int64 { Int64(time(nil)) }

        /// Writes a valid entry for `key` with chosen created and expiry times (nanoseconds).
        func writeEntry(_ key: CacheKey, payload: Data, createdAt: Int64, expiresAt: Int64) throws {
            let expectation = EntryExpectation(key: key, codecIdentifier: DataCodec().identifier)
            let header = EntryFormat.encodeHeader(
                keyBytes: expectation.keyBytes, codecIdentifier: DataCodec().identifier,
                entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest,
                payloadByteCount: payload.count, payloadChecksum: payload.withUnsafeBytes { CRC32C.checksum($0) },
                createdAtNanoseconds: createdAt, expiresAtNanoseconds: expiresAt)
            let files = KeyFiles(root: dir.path, key: key)
            Hardening.makePrivateFolder(files.entryFanOut)
            try (Data(header) + payload).write(to: URL(fileURLWithPath: files.entry))
        }

        @Test("trim converges with an entry whose mtime is years in the future")
        func trimConvergesWithFutureMtime() async throws {
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
            let keys = (0..<6).map { CacheKey("e\($0)") }
            for (index, key) in keys.enumerated() {
                _ = try await cache.data(for: key) { Data(count: 3000) }
                setModified(KeyFiles(root: dir.path, key: key).entry, seconds: now - 1000 + Int64(index))
            }
            setModified(KeyFiles(root: dir.path, key: keys[0]).entry, seconds: now + 10 * Self.year)
            let budgeted = YCache(storageDirectory: dir.url, storageMaximumByteCount: 2 * 4096)
            try await budgeted.trimStorageIfNeeded()
            let usage = try await budgeted.storageUsage()
            #expect(usage.byteCount <= 2 * 4096)
            // LRU by mtime: the future one counts as newest and survives with the newest real one.
            let survivors = keys.filter { Hardening.isRegularFile(KeyFiles(root: dir.path, key: $0).entry) }
            #expect(survivors == [keys[0], keys[5]])
        }

        @Test("trim converges when every mtime is in the future (the clock jumped back), oldest first")
        func trimConvergesWhenClockJumpedBack() async throws {
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
            let keys = (0..<5).map { CacheKey("f\($0)") }
            for (index, key) in keys.enumerated() {
                _ = try await cache.data(for: key) { Data(count: 3000) }
                setModified(KeyFiles(root: dir.path, key: key).entry, seconds: now + Self.year + Int64(index))
            }
            let budgeted = YCache(storageDirectory: dir.url, storageMaximumByteCount: 4096)
            try await budgeted.trimStorageIfNeeded()
            #expect(try await budgeted.storageUsage().byteCount <= 4096)
            let survivors = keys.filter { Hardening.isRegularFile(KeyFiles(root: dir.path, key: $0).entry) }
            #expect(survivors == [keys[4]])
            // Writes keep the budget afterwards too.
            _ = try await budgeted.data(for: CacheKey("after")) { Data(count: 3000) }
            #expect(try await budgeted.storageUsage().byteCount <= 4096)
        }

        @Test("a hit on an entry with a future mtime touches it back to now")
        func hitRepairsFutureMtime() async throws {
            let key = CacheKey("touch")
            _ = try await YCache(storageDirectory: dir.url).data(for: key) { Data("v".utf8) }
            let path = KeyFiles(root: dir.path, key: key).entry
            setModified(path, seconds: now + Self.year)
            let hit = try await YCache(storageDirectory: dir.url).resolve(for: key, codec: DataCodec()) { Data() }
            #expect(hit.source == .storage)
            #expect(modified(path) <= now + 1)
        }

        @Test("a created time after now does not matter: expiry uses the stored absolute expiry")
        func createdAfterNow() async throws {
            let nanosecond: Int64 = 1_000_000_000
            let future = (now + 10 * Self.year) * nanosecond
            let fresh = CacheKey("created-in-future")
            try writeEntry(fresh, payload: Data("stored".utf8), createdAt: future, expiresAt: (now + 3600) * nanosecond)
            let expired = CacheKey("created-in-future-but-expired")
            try writeEntry(expired, payload: Data("stale".utf8), createdAt: future, expiresAt: (now - 1) * nanosecond)
            let never = CacheKey("created-in-future-never-expires")
            try writeEntry(never, payload: Data("forever".utf8), createdAt: future, expiresAt: 0)

            let cache = YCache(storageDirectory: dir.url)
            let hit = try await cache.resolve(for: fresh, codec: DataCodec()) { Data("generated".utf8) }
            #expect(hit.value == Data("stored".utf8))
            #expect(try #require(hit.metadata).createdAt > Date())
            let miss = try await cache.resolve(for: expired, codec: DataCodec()) { Data("generated".utf8) }
            #expect(miss.value == Data("generated".utf8))
            #expect(miss.source == .generated)
            #expect(try await cache.data(for: never) { Data() } == Data("forever".utf8))
            #expect(try await cache.removeExpired() == 0)  // the regenerated one never expires
        }

        @Test("an entry stored with an expiry keeps its absolute instant, whatever its mtime says")
        func expiryIgnoresMtime() async throws {
            let key = CacheKey("expiring")
            let cache = YCache(storageDirectory: dir.url)
            _ = try await cache.data(for: key, options: .init(expiry: .after(.seconds(3600)))) { Data("v".utf8) }
            let path = KeyFiles(root: dir.path, key: key).entry
            setModified(path, seconds: now - 10 * Self.year)  // an ancient mtime: LRU-cold, not expired
            let reader = YCache(storageDirectory: dir.url)
            #expect(try await reader.valueIfCached(for: key, codec: DataCodec()) == Data("v".utf8))
            let metadata = try #require(try await reader.metadata(for: key, codec: DataCodec()))
            let expiresAt = try #require(metadata.expiresAt)
            #expect(expiresAt.timeIntervalSinceNow > 3000 && expiresAt.timeIntervalSinceNow <= 3600)
        }
    }
}
