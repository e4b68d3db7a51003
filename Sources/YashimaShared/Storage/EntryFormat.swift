// The one definition of an entry file's bytes (format version 1). Offsets come from the field table
// below; nothing else in the package writes a header offset as a literal. The stress checker and the
// fuzz target use this file rather than re-deriving it. Pure functions: no I/O.

/// The byte layout of an entry file. All integers are little-endian.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `YSHENTRY` |
/// | 8 | 2 | format version (1) |
/// | 10 | 2 | flags (0; any other value is rejected) |
/// | 12 | 4 | key canonical byte count K |
/// | 16 | 4 | codec identifier byte count C |
/// | 20 | 4 | header checksum: CRC32C of bytes 0..<20, 24..<128, the key and the codec identifier |
/// | 24 | 8 | payload byte count P |
/// | 32 | 8 | created time, nanoseconds since 1970 (Int64) |
/// | 40 | 8 | expiry time, nanoseconds since 1970 (Int64; 0 = never expires) |
/// | 48 | 4 | payload checksum: CRC32C of the payload |
/// | 52 | 4 | reserved (0) |
/// | 56 | 32 | entry identity: SHA-256 of ("yashima.cache-entry-identity.v1", "key", key bytes, "codec", codec) |
/// | 88 | 32 | key stable identifier: SHA-256 of the key's canonical bytes |
/// | 120 | 8 | reserved (0) |
/// | 128 | K | the key's canonical bytes |
/// | 128+K | C | the codec identifier, UTF-8 |
/// | 128+K+C | P | the payload |
///
/// The file size is exactly 128 + K + C + P; anything else is corruption.
enum EntryFormat {
    static let magic: [UInt8] = Array("YSHENTRY".utf8)
    static let version: UInt16 = 1

    enum Offset {
        static let magic = 0
        static let version = 8
        static let flags = 10
        static let keyByteCount = 12
        static let codecByteCount = 16
        static let headerChecksum = 20
        static let payloadByteCount = 24
        static let createdAt = 32
        static let expiresAt = 40
        static let payloadChecksum = 48
        static let reserved1 = 52
        static let entryIdentity = 56
        static let keyStableIdentifier = 88
        static let reserved2 = 120
        static let end = 128
    }

    /// Size of the fixed part of the header.
    static let fixedHeaderSize = Offset.end
    /// Largest key canonical form accepted (keys with huge components are data, within reason).
    static let maximumKeyByteCount = 64 << 20
    /// Largest codec identifier accepted.
    static let maximumCodecByteCount = 4096
    /// Bytes read up front on a lookup: the fixed header plus room for typical keys, so one read suffices.
    static let typicalHeaderReadSize = 4096

    /// Why an entry file was rejected. Every case is a miss under `.treatAsMiss`.
    enum Corruption: Error, Equatable, Sendable, CustomStringConvertible {
        case tooShort
        case badMagic
        case unsupportedVersion(UInt16)
        case unknownFlags(UInt16)
        case badLengths
        case sizeMismatch(expected: Int64, actual: Int64)
        case headerChecksumMismatch
        case identityMismatch
        case payloadChecksumMismatch

        var description: String {
            switch self {
            case .tooShort: return "file shorter than the entry header"
            case .badMagic: return "bad magic"
            case .unsupportedVersion(let v): return "unsupported entry format version \(v)"
            case .unknownFlags(let f): return "unknown header flags \(f)"
            case .badLengths: return "key or codec length out of range"
            case .sizeMismatch(let expected, let actual):
                return "file size \(actual) does not match the header (\(expected))"
            case .headerChecksumMismatch: return "header checksum mismatch"
            case .identityMismatch: return "entry belongs to another key or codec"
            case .payloadChecksumMismatch: return "payload checksum mismatch"
            }
        }
    }

    /// The decoded fixed header.
    struct Header: Sendable, Equatable {
        var keyByteCount: Int
        var codecByteCount: Int
        var payloadByteCount: Int64
        var createdAtNanoseconds: Int64
        var expiresAtNanoseconds: Int64  // 0 = never
        var payloadChecksum: UInt32
        var entryIdentity: SHA256Digest
        var keyStableDigest: SHA256Digest

        /// Offset of the key's canonical bytes.
        var keyOffset: Int { EntryFormat.fixedHeaderSize }
        /// Offset of the codec identifier.
        var codecOffset: Int { EntryFormat.fixedHeaderSize + keyByteCount }
        /// Offset of the payload: the full header size.
        var payloadOffset: Int { EntryFormat.fixedHeaderSize + keyByteCount + codecByteCount }
        /// Exact file size this header describes.
        var fileSize: Int64 { Int64(payloadOffset) + payloadByteCount }

        func isExpired(atNanoseconds now: Int64) -> Bool {
            expiresAtNanoseconds != 0 && now >= expiresAtNanoseconds
        }
    }

    // MARK: Encoding

    /// The full header (fixed part, key bytes, codec identifier) for a payload.
    static func encodeHeader(
        keyBytes: [UInt8], codecIdentifier: String, entryIdentity: SHA256Digest, keyStableDigest: SHA256Digest,
        payloadByteCount: Int, payloadChecksum: UInt32, createdAtNanoseconds: Int64, expiresAtNanoseconds: Int64
    ) -> [UInt8] {
        let codecBytes = Array(codecIdentifier.utf8)
        var bytes = [UInt8](repeating: 0, count: fixedHeaderSize + keyBytes.count + codecBytes.count)
        bytes.withUnsafeMutableBytes { raw in
            for (i, b) in magic.enumerated() { raw[Offset.magic + i] = b }
            store(version, at: Offset.version, in: raw)
            store(UInt16(0), at: Offset.flags, in: raw)
            store(UInt32(keyBytes.count), at: Offset.keyByteCount, in: raw)
            store(UInt32(codecBytes.count), at: Offset.codecByteCount, in: raw)
            store(UInt64(payloadByteCount), at: Offset.payloadByteCount, in: raw)
            store(UInt64(bitPattern: createdAtNanoseconds), at: Offset.createdAt, in: raw)
            store(UInt64(bitPattern: expiresAtNanoseconds), at: Offset.expiresAt, in: raw)
            store(payloadChecksum, at: Offset.payloadChecksum, in: raw)
            entryIdentity.withUnsafeBytes { d in
                for i in 0..<32 { raw[Offset.entryIdentity + i] = d[i] }
            }
            keyStableDigest.withUnsafeBytes { d in
                for i in 0..<32 { raw[Offset.keyStableIdentifier + i] = d[i] }
            }
            keyBytes.withUnsafeBytes { k in
                if k.count > 0 {
                    (raw.baseAddress! + fixedHeaderSize).copyMemory(from: k.baseAddress!, byteCount: k.count)
                }
            }
            codecBytes.withUnsafeBytes { c in
                if c.count > 0 {
                    (raw.baseAddress! + fixedHeaderSize + keyBytes.count)
                        .copyMemory(from: c.baseAddress!, byteCount: c.count)
                }
            }
            store(headerChecksum(UnsafeRawBufferPointer(raw)), at: Offset.headerChecksum, in: raw)
        }
        return bytes
    }

    /// CRC32C over the header bytes except the checksum field itself.
    static func headerChecksum(_ header: UnsafeRawBufferPointer) -> UInt32 {
        let first = UnsafeRawBufferPointer(rebasing: header[0..<Offset.headerChecksum])
        let rest = UnsafeRawBufferPointer(rebasing: header[(Offset.headerChecksum + 4)...])
        return CRC32C.checksum(rest, continuing: CRC32C.checksum(first))
    }

    // MARK: Decoding

    /// Parses the fixed header from `prefix` (at least `fixedHeaderSize` bytes) and checks it against the
    /// file size. Does not check the header checksum (that needs the key and codec bytes: see
    /// `validateHeader(_:bytes:)`).
    static func parseFixedHeader(_ prefix: UnsafeRawBufferPointer, fileSize: Int64) -> Result<Header, Corruption> {
        guard prefix.count >= fixedHeaderSize, fileSize >= Int64(fixedHeaderSize) else { return .failure(.tooShort) }
        for i in 0..<magic.count where prefix[Offset.magic + i] != magic[i] { return .failure(.badMagic) }
        let version: UInt16 = load(prefix, Offset.version)
        guard version == EntryFormat.version else { return .failure(.unsupportedVersion(version)) }
        let flags: UInt16 = load(prefix, Offset.flags)
        guard flags == 0 else { return .failure(.unknownFlags(flags)) }
        let keyCount = Int(load(prefix, Offset.keyByteCount) as UInt32)
        let codecCount = Int(load(prefix, Offset.codecByteCount) as UInt32)
        guard keyCount <= maximumKeyByteCount, codecCount <= maximumCodecByteCount else {
            return .failure(.badLengths)
        }
        let payloadCount: UInt64 = load(prefix, Offset.payloadByteCount)
        guard payloadCount <= UInt64(Int64.max / 2) else { return .failure(.badLengths) }
        let header = Header(
            keyByteCount: keyCount,
            codecByteCount: codecCount,
            payloadByteCount: Int64(payloadCount),
            createdAtNanoseconds: Int64(bitPattern: load(prefix, Offset.createdAt)),
            expiresAtNanoseconds: Int64(bitPattern: load(prefix, Offset.expiresAt)),
            payloadChecksum: load(prefix, Offset.payloadChecksum),
            entryIdentity: digest(prefix, Offset.entryIdentity),
            keyStableDigest: digest(prefix, Offset.keyStableIdentifier)
        )
        guard header.fileSize == fileSize else {
            return .failure(.sizeMismatch(expected: header.fileSize, actual: fileSize))
        }
        return .success(header)
    }

    /// Checks the header checksum over `bytes`, which must hold at least `header.payloadOffset` bytes.
    static func validateHeaderChecksum(_ header: Header, bytes: UnsafeRawBufferPointer) -> Result<Void, Corruption> {
        guard bytes.count >= header.payloadOffset else { return .failure(.tooShort) }
        let stored: UInt32 = load(bytes, Offset.headerChecksum)
        let computed = headerChecksum(UnsafeRawBufferPointer(rebasing: bytes[0..<header.payloadOffset]))
        return stored == computed ? .success(()) : .failure(.headerChecksumMismatch)
    }

    /// Checks that the entry holds exactly `keyBytes` and `codecIdentifier` and the expected identity.
    static func validateIdentity(
        _ header: Header, bytes: UnsafeRawBufferPointer, expectedIdentity: SHA256Digest, keyBytes: [UInt8],
        codecBytes: [UInt8]
    ) -> Result<Void, Corruption> {
        guard header.entryIdentity == expectedIdentity, header.keyByteCount == keyBytes.count,
            header.codecByteCount == codecBytes.count, bytes.count >= header.payloadOffset
        else { return .failure(.identityMismatch) }
        let keyMatches = keyBytes.withUnsafeBytes { k in
            k.count == 0 || memcmpEqual(bytes.baseAddress! + header.keyOffset, k.baseAddress!, k.count)
        }
        let codecMatches = codecBytes.withUnsafeBytes { c in
            c.count == 0 || memcmpEqual(bytes.baseAddress! + header.codecOffset, c.baseAddress!, c.count)
        }
        return keyMatches && codecMatches ? .success(()) : .failure(.identityMismatch)
    }

    // MARK: Little-endian helpers

    @inline(__always)
    static func load<T: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> T {
        T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    @inline(__always)
    static func store<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: UnsafeMutableRawBufferPointer) {
        bytes.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
    }

    /// The 32 digest bytes at `offset` (the caller checked they are in `bytes`), as four big-endian words:
    /// four loads instead of a byte loop (every lookup parses a header).
    private static func digest(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> SHA256Digest {
        precondition(offset >= 0 && offset + 32 <= bytes.count)
        func word(_ index: Int) -> UInt64 {
            UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset + 8 * index, as: UInt64.self))
        }
        return SHA256Digest(w0: word(0), w1: word(1), w2: word(2), w3: word(3))
    }

    @inline(__always)
    private static func memcmpEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
        var i = 0
        while i + 8 <= count {
            if a.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                != b.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            {
                return false
            }
            i += 8
        }
        while i < count {
            if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
            i += 1
        }
        return true
    }
}
