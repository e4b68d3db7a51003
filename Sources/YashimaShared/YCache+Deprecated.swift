// The names YashimaShared used before it took Yashima's (0.1): type aliases and `generate:`-labelled
// overloads, all deprecated and forwarding to the primary API. Nothing in this package uses them; they
// go before 1.0. The overloads are `@_disfavoredOverload`, so a trailing closure always picks the
// primary, unlabelled `_ generator` method and is never ambiguous.

import Foundation

/// Renamed: the metadata type is `YCache.Metadata`.
@available(*, deprecated, renamed: "YCache.Metadata")
public typealias CacheMetadata = YCache.Metadata

/// Renamed: the result type is `YCache.Resolved`.
@available(*, deprecated, renamed: "YCache.Resolved")
public typealias CacheResolution<Value: Sendable> = YCache.Resolved<Value>

/// Renamed: the source type is `YCache.Source`.
@available(*, deprecated, renamed: "YCache.Source")
public typealias CacheSource = YCache.Source

/// Renamed: the usage type is `YCache.StorageUsage`.
@available(*, deprecated, renamed: "YCache.StorageUsage")
public typealias StorageUsage = YCache.StorageUsage

/// Renamed: the error type is `YCache.Error`.
@available(*, deprecated, renamed: "YCache.Error")
public typealias YCacheError = YCache.Error

extension CacheKey {
    /// Renamed: a component is a `CacheKeyComponent`.
    @available(*, deprecated, renamed: "CacheKeyComponent")
    public typealias Component = CacheKeyComponent
}

extension YCache.Metadata {
    /// Renamed: the payload size is `byteCount`.
    @available(*, deprecated, renamed: "byteCount")
    public var payloadByteCount: Int { byteCount }
}

extension YCache.Options {
    /// Renamed: the policy is the top-level `CacheLookupPolicy`.
    @available(*, deprecated, renamed: "CacheLookupPolicy")
    public typealias LookupPolicy = CacheLookupPolicy
    /// Renamed: the policy is the top-level `CacheWritePolicy`.
    @available(*, deprecated, renamed: "CacheWritePolicy")
    public typealias WritePolicy = CacheWritePolicy
    /// Renamed: the policy is the top-level `CacheReadFailurePolicy`.
    @available(*, deprecated, renamed: "CacheReadFailurePolicy")
    public typealias ReadFailurePolicy = CacheReadFailurePolicy
    /// Renamed: the policy is the top-level `CacheWriteFailurePolicy`.
    @available(*, deprecated, renamed: "CacheWriteFailurePolicy")
    public typealias WriteFailurePolicy = CacheWriteFailurePolicy
    /// Renamed: the policy is the top-level `CacheSingleFlightPolicy`.
    @available(*, deprecated, renamed: "CacheSingleFlightPolicy")
    public typealias SingleFlightPolicy = CacheSingleFlightPolicy

    /// The 0.1 initializer, with `cost` an `Int` after the other options. `cost` is a `CacheCost` now
    /// and comes first, as in Yashima: `Options(cost: .bytes(n), …)`.
    /// - Parameters:
    ///   - lookupPolicy: Where a lookup may find the value.
    ///   - writePolicy: Which layers a value is written to.
    ///   - readFailurePolicy: Whether a failed read is a miss or thrown.
    ///   - writeFailurePolicy: Whether a failed storage write is thrown or falls back to memory.
    ///   - singleFlightPolicy: How concurrent calls share a generation.
    ///   - crossProcess: Whether generation is coordinated with other processes.
    ///   - crossProcessWaitTimeout: How long to wait for another process's generation.
    ///   - cost: The memory cost, as `.units(cost)`.
    ///   - expiry: When a value stored by the call expires.
    @available(*, deprecated, message: "pass cost: .bytes(n) or .units(n) as the first argument")
    public init(
        lookupPolicy: CacheLookupPolicy = .normal, writePolicy: CacheWritePolicy = .memoryAndStorage,
        readFailurePolicy: CacheReadFailurePolicy = .treatAsMiss,
        writeFailurePolicy: CacheWriteFailurePolicy = .throwError,
        singleFlightPolicy: CacheSingleFlightPolicy = .share, crossProcess: CrossProcessPolicy = .coordinate,
        crossProcessWaitTimeout: Duration? = nil, cost: Int, expiry: CacheExpiry = .never
    ) {
        self.init(
            cost: .units(cost), lookupPolicy: lookupPolicy, writePolicy: writePolicy,
            readFailurePolicy: readFailurePolicy, writeFailurePolicy: writeFailurePolicy,
            singleFlightPolicy: singleFlightPolicy, crossProcess: crossProcess,
            crossProcessWaitTimeout: crossProcessWaitTimeout, expiry: expiry)
    }
}

extension YCache {
    /// Renamed: the generator is the unlabelled last argument, `value(for:codec:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss.
    /// - Returns: The cached or generated value.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "value(for:codec:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func value<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        try await value(for: key, codec: codec, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `resolve(for:codec:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss.
    /// - Returns: The value with its source and metadata.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "resolve(for:codec:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func resolve<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Resolved<Codec.Value> {
        try await resolve(for: key, codec: codec, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `optionalValue(for:codec:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss, or nil.
    /// - Returns: The cached or generated value, or nil.
    /// - Throws: The errors of `optionalValue(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "optionalValue(for:codec:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func optionalValue<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> Codec.Value? {
        try await optionalValue(for: key, codec: codec, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `refresh(for:codec:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: How the value is stored.
    ///   - options: The policies.
    ///   - generate: Produces the fresh value.
    /// - Returns: The generated value.
    /// - Throws: The errors of `refresh(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "refresh(for:codec:options:_:)")
    @_disfavoredOverload
    public func refresh<Codec: CacheCodec>(
        for key: CacheKey, codec: Codec, options: Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        try await refresh(for: key, codec: codec, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `data(for:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: The policies.
    ///   - generate: Produces the bytes on a miss.
    /// - Returns: The cached or generated bytes.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "data(for:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func data(
        for key: CacheKey, options: Options = .default, generate: @escaping @Sendable () async throws -> Data
    ) async throws -> Data {
        try await data(for: key, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `string(for:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: The policies.
    ///   - generate: Produces the text on a miss.
    /// - Returns: The cached or generated text.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "string(for:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func string(
        for key: CacheKey, options: Options = .default, generate: @escaping @Sendable () async throws -> String
    ) async throws -> String {
        try await string(for: key, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `codable(for:as:format:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - type: The value type.
    ///   - format: `.json` or `.propertyList`.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss.
    /// - Returns: The cached or generated value.
    /// - Throws: The errors of `value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "codable(for:as:format:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func codable<Value: Codable & Sendable>(
        for key: CacheKey, as type: Value.Type = Value.self, format: CodableCodec<Value>.Format = .json,
        options: Options = .default, generate: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await codable(for: key, as: type, format: format, options: options, generate)
    }
}

extension YCache.Typed {
    /// Renamed: the generator is the unlabelled last argument, `value(for:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss.
    /// - Returns: The cached or generated value.
    /// - Throws: The errors of `YCache.value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "value(for:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func value(
        for key: CacheKey, options: YCache.Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        try await value(for: key, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `resolve(for:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss.
    /// - Returns: The value with its source and metadata.
    /// - Throws: The errors of `YCache.value(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "resolve(for:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func resolve(
        for key: CacheKey, options: YCache.Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> YCache.Resolved<Codec.Value> {
        try await resolve(for: key, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `optionalValue(for:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: The policies.
    ///   - generate: Produces the value on a miss, or nil.
    /// - Returns: The cached or generated value, or nil.
    /// - Throws: The errors of `YCache.optionalValue(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "optionalValue(for:options:_:)")
    @_disfavoredOverload
    nonisolated(nonsending) public func optionalValue(
        for key: CacheKey, options: YCache.Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value?
    ) async throws -> Codec.Value? {
        try await optionalValue(for: key, options: options, generate)
    }

    /// Renamed: the generator is the unlabelled last argument, `refresh(for:options:_:)`.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - options: The policies.
    ///   - generate: Produces the fresh value.
    /// - Returns: The generated value.
    /// - Throws: The errors of `YCache.refresh(for:codec:options:_:)`.
    @available(*, deprecated, renamed: "refresh(for:options:_:)")
    @_disfavoredOverload
    public func refresh(
        for key: CacheKey, options: YCache.Options = .default,
        generate: @escaping @Sendable () async throws -> Codec.Value
    ) async throws -> Codec.Value {
        try await refresh(for: key, options: options, generate)
    }
}
