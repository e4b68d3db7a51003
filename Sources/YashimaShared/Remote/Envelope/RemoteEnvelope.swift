// RemoteEnvelope.swift: the one definition of a remote value's bytes (format 1), the same for every backend.
// A value of another client, truncated, another key's, or wrongly signed is rejected with a typed reason,
// never returned. Pure functions.

import Foundation

/// A verified remote value: the payload and the entry's times.
struct RemoteValue: Equatable, Sendable {
    /// The codec's bytes, as the generator stored them.
    let payload: Data
    /// When the value was created, nanoseconds since 1970.
    let createdAt: Int64
    /// When it expires, nanoseconds since 1970 (0: never).
    let expiresAt: Int64
}

/// The byte layout of a remote value. All integers are little-endian.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `YSHREMOT` |
/// | 8 | 2 | format version (1) |
/// | 10 | 2 | flags: bit 0 = an HMAC-SHA256 tag follows the payload; other bits must be 0 |
/// | 12 | 4 | reserved (0) |
/// | 16 | 8 | payload byte count P |
/// | 24 | 8 | created time, nanoseconds since 1970 (Int64) |
/// | 32 | 8 | expiry time, nanoseconds since 1970 (Int64; 0 = never) |
/// | 40 | 32 | entry identity (`EntryIdentity.digest`: SHA-256 of key and codec) |
/// | 72 | 4 | checksum: CRC32C of bytes 0..<72, then the payload |
/// | 76 | 4 | reserved (0) |
/// | 80 | P | the payload |
/// | 80+P | 32 | with flag bit 0: HMAC-SHA256(secret, bytes 0..<80+P) |
///
/// The value is exactly 80 + P (+ 32) bytes; anything else is rejected. The tag covers the identity,
/// so a signed value copied under another key's name is still rejected (wrong identity). An older
/// signed value of the same key can be replayed; values of one key are interchangeable (I8).
enum RemoteEnvelope {
    static let magic: [UInt8] = Array("YSHREMOT".utf8)
    static let version: UInt16 = 1
    static let signedFlag: UInt16 = 1

    enum Offset {
        static let magic = 0
        static let version = 8
        static let flags = 10
        static let reserved1 = 12
        static let payloadByteCount = 16
        static let createdAt = 24
        static let expiresAt = 32
        static let identity = 40
        static let checksum = 72
        static let reserved2 = 76
        static let payload = 80
    }

    /// Bytes before the payload.
    static let headerSize = Offset.payload
    /// Bytes of the signature.
    static let tagSize = 32
    /// The most bytes an envelope adds to its payload.
    static let maximumOverhead = headerSize + tagSize

    /// Why stored bytes are not a value for the entry asked for.
    enum Rejection: Error, Equatable, Sendable, CustomStringConvertible {
        /// Not ours: no `YSHREMOT` magic.
        case foreign
        /// A format version this client does not read.
        case unsupportedVersion(UInt16)
        /// Unknown flag bits, or nonzero reserved bytes.
        case malformedHeader
        /// Fewer bytes than the header and its payload count announce.
        case truncated
        /// More bytes than announced.
        case trailingBytes
        /// A value for another entry.
        case wrongIdentity
        /// The checksum does not match: damaged bytes.
        case badChecksum
        /// A secret is configured and the value carries no signature.
        case unsigned
        /// The signature does not match this host's secret.
        case badSignature

        var description: String {
            switch self {
            case .foreign: return "not a remote value of this cache"
            case .unsupportedVersion(let version): return "unsupported remote value version \(version)"
            case .malformedHeader: return "malformed remote value header"
            case .truncated: return "truncated remote value"
            case .trailingBytes: return "remote value longer than its header says"
            case .wrongIdentity: return "remote value of another entry"
            case .badChecksum: return "remote value checksum mismatch"
            case .unsigned: return "unsigned remote value (a secret is configured)"
            case .badSignature: return "remote value signature mismatch"
            }
        }
    }

    /// The envelope's byte count for a payload of `payloadCount` bytes.
    static func sealedSize(payloadCount: Int, signed: Bool) -> Int {
        headerSize + payloadCount + (signed ? tagSize : 0)
    }

    /// Wraps `payload` for `identity`, signed when `secret` is given.
    static func seal(
        _ payload: Data, identity: SHA256Digest, createdAt: Int64, expiresAt: Int64, secret: RemoteSecret?
    ) -> [UInt8] {
        let payloadChecksum = payload.withUnsafeBytes { CRC32C.checksum($0) }
        var bytes = header(
            payloadCount: payload.count, payloadChecksum: payloadChecksum, identity: identity, createdAt: createdAt,
            expiresAt: expiresAt, signed: secret != nil)
        bytes.reserveCapacity(sealedSize(payloadCount: payload.count, signed: secret != nil))
        bytes.append(contentsOf: payload)
        if let secret {
            var mac = HMACSHA256(key: secret.bytes)
            mac.update(bytes)
            bytes.append(contentsOf: mac.finalize())
        }
        return bytes
    }

    /// The 80 header bytes of an envelope for a payload of `payloadCount` bytes whose own CRC32C is
    /// `payloadChecksum` (a streamed upload sends these, then the payload, then the tag if `signed`).
    static func header(
        payloadCount: Int, payloadChecksum: UInt32, identity: SHA256Digest, createdAt: Int64, expiresAt: Int64,
        signed: Bool
    ) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: headerSize)
        bytes.withUnsafeMutableBytes { buffer in
            for (index, byte) in magic.enumerated() { buffer[Offset.magic + index] = byte }
            buffer.storeBytes(of: version.littleEndian, toByteOffset: Offset.version, as: UInt16.self)
            let flags: UInt16 = signed ? signedFlag : 0
            buffer.storeBytes(of: flags.littleEndian, toByteOffset: Offset.flags, as: UInt16.self)
            buffer.storeBytes(
                of: UInt64(payloadCount).littleEndian, toByteOffset: Offset.payloadByteCount, as: UInt64.self)
            buffer.storeBytes(of: createdAt.littleEndian, toByteOffset: Offset.createdAt, as: Int64.self)
            buffer.storeBytes(of: expiresAt.littleEndian, toByteOffset: Offset.expiresAt, as: Int64.self)
            for (index, word) in [identity.w0, identity.w1, identity.w2, identity.w3].enumerated() {
                buffer.storeBytes(of: word.bigEndian, toByteOffset: Offset.identity + 8 * index, as: UInt64.self)
            }
            let checksum = Self.checksum(
                header: UnsafeRawBufferPointer(buffer), payloadChecksum: payloadChecksum, payloadCount: payloadCount)
            buffer.storeBytes(of: checksum.littleEndian, toByteOffset: Offset.checksum, as: UInt32.self)
        }
        return bytes
    }

    /// Verifies `bytes` as a value of `identity` and returns it (``RemoteEnvelopeReader`` over the
    /// whole value: the one verifier, whether the bytes arrive at once or streamed).
    ///
    /// - Parameters:
    ///   - bytes: What the backend returned.
    ///   - identity: The entry asked for.
    ///   - secret: This host's secret: when given, only values signed with it are accepted. Without
    ///     one, signed values are accepted on their checksum (the tag cannot be checked).
    static func open(
        _ bytes: [UInt8], identity: SHA256Digest, secret: RemoteSecret?
    ) -> Result<RemoteValue, Rejection> {
        // The limit is the bytes at hand: a header announcing more is short of bytes.
        var reader = RemoteEnvelopeReader(identity: identity, secret: secret, maximumBytes: bytes.count)
        let outcome = bytes.withUnsafeBytes { reader.consume($0) }.flatMap { reader.finish() }
        switch outcome {
        case .success(.memory(let value)): return .success(value)
        case .success(.file): return .failure(.truncated)  // unreachable: no staging file was given
        case .failure(.rejected(let rejection)): return .failure(rejection)
        case .failure(.tooLarge), .failure(.staging): return .failure(.truncated)
        }
    }

    /// CRC32C of the header before the checksum field, continued over the payload (combined from the
    /// payload's own CRC32C, so no second pass over the payload).
    static func checksum(header: UnsafeRawBufferPointer, payloadChecksum: UInt32, payloadCount: Int) -> UInt32 {
        let headerCRC = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: header[0..<Offset.checksum]))
        return CRC32C.combine(headerCRC, payloadChecksum, secondLength: payloadCount)
    }
}
