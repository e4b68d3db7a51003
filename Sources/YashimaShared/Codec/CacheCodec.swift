// Owns the codec abstraction of the cache: the `CacheCodec` protocol that turns cached
// values into bytes and back, its default memory-cost estimate, and `CacheCodecError`,
// the error type thrown by the standard codecs.

import Foundation

/// Turns values into bytes and back.
///
/// The cache stores every entry as bytes produced by a codec and hands those bytes back
/// to the same kind of codec when the entry is read, possibly in another process and
/// long after it was written.
///
/// ## Identity
///
/// ``identifier`` is part of the entry's identity on disk: two codecs with different
/// identifiers never see each other's bytes. Change it (for example by bumping a `-v1`
/// suffix) whenever the byte format changes, so that entries written in the old format
/// are treated as misses and regenerated instead of being misdecoded.
///
/// ## The bytes passed to `decode`
///
/// The `Data` passed to ``decode(_:)`` may be backed by a private copy-on-write memory
/// mapping of a cache file rather than by heap memory. The contract is:
///
/// - It stays valid for as long as anything references it, even after the cache file is
///   replaced, removed or evicted: a codec may keep the `Data` (or a slice of it) inside
///   the decoded value, and need not copy it.
/// - It is mutable: mutating it (or a value that shares its storage) never writes
///   through to the cache file and never crashes; the mapping is private, so writes only
///   ever affect this process's pages.
/// - The cache always passes a `Data` whose `startIndex` is 0. Codecs should still index
///   relative to `startIndex` (or use `withUnsafeBytes`) so that they also work when
///   called directly with a slice.
///
/// ## Failure
///
/// ``decode(_:)`` must treat its input as untrusted: a cache file may be truncated,
/// corrupted or written by a different version of the program. It must throw on bad
/// input, never crash, and never allocate memory in proportion to a length field it has
/// not validated. The cache treats a throwing decode as a miss and removes the entry (or, under
/// `readFailurePolicy: .throwError`, removes it and throws the codec's error as it is).
///
/// ## Concurrency
///
/// Codecs are `Sendable` and are called concurrently from many tasks; `encode` and
/// `decode` must not rely on unsynchronized shared mutable state.
public protocol CacheCodec: Sendable {
    /// The type of the values this codec encodes and decodes.
    associatedtype Value: Sendable

    /// A stable name for this codec's byte format, part of each entry's identity on disk.
    ///
    /// Two codecs that produce or accept different bytes for the same value must have
    /// different identifiers. Change the identifier whenever the byte format changes.
    var identifier: String { get }

    /// Encodes a value into bytes.
    ///
    /// - Parameter value: The value to encode.
    /// - Returns: The bytes to store; ``decode(_:)`` must turn them back into an equal value.
    /// - Throws: An error (`CodableCodec` passes on the encoder's, the other standard codecs
    ///   throw ``CacheCodecError``) when the value cannot be encoded. The cache then stores
    ///   nothing, in memory or storage, and the call throws this error as it is, whatever the
    ///   write-failure policy (as in Yashima).
    func encode(_ value: Value) throws -> Data

    /// Decodes bytes produced by ``encode(_:)``.
    ///
    /// See the protocol documentation for what the `Data` may be backed by and how long it
    /// stays valid: it may be kept without copying. Its `startIndex` is 0 when the cache
    /// calls this method.
    ///
    /// - Parameter data: The stored bytes. Treat them as untrusted.
    /// - Returns: The decoded value.
    /// - Throws: An error (`CodableCodec` passes on the decoder's, the other standard codecs
    ///   throw ``CacheCodecError``) when the bytes are not a valid encoding. The cache treats
    ///   that as a miss and removes the entry (or, under `readFailurePolicy: .throwError`,
    ///   removes it and throws this error as it is).
    func decode(_ data: Data) throws -> Value

    /// The value's cost in the in-memory cache, in bytes, roughly.
    ///
    /// The in-memory cache weighs entries by this cost when it decides what to evict.
    /// The default implementation returns `max(1, encodedByteCount ?? MemoryLayout<Value>.size)`.
    ///
    /// - Parameters:
    ///   - value: The decoded value.
    ///   - encodedByteCount: The encoded size when the cache knows it, otherwise `nil`.
    /// - Returns: An estimate of the memory the value keeps alive, in bytes; at least 1.
    func memoryCost(of value: Value, encodedByteCount: Int?) -> Int
}

extension CacheCodec {
    /// The default memory-cost estimate: the encoded size when known, otherwise the size of
    /// the value's inline representation.
    ///
    /// The inline size (`MemoryLayout<Value>.size`) does not count heap storage that the
    /// value references, so codecs whose values own large buffers should override this.
    ///
    /// - Parameters:
    ///   - value: The decoded value (unused by the default).
    ///   - encodedByteCount: The encoded size when the cache knows it, otherwise `nil`.
    /// - Returns: `max(1, encodedByteCount ?? MemoryLayout<Value>.size)`.
    public func memoryCost(of value: Value, encodedByteCount: Int?) -> Int {
        max(1, encodedByteCount ?? MemoryLayout<Value>.size)
    }
}

/// Thrown by `StringCodec` and `CompressedDataCodec` (`CodableCodec` throws the encoder's and
/// decoder's own errors, as Yashima's does).
///
/// Carries the identifier of the codec that failed, a coarse ``Reason`` that callers can
/// switch on, and a human-readable message with the details.
public struct CacheCodecError: Error, Sendable, CustomStringConvertible, Equatable {
    /// Why a codec failed.
    public enum Reason: Sendable, Equatable {
        /// The bytes given to `decode` are not a valid encoding for this codec
        /// (truncated, corrupted, not UTF-8, an implausible length field, ...).
        case invalidInput
        /// The value could not be encoded.
        case encodingFailed
        /// The bytes could not be decoded into a value (zlib could not inflate them).
        case decodingFailed
    }

    /// The ``CacheCodec/identifier`` of the codec that threw.
    public let codecIdentifier: String
    /// The kind of failure.
    public let reason: Reason
    /// A human-readable description of what went wrong.
    public let message: String

    /// Creates a codec error.
    ///
    /// - Parameters:
    ///   - codecIdentifier: The identifier of the codec that failed.
    ///   - reason: The kind of failure.
    ///   - message: A human-readable description of what went wrong.
    public init(codecIdentifier: String, reason: Reason, message: String) {
        self.codecIdentifier = codecIdentifier
        self.reason = reason
        self.message = message
    }

    /// A one-line description: the codec identifier, the reason and the message.
    public var description: String {
        "CacheCodecError(\(codecIdentifier), \(reason)): \(message)"
    }
}
