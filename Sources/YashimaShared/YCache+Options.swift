// Per-call options and their policies, and the small public value types results are made of.
// No behaviour lives here; CacheEngine reads these.

import Foundation

extension YCache {
    /// How one call looks up, generates, stores and shares a value.
    public struct Options: Sendable, Equatable {
        /// Where a lookup may find the value.
        public enum LookupPolicy: Sendable, Equatable {
            /// Memory, then storage, then generate (the default).
            case normal
            /// Memory, then storage; never generate. A miss throws `YCacheError.cacheMiss`.
            case cacheOnly
            /// Always generate, then store the fresh value (like `refresh`).
            case refresh
        }

        /// Which layers a generated value is written to.
        public enum WritePolicy: Sendable, Equatable {
            /// Memory and storage (the default).
            case memoryAndStorage
            /// Memory only; other processes do not see it, and generation is deduplicated within this
            /// process only (no cross-process lock).
            case memoryOnly
            /// Nothing is stored, not even a storage hit's copy in memory; generation is deduplicated
            /// within this process only.
            case disabled
        }

        /// What a failed read of a stored entry (corrupt, truncated, undecodable, I/O error), or a storage
        /// directory that cannot be opened for a lookup, does.
        public enum ReadFailurePolicy: Sendable, Equatable {
            /// The entry is a miss and the value is generated again (the default). A corrupt or
            /// undecodable entry is also removed; after an I/O error the file is left in place.
            case treatAsMiss
            /// The call throws the `YCacheError`.
            case throwError
        }

        /// What a failed storage write (disk full, I/O error, encoding failure, a storage directory that
        /// cannot be opened) does.
        public enum WriteFailurePolicy: Sendable, Equatable {
            /// The call throws, and neither layer keeps the value (the default).
            case throwError
            /// The value is returned and kept in memory only.
            case bestEffort
        }

        /// How concurrent calls for the same entry share one generation.
        public enum SingleFlightPolicy: Sendable, Equatable {
            /// Callers share one producer, which keeps running when a caller is cancelled (the default).
            case share
            /// Callers share one producer, cancelled when its last caller is cancelled; its result is
            /// never stored even if the generator ignores cancellation.
            case cancelWhenNoWaiters
            /// Every call generates on its own (and takes no cross-process lock).
            case disabled
        }

        /// Whether a generation is coordinated with other processes on the same directory.
        public enum CrossProcessPolicy: Sendable, Equatable {
            /// One generator per entry across all processes (the default): the others wait and read it.
            /// Applies only with `writePolicy: .memoryAndStorage`, a single-flight policy other than
            /// `.disabled`, and a local filesystem; otherwise the call behaves as `.processLocal`.
            case coordinate
            /// Deduplicate within this process only; other processes may generate the same entry.
            case processLocal
        }

        /// Where a lookup may find the value. Default `.normal`.
        public var lookupPolicy: LookupPolicy
        /// Which layers a generated value is written to. Default `.memoryAndStorage`.
        public var writePolicy: WritePolicy
        /// What a failed read does. Default `.treatAsMiss`.
        public var readFailurePolicy: ReadFailurePolicy
        /// What a failed write does. Default `.throwError`.
        public var writeFailurePolicy: WriteFailurePolicy
        /// How concurrent calls share a generation. Default `.share`.
        public var singleFlightPolicy: SingleFlightPolicy
        /// Cross-process coordination. Default `.coordinate`.
        public var crossProcess: CrossProcessPolicy
        /// How long to wait for another process that is generating the same key before generating
        /// anyway (a duplicate, never a wrong value). Default `nil`: wait as long as it holds the lock
        /// (a process that dies releases it at once).
        public var crossProcessWaitTimeout: Duration?
        /// The value's cost in memory, for generated values and for storage hits put in memory; `nil`
        /// asks the codec (`CacheCodec.memoryCost(of:encodedByteCount:)`).
        public var cost: Int?
        /// When a value stored by this call expires. Default `.never`.
        public var expiry: CacheExpiry

        /// Creates options; every parameter defaults to the `.default` preset's value.
        /// - Parameters:
        ///   - lookupPolicy: Where a lookup may find the value.
        ///   - writePolicy: Which layers a generated or stored value is written to.
        ///   - readFailurePolicy: Whether a failed read is a miss or thrown.
        ///   - writeFailurePolicy: Whether a failed storage write is thrown or falls back to memory.
        ///   - singleFlightPolicy: How concurrent calls for the same entry share a generation.
        ///   - crossProcess: Whether generation is coordinated with other processes.
        ///   - crossProcessWaitTimeout: How long to wait for another process's generation; `nil` waits
        ///     as long as it holds the lock.
        ///   - cost: The value's memory cost; `nil` asks the codec.
        ///   - expiry: When a value stored by the call expires.
        public init(
            lookupPolicy: LookupPolicy = .normal,
            writePolicy: WritePolicy = .memoryAndStorage,
            readFailurePolicy: ReadFailurePolicy = .treatAsMiss,
            writeFailurePolicy: WriteFailurePolicy = .throwError,
            singleFlightPolicy: SingleFlightPolicy = .share,
            crossProcess: CrossProcessPolicy = .coordinate,
            crossProcessWaitTimeout: Duration? = nil,
            cost: Int? = nil,
            expiry: CacheExpiry = .never
        ) {
            self.lookupPolicy = lookupPolicy
            self.writePolicy = writePolicy
            self.readFailurePolicy = readFailurePolicy
            self.writeFailurePolicy = writeFailurePolicy
            self.singleFlightPolicy = singleFlightPolicy
            self.crossProcess = crossProcess
            self.crossProcessWaitTimeout = crossProcessWaitTimeout
            self.cost = cost
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

/// Facts about a cached value, read without decoding its payload.
public struct CacheMetadata: Sendable, Equatable {
    /// The key's `stableIdentifier`.
    public var keyStableIdentifier: String { keyDigest?.hex ?? "" }
    /// The codec identifier the value was encoded with.
    public let codecIdentifier: String
    /// When the value was stored.
    public var createdAt: Date { Date(timeIntervalSince1970: Double(createdAtNanoseconds) / 1e9) }
    /// When the value expires, or nil if it never does.
    public var expiresAt: Date? { expiresAtNanoseconds.map { Date(timeIntervalSince1970: Double($0) / 1e9) } }
    /// The encoded payload's size in bytes (0 for a value kept only in memory without encoding).
    public let payloadByteCount: Int

    let keyDigest: SHA256Digest?
    let createdAtNanoseconds: Int64
    let expiresAtNanoseconds: Int64?

    init(
        keyDigest: SHA256Digest?, codecIdentifier: String, createdAtNanoseconds: Int64,
        expiresAtNanoseconds: Int64?, payloadByteCount: Int
    ) {
        self.keyDigest = keyDigest
        self.codecIdentifier = codecIdentifier
        self.createdAtNanoseconds = createdAtNanoseconds
        self.expiresAtNanoseconds = expiresAtNanoseconds
        self.payloadByteCount = payloadByteCount
    }
}

/// Where a resolved value came from.
public enum CacheSource: String, Sendable, Equatable, Codable {
    /// This process's memory (L1).
    case memory
    /// The shared storage directory (L2), written by this or another process.
    case storage
    /// The generator ran for this call.
    case generated
}

/// A value with where it came from.
public struct CacheResolution<Value: Sendable>: Sendable {
    /// The value.
    public let value: Value
    /// Where it came from.
    public let source: CacheSource
    /// Its metadata.
    public let metadata: CacheMetadata
    /// True when another task or process generated it while this call waited (single-flight).
    public let wasSharedGeneration: Bool
}

/// Bytes and entries in the storage directory.
public struct StorageUsage: Sendable, Equatable {
    /// Allocated bytes of all entries (file blocks, not only payload sizes).
    public let byteCount: Int64
    /// Number of entries.
    public let entryCount: Int
}

/// One stored entry, as listed by `YCache.entries(in:)` (the payload is not read).
public struct StoredEntryInfo: Sendable, Equatable {
    /// The entry's key, read back from the entry's header.
    public let key: CacheKey
    /// Its metadata.
    public let metadata: CacheMetadata
    /// Allocated bytes of the entry file.
    public let allocatedByteCount: Int64
}

/// Counters of what one `YCache` instance did since it was created.
public struct CacheStatistics: Sendable, Equatable {
    /// Lookups answered from memory.
    public var memoryHits = 0
    /// Lookups answered from storage.
    public var storageHits = 0
    /// Values that this process generated.
    public var generations = 0
    /// Lookups that waited on another task's or process's generation and used its value.
    public var sharedGenerations = 0
    /// Entries found corrupt (and treated as misses or thrown).
    public var corruptEntries = 0
    /// Storage writes that failed.
    public var writeFailures = 0
    /// Cross-process waits that passed `crossProcessWaitTimeout`.
    public var crossProcessTimeouts = 0
    /// Generations that ran without the key's lock file because it could not be opened or locked (an
    /// I/O or permission error in the storage directory). Each may duplicate another process's work;
    /// the values stay correct. Non-zero means the directory needs a look (its modes, its filesystem).
    public var crossProcessLockFailures = 0
    /// Damaged auxiliary files of the storage directory this instance replaced: a `state` file of the
    /// wrong size, type, magic or version (truncated, zeroed, a folder or link planted there), or a
    /// `trim.lock` that could not serve as a lock file. Each repair costs every process its memory
    /// layer once (the new `state` file invalidates every value kept in memory) and usage is recounted
    /// by the next trim; values stay correct. Non-zero means something damaged the directory.
    public var auxiliaryFileRepairs = 0
}
