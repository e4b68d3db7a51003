// What calls return: `YCache.Metadata`, `Source`, `Origin`, `Resolved`, `StorageUsage` and `StoredEntryInfo`.
// Plain values, made by Storage and the engine, returned by the facade.

import Foundation

extension YCache {
    /// Facts about a cached value, read without decoding its payload.
    public struct Metadata: Sendable, Equatable {
        /// The encoded payload's size in bytes (what storage holds for the value, and what the storage
        /// budget counts).
        public let byteCount: Int
        /// The memory cost the value was charged: `Options.cost` when given, else the codec's
        /// `memoryCost(of:encodedByteCount:)`. `nil` when no decoded value was involved (metadata read
        /// from an entry's header by `metadata(for:codec:)`).
        public let cost: Int?
        /// When the value was stored.
        public let createdAt: Date
        /// When the value was last used, as storage records it: now for a storage hit, the creation
        /// time for a value just stored, the entry file's modification time (its LRU position) for
        /// `metadata(for:codec:)`; memory hits report the metadata captured when the value entered memory.
        public let lastAccessedAt: Date
        /// The codec identifier the value was encoded with.
        public let codecIdentifier: String
        /// When the value expires, or nil if it never does (YashimaShared: `Options.expiry`).
        public let expiresAt: Date?
        /// The key's `stableIdentifier` (YashimaShared; empty for metadata made with the public
        /// initializer).
        public var keyStableIdentifier: String { keyDigest?.hex ?? "" }

        let keyDigest: SHA256Digest?
        /// The expiry instant, kept exact for the memory layer's checks.
        let expiresAtNanoseconds: Int64?

        /// Creates metadata (as Yashima's initializer; `expiresAt` is nil).
        /// - Parameters:
        ///   - byteCount: The encoded payload's size in bytes.
        ///   - cost: The memory cost, or nil.
        ///   - createdAt: When the value was stored.
        ///   - lastAccessedAt: When it was last used.
        ///   - codecIdentifier: The codec identifier.
        public init(byteCount: Int, cost: Int?, createdAt: Date, lastAccessedAt: Date, codecIdentifier: String) {
            self.init(
                byteCount: byteCount, cost: cost, createdAt: createdAt, lastAccessedAt: lastAccessedAt,
                codecIdentifier: codecIdentifier, keyDigest: nil, expiresAtNanoseconds: nil)
        }

        init(
            byteCount: Int, cost: Int?, createdAt: Date, lastAccessedAt: Date, codecIdentifier: String,
            keyDigest: SHA256Digest?, expiresAtNanoseconds: Int64?
        ) {
            self.byteCount = byteCount
            self.cost = cost
            self.createdAt = createdAt
            self.lastAccessedAt = lastAccessedAt
            self.codecIdentifier = codecIdentifier
            self.keyDigest = keyDigest
            self.expiresAtNanoseconds = expiresAtNanoseconds
            self.expiresAt = expiresAtNanoseconds.map(Date.init(nanosecondsSince1970:))
        }

        /// The same metadata with another memory cost.
        func with(cost: Int?) -> Metadata {
            Metadata(
                byteCount: byteCount, cost: cost, createdAt: createdAt, lastAccessedAt: lastAccessedAt,
                codecIdentifier: codecIdentifier, keyDigest: keyDigest, expiresAtNanoseconds: expiresAtNanoseconds)
        }
    }

    /// Where a resolved value came from.
    public enum Source: String, Sendable, Equatable, Codable {
        /// This process's memory (L1).
        case memory
        /// The shared storage directory (L2), written by this or another process.
        case storage
        /// The generator ran for this call (or for the call or process whose generation it joined).
        case generated
    }

    /// Where a resolved value came from, with the remote tier told apart (YashimaShared).
    ///
    /// `Source` keeps Yashima's three cases, so that exhaustive switches over it keep compiling; a value
    /// from the remote tier has `source == .storage` (the generator did not run here, and the value is now
    /// in this host's storage directory) and `origin == .remote`. More cases may be added: switch over
    /// `Origin` with a `default`.
    public enum Origin: String, Sendable, Equatable, Codable {
        /// This process's memory (L1).
        case memory
        /// The shared storage directory (L2), written by this or another process of this host.
        case storage
        /// The generator ran for this call (or for the call or process whose generation it joined).
        case generated
        /// The remote tier (`Configuration.remote`): another host (or this one, earlier) stored it there;
        /// it was verified and published into this host's storage directory.
        case remote

        /// The `Source` this origin is reported as (`.remote` is `.storage`).
        public var source: Source {
            switch self {
            case .memory: return .memory
            case .storage, .remote: return .storage
            case .generated: return .generated
            }
        }

        /// The origin of a value whose source is `source` (never `.remote`).
        /// - Parameter source: Where the value came from.
        public init(_ source: Source) {
            switch source {
            case .memory: self = .memory
            case .storage: self = .storage
            case .generated: self = .generated
            }
        }
    }

    /// A value with where it came from.
    public struct Resolved<Value: Sendable>: Sendable {
        /// The value.
        public let value: Value
        /// Where it came from.
        public let source: Source
        /// Its metadata; `nil` for a value generated under `writePolicy: .disabled` (never encoded).
        public let metadata: Metadata?
        /// True when another task or process (or, with a remote tier, another host) generated it while this
        /// call waited (single-flight).
        public let wasSharedGeneration: Bool
        /// Where it came from, with the remote tier told apart: `.remote` for a value of the remote tier
        /// (whose `source` is `.storage`), else the same as `source` (YashimaShared).
        public let origin: Origin

        /// Creates a resolution.
        /// - Parameters:
        ///   - value: The value.
        ///   - source: Where it came from.
        ///   - metadata: Its metadata, if any.
        ///   - wasSharedGeneration: Whether another caller's generation produced it.
        public init(value: Value, source: Source, metadata: Metadata?, wasSharedGeneration: Bool) {
            self.init(
                value: value, origin: Origin(source), metadata: metadata, wasSharedGeneration: wasSharedGeneration)
        }

        /// Creates a resolution from its origin (its `source` is `origin.source`).
        /// - Parameters:
        ///   - value: The value.
        ///   - origin: Where it came from.
        ///   - metadata: Its metadata, if any.
        ///   - wasSharedGeneration: Whether another caller's generation produced it.
        public init(value: Value, origin: Origin, metadata: Metadata?, wasSharedGeneration: Bool) {
            self.value = value
            self.source = origin.source
            self.origin = origin
            self.metadata = metadata
            self.wasSharedGeneration = wasSharedGeneration
        }
    }

    /// Bytes and entries in the storage directory (all processes' entries).
    public struct StorageUsage: Sendable, Equatable {
        /// Payload bytes of all entries (the sum of their `Metadata.byteCount`): what the storage budget
        /// counts, as in Yashima.
        public let byteCount: Int
        /// Number of entries.
        public let entryCount: Int
        /// The storage budget of the instance that measured (`Configuration.storageMaximumByteCount`).
        public let maximumByteCount: Int?
        /// Allocated bytes of all entry files (`st_blocks × 512`: headers and block rounding included), what
        /// the entries take on disk (YashimaShared).
        public let allocatedByteCount: Int64
        /// The disk cap of the instance that measured (`Configuration.storageMaximumAllocatedByteCount`).
        public let maximumAllocatedByteCount: Int?

        /// Creates a usage report.
        /// - Parameters:
        ///   - byteCount: Payload bytes of all entries.
        ///   - entryCount: Number of entries.
        ///   - maximumByteCount: The storage budget, if any.
        ///   - allocatedByteCount: Allocated bytes of all entry files.
        ///   - maximumAllocatedByteCount: The disk cap, if any.
        public init(
            byteCount: Int, entryCount: Int, maximumByteCount: Int?, allocatedByteCount: Int64 = 0,
            maximumAllocatedByteCount: Int? = nil
        ) {
            self.byteCount = byteCount
            self.entryCount = entryCount
            self.maximumByteCount = maximumByteCount
            self.allocatedByteCount = allocatedByteCount
            self.maximumAllocatedByteCount = maximumAllocatedByteCount
        }
    }
}

extension Date {
    /// The date `nanoseconds` after 1970 (the unit of entry headers and memory items).
    init(nanosecondsSince1970 nanoseconds: Int64) {
        self.init(timeIntervalSince1970: Double(nanoseconds) / 1e9)
    }
}

/// One stored entry, as listed by `YCache.entries(in:)` (the payload is not read).
public struct StoredEntryInfo: Sendable, Equatable {
    /// The entry's key, read back from the entry's header.
    public let key: CacheKey
    /// Its metadata (`cost` is nil: the payload is not decoded).
    public let metadata: YCache.Metadata
    /// Allocated bytes of the entry file.
    public let allocatedByteCount: Int64
}
