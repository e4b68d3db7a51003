// Per-call options, the policies (top-level, as in Yashima), `CacheCost`, `CacheExpiry`, and the small
// public value types results are made of. No behaviour lives here; CacheEngine reads these.

import Foundation

/// Where a lookup may find the value.
public enum CacheLookupPolicy: Sendable, Equatable {
    /// Memory, then storage, then generate (the default).
    case normal
    /// Memory, then storage; never generate. A miss throws `YCache.Error.cacheMiss`.
    case cacheOnly
    /// Always generate, then store the fresh value (like `refresh`).
    case refresh
}

/// Which layers a generated or stored value is written to.
public enum CacheWritePolicy: Sendable, Equatable {
    /// Memory and storage (the default).
    case memoryAndStorage
    /// Memory only; other processes do not see it, and generation is deduplicated within this process
    /// only (no cross-process lock). A storage hit is still put in memory.
    case memoryOnly
    /// Nothing is stored or encoded, not even a storage hit's copy in memory; generation is
    /// deduplicated within this process only, and a generated value's `metadata` is `nil`.
    case disabled
}

/// What a failed read of a stored entry (corrupt, truncated, undecodable, I/O error), or a storage
/// directory that cannot be opened for a lookup, does.
public enum CacheReadFailurePolicy: Sendable, Equatable {
    /// The call throws the `YCache.Error`.
    case throwError
    /// The entry is a miss and the value is generated again (the default). A corrupt or undecodable
    /// entry is also removed; after an I/O error the file is left in place.
    case treatAsMiss
}

/// What a failed storage write (disk full, I/O error, encoding failure, a storage directory that cannot
/// be opened) does.
public enum CacheWriteFailurePolicy: Sendable, Equatable {
    /// The call throws, and neither layer keeps the value (the default).
    case throwError
    /// The value is returned and kept in memory only.
    case bestEffort
}

/// How concurrent calls for the same entry share one generation.
public enum CacheSingleFlightPolicy: Sendable, Hashable {
    /// Callers share one producer, which keeps running when a caller is cancelled (the default).
    case share
    /// Callers share one producer, cancelled when its last caller is cancelled; its result is never
    /// stored even if the generator ignores cancellation.
    case cancelWhenNoWaiters
    /// Every call generates on its own (and takes no cross-process lock).
    case disabled
}

/// An explicit memory cost for a value, overriding the codec's estimate. Both cases mean the same to
/// the memory layer: a cost in the units of `YCache.Configuration.memoryMaximumCost`; negative
/// numbers count as 0.
public enum CacheCost: Sendable, Equatable {
    /// A cost in bytes.
    case bytes(Int)
    /// A cost in units of your choosing (use one kind of unit per cache).
    case units(Int)

    /// The cost charged: the number, at least 0.
    var charged: Int {
        switch self {
        case .bytes(let count), .units(let count): return max(0, count)
        }
    }
}

extension YCache {
    /// How one call looks up, generates, stores and shares a value.
    public struct Options: Sendable, Equatable {
        /// Whether a generation is coordinated with other processes on the same directory.
        public enum CrossProcessPolicy: Sendable, Equatable {
            /// One generator per entry across all processes (the default): the others wait and read it.
            /// Applies only with `writePolicy: .memoryAndStorage`, a single-flight policy other than
            /// `.disabled`, and a local filesystem; otherwise the call behaves as `.processLocal`.
            case coordinate
            /// Deduplicate within this process only; other processes may generate the same entry.
            case processLocal
        }

        /// The value's cost in memory, for generated values and for storage hits put in memory; `nil`
        /// asks the codec (`CacheCodec.memoryCost(of:encodedByteCount:)`).
        public var cost: CacheCost?
        /// Where a lookup may find the value. Default `.normal`.
        public var lookupPolicy: CacheLookupPolicy
        /// Which layers a generated value is written to. Default `.memoryAndStorage`.
        public var writePolicy: CacheWritePolicy
        /// What a failed read does. Default `.treatAsMiss`.
        public var readFailurePolicy: CacheReadFailurePolicy
        /// What a failed storage write does. Default `.throwError`.
        public var writeFailurePolicy: CacheWriteFailurePolicy
        /// How concurrent calls share a generation. Default `.share`.
        public var singleFlightPolicy: CacheSingleFlightPolicy
        /// Cross-process coordination. Default `.coordinate`.
        public var crossProcess: CrossProcessPolicy
        /// How long to wait for another process that is generating the same key before generating
        /// anyway (a duplicate, never a wrong value). Default `nil`: wait as long as it holds the lock
        /// (a process that dies releases it at once).
        public var crossProcessWaitTimeout: Duration?
        /// When a value stored by this call expires. Default `.never`.
        public var expiry: CacheExpiry

        /// Creates options; every parameter defaults to the `.default` preset's value. The first six are
        /// Yashima's, in Yashima's order; the last three are YashimaShared's.
        /// - Parameters:
        ///   - cost: The value's memory cost; `nil` asks the codec.
        ///   - lookupPolicy: Where a lookup may find the value.
        ///   - writePolicy: Which layers a generated or stored value is written to.
        ///   - readFailurePolicy: Whether a failed read is a miss or thrown.
        ///   - writeFailurePolicy: Whether a failed storage write is thrown or falls back to memory.
        ///   - singleFlightPolicy: How concurrent calls for the same entry share a generation.
        ///   - crossProcess: Whether generation is coordinated with other processes.
        ///   - crossProcessWaitTimeout: How long to wait for another process's generation; `nil` waits
        ///     as long as it holds the lock.
        ///   - expiry: When a value stored by the call expires.
        public init(
            cost: CacheCost? = nil,
            lookupPolicy: CacheLookupPolicy = .normal,
            writePolicy: CacheWritePolicy = .memoryAndStorage,
            readFailurePolicy: CacheReadFailurePolicy = .treatAsMiss,
            writeFailurePolicy: CacheWriteFailurePolicy = .throwError,
            singleFlightPolicy: CacheSingleFlightPolicy = .share,
            crossProcess: CrossProcessPolicy = .coordinate,
            crossProcessWaitTimeout: Duration? = nil,
            expiry: CacheExpiry = .never
        ) {
            self.cost = cost
            self.lookupPolicy = lookupPolicy
            self.writePolicy = writePolicy
            self.readFailurePolicy = readFailurePolicy
            self.writeFailurePolicy = writeFailurePolicy
            self.singleFlightPolicy = singleFlightPolicy
            self.crossProcess = crossProcess
            self.crossProcessWaitTimeout = crossProcessWaitTimeout
            self.expiry = expiry
        }

        /// Normal lookup, memory and storage writes, corrupt entries as misses, write failures thrown,
        /// shared single-flight, cross-process coordination.
        public static let `default` = Options()

        /// For work tied to a UI lifecycle (cells, previews): the producer is cancelled when nobody waits
        /// any more, and a failed storage write falls back to memory.
        public static let uiLifecycle = Options(
            writeFailurePolicy: .bestEffort, singleFlightPolicy: .cancelWhenNoWaiters)
    }
}

/// When a stored value stops being returned.
public enum CacheExpiry: Sendable, Equatable {
    /// Never expires (it can still be trimmed or removed).
    case never
    /// Expires this long after it is stored.
    case after(Duration)
    /// Expires at this date. A date before 1970 is already expired; one after about the year 2261
    /// (9.2 × 10⁹ s since 1970) counts as never.
    case at(Date)

    /// The expiry instant in nanoseconds since 1970 for a value stored at `now`, or nil for never.
    func expiresAtNanoseconds(now: Int64) -> Int64? {
        switch self {
        case .never: return nil
        case .after(let duration):
            let (seconds, attoseconds) = duration.components
            let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
            // Adding the fraction can overflow too (9_223_372_036 s + 0.9 s), not only the product.
            let exact = nanoseconds.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000)
            if nanoseconds.overflow || exact.overflow { return seconds > 0 ? nil : now }
            let total = now.addingReportingOverflow(exact.partialValue)
            return total.overflow ? nil : max(1, total.partialValue)
        case .at(let date):
            let seconds = date.timeIntervalSince1970
            guard seconds.isFinite, seconds < 9.2e9 else { return nil }
            // Dates before 1970 are already expired; converting them could trap below Int64.min.
            return seconds <= 0 ? 1 : max(1, Int64(seconds * 1e9))
        }
    }
}

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
