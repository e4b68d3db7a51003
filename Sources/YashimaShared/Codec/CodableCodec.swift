// Owns `CodableCodec`, which stores any `Codable` value as JSON or as a binary property
// list, and names both the format and the value's type in its identifier (Yashima's identifiers).

import Foundation

/// A codec for `Codable` values, stored as JSON or as a binary property list.
///
/// The ``identifier`` names the format and the fully qualified type
/// (`String(reflecting: V.self)`), so different types and formats never share entries.
/// Because the type name is part of the identity, renaming or moving the type (or
/// changing its module) invalidates its entries; so does any change to its `Codable`
/// representation that you signal by renaming it. Types whose reflected name is not
/// stable, such as types declared inside a function, should not be used as keys of
/// persistent entries. The reflected name of Foundation types also differs between
/// platforms (on Linux, `Data` reflects as `FoundationEssentials.Data`).
///
/// A fresh encoder or decoder is created for each call, so the codec holds no shared
/// mutable state. Both formats use the encoders' default strategies (dates, data, keys).
public struct CodableCodec<V: Codable & Sendable>: CacheCodec, Equatable {
    /// The serialization format.
    public enum Format: Sendable, Equatable {
        /// JSON via `JSONEncoder` / `JSONDecoder` with default settings.
        /// Top-level scalars (numbers, strings, booleans) are allowed.
        case json
        /// A binary property list via `PropertyListEncoder` (`outputFormat = .binary`) /
        /// `PropertyListDecoder`. The top-level value must encode as a dictionary or an
        /// array: top-level scalars fail to encode.
        case propertyList
    }

    /// The values are `V`.
    public typealias Value = V

    /// The serialization format this codec uses.
    public let format: Format

    /// `"codable-json-v1:"` or `"codable-property-list-binary-v1:"` followed by
    /// `String(reflecting: V.self)`: Yashima's identifiers, so the same key and codec name the same entry
    /// identity in both.
    public let identifier: String

    /// Creates a codec for values of type `V`.
    ///
    /// - Parameters:
    ///   - type: The value type; pass it to help type inference, e.g. `CodableCodec(Point.self)`.
    ///   - format: The serialization format; JSON by default.
    public init(_ type: V.Type = V.self, format: Format = .json) {
        self.format = format
        let prefix: String
        switch format {
        case .json: prefix = "codable-json-v1:"
        case .propertyList: prefix = "codable-property-list-binary-v1:"
        }
        self.identifier = prefix + String(reflecting: V.self)
    }

    /// Encodes a value in the codec's format.
    ///
    /// - Parameter value: The value to store.
    /// - Returns: The JSON or binary property-list bytes.
    /// - Throws: The encoder's own error (usually `EncodingError`) when it rejects the value.
    public func encode(_ value: V) throws -> Data {
        switch format {
        case .json:
            return try JSONEncoder().encode(value)
        case .propertyList:
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            return try encoder.encode(value)
        }
    }

    /// Decodes bytes produced by ``encode(_:)``.
    ///
    /// - Parameter data: The stored bytes.
    /// - Returns: The decoded value.
    /// - Throws: The decoder's own error (usually `DecodingError`) when the bytes are not a valid
    ///   encoding of `V` in this format.
    public func decode(_ data: Data) throws -> V {
        switch format {
        case .json:
            return try JSONDecoder().decode(V.self, from: data)
        case .propertyList:
            return try PropertyListDecoder().decode(V.self, from: data)
        }
    }
}
