// Owns `DataCodec`, the identity codec for raw bytes: the cache stores the caller's
// `Data` as is and hands the stored bytes back without copying.

import Foundation

/// A codec for raw bytes: encoding and decoding are the identity.
///
/// Decoding returns the `Data` it is given, which may be backed by a private copy-on-write
/// mapping of the cache file (see ``CacheCodec``); no bytes are copied in either direction.
/// The decoded value stays valid after the entry is evicted or replaced, and mutating it
/// only ever changes this process's copy.
public struct DataCodec: CacheCodec, Equatable {
    /// The values are raw bytes.
    public typealias Value = Data

    /// `"data-v1"`.
    public var identifier: String { "data-v1" }

    /// Creates the identity codec.
    public init() {}

    /// Returns the bytes unchanged.
    ///
    /// - Parameter value: The bytes to store.
    /// - Returns: `value` itself.
    /// - Throws: Never.
    public func encode(_ value: Data) throws -> Data {
        value
    }

    /// Returns the stored bytes unchanged, without copying them.
    ///
    /// - Parameter data: The stored bytes.
    /// - Returns: `data` itself.
    /// - Throws: Never: every byte sequence is a valid encoding.
    public func decode(_ data: Data) throws -> Data {
        data
    }

    /// The number of bytes in the value.
    ///
    /// - Parameters:
    ///   - value: The decoded bytes.
    ///   - encodedByteCount: Ignored: it equals `value.count`.
    /// - Returns: `max(1, value.count)`, so that even empty entries have a nonzero cost.
    public func memoryCost(of value: Data, encodedByteCount: Int?) -> Int {
        max(1, value.count)
    }
}
