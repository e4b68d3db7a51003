// Lookups of the five payload kinds with every value checked against `Payload`: a key carries its kind
// and size as variants, so any process (worker or judge) knows the right value for any key it meets,
// including keys it only found by listing the directory.

import Foundation
import Synchronization
import YashimaShared

/// What a key's value is: its codec kind and its size (bytes, characters or numbers, per kind).
struct PayloadSpec: Sendable, Hashable, CustomStringConvertible {
    var kind: PayloadKind
    var size: Int

    var description: String { "\(kind.rawValue) \(size)" }
}

/// Stress keys: namespace and identity, with the payload spec as variants.
enum StressKey {
    static func make(_ namespace: String, _ identity: String, _ spec: PayloadSpec) -> CacheKey {
        CacheKey(namespace: namespace, identity: identity).variant("kind", spec.kind.rawValue).variant(
            "size", spec.size)
    }

    /// The spec a key was made with, or nil for a key the stress runner did not make.
    static func spec(of key: CacheKey) -> PayloadSpec? {
        guard let kindText = key.variants.first(where: { $0.name == "kind" })?.value,
            let kind = PayloadKind(rawValue: kindText),
            let sizeText = key.variants.first(where: { $0.name == "size" })?.value, let size = Int(sizeText)
        else { return nil }
        return PayloadSpec(kind: kind, size: size)
    }

    /// `namespace/identity#kind`: how ledgers and reports name an entry.
    static func label(_ key: CacheKey) -> String {
        "\(key.namespace)/\(key.identity)#\(spec(of: key)?.kind.rawValue ?? "?")"
    }

    /// The codec identifier a kind is stored under.
    static func codecIdentifier(_ kind: PayloadKind) -> String {
        switch kind {
        case .data: return DataCodec().identifier
        case .compressed: return CompressedDataCodec().identifier
        case .json: return CodableCodec(Artifact.self, format: .json).identifier
        case .plist: return CodableCodec(Artifact.self, format: .propertyList).identifier
        case .string: return StringCodec().identifier
        }
    }
}

/// A value a lookup returned, where it came from, and whether it was the right value.
struct Fetched: Sendable {
    let source: YCache.Source
    /// `.remote` for a value of the remote tier (`--remote`), whose `source` is `.storage`.
    var origin: YCache.Origin? = nil
    let shared: Bool
    let correct: Bool
    /// Nil only for a value generated under `writePolicy: .disabled` (the stress runner never uses it).
    let metadata: YCache.Metadata?
    /// A digest of the value's encoding-independent content (for comparing across processes).
    let digest: UInt64
}

/// What a generator does around making its value (announce, record, wait).
struct GeneratorHooks: Sendable {
    var willGenerate: (@Sendable () async throws -> Void)?
    var didGenerate: (@Sendable () async throws -> Void)?

    init(
        willGenerate: (@Sendable () async throws -> Void)? = nil,
        didGenerate: (@Sendable () async throws -> Void)? = nil
    ) {
        self.willGenerate = willGenerate
        self.didGenerate = didGenerate
    }
}

/// 64-bit digest of bytes, word at a time (fast in debug builds too). Not cryptographic.
enum Digest {
    static func of(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { raw -> UInt64 in
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325
            var offset = 0
            while offset + 8 <= raw.count {
                hash = (hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x0100_0000_01B3
                hash ^= hash >> 29
                offset += 8
            }
            while offset < raw.count {
                hash = (hash ^ UInt64(raw[offset])) &* 0x0100_0000_01B3
                offset += 1
            }
            return hash ^ UInt64(raw.count)
        }
    }

    static func of(_ artifact: Artifact) -> UInt64 {
        var data = Data(artifact.identity.utf8)
        for number in artifact.numbers { withUnsafeBytes(of: number.littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: artifact.label.utf8)
        return of(data)
    }

    static func of(_ text: String) -> UInt64 { of(Data(text.utf8)) }

    static func hex(_ digest: UInt64) -> String { String(digest, radix: 16) }
}

/// The right values for one run's seed, memoised for small values.
final class ExpectedValues: Sendable {
    let seed: UInt64
    private let memo = Mutex<(values: [MemoKey: Expected], bytes: Int)>(([:], 0))
    private static let memoLimit = 48 << 20
    private static let memoEntryLimit = 512 << 10

    private struct MemoKey: Hashable {
        let key: CacheKey
        let spec: PayloadSpec
    }

    enum Expected: Sendable {
        case bytes(Data)
        case artifact(Artifact)
        case text(String)

        var digest: UInt64 {
            switch self {
            case .bytes(let data): return Digest.of(data)
            case .artifact(let artifact): return Digest.of(artifact)
            case .text(let text): return Digest.of(text)
            }
        }
    }

    init(seed: UInt64) {
        self.seed = seed
    }

    /// The right value for `key` (whose spec is `spec`).
    func value(_ key: CacheKey, _ spec: PayloadSpec) -> Expected {
        let memoKey = MemoKey(key: key, spec: spec)
        if let known = memo.withLock({ $0.values[memoKey] }) { return known }
        let value: Expected
        switch spec.kind {
        case .data, .compressed: value = .bytes(Payload.bytes(seed, key: key, kind: spec.kind, size: spec.size))
        case .json, .plist: value = .artifact(Payload.artifact(seed, key: key, kind: spec.kind, count: spec.size))
        case .string: value = .text(Payload.string(seed, key: key, size: spec.size))
        }
        let cost =
            spec.kind == .string
            ? spec.size * 2 : (spec.kind == .data || spec.kind == .compressed ? spec.size : spec.size * 8)
        if cost <= Self.memoEntryLimit {
            memo.withLock { memo in
                guard memo.bytes + cost <= Self.memoLimit else { return }
                memo.values[memoKey] = value
                memo.bytes += cost
            }
        }
        return value
    }

    func bytes(_ key: CacheKey, _ spec: PayloadSpec) -> Data {
        if case .bytes(let data) = value(key, spec) { return data }
        preconditionFailure("\(spec.kind) is not a byte kind")
    }

    func digest(_ key: CacheKey) -> UInt64? {
        guard let spec = StressKey.spec(of: key) else { return nil }
        return value(key, spec).digest
    }

    // MARK: Lookups

    /// Get-or-generate `key` (its spec comes from the key), checking the value.
    func fetch(
        _ cache: YCache, _ key: CacheKey, options: YCache.Options = .default, hooks: GeneratorHooks = GeneratorHooks()
    ) async throws -> Fetched {
        guard let spec = StressKey.spec(of: key) else { preconditionFailure("not a stress key: \(key)") }
        let make: @Sendable () -> Expected = { [self] in value(key, spec) }
        switch spec.kind {
        case .data, .compressed:
            let resolution: YCache.Resolved<Data>
            let generate: @Sendable () async throws -> Data = {
                try await hooks.willGenerate?()
                guard case .bytes(let data) = make() else { preconditionFailure() }
                try await hooks.didGenerate?()
                return data
            }
            if spec.kind == .data {
                resolution = try await cache.resolve(for: key, codec: DataCodec(), options: options, generate)
            } else {
                resolution = try await cache.resolve(
                    for: key, codec: CompressedDataCodec(), options: options, generate)
            }
            let expected = bytes(key, spec)
            return Fetched(
                source: resolution.source, origin: resolution.origin, shared: resolution.wasSharedGeneration,
                correct: resolution.value == expected,
                metadata: resolution.metadata, digest: Digest.of(resolution.value))
        case .json, .plist:
            let codec = CodableCodec(Artifact.self, format: spec.kind == .json ? .json : .propertyList)
            let resolution = try await cache.resolve(for: key, codec: codec, options: options) {
                try await hooks.willGenerate?()
                guard case .artifact(let artifact) = make() else { preconditionFailure() }
                try await hooks.didGenerate?()
                return artifact
            }
            guard case .artifact(let expected) = make() else { preconditionFailure() }
            return Fetched(
                source: resolution.source, origin: resolution.origin, shared: resolution.wasSharedGeneration,
                correct: resolution.value == expected,
                metadata: resolution.metadata, digest: Digest.of(resolution.value))
        case .string:
            let resolution = try await cache.resolve(for: key, codec: StringCodec(), options: options) {
                try await hooks.willGenerate?()
                guard case .text(let text) = make() else { preconditionFailure() }
                try await hooks.didGenerate?()
                return text
            }
            guard case .text(let expected) = make() else { preconditionFailure() }
            return Fetched(
                source: resolution.source, origin: resolution.origin, shared: resolution.wasSharedGeneration,
                correct: resolution.value == expected,
                metadata: resolution.metadata, digest: Digest.of(resolution.value))
        }
    }

    /// A cache-only read of `key`: the checked value, or nil on a miss. Never generates.
    func cached(_ cache: YCache, _ key: CacheKey, options: YCache.Options = .default) async throws -> Fetched? {
        var options = options
        options.lookupPolicy = .cacheOnly
        do {
            return try await fetch(
                cache, key, options: options,
                hooks: GeneratorHooks(willGenerate: {
                    throw YCache.Error.cacheMiss  // unreachable with .cacheOnly; a generation here would be a bug
                }))
        } catch YCache.Error.cacheMiss {
            return nil
        }
    }
}

/// Wall-clock nanoseconds since 1970 (what entry metadata is stamped with).
func wallNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

extension Date {
    /// Nanoseconds since 1970, as metadata dates were made from (exact for equal inputs).
    var nanosecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1e9).rounded()) }
}

/// Calls that need the key's codec but return no value: metadata, contains, remove, store.
enum KindOperations {
    static func metadata(_ cache: YCache, _ key: CacheKey) async throws -> YCache.Metadata? {
        switch kind(of: key) {
        case .data: return try await cache.metadata(for: key, codec: DataCodec())
        case .compressed: return try await cache.metadata(for: key, codec: CompressedDataCodec())
        case .json: return try await cache.metadata(for: key, codec: CodableCodec(Artifact.self, format: .json))
        case .plist:
            return try await cache.metadata(for: key, codec: CodableCodec(Artifact.self, format: .propertyList))
        case .string: return try await cache.metadata(for: key, codec: StringCodec())
        }
    }

    static func contains(_ cache: YCache, _ key: CacheKey) async throws -> Bool {
        switch kind(of: key) {
        case .data: return try await cache.contains(for: key, codec: DataCodec())
        case .compressed: return try await cache.contains(for: key, codec: CompressedDataCodec())
        case .json: return try await cache.contains(for: key, codec: CodableCodec(Artifact.self, format: .json))
        case .plist:
            return try await cache.contains(for: key, codec: CodableCodec(Artifact.self, format: .propertyList))
        case .string: return try await cache.contains(for: key, codec: StringCodec())
        }
    }

    static func remove(_ cache: YCache, _ key: CacheKey) async throws {
        switch kind(of: key) {
        case .data: try await cache.remove(for: key, codec: DataCodec())
        case .compressed: try await cache.remove(for: key, codec: CompressedDataCodec())
        case .json: try await cache.remove(for: key, codec: CodableCodec(Artifact.self, format: .json))
        case .plist: try await cache.remove(for: key, codec: CodableCodec(Artifact.self, format: .propertyList))
        case .string: try await cache.remove(for: key, codec: StringCodec())
        }
    }

    /// Stores the right value for `key` (an explicit `store`, not a generation).
    static func store(_ cache: YCache, _ key: CacheKey, _ expected: ExpectedValues) async throws {
        guard let spec = StressKey.spec(of: key) else { preconditionFailure("not a stress key: \(key)") }
        switch expected.value(key, spec) {
        case .bytes(let data):
            if spec.kind == .data {
                try await cache.store(data, for: key, codec: DataCodec())
            } else {
                try await cache.store(data, for: key, codec: CompressedDataCodec())
            }
        case .artifact(let artifact):
            let codec = CodableCodec(Artifact.self, format: spec.kind == .json ? .json : .propertyList)
            try await cache.store(artifact, for: key, codec: codec)
        case .text(let text):
            try await cache.store(text, for: key, codec: StringCodec())
        }
    }

    private static func kind(of key: CacheKey) -> PayloadKind {
        guard let spec = StressKey.spec(of: key) else { preconditionFailure("not a stress key: \(key)") }
        return spec.kind
    }
}
