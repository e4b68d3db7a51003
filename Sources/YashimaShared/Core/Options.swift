// Per-call options: the policies (top-level, as in Yashima), `CacheCost`, `CacheExpiry` and
// `YCache.Options`. No behaviour lives here; the engine reads these.

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
    /// Every call generates on its own (and takes no cross-process lock), gets its own value, and stores
    /// it over whatever another call stored meanwhile (the last to publish wins).
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
        /// (a process that dies releases it at once). Each caller's own: a call that joins another call's
        /// wait in this process stops waiting at its own timeout, even when that call has none (a call
        /// with no timeout that joins one with a shorter timeout may get the value that call generated).
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
