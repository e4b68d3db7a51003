// EntryFormat: the golden bytes of a header, a round trip through the parser, and one rejection per
// way a header can be wrong (checked here on bytes in memory; EntryFileTests checks the same damage
// on real files, YCacheCorruptionTests end to end).

import Foundation
import Testing

@testable import YashimaShared

@Suite("EntryFormat")
struct EntryFormatTests {
    /// The golden key of issue 2 (its stable identifier and entry identity are the Yashima vectors).
    static let goldenKey = CacheKey(namespace: "thumbnail", identity: "video-42")
        .variant("size", "320x180").variant("scale", 2).version("renderer", 3)
    static let createdAt: Int64 = 1_700_000_000_123_456_789
    static let expiresAt: Int64 = 1_800_000_000_000_000_000
    static let payload = Array("hello".utf8)

    static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// What a reader does with a whole file in memory: the fixed header, the header checksum, the
    /// identity, then the payload checksum (the order `EntryFile` checks them in).
    static func classify(_ bytes: [UInt8], key: CacheKey, codec: String) -> Result<
        EntryFormat.Header, EntryFormat.Corruption
    > {
        let expectation = EntryExpectation(key: key, codecIdentifier: codec)
        return bytes.withUnsafeBytes { raw in
            let header: EntryFormat.Header
            switch EntryFormat.parseFixedHeader(raw, fileSize: Int64(raw.count)) {
            case .success(let value): header = value
            case .failure(let corruption): return .failure(corruption)
            }
            if case .failure(let corruption) = EntryFormat.validateHeaderChecksum(header, bytes: raw) {
                return .failure(corruption)
            }
            if case .failure(let corruption) = EntryFormat.validateIdentity(
                header, bytes: raw, expectedIdentity: expectation.identity.digest, keyBytes: expectation.keyBytes,
                codecBytes: expectation.codecBytes)
            {
                return .failure(corruption)
            }
            let payload = UnsafeRawBufferPointer(rebasing: raw[header.payloadOffset...])
            guard CRC32C.checksum(payload) == header.payloadChecksum else { return .failure(.payloadChecksumMismatch) }
            return .success(header)
        }
    }

    // MARK: Encoding

    @Test("golden header: fields at their offsets, total size, and a stable checksum")
    func goldenHeader() {
        let key = Self.goldenKey
        let expectation = EntryExpectation(key: key, codecIdentifier: "data-v1")
        let bytes = EntryFormat.encodeHeader(
            keyBytes: key.canonicalBytes, codecIdentifier: "data-v1", entryIdentity: expectation.identity.digest,
            keyStableDigest: key.stableDigest, payloadByteCount: Self.payload.count,
            payloadChecksum: CRC32C.checksum(Self.payload), createdAtNanoseconds: Self.createdAt,
            expiresAtNanoseconds: Self.expiresAt)
        // 128 fixed bytes + 180 canonical key bytes + "data-v1".
        #expect(bytes.count == 315)
        #expect(Array(bytes[0..<8]) == Array("YSHENTRY".utf8))
        #expect(Array(bytes[8..<12]) == [1, 0, 0, 0])  // version 1, flags 0
        #expect(Array(bytes[12..<20]) == [180, 0, 0, 0, 7, 0, 0, 0])  // K = 180, C = 7
        #expect(Array(bytes[24..<32]) == [5, 0, 0, 0, 0, 0, 0, 0])  // P = 5
        #expect(EntryBytes.load(bytes, 32, as: Int64.self) == Self.createdAt)
        #expect(Self.hex(bytes[32..<40]) == "15cd853dfe9c9717")  // little-endian
        #expect(EntryBytes.load(bytes, 40, as: Int64.self) == Self.expiresAt)
        #expect(Self.hex(bytes[48..<52]) == "4cbb719a")  // CRC32C("hello") = 0x9a71bb4c
        #expect(Array(bytes[52..<56]) == [0, 0, 0, 0])
        #expect(Self.hex(bytes[56..<88]) == "5f3a3ae57d96bbf2e16e62da269509d4f1638e6650f243676087636fb8a6a0a4")
        #expect(Self.hex(bytes[88..<120]) == "a02bbdf6fd55ad4512872772211b170d6693e8e80faefb18344ca7a3b0bd7791")
        #expect(Array(bytes[120..<128]) == [0, 0, 0, 0, 0, 0, 0, 0])
        #expect(Array(bytes[128..<308]) == key.canonicalBytes)
        #expect(Array(bytes[308..<315]) == Array("data-v1".utf8))
        // The header checksum covers everything but itself; its golden value pins the whole layout.
        let checksum = EntryBytes.load(bytes, 20, as: UInt32.self)
        #expect(checksum == bytes.withUnsafeBytes { EntryFormat.headerChecksum($0) })
        #expect(checksum == 0x4AA4_3157, "golden header checksum: \(String(checksum, radix: 16))")
    }

    @Test("offsets come from widths: each field starts where the previous ends")
    func offsetTable() {
        typealias O = EntryFormat.Offset
        let table = [
            (O.magic, 8), (O.version, 2), (O.flags, 2), (O.keyByteCount, 4), (O.codecByteCount, 4),
            (O.headerChecksum, 4), (O.payloadByteCount, 8), (O.createdAt, 8), (O.expiresAt, 8),
            (O.payloadChecksum, 4), (O.reserved1, 4), (O.entryIdentity, 32), (O.keyStableIdentifier, 32),
            (O.reserved2, 8),
        ]
        var next = 0
        for (offset, width) in table {
            #expect(offset == next)
            next = offset + width
        }
        #expect(next == O.end)
        #expect(EntryFormat.fixedHeaderSize == 128)
    }

    // MARK: Decoding

    @Test("round trip: a parsed header equals what was encoded, and every check passes")
    func roundTrip() throws {
        let key = CacheKey("round", namespace: "trip").variant("w", 64)
        let payload = Array(repeating: UInt8(7), count: 1000)
        let bytes = EntryBytes.make(
            key: key, codec: "string-utf8-v1", payload: payload, createdAt: Self.createdAt, expiresAt: Self.expiresAt)
        let header = try Self.classify(bytes, key: key, codec: "string-utf8-v1").get()
        #expect(header.keyByteCount == key.canonicalBytes.count)
        #expect(header.codecByteCount == "string-utf8-v1".utf8.count)
        #expect(header.payloadByteCount == 1000)
        #expect(header.createdAtNanoseconds == Self.createdAt)
        #expect(header.expiresAtNanoseconds == Self.expiresAt)
        #expect(header.payloadChecksum == CRC32C.checksum(payload))
        #expect(header.entryIdentity == EntryIdentity(key: key, codecIdentifier: "string-utf8-v1").digest)
        #expect(header.keyStableDigest == key.stableDigest)
        #expect(header.fileSize == Int64(bytes.count))
        #expect(Array(bytes[header.keyOffset..<header.codecOffset]) == key.canonicalBytes)
        #expect(CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]) == key)
        #expect(Array(bytes[header.payloadOffset...]) == payload)
    }

    @Test("an empty payload and an empty codec identifier round-trip")
    func emptyParts() throws {
        let key = CacheKey("e")
        let bytes = EntryBytes.make(key: key, codec: "", payload: [])
        let header = try Self.classify(bytes, key: key, codec: "").get()
        #expect(header.payloadByteCount == 0)
        #expect(header.codecByteCount == 0)
        #expect(bytes.count == EntryFormat.fixedHeaderSize + key.canonicalBytes.count)
    }

    @Test("expiry: 0 never expires; otherwise expired from the instant on")
    func expiry() throws {
        let key = CacheKey("x")
        let never = try Self.classify(EntryBytes.make(key: key, codec: "c", payload: [1]), key: key, codec: "c").get()
        #expect(!never.isExpired(atNanoseconds: .max))
        let timed = try Self.classify(
            EntryBytes.make(key: key, codec: "c", payload: [1], expiresAt: 1000), key: key, codec: "c"
        ).get()
        #expect(!timed.isExpired(atNanoseconds: 999))
        #expect(timed.isExpired(atNanoseconds: 1000))
    }

    // MARK: Rejections (one per way a header can be wrong)

    @Test("each damage is rejected with its own reason", arguments: EntryDamage.allCases)
    func rejection(_ damage: EntryDamage) {
        let key = CacheKey("damaged", namespace: "format").version("v", 1)
        let codec = "data-v1"
        let payload = Array((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let entry = EntryBytes.make(key: key, codec: codec, payload: payload)
        let damaged = damage.apply(to: entry, key: key, codec: codec, payload: payload)
        let expected = damage.expected(
            entryCount: entry.count, keyCount: key.canonicalBytes.count, codecCount: codec.utf8.count)
        switch Self.classify(damaged, key: key, codec: codec) {
        case .success: Issue.record("\(damage) was accepted")
        case .failure(let corruption): #expect(corruption == expected)
        }
    }

    @Test("the header checksum is checked over the key and codec bytes the header declares")
    func checksumNeedsWholeHeader() throws {
        let key = CacheKey("k")
        let bytes = EntryBytes.make(key: key, codec: "data-v1", payload: [1, 2, 3])
        let header = try Self.classify(bytes, key: key, codec: "data-v1").get()
        let short = Array(bytes.prefix(header.payloadOffset - 1))
        let result = short.withUnsafeBytes { EntryFormat.validateHeaderChecksum(header, bytes: $0) }
        #expect(throws: EntryFormat.Corruption.tooShort) { try result.get() }
    }

    @Test("every rejection has a readable reason")
    func descriptions() {
        let all: [EntryFormat.Corruption] = [
            .tooShort, .badMagic, .unsupportedVersion(9), .unknownFlags(4), .badLengths,
            .sizeMismatch(expected: 10, actual: 11), .headerChecksumMismatch, .identityMismatch,
            .payloadChecksumMismatch,
        ]
        #expect(Set(all.map(\.description)).count == all.count)
        #expect(EntryFormat.Corruption.unsupportedVersion(9).description.contains("9"))
    }
}
