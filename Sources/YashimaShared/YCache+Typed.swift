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

        /// Get-or-generate; see `YCache.value(for:codec:options:generate:)`.
        public func value(
            for key: CacheKey, options: Options = .default,
            generate: @escaping @Sendable () async throws -> Codec.Value
        ) async throws -> Codec.Value {
            try await cache.value(for: key, codec: codec, options: options, generate: generate)
        }

        /// Get-or-generate with the value's source; see `YCache.resolve(for:codec:options:generate:)`.
        public func resolve(
            for key: CacheKey, options: Options = .default,
            generate: @escaping @Sendable () async throws -> Codec.Value
        ) async throws -> CacheResolution<Codec.Value> {
            try await cache.resolve(for: key, codec: codec, options: options, generate: generate)
        }

        /// Get-or-generate for an optional generator; see `YCache.optionalValue(for:codec:options:generate:)`.
        public func optionalValue(
            for key: CacheKey, options: Options = .default,
            generate: @escaping @Sendable () async throws -> Codec.Value?
        ) async throws -> Codec.Value? {
            try await cache.optionalValue(for: key, codec: codec, options: options, generate: generate)
        }

        /// The value if cached; see `YCache.valueIfCached(for:codec:options:)`.
        public func valueIfCached(for key: CacheKey, options: Options = .default) async throws -> Codec.Value? {
            try await cache.valueIfCached(for: key, codec: codec, options: options)
        }

        /// Regenerates and stores; see `YCache.refresh(for:codec:options:generate:)`.
        public func refresh(
            for key: CacheKey, options: Options = .default,
            generate: @escaping @Sendable () async throws -> Codec.Value
        ) async throws -> Codec.Value {
            try await cache.refresh(for: key, codec: codec, options: options, generate: generate)
        }

        /// The value if in this process's memory; see `YCache.peek(for:codec:)`.
        public func peek(for key: CacheKey) -> Codec.Value? {
            cache.peek(for: key, codec: codec)
        }

        /// Stores a value; see `YCache.store(_:for:codec:options:)`.
        public func store(_ value: Codec.Value, for key: CacheKey, options: Options = .default) async throws {
            try await cache.store(value, for: key, codec: codec, options: options)
        }

        /// Puts a value in memory only; see `YCache.putInMemory(_:for:codec:cost:expiry:)`.
        public func putInMemory(
            _ value: Codec.Value, for key: CacheKey, cost: Int? = nil, expiry: CacheExpiry = .never
        ) {
            cache.putInMemory(value, for: key, codec: codec, cost: cost, expiry: expiry)
        }

        /// Metadata without decoding; see `YCache.metadata(for:codec:)`.
        public func metadata(for key: CacheKey) async throws -> CacheMetadata? {
            try await cache.metadata(for: key, codec: codec)
        }

        /// Whether cached; see `YCache.contains(for:codec:)`.
        public func contains(for key: CacheKey) async throws -> Bool {
            try await cache.contains(for: key, codec: codec)
        }

        /// Removes the entry; see `YCache.remove(for:codec:)`.
        public func remove(for key: CacheKey) async throws {
            try await cache.remove(for: key, codec: codec)
        }
    }

    /// Get-or-generate for raw bytes (`DataCodec`).
    public func data(
        for key: CacheKey, options: Options = .default, generate: @escaping @Sendable () async throws -> Data
    ) async throws -> Data {
        try await value(for: key, codec: DataCodec(), options: options, generate: generate)
    }

    /// Get-or-generate for text stored as UTF-8 (`StringCodec`).
    public func string(
        for key: CacheKey, options: Options = .default, generate: @escaping @Sendable () async throws -> String
    ) async throws -> String {
        try await value(for: key, codec: StringCodec(), options: options, generate: generate)
    }

    /// Get-or-generate for a `Codable` value (`CodableCodec`, JSON by default).
    public func codable<Value: Codable & Sendable>(
        for key: CacheKey, as type: Value.Type = Value.self, format: CodableCodec<Value>.Format = .json,
        options: Options = .default, generate: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await value(for: key, codec: CodableCodec(type, format: format), options: options, generate: generate)
    }
}
