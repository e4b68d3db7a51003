import Foundation
import Testing

@testable import YashimaShared

@Suite struct SmokeTests {
    @Test func generateThenStorageHitFromFreshInstance() async throws {
        let dir = TemporaryDirectory("smoke")
        let key = CacheKey(namespace: "t", identity: "a")
        let first = YCache(storageDirectory: dir.url)
        let r1 = try await first.resolve(for: key, codec: DataCodec()) { Data("hello".utf8) }
        #expect(r1.source == .generated)
        let r2 = try await first.resolve(for: key, codec: DataCodec()) { Data("nope".utf8) }
        #expect(r2.source == .memory)
        let second = YCache(storageDirectory: dir.url)
        let r3 = try await second.resolve(for: key, codec: DataCodec()) { Data("nope".utf8) }
        #expect(r3.source == .storage)
        #expect(r3.value == Data("hello".utf8))
        let big = Data((0..<300_000).map { UInt8($0 & 0xff) })
        let bigKey = CacheKey("big")
        _ = try await first.data(for: bigKey) { big }
        let third = YCache(storageDirectory: dir.url)
        let r4 = try await third.resolve(for: bigKey, codec: DataCodec()) { Data() }
        #expect(r4.source == .storage)
        #expect(r4.value == big)
        var copy = r4.value
        copy[0] = 99  // must not crash (private writable mapping)
        #expect(copy[0] == 99)
    }
}
