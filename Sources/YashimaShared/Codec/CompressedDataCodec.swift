// Owns `CompressedDataCodec`: raw bytes stored as an 8-byte little-endian original length
// followed by a zlib (RFC 1950) stream, compressed and inflated by calling zlib directly
// through CZlib, with strict validation of everything read back.

import CZlib
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A codec for raw bytes that compresses them with zlib (deflate).
///
/// ## Format
///
/// An encoded entry is an 8-byte little-endian unsigned integer holding the original
/// length, followed by exactly one zlib stream (RFC 1950: a 2-byte header, deflate data
/// and an Adler-32 checksum of the original bytes). Empty data is encoded as the header
/// and the zlib stream of zero bytes.
///
/// The compression level is not part of the ``identifier``: every level produces the same
/// format, and any level decodes output of any other.
///
/// ## Validation
///
/// ``decode(_:)`` treats its input as hostile. It throws ``CacheCodecError`` with reason
/// ``CacheCodecError/Reason/invalidInput`` when the input is shorter than the header, when
/// the declared length exceeds 16 GiB or the 1032:1 maximum expansion of deflate
/// (`1032 × compressed size + 64`), when zlib reports an error (including an Adler-32
/// mismatch), when the stream is truncated, when bytes follow the end of the stream, and
/// when the inflated size differs from the declared one. Output memory grows with the
/// bytes actually inflated (starting at no more than 64 MiB), so a forged length field
/// cannot make it commit absurd amounts of memory.
public struct CompressedDataCodec: CacheCodec, Equatable {
    /// The values are raw (uncompressed) bytes.
    public typealias Value = Data

    /// The zlib compression level used by ``encode(_:)``: 0 (store) through 9 (smallest),
    /// or -1 for zlib's default (currently 6).
    public let level: Int32

    /// `"zlib-data-v1"`; independent of ``level``.
    public var identifier: String { "zlib-data-v1" }

    /// The size of the little-endian length header that precedes the zlib stream.
    static let headerByteCount = 8
    /// The largest original length ``decode(_:)`` accepts: 16 GiB.
    static let maximumDeclaredLength: UInt64 = 16 << 30
    /// Deflate's maximum expansion ratio (RFC 1951 length 258 in a ~2-bit code, about 1032:1).
    static let maximumExpansionRatio: UInt64 = 1032
    /// Added to the expansion bound so that tiny streams are never rejected by rounding.
    static let expansionSlack: UInt64 = 64
    /// The most output memory ``decode(_:)`` reserves before any of it has been produced.
    static let initialOutputLimit = 64 << 20
    /// zlib's `avail_in` and `avail_out` are 32-bit: buffers are fed in chunks of at most this.
    static let maximumChunk = Int(UInt32.max)

    /// Creates a zlib codec.
    ///
    /// - Parameter level: The compression level used when encoding: 0 (no compression)
    ///   through 9 (best compression), or -1 for zlib's default. Defaults to 6. Any other
    ///   value makes ``encode(_:)`` throw. The level does not affect decoding.
    public init(level: Int32 = 6) {
        self.level = level
    }

    /// Compresses bytes.
    ///
    /// - Parameter value: The bytes to store; may be empty and may exceed 4 GiB.
    /// - Returns: The 8-byte little-endian length of `value` followed by its zlib stream.
    /// - Throws: ``CacheCodecError`` with reason ``CacheCodecError/Reason/encodingFailed``
    ///   when ``level`` is not in -1...9, when memory cannot be allocated, or when zlib
    ///   reports an error.
    public func encode(_ value: Data) throws -> Data {
        guard (-1...9).contains(level) else {
            throw failure(.encodingFailed, "compression level \(level) is outside -1...9")
        }
        var stream = z_stream()
        let initStatus = deflateInit_(
            &stream, level, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard initStatus == Z_OK else {
            throw failure(.encodingFailed, "deflateInit failed with status \(initStatus)")
        }
        defer { deflateEnd(&stream) }

        let header = Self.headerByteCount
        var capacity = header + Int(deflateBound(&stream, uLong(value.count)))
        guard var buffer = malloc(capacity) else {
            throw failure(.encodingFailed, "cannot allocate \(capacity) bytes")
        }
        var handedOff = false
        defer { if !handedOff { free(buffer) } }
        buffer.storeBytes(of: UInt64(value.count).littleEndian, as: UInt64.self)

        try value.withUnsafeBytes { (input: UnsafeRawBufferPointer) in
            var inputOffset = 0
            while true {
                if stream.avail_in == 0, inputOffset < input.count, let base = input.baseAddress {
                    let chunk = min(input.count - inputOffset, Self.maximumChunk)
                    stream.next_in = UnsafeMutablePointer(
                        mutating: (base + inputOffset).assumingMemoryBound(to: Bytef.self))
                    stream.avail_in = uInt(chunk)
                    inputOffset += chunk
                }
                if stream.avail_out == 0 {
                    let used = header + Int(stream.total_out)
                    if used == capacity {
                        // deflateBound is only a guarantee for a single Z_FINISH call; inputs
                        // over 4 GiB are fed in chunks, so grow rather than trust it.
                        let grown = capacity + capacity / 2 + 4096
                        guard let moved = realloc(buffer, grown) else {
                            throw failure(.encodingFailed, "cannot allocate \(grown) bytes")
                        }
                        buffer = moved
                        capacity = grown
                    }
                    stream.next_out = (buffer + used).assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(min(capacity - used, Self.maximumChunk))
                }
                let allInputFed = stream.avail_in == 0 && inputOffset == input.count
                let status = deflate(&stream, allInputFed ? Z_FINISH : Z_NO_FLUSH)
                switch status {
                case Z_STREAM_END:
                    return
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_out == 0 || !allInputFed:
                    // "No progress without more room or input", which the next iteration
                    // provides. Anything else would loop forever, so it falls through.
                    continue
                default:
                    throw failure(.encodingFailed, "deflate failed: \(Self.describe(status, stream))")
                }
            }
        }

        let total = header + Int(stream.total_out)
        if capacity - total >= 4096, let shrunk = realloc(buffer, total) {
            buffer = shrunk
        }
        handedOff = true
        return Data(bytesNoCopy: buffer, count: total, deallocator: .free)
    }

    /// Validates and decompresses bytes produced by ``encode(_:)``.
    ///
    /// - Parameter data: The stored bytes; treated as untrusted.
    /// - Returns: The original bytes, in freshly allocated memory that does not reference
    ///   `data`.
    /// - Throws: ``CacheCodecError`` with reason ``CacheCodecError/Reason/invalidInput`` when
    ///   the input is not a valid encoding (see the type's documentation for every check),
    ///   or ``CacheCodecError/Reason/decodingFailed`` when zlib or the allocator runs out of
    ///   memory.
    public func decode(_ data: Data) throws -> Data {
        try data.withUnsafeBytes { try inflateValidated($0) }
    }

    /// The size of the decompressed bytes.
    ///
    /// The default estimate would use the (smaller) compressed size, under-counting what
    /// the decoded value keeps in memory.
    ///
    /// - Parameters:
    ///   - value: The decoded bytes.
    ///   - encodedByteCount: Ignored: it is the compressed size.
    /// - Returns: `max(1, value.count)`.
    public func memoryCost(of value: Data, encodedByteCount: Int?) -> Int {
        max(1, value.count)
    }

    /// Parses the header, checks the declared length, and inflates the rest.
    private func inflateValidated(_ raw: UnsafeRawBufferPointer) throws -> Data {
        let header = Self.headerByteCount
        guard raw.count >= header, let rawBase = raw.baseAddress else {
            throw failure(.invalidInput, "\(raw.count) bytes is shorter than the \(header)-byte header")
        }
        let declared = UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
        let compressedCount = raw.count - header
        guard declared <= Self.maximumDeclaredLength else {
            throw failure(.invalidInput, "declared length \(declared) exceeds the 16 GiB limit")
        }
        let (product, overflow) = UInt64(compressedCount)
            .multipliedReportingOverflow(by: Self.maximumExpansionRatio)
        guard overflow || declared <= product + Self.expansionSlack else {
            throw failure(
                .invalidInput,
                "declared length \(declared) is impossible for \(compressedCount) compressed bytes")
        }
        let declaredCount = Int(declared)
        // One spare byte, so that a stream inflating to more than declared is detected
        // by producing it, not by guessing.
        let target = declaredCount + 1

        var stream = z_stream()
        let initStatus = inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard initStatus == Z_OK else {
            throw failure(.decodingFailed, "inflateInit failed with status \(initStatus)")
        }
        defer { inflateEnd(&stream) }

        var capacity = min(target, Self.initialOutputLimit)
        guard var buffer = malloc(capacity) else {
            throw failure(.decodingFailed, "cannot allocate \(capacity) bytes")
        }
        var handedOff = false
        defer { if !handedOff { free(buffer) } }

        let input = rawBase + header
        var inputOffset = 0
        while true {
            if stream.avail_in == 0, inputOffset < compressedCount {
                let chunk = min(compressedCount - inputOffset, Self.maximumChunk)
                stream.next_in = UnsafeMutablePointer(
                    mutating: (input + inputOffset).assumingMemoryBound(to: Bytef.self))
                stream.avail_in = uInt(chunk)
                inputOffset += chunk
            }
            if stream.avail_out == 0 {
                let produced = Int(stream.total_out)
                guard produced <= declaredCount else {
                    throw failure(.invalidInput, "stream inflates to more than the declared \(declared) bytes")
                }
                if produced == capacity {
                    // produced <= declaredCount < target, so there is room to grow.
                    let grown = capacity > target / 2 ? target : capacity * 2
                    guard let moved = realloc(buffer, grown) else {
                        throw failure(.decodingFailed, "cannot allocate \(grown) bytes")
                    }
                    buffer = moved
                    capacity = grown
                }
                stream.next_out = (buffer + produced).assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(min(capacity - produced, Self.maximumChunk))
            }
            let status = inflate(&stream, Z_NO_FLUSH)
            switch status {
            case Z_STREAM_END:
                guard stream.avail_in == 0, inputOffset == compressedCount else {
                    let extra = Int(stream.avail_in) + (compressedCount - inputOffset)
                    throw failure(.invalidInput, "\(extra) trailing bytes after the zlib stream")
                }
                let produced = Int(stream.total_out)
                guard produced == declaredCount else {
                    throw failure(
                        .invalidInput,
                        "stream inflates to \(produced) bytes, the header declares \(declared)")
                }
                if declaredCount == 0 {
                    return Data()
                }
                // The buffer holds declaredCount bytes plus at most one spare byte.
                handedOff = true
                return Data(bytesNoCopy: buffer, count: declaredCount, deallocator: .free)
            case Z_OK:
                continue
            case Z_BUF_ERROR:
                if stream.avail_out == 0 || (stream.avail_in == 0 && inputOffset < compressedCount) {
                    continue
                }
                throw failure(.invalidInput, "zlib stream is truncated")
            case Z_NEED_DICT:
                throw failure(.invalidInput, "zlib stream requires a preset dictionary")
            case Z_MEM_ERROR:
                throw failure(.decodingFailed, "zlib ran out of memory")
            default:
                throw failure(.invalidInput, "corrupt zlib stream: \(Self.describe(status, stream))")
            }
        }
    }

    /// Builds a ``CacheCodecError`` for this codec.
    private func failure(_ reason: CacheCodecError.Reason, _ message: String) -> CacheCodecError {
        CacheCodecError(codecIdentifier: identifier, reason: reason, message: message)
    }

    /// The status code and zlib's own message, if any.
    private static func describe(_ status: Int32, _ stream: z_stream) -> String {
        if let message = stream.msg {
            return "status \(status), \(String(cString: message))"
        }
        return "status \(status)"
    }
}
