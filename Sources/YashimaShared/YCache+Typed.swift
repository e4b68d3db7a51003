// YCache.Typed (a cache bound to one codec) and the standard conveniences (`data`, `string`, `codable`).
// Thin forwarding only: every call has the same semantics as the codec-based method it wraps.

import Foundation

extension YCache {
    /// A view of a `YCache` bound to one codec, so calls need no `codec:` argument.
    public struct Typed<Codec: CacheCodec>: Sendable {
        /// The underlying cache.
        public let cache: YCache
        /// The codec every call uses.
        public let codec: Codec

        /// Get-or-generate; see `YCache.value(for:codec:options:_:)`, which also says what is stored
        /// when.
        /// - Parameters:
        ///   - key: What the value depends on.
        ///   - options: Lookup, write, failure, single-flight and cross-process policies.
        ///   - generator: Produces the value on a miss.
        /// - Returns: The cached or generated value.
        /// - Throws: The errors of `YCache.value(for:codec:options:_:)`.
        @_specialize(exported:true,where Codec == DataCodec)
        @_specialize(exported:true,where Codec == StringCodec)
        nonisolated(nonsending) public func value(
            for key: CacheKey, options: Options = .default,
            _ generator: @escaping @Sendable () async throws -> Codec.Value
        ) async throws -> Codec.Value {
            try await cache.value(for: key, codec: codec, options: options, generator)
        }

        /// Get-or-generate with the value's source; see `YCache.resolve(for:codec:options:_:)`.
        /// - Parameters:
        ///   - key: What the value depends on.
        ///   - options: Lookup, write, failure, single-flight and cross-process policies.
        ///   - generator: Produces the value on a miss.
        /// - Returns: The value with its source, metadata and `wasSharedGeneration`.
        /// - Throws: The errors of `YCache.value(for:codec:options:_:)`.
        @_specialize(exported:true,where Codec == DataCodec)
        @_specialize(exported:true,where Codec == StringCodec)
        nonisolated(nonsending) public func resolve(
            for key: CacheKey, options: Options = .default,
            _ generator: @escaping @Sendable () async throws -> Codec.Value
        ) async throws -> Resolved<Codec.Value> {
            try await cache.resolve(for: key, codec: codec, options: options, generator)
        }

        /// Get-or-generate for an optional generator; see `YCache.optionalValue(for:codec:options:_:)`.
        /// A `nil` from the generator is never stored.
        /// - Parameters:
        ///   - key: What the value depends on.
        ///   - options: Lookup, write, failure, single-flight and cross-process policies.
        ///   - generator: Produces the value on a miss, or `nil` when there is none.
        /// - Returns: The cached or generated value, or `nil`.
        /// - Throws: The errors of `YCache.optionalValue(for:codec:options:_:)`.
        @_specialize(exported:true,where Codec == DataCodec)
        @_specialize(exported:true,where Codec == StringCodec)
        nonisolated(nonsending) public func optionalValue(
            for key: CacheKey, options: Options = .default,
            _ generator: @escaping @Sendable () async throws -> Codec.Value?
        ) async throws -> Codec.Value? {
            try await cache.optionalValue(for: key, codec: codec, options: options, generator)
        }

        /// The value if cached; see `YCache.valueIfCached(for:codec:options:)`. Never generates; a storage
        /// hit is put in memory.
        /// - Parameters:
        ///   - key: What the value depends on.
        ///   - options: Read-failure policy; write policy and cost of the memory copy.
        /// - Returns: The cached value, or `nil` on a miss.
        /// - Throws: Only under `readFailurePolicy: .throwError`; see `YCache.valueIfCached(for:codec:options:)`.
        @_specialize(exported:true,where Codec == DataCodec)
        @_specialize(exported:true,where Codec == StringCodec)
        nonisolated(nonsending) public func valueIfCached(for key: CacheKey, options: Options = .default) async throws
            -> Codec.Value?
        {
            try await cache.valueIfCached(for: key, codec: codec, options: options)
        }

        /// Regenerates and stores; see `YCache.refresh(for:codec:options:_:)`.
        /// - Parameters:
        ///   - key: What the value depends on.
        ///   - options: Write, failure and single-flight policies (`lookupPolicy` is ignored).
        ///   - generator: Produces the fresh value.
        /// - Returns: The generated value.
        /// - Throws: The errors of `YCache.refresh(for:codec:options:_:)`.
        public func refresh(
            for key: CacheKey, options: Options = .default,
            _ generator: @escaping @Sendable () async throws -> Codec.Value
        ) async throws -> Codec.Value {
            try await cache.refresh(for: key, codec: codec, options: options, generator)
        }

        /// The value if in this process's memory; see `YCache.peek(for:codec:)`. Stores nothing.
        /// - Parameter key: What the value depends on.
        /// - Returns: The value from memory, or `nil`.
        /// - Throws: The errors of `YCache.peek(for:codec:)`.
        nonisolated(nonsending) public func peek(for key: CacheKey) async throws -> Codec.Value? {
            try await cache.peek(for: key, codec: codec)
        }

        /// Stores a value per `options.writePolicy`; see `YCache.store(_:for:codec:options:)` for what is
        /// stored when.
        /// - Parameters:
        ///   - value: The value to store.
        ///   - key: What the value depends on.
        ///   - options: Write and write-failure policies, expiry and cost.
        /// - Throws: Under `writeFailurePolicy: .throwError` only; see `YCache.store(_:for:codec:options:)`.
        public func store(_ value: Codec.Value, for key: CacheKey, options: Options = .default) async throws {
            try await cache.store(value, for: key, codec: codec, options: options)
        }

        /// Puts a value in this process's memory only; see `YCache.putInMemory(_:for:codec:cost:expiry:)`.
        /// - Parameters:
        ///   - value: The value to keep.
        ///   - key: What the value depends on.
        ///   - cost: Its cost; `nil` asks the codec.
        ///   - expiry: When it stops being returned.
        /// - Throws: The errors of `YCache.putInMemory(_:for:codec:cost:expiry:)`.
        public func putInMemory(
            _ value: Codec.Value, for key: CacheKey, cost: CacheCost? = nil, expiry: CacheExpiry = .never
        ) async throws {
            try await cache.putInMemory(value, for: key, codec: codec, cost: cost, expiry: expiry)
        }

        /// Metadata without decoding; see `YCache.metadata(for:codec:)`.
        /// - Parameter key: What the value depends on.
        /// - Returns: The metadata, or `nil` when nothing unexpired is cached.
        /// - Throws: The errors of `YCache.metadata(for:codec:)`.
        public func metadata(for key: CacheKey) async throws -> Metadata? {
            try await cache.metadata(for: key, codec: codec)
        }

        /// Whether cached in memory or storage; see `YCache.contains(for:codec:)`.
        /// - Parameter key: What the value depends on.
        /// - Returns: Whether metadata is found.
        /// - Throws: The errors of `YCache.metadata(for:codec:)`.
        public func contains(for key: CacheKey) async throws -> Bool {
            try await cache.contains(for: key, codec: codec)
        }

        /// Removes the entry from memory and storage; see `YCache.remove(for:codec:)`.
        /// - Parameter key: The entry's key.
        /// - Returns: True when memory held the value or an entry file was unlinked.
        /// - Throws: The errors of `YCache.remove(for:codec:)`.
        @discardableResult
        public func remove(for key: CacheKey) async throws -> Bool {
            try await cache.remove(for: key, codec: codec)
        }
    }

    /// Get-or-generate for raw bytes (`DataCodec`); stores as `value(for:codec:options:_:)` does.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generator: Produces the bytes on a miss.
    /// - Returns: The cached or generated bytes.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    nonisolated(nonsending) public func data(
        for key: CacheKey, options: Options = .default, _ generator: @escaping @Sendable () async throws -> Data
    ) async throws -> Data {
        try await value(for: key, codec: DataCodec(), options: options, generator)
    }

    /// Get-or-generate for text stored as UTF-8 (`StringCodec`); stores as
    /// `value(for:codec:options:_:)` does.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generator: Produces the text on a miss.
    /// - Returns: The cached or generated text.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    nonisolated(nonsending) public func string(
        for key: CacheKey, options: Options = .default, _ generator: @escaping @Sendable () async throws -> String
    ) async throws -> String {
        try await value(for: key, codec: StringCodec(), options: options, generator)
    }

    /// Get-or-generate for a `Codable` value (`CodableCodec`, JSON by default); stores as
    /// `value(for:codec:options:_:)` does.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - type: The value type (part of the codec identifier, so of the entry's identity).
    ///   - format: `.json` (default) or `.propertyList`.
    ///   - options: Lookup, write, failure, single-flight and cross-process policies.
    ///   - generator: Produces the value on a miss.
    /// - Returns: The cached or generated value.
    /// - Throws: The errors of `value(for:codec:options:_:)`; the encoder's or decoder's own error
    ///   (`EncodingError`, `DecodingError`) as `CodableCodec` throws it.
    nonisolated(nonsending) public func codable<Value: Codable & Sendable>(
        for key: CacheKey, as type: Value.Type = Value.self, format: CodableCodec<Value>.Format = .json,
        options: Options = .default, _ generator: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await value(for: key, codec: CodableCodec(type, format: format), options: options, generator)
    }
}
