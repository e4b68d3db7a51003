// Owns `StringCodec`, which stores strings as their UTF-8 bytes and refuses, rather than
// repairs, stored bytes that are not valid UTF-8.

import Foundation

/// A codec for strings, stored as UTF-8 without a terminator or byte-order mark.
///
/// Decoding validates the bytes strictly: invalid UTF-8 throws instead of being repaired
/// with replacement characters, so a corrupted entry is a miss rather than a silently
/// different string. Embedded NUL characters round-trip.
public struct StringCodec: CacheCodec, Equatable {
    /// The values are strings.
    public typealias Value = String

    /// `"string-utf8-v1"`.
    public var identifier: String { "string-utf8-v1" }

    /// Creates the UTF-8 string codec.
    public init() {}

    /// Encodes a string as its UTF-8 bytes.
    ///
    /// - Parameter value: The string to store.
    /// - Returns: The string's UTF-8 code units.
    /// - Throws: Never.
    public func encode(_ value: String) throws -> Data {
        Data(value.utf8)
    }

    /// Decodes UTF-8 bytes into a string.
    ///
    /// - Parameter data: The stored bytes.
    /// - Returns: The string the bytes spell.
    /// - Throws: ``CacheCodecError`` with reason ``CacheCodecError/Reason/invalidInput``
    ///   when the bytes are not valid UTF-8.
    public func decode(_ data: Data) throws -> String {
        let decoded = data.withUnsafeBytes { raw in
            String(validating: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        }
        guard let decoded else {
            throw CacheCodecError(
                codecIdentifier: identifier, reason: .invalidInput,
                message: "\(data.count) bytes are not valid UTF-8")
        }
        return decoded
    }

    /// The number of UTF-8 bytes in the string.
    ///
    /// - Parameters:
    ///   - value: The decoded string.
    ///   - encodedByteCount: Ignored: it equals the UTF-8 count.
    /// - Returns: `max(1, value.utf8.count)`, so that even empty strings have a nonzero cost.
    public func memoryCost(of value: String, encodedByteCount: Int?) -> Int {
        max(1, value.utf8.count)
    }
}
