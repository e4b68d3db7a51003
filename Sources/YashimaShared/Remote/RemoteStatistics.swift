// RemoteStatistics.swift: the remote tier's counters, shared by every backend (hits, misses, stores,
// rejected values, errors, timeouts, bypassed calls, failed writes, lease waits and takeovers); for
// observation, never control.

import Synchronization

/// Counters of one remote tier. Thread-safe.
final class RemoteStatistics: Sendable {
    /// One counter.
    enum Counter: Int, CaseIterable, Sendable {
        /// Lookups that returned a verified value.
        case hits
        /// Lookups that found nothing usable (absent, rejected, wrong Redis type, too large).
        case misses
        /// Values stored.
        case puts
        /// Stored bytes that failed verification (a subset of misses).
        case rejectedValues
        /// Values not stored because they exceed the size cap.
        case oversizedValues
        /// Failed calls other than timeouts.
        case errors
        /// Calls that missed their deadline.
        case timeouts
        /// Calls not made because the breaker was open (or the tier is read-only, for writes).
        case bypassed
        /// Writes (stores, removals, leases) that were attempted and failed: refused by the server, an
        /// error or a timeout (each also counted as an error or a timeout).
        case failedWrites
        /// Leases acquired.
        case leasesAcquired
        /// Waits for another host's lease.
        case leaseWaits
        /// Leases acquired after the previous holder's lease expired without a release (it died or hung).
        case leaseTakeovers
        /// Leases found lost on renewal (expired, evicted, or taken by another holder).
        case leasesLost
        /// Values stored with their payload streamed from a local entry file, not from memory (a subset
        /// of `puts`; HTTP only).
        case storesFromFile
    }

    /// A copy of every counter.
    struct Snapshot: Equatable, Sendable {
        /// The counters, indexed by ``Counter``.
        let values: [Int]

        /// One counter's value.
        subscript(_ counter: Counter) -> Int { values[counter.rawValue] }
    }

    private let counters = Mutex([Int](repeating: 0, count: Counter.allCases.count))

    init() {}

    /// Adds `amount` to `counter`.
    func add(_ counter: Counter, _ amount: Int = 1) {
        counters.withLock { $0[counter.rawValue] += amount }
    }

    /// The counters now.
    var snapshot: Snapshot { Snapshot(values: counters.withLock { $0 }) }
}
