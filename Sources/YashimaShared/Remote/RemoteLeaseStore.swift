// RemoteLeaseStore.swift: the lease capability of a remote backend (Redis only): a lease per entry that
// makes one host its generator (I16), the wait for another host's lease, and what each call returns.
// The protocol's steps are told in Redis/RedisRemoteStore.swift.

import Foundation

/// The lease capability of a remote tier (Redis only): exactly-once generation across hosts. See
/// ``RedisRemoteStore`` for the protocol.
protocol RemoteLeaseStore: RemoteValueStore {
    /// Takes the lease, or finds the value, or finds another holder.
    func acquireLease(_ identity: EntryIdentity) async -> RemoteLeaseAcquisition
    /// Stores the generated value and releases `lease`.
    func storeAndRelease(
        _ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64, lease: RemoteLease
    ) async -> RemoteStoreOutcome
    /// Releases `lease` without a value (the generator failed). True when released.
    @discardableResult
    func release(_ lease: RemoteLease) async -> Bool
    /// Waits until another holder's lease is released or the value appears, at most `timeout`.
    func waitForRelease(
        _ identity: EntryIdentity, timeout: Duration, onWaiting: (@Sendable () -> Void)?
    ) async -> RemoteWaitOutcome
    /// Renews `lease` until stopped; `onLost` is called once if it is lost.
    func startRenewal(_ lease: RemoteLease, onLost: @escaping @Sendable () -> Void) -> LeaseRenewal
}

/// A lease store that holds the values too (Redis): a lookup and, on a miss, its lease in one call.
protocol RemoteLookupOrLease: RemoteLeaseStore {
    /// Starts asking for the verified value of `identity` when one is stored (a hit), else the lease:
    /// taken, or held by another; `completion` gets the answer on an I/O thread (or at once when the
    /// tier is bypassed). Counted as a lookup (hit, miss, rejected value); a value this host rejects is a
    /// miss whose lease is then taken past it, to be regenerated and replaced.
    func startLookupOrAcquireLease(
        _ identity: EntryIdentity, completion: @escaping @Sendable (RemoteLeaseAcquisition) -> Void)
}

extension RemoteLookupOrLease {
    /// The value of `identity`, or else its lease (``startLookupOrAcquireLease(_:completion:)``), awaited.
    func lookupOrAcquireLease(_ identity: EntryIdentity) async -> RemoteLeaseAcquisition {
        await withCheckedContinuation { continuation in
            startLookupOrAcquireLease(identity) { continuation.resume(returning: $0) }
        }
    }
}

/// A lease held by this process on one entry: its keys, the random token and the TTL.
struct RemoteLease: Equatable, Sendable {
    /// The entry's Redis names.
    let keys: RemoteKeys
    /// The random token stored in the lease key (32 hex characters from getrandom).
    let token: [UInt8]
    /// The lease TTL in milliseconds (set on acquire, again on each renewal).
    let timeToLiveMilliseconds: Int64
}

/// The result of waiting for another host's lease.
enum RemoteWaitOutcome: Equatable, Sendable {
    /// The holder stored the value (verified).
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

/// The result of trying to take a lease.
enum RemoteLeaseAcquisition: Equatable, Sendable {
    /// This process holds the lease: generate, then ``RedisRemoteStore/storeAndRelease(_:payload:createdAt:expiresAt:lease:)``.
    case acquired(RemoteLease)
    /// Another holder generates: wait (``RedisRemoteStore/waitForRelease(_:timeout:)``).
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
