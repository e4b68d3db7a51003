// RemoteStatistics.swift: the remote tier's counters, shared by every backend (hits, misses, stores,
// rejected values by reason, errors by kind, timeouts, throttles, bypassed calls, failed writes, lease waits
// and their time); for observation, never control. Each count is mirrored to the machine's board when one is
// attached (I17), and to its chain member's slot there when the store is a chain's member.

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
        /// Rejected values whose signature does not match this host's secret (a subset of `rejectedValues`).
        case rejectedBadSignature
        /// Rejected values without a signature, read by a host with a secret (a subset of `rejectedValues`).
        case rejectedUnsigned
        /// Rejected values that are damaged, truncated, another entry's or not this cache's (a subset of
        /// `rejectedValues`).
        case rejectedDamaged
        /// Values not read because they are longer than the size cap (counted apart from `rejectedValues`).
        case rejectedTooLarge
        /// Nanoseconds spent waiting for another host's lease.
        case leaseWaitNanoseconds
        /// Failed calls whose credentials the server refused (also counted as errors).
        case authenticationFailures
        /// Failed calls that could not connect, or lost the connection (also counted as errors).
        case connectionFailures
        /// Leases released by a separate call after their store-and-release failed.
        case releasesAfterFailedStore
        /// Stores a host without a secret left undone because a signed value was there (the trust rule).
        case signedValuesKept
        /// Failed calls the server throttled (429, 503 SlowDown; also counted as errors).
        case throttled
        /// Values this store received from a later chain member's hit (a subset of `puts`).
        case backfills
    }

    /// A copy of every counter.
    struct Snapshot: Equatable, Sendable {
        /// The counters, indexed by ``Counter``.
        let values: [Int]

        /// One counter's value.
        subscript(_ counter: Counter) -> Int { values[counter.rawValue] }
    }

    private let counters = Mutex([Int](repeating: 0, count: Counter.allCases.count))
    private let memberTag = Mutex<RemoteMemberTag?>(nil)
    /// The machine's board, once the engine attaches one: every count is added there too.
    let board: MachineBoardLink

    init(board: MachineBoardLink = MachineBoardLink()) {
        self.board = board
    }

    /// Makes these the counters of a chain's member: the board keeps them by member too (`yashima stats`).
    func join(_ tag: RemoteMemberTag) { memberTag.withLock { $0 = tag } }

    /// The chain member these counters belong to, if any.
    var member: RemoteMemberTag? { memberTag.withLock { $0 } }

    /// Adds `amount` to `counter` (and to the machine's board, and its member's slot there).
    func add(_ counter: Counter, _ amount: Int = 1) {
        guard amount != 0 else { return }
        counters.withLock { $0[counter.rawValue] += amount }
        guard let board = board.current else { return }
        board.count(counter, amount)
        if let tag = member { board.count(counter, amount, member: tag) }
    }

    /// Counts a value that failed verification, by reason.
    func addRejection(_ rejection: RemoteEnvelope.Rejection) {
        add(.rejectedValues)
        switch rejection {
        case .badSignature: add(.rejectedBadSignature)
        case .unsigned: add(.rejectedUnsigned)
        default: add(.rejectedDamaged)
        }
    }

    /// The counters now.
    var snapshot: Snapshot { Snapshot(values: counters.withLock { $0 }) }
}

/// A chain member as the machine's board names it: its slot's id and label, its place, whether it writes.
struct RemoteMemberTag: Sendable, Equatable {
    /// The slot's id: the first 8 bytes of SHA-256(`yashima.remote.member.v1` ‖ 0 ‖ label ‖ 0 ‖ read-only
    /// flag), never 0.
    let id: UInt64
    /// The member's servers without credentials (its breakers' labels without the direction), for display.
    let label: String
    /// Its place in the chain, from 1.
    let position: Int
    /// A read-only member (never stored to).
    let readOnly: Bool

    init(label: String, position: Int, readOnly: Bool) {
        self.label = label
        self.position = position
        self.readOnly = readOnly
        var hasher = SHA256()
        hasher.update(Array("yashima.remote.member.v1".utf8) + [0] + Array(label.utf8) + [0, readOnly ? 1 : 0])
        id = max(1, hasher.finalize().w0)
    }
}
