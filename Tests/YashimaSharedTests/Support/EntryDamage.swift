// One value per way an entry file can be damaged, with the rejection `EntryFormat`/`EntryFile` must
// report for it. Shared by the format, file and end-to-end corruption tests so that every header
// rejection is exercised at each level.

import Foundation
import Testing

@testable import YashimaShared

/// Builds complete entry files (header + payload) in memory, the way `EntryFile.publish` lays them out.
enum EntryBytes {
    static func make(
        key: CacheKey, codec: String, payload: [UInt8], createdAt: Int64 = 1_700_000_000_000_000_000,
        expiresAt: Int64 = 0, identityOf identityKey: CacheKey? = nil
    ) -> [UInt8] {
        let expectation = EntryExpectation(key: identityKey ?? key, codecIdentifier: codec)
        return EntryFormat.encodeHeader(
            keyBytes: key.canonicalBytes, codecIdentifier: codec, entryIdentity: expectation.identity.digest,
            keyStableDigest: key.stableDigest, payloadByteCount: payload.count,
            payloadChecksum: CRC32C.checksum(payload), createdAtNanoseconds: createdAt,
            expiresAtNanoseconds: expiresAt) + payload
    }

    static func load<T: FixedWidthInteger>(_ bytes: [UInt8], _ offset: Int, as: T.Type = T.self) -> T {
        bytes.withUnsafeBytes { EntryFormat.load($0, offset) }
    }

    static func store<T: FixedWidthInteger>(_ value: T, _ offset: Int, in bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { EntryFormat.store(value, at: offset, in: $0) }
    }
}

/// A way to damage a valid entry file of `key` encoded by `codec`.
enum EntryDamage: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case badMagic
    case unsupportedVersion
    case unknownFlags
    case keyLengthOutOfRange
    case codecLengthOutOfRange
    case payloadLengthOutOfRange
    case truncatedByOneByte
    case extraByte
    case truncatedInsideHeader
    case zeroLength
    case garbage
    // A flipped byte in each header field region, the key bytes and the codec identifier.
    case flipKeyByteCount
    case flipCodecByteCount
    case flipHeaderChecksum
    case flipPayloadByteCount
    case flipCreatedAt
    case flipExpiresAt
    case flipPayloadChecksum
    case flipReserved1
    case flipEntryIdentity
    case flipKeyStableIdentifier
    case flipReserved2
    case flipKeyBytes
    case flipCodecBytes
    // Valid entries that belong elsewhere.
    case entryOfAnotherKey
    case entryOfAnotherCodec
    case forgedIdentity
    // The payload.
    case flipPayloadByte

    var testDescription: String { rawValue }

    /// The damaged file for a valid `entry` of `key`/`codec` with `payload`.
    func apply(to entry: [UInt8], key: CacheKey, codec: String, payload: [UInt8]) -> [UInt8] {
        var bytes = entry
        let keyCount = key.canonicalBytes.count
        func flip(_ offset: Int) { bytes[offset] ^= 0x01 }
        switch self {
        case .badMagic: bytes[EntryFormat.Offset.magic] ^= 0xFF
        case .unsupportedVersion: EntryBytes.store(UInt16(2), EntryFormat.Offset.version, in: &bytes)
        case .unknownFlags: EntryBytes.store(UInt16(1), EntryFormat.Offset.flags, in: &bytes)
        case .keyLengthOutOfRange: EntryBytes.store(UInt32.max, EntryFormat.Offset.keyByteCount, in: &bytes)
        case .codecLengthOutOfRange:
            EntryBytes.store(
                UInt32(EntryFormat.maximumCodecByteCount + 1), EntryFormat.Offset.codecByteCount, in: &bytes)
        case .payloadLengthOutOfRange: EntryBytes.store(UInt64.max, EntryFormat.Offset.payloadByteCount, in: &bytes)
        case .truncatedByOneByte: bytes.removeLast()
        case .extraByte: bytes.append(0)
        case .truncatedInsideHeader: bytes = Array(bytes.prefix(EntryFormat.fixedHeaderSize - 28))
        case .zeroLength: bytes = []
        case .garbage:
            var state: UInt64 = 0x1234_5678
            bytes = (0..<4096).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 33)
            }
        case .flipKeyByteCount: flip(EntryFormat.Offset.keyByteCount)
        case .flipCodecByteCount: flip(EntryFormat.Offset.codecByteCount)
        case .flipHeaderChecksum: flip(EntryFormat.Offset.headerChecksum)
        case .flipPayloadByteCount: flip(EntryFormat.Offset.payloadByteCount)
        case .flipCreatedAt: flip(EntryFormat.Offset.createdAt + 3)
        case .flipExpiresAt: flip(EntryFormat.Offset.expiresAt)
        case .flipPayloadChecksum: flip(EntryFormat.Offset.payloadChecksum)
        case .flipReserved1: flip(EntryFormat.Offset.reserved1)
        case .flipEntryIdentity: flip(EntryFormat.Offset.entryIdentity + 17)
        case .flipKeyStableIdentifier: flip(EntryFormat.Offset.keyStableIdentifier + 31)
        case .flipReserved2: flip(EntryFormat.Offset.reserved2 + 7)
        case .flipKeyBytes: flip(EntryFormat.fixedHeaderSize + keyCount / 2)
        case .flipCodecBytes: flip(EntryFormat.fixedHeaderSize + keyCount)
        case .entryOfAnotherKey:
            bytes = EntryBytes.make(key: key.variant("other", 1), codec: codec, payload: payload)
        case .entryOfAnotherCodec:
            bytes = EntryBytes.make(key: key, codec: codec + "-other", payload: payload)
        case .forgedIdentity:
            // This path's identity digest, but another key's bytes: the header checksum is valid.
            bytes = EntryBytes.make(key: key.variant("other", 1), codec: codec, payload: payload, identityOf: key)
        case .flipPayloadByte: flip(bytes.count - 1 - payload.count / 3)
        }
        return bytes
    }

    /// The rejection a reader must report for the damaged file made from an entry of `entryCount` bytes.
    func expected(entryCount n: Int, keyCount: Int, codecCount: Int) -> EntryFormat.Corruption {
        switch self {
        case .badMagic, .garbage: return .badMagic
        case .unsupportedVersion: return .unsupportedVersion(2)
        case .unknownFlags: return .unknownFlags(1)
        case .keyLengthOutOfRange, .codecLengthOutOfRange, .payloadLengthOutOfRange: return .badLengths
        case .truncatedByOneByte: return .sizeMismatch(expected: Int64(n), actual: Int64(n - 1))
        case .extraByte: return .sizeMismatch(expected: Int64(n), actual: Int64(n + 1))
        case .truncatedInsideHeader, .zeroLength: return .tooShort
        case .flipKeyByteCount:
            return .sizeMismatch(expected: Int64(n - keyCount + (keyCount ^ 1)), actual: Int64(n))
        case .flipCodecByteCount:
            return .sizeMismatch(expected: Int64(n - codecCount + (codecCount ^ 1)), actual: Int64(n))
        case .flipPayloadByteCount:
            let payloadCount = n - EntryFormat.fixedHeaderSize - keyCount - codecCount
            return .sizeMismatch(expected: Int64(n - payloadCount + (payloadCount ^ 1)), actual: Int64(n))
        case .flipHeaderChecksum, .flipCreatedAt, .flipExpiresAt, .flipPayloadChecksum, .flipReserved1,
            .flipEntryIdentity, .flipKeyStableIdentifier, .flipReserved2, .flipKeyBytes, .flipCodecBytes:
            return .headerChecksumMismatch
        case .entryOfAnotherKey, .entryOfAnotherCodec, .forgedIdentity: return .identityMismatch
        case .flipPayloadByte: return .payloadChecksumMismatch
        }
    }
}
