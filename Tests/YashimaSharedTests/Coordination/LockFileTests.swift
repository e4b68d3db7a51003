// The lock file as staging file (I6): a generator writes the entry into its lock file and renames it
// into place, so a lock file left by a killed holder (unlocked, partly written) must be emptied first.

import Foundation
import Testing

@testable import YashimaShared

@Suite struct LockFileTests {
    @Test("a partly written lock file left by a killed holder becomes a valid entry of exactly the right size")
    func leftoverLockFileIsEmptiedBeforeReuse() async throws {
        let (dir, cache) = makeCache("lock-leftover")
        try cache.openStorage()
        let key = CacheKey(namespace: "locks", identity: "leftover")
        let directory = try cache.engine.storageTier.context().get().directory
        let lockPath = directory.lockPath(forKeyDigest: key.stableDigest)
        // Larger than the entry that will be written: without emptying it, its tail would remain.
        let junk = Data(repeating: 0xEE, count: 300_000)
        try writeFile(junk, to: dir.url.appendingPathComponent(lockPath.relative))

        let payload = Data("the real value".utf8)
        let resolution = try await cache.resolve(for: key, codec: DataCodec()) { payload }
        #expect(resolution.source == .generated)
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent(lockPath.relative).path))

        let expectation = EntryExpectation(key: key, codecIdentifier: DataCodec().identifier)
        let entry = dir.url.appendingPathComponent(directory.entryPath(for: expectation.identity).relative)
        let size = try FileManager.default.attributesOfItem(atPath: entry.path)[.size] as? Int
        #expect(
            size == EntryFormat.fixedHeaderSize + expectation.keyBytes.count + expectation.codecBytes.count
                + payload.count)
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.valueIfCached(for: key, codec: DataCodec()) == payload)
    }
}
