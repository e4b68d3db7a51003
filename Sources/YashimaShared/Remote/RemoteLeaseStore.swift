// RemoteLeaseStore.swift: the lease capabilities of a remote backend (I16), backend-neutral: a lease per entry
// that makes one host its generator, owned as a `~Copyable` value that `release` or `storeAndRelease`
// consumes; the wait for another host's lease; and the two shapes a backend offers, as protocols: leases
// apart from the values (RemoteLeaseStore), or with them, a lookup and its lease in one call (RemoteValueLeaseStore).

import Foundation
import Synchronization

/// A backend's hold on one lease (a Redis token, an S3 lease object's ETag): what a ``RemoteLease``
/// owns. Each call is made at most once per lease, and never after `release`.
protocol RemoteLeaseTicket: Sendable {
    /// Releases the lease without a value (only if still held) and wakes the waiters. True when released.
    func release() async -> Bool
    /// Renews the lease until stopped; `onLost` is called once if it is lost.
    func startRenewal(onLost: @escaping @Sendable () -> Void) -> LeaseRenewal
}

/// A ticket whose store holds the values too (Redis): the value stored and the lease released in one call.
protocol RemoteValueLeaseTicket: RemoteLeaseTicket {
    /// Stores the generated value as `identity`'s and releases the lease. A value that may not be stored
    /// is skipped and the lease still released.
    func storeAndRelease(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async
        -> RemoteStoreOutcome
}

/// A lease this process holds on one entry: other hosts wait for its value. Not copyable: `release()`
/// consumes it, so it is released once and never used after. One dropped without a release is released
/// by its deinit (in a task of its own), so other hosts never wait for its expiry because of a lost value.
struct RemoteLease: ~Copyable, Sendable {
    private let ticket: any RemoteLeaseTicket
    private let settlement = LeaseSettlement()

    /// Owns `ticket` (a backend makes one when it took a lease).
    init(_ ticket: any RemoteLeaseTicket) { self.ticket = ticket }

    /// Renews the lease every third of its TTL until the renewal is stopped (before the release).
    func startRenewal(onLost: @escaping @Sendable () -> Void = {}) -> LeaseRenewal {
        ticket.startRenewal(onLost: onLost)
    }

    /// Releases the lease without a value (the generator failed, or the value was found meanwhile).
    @discardableResult
    consuming func release() async -> Bool {
        settlement.settle()
        return await ticket.release()
    }

    /// The backend's ticket, no longer released by this lease (a backend's own tests drive it directly).
    consuming func surrender() -> any RemoteLeaseTicket {
        settlement.settle()
        return ticket
    }

    deinit {
        guard settlement.settle() else { return }
        let ticket = ticket
        Task.detached { _ = await ticket.release() }
    }
}

/// A lease from a store that holds the values too (``RemoteValueLeaseStore``): as ``RemoteLease``, and
/// `storeAndRelease` stores the value and releases it in one call.
struct RemoteValueLease: ~Copyable, Sendable {
    private let ticket: any RemoteValueLeaseTicket
    private let settlement = LeaseSettlement()

    /// Owns `ticket`.
    init(_ ticket: any RemoteValueLeaseTicket) { self.ticket = ticket }

    /// Renews the lease every third of its TTL until the renewal is stopped (before the release).
    func startRenewal(onLost: @escaping @Sendable () -> Void = {}) -> LeaseRenewal {
        ticket.startRenewal(onLost: onLost)
    }

    /// Releases the lease without a value.
    @discardableResult
    consuming func release() async -> Bool {
        settlement.settle()
        return await ticket.release()
    }

    /// Stores the generated value and releases the lease (one round trip on Redis).
    consuming func storeAndRelease(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64)
        async -> RemoteStoreOutcome
    {
        settlement.settle()
        return await ticket.storeAndRelease(identity, payload: payload, createdAt: createdAt, expiresAt: expiresAt)
    }

    deinit {
        guard settlement.settle() else { return }
        let ticket = ticket
        Task.detached { _ = await ticket.release() }
    }
}

/// Whether a lease was released (or handed to its store) yet: its deinit releases one that was not.
final class LeaseSettlement: Sendable {
    private let settled = Atomic(false)

    /// Marks it settled; true when this call did (it was not before).
    @discardableResult
    func settle() -> Bool { !settled.exchange(true, ordering: .acquiringAndReleasing) }
}

/// A lease kept for a later step (a production's after-publish step, which may run once): `take()`
/// hands it out once. Dropped untaken, the lease goes with it (and its deinit releases it).
///
/// Safe to share (`@unchecked Sendable`): `lease` is touched only by the one caller whose exchange of
/// `taken` won (or by deinit, when no other reference exists).
final class HeldLease<Lease: ~Copyable & Sendable>: @unchecked Sendable {
    private let taken = Atomic(false)
    private var lease: Lease?

    init(_ lease: consuming Lease) { self.lease = consume lease }

    /// The lease, to the first caller; nil after.
    func take() -> Lease? {
        guard !taken.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        return lease.take()
    }
}

/// Leases apart from the values (Redis leases for HTTP or S3 values; S3's own lease objects beside its
/// values): exactly-once generation across hosts. A holder stores its value, then releases: a caller
/// that took a lease (or saw one released) looks the value up again.
protocol RemoteLeaseStore: AnyObject, Sendable {
    /// The lease side's counters.
    var statistics: RemoteStatistics { get }
    /// Takes `identity`'s lease, or finds another holder.
    func lease(for identity: EntryIdentity) async -> RemoteLeaseAcquisition
    /// Waits until another holder's lease is released or the value appears, at most `timeout`.
    func waitForRelease(
        _ identity: EntryIdentity, timeout: Duration, onWaiting: (@Sendable () -> Void)?
    ) async -> RemoteWaitOutcome
}

/// Values and their leases on one store (Redis): a lookup and, on a miss, its lease in one call; a value
/// stored and the lease released in one.
protocol RemoteValueLeaseStore: RemoteValueStore {
    /// Starts asking for the verified value of `identity` when one is stored (a hit), else the lease:
    /// taken, or held by another; `completion` gets the answer on an I/O thread (or at once when the tier
    /// is bypassed). Counted as a lookup (hit, miss, rejected value); a value this host rejects is a miss
    /// whose lease is then taken past it, to be regenerated and replaced.
    func startLookupOrLease(
        _ identity: EntryIdentity, completion: @escaping @Sendable (consuming RemoteValueLeaseAcquisition) -> Void)
    /// Takes `identity`'s lease, or finds the value, or finds another holder (after a wait).
    func valueLease(for identity: EntryIdentity) async -> RemoteValueLeaseAcquisition
    /// Waits until another holder's lease is released or the value appears, at most `timeout`.
    func waitForRelease(
        _ identity: EntryIdentity, timeout: Duration, onWaiting: (@Sendable () -> Void)?
    ) async -> RemoteWaitOutcome
}

extension RemoteValueLeaseStore {
    /// The value of `identity`, or else its lease (``startLookupOrLease(_:completion:)``), awaited.
    func lookupOrLease(_ identity: EntryIdentity) async -> RemoteValueLeaseAcquisition {
        let answer = HeldAnswer()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            startLookupOrLease(identity) { acquisition in
                answer.put(acquisition)
                continuation.resume()
            }
        }
        return answer.take()
    }
}

/// One answer handed from the I/O thread to the awaiting task.
///
/// Safe to share (`@unchecked Sendable`): `answer` is written once before the continuation resumes and
/// read once after it, which orders the two.
private final class HeldAnswer: @unchecked Sendable {
    private var answer: RemoteValueLeaseAcquisition?

    func put(_ acquisition: consuming RemoteValueLeaseAcquisition) { answer = consume acquisition }

    func take() -> RemoteValueLeaseAcquisition { answer.take() ?? .unavailable }
}

/// The result of waiting for another host's lease.
enum RemoteWaitOutcome: Equatable, Sendable {
    /// The holder stored the value (verified; only where the lease store holds the values).
    case found(RemoteValue)
    /// The lease is gone and no value is there: try to acquire it. `notified` is false when the lease was
    /// found gone on a timed re-check (the holder died or hung past its TTL, or the message was lost).
    case leaseFree(notified: Bool)
    /// The caller's timeout passed with the lease still held: generate without it.
    case timedOut
    /// The calling task was cancelled.
    case cancelled
    /// The tier is down or bypassed.
    case unavailable
}

/// The result of trying to take a lease apart from the values.
enum RemoteLeaseAcquisition: ~Copyable, Sendable {
    /// This process holds the lease: look the value up once more, then generate and store it, then release.
    case acquired(RemoteLease)
    /// Another holder generates: wait (``RemoteLeaseStore/waitForRelease(_:timeout:onWaiting:)``).
    case heldElsewhere
    /// The tier is down, bypassed or read-only: generate without a lease.
    case unavailable
}

/// The result of a lookup-or-lease, or of taking a lease where the values are.
enum RemoteValueLeaseAcquisition: ~Copyable, Sendable {
    /// This process holds the lease: generate, then `storeAndRelease`.
    case acquired(RemoteValueLease)
    /// Another holder generates: wait.
    case heldElsewhere
    /// The value is there now.
    case found(RemoteValue)
    /// The tier is down, bypassed or read-only: generate without a lease.
    case unavailable
}

/// The result of a renewal.
enum RemoteLeaseRenewal: Equatable, Sendable {
    /// Extended by its TTL.
    case renewed
    /// Gone or someone else's.
    case lost
    /// The tier did not answer.
    case unavailable
}
