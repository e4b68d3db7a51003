// The operator's view of the remote tier on this machine (`@_spi(Operator)`): the remote counters every
// process using the directory adds to, each remote server's breaker as they all share it, and a chain's
// members' counters (I17), read from the `state` file without contacting any server.

import Foundation

@_spi(Operator)
extension StorageOperator {
    /// The remote counters every process using the directory adds to, since they were last zeroed.
    public func remoteCounters() -> SharedRemoteCounters {
        let state = directory.state
        return SharedRemoteCounters(
            hits: state.remoteTotal(.hits), misses: state.remoteTotal(.misses), stores: state.remoteTotal(.stores),
            errors: state.remoteTotal(.errors), timeouts: state.remoteTotal(.timeouts),
            bypassed: state.remoteTotal(.bypassed), leaseWaits: state.remoteTotal(.leaseWaits),
            leaseWaitNanoseconds: state.remoteTotal(.leaseWaitNanoseconds),
            leaseTakeovers: state.remoteTotal(.leaseTakeovers),
            rejectedBadSignature: state.remoteTotal(.rejectedBadSignature),
            rejectedUnsigned: state.remoteTotal(.rejectedUnsigned),
            rejectedDamaged: state.remoteTotal(.rejectedDamaged),
            rejectedTooLarge: state.remoteTotal(.rejectedTooLarge), failedWrites: state.remoteTotal(.failedWrites),
            authenticationFailures: state.remoteTotal(.authenticationFailures),
            connectionFailures: state.remoteTotal(.connectionFailures), throttled: state.remoteTotal(.throttled),
            backfills: state.remoteTotal(.backfills))
    }

    /// Every remote server (and direction) a process using the directory has called, with its breaker as
    /// they all share it.
    public func remoteHealth() -> [RemoteServerHealth] {
        DirectoryMachineBoard.health(in: directory.state).map(Self.health)
    }

    private static func health(_ record: RemoteHealthRecord) -> RemoteServerHealth {
        let state: RemoteServerHealth.State
        switch record.position {
        case .closed: state = .closed
        case .open(let until): state = .open(until: until)
        case .probeDue: state = .probeDue
        case .halfOpen: state = .probing
        }
        return RemoteServerHealth(server: record.label, state: state, since: record.openedAt, reason: record.reasonText)
    }

    /// Every member of a remote chain a process using the directory has used, in chain order, with its
    /// counters and its servers' breakers (empty without a chain).
    public func remoteMembers() -> [RemoteMemberStatus] {
        let state = directory.state
        let breakers = DirectoryMachineBoard.health(in: state)
        return DirectoryMachineBoard.members(in: state).map { record in
            func count(_ word: SharedMemberWord) -> UInt64 { record.counts[word] ?? 0 }
            return RemoteMemberStatus(
                member: record.label, position: record.position, readOnly: record.readOnly, hits: count(.hits),
                misses: count(.misses), stores: count(.stores), backfills: count(.backfills), errors: count(.errors),
                timeouts: count(.timeouts), bypassed: count(.bypassed), failedWrites: count(.failedWrites),
                throttled: count(.throttled), authenticationFailures: count(.authenticationFailures),
                connectionFailures: count(.connectionFailures), rejected: count(.rejected),
                breakers: breakers.filter { $0.member == record.id }.map(Self.health))
        }
    }
}

/// One member of a remote chain (`--remote redis://… --remote s3://…`), as every process using a storage
/// directory counted it (in its `state` file, I17).
@_spi(Operator)
public struct RemoteMemberStatus: Sendable, Equatable {
    /// Its servers, without credentials (`s3 http://10.0.0.9:8333/bucket`).
    public var member: String
    /// Its place in the chain, from 1.
    public var position: Int
    /// A read-only member: it is asked, never stored to.
    public var readOnly: Bool
    /// Lookups it answered with a verified value.
    public var hits: UInt64
    /// Lookups that found nothing usable there.
    public var misses: UInt64
    /// Values stored there (backfills included).
    public var stores: UInt64
    /// Values stored there because a later member had them.
    public var backfills: UInt64
    /// Failed calls other than timeouts.
    public var errors: UInt64
    /// Calls that missed their deadline.
    public var timeouts: UInt64
    /// Calls skipped while its breaker was open.
    public var bypassed: UInt64
    /// Writes that failed.
    public var failedWrites: UInt64
    /// Calls it throttled (429, 503 SlowDown).
    public var throttled: UInt64
    /// Calls whose credentials it refused.
    public var authenticationFailures: UInt64
    /// Calls that could not connect or lost the connection.
    public var connectionFailures: UInt64
    /// Values it held that failed verification.
    public var rejected: UInt64
    /// Its servers' breakers (reads and writes).
    public var breakers: [RemoteServerHealth]
}

/// The remote counters every process using a storage directory adds to (in its `state` file, I17).
@_spi(Operator)
public struct SharedRemoteCounters: Sendable, Equatable {
    /// Remote lookups that returned a verified value.
    public var hits: UInt64
    /// Remote lookups that found nothing usable.
    public var misses: UInt64
    /// Values stored remotely.
    public var stores: UInt64
    /// Failed remote calls other than timeouts.
    public var errors: UInt64
    /// Remote calls that missed their deadline.
    public var timeouts: UInt64
    /// Remote calls not made: the server's breaker was open.
    public var bypassed: UInt64
    /// Waits for another host's lease.
    public var leaseWaits: UInt64
    /// Nanoseconds spent in those waits.
    public var leaseWaitNanoseconds: UInt64
    /// Leases taken over after the holder's lease expired unreleased.
    public var leaseTakeovers: UInt64
    /// Values rejected: signed with another secret.
    public var rejectedBadSignature: UInt64
    /// Values rejected: unsigned, read by a host with a secret.
    public var rejectedUnsigned: UInt64
    /// Values rejected: damaged, truncated, another entry's or not this cache's.
    public var rejectedDamaged: UInt64
    /// Values not read: larger than the size cap.
    public var rejectedTooLarge: UInt64
    /// Remote writes that failed.
    public var failedWrites: UInt64
    /// Calls whose credentials the server refused.
    public var authenticationFailures: UInt64
    /// Calls that could not connect or lost the connection.
    public var connectionFailures: UInt64
    /// Calls the server throttled (429, 503 SlowDown; also among the errors).
    public var throttled: UInt64
    /// Values a chain member received from a later member's hit.
    public var backfills: UInt64

    /// Every rejected value, whatever the reason.
    public var rejected: UInt64 { rejectedBadSignature + rejectedUnsigned + rejectedDamaged + rejectedTooLarge }

    /// True when no process counted anything remote (no remote tier was used since the last zeroing).
    public var isEmpty: Bool {
        hits + misses + stores + errors + timeouts + bypassed + leaseWaits + rejected + failedWrites == 0
    }
}

/// One remote server's breaker, as every process using the directory shares it.
@_spi(Operator)
public struct RemoteServerHealth: Sendable, Equatable {
    /// Where the breaker is.
    public enum State: Sendable, Equatable {
        /// Calls go to the server.
        case closed
        /// Every process skips the server until then.
        case open(until: Date)
        /// The cooldown is over: the next call (by any process) probes the server.
        case probeDue
        /// One process is probing the server now; the others skip it.
        case probing
    }

    /// The server and direction, without credentials (`redis 127.0.0.1:6379/0 reads`).
    public var server: String
    /// Its breaker now.
    public var state: State
    /// When it opened, if it is not closed.
    public var since: Date?
    /// Why it opened (`timed out`, `connection failed`, ...), if it is not closed.
    public var reason: String?
}
