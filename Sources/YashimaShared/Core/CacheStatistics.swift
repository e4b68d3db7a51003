// `CacheStatistics`: the public counters of one `YCache` instance (Yashima's, then YashimaShared's, then
// the remote tier's). Plain data: CacheEngine counts into it (and mirrors the local counters into the
// directory's shared counters); the remote tier's counters are added when it is read.

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
    /// Trims after a write that failed (`trim.lock` could not be opened or locked). The write's value was
    /// still returned and stored; the directory stays over its budget until a later trim succeeds.
    public var trimFailures = 0
    /// Trims this instance ran to make room for a write on a full filesystem (`ENOSPC`, `EDQUOT`) or one
    /// below `Configuration.storageFreeSpaceFloor`, that unlinked least-recently-used entries.
    public var pressureTrims = 0

    // The remote tier's counters (`YCache.Configuration.remote`); all 0 without one. They are this
    // instance's own (not in the directory's shared counters).

    /// Remote lookups that returned a verified value (also counted when a lease wait ended with one).
    public var remoteHits = 0
    /// Remote lookups that found nothing usable (absent, expired, rejected, another Redis type, too large).
    public var remoteMisses = 0
    /// Values stored remotely.
    public var remotePuts = 0
    /// Remote values that failed verification (a wrong identity, damaged bytes, a missing or wrong
    /// signature): misses, never returned, overwritten by the next store. The sum of
    /// `remoteRejectedBadSignature`, `remoteRejectedUnsigned` and `remoteRejectedDamaged`.
    public var remoteRejectedValues = 0
    /// Rejected remote values whose signature does not match this host's secret (signed with another).
    public var remoteRejectedBadSignature = 0
    /// Rejected remote values without a signature, read by a host with a secret (stored by a host
    /// without one).
    public var remoteRejectedUnsigned = 0
    /// Rejected remote values that are damaged, truncated, another entry's or not this cache's.
    public var remoteRejectedDamaged = 0
    /// Remote values not read because they are longer than `YCache.Remote.Options.maximumValueByteCount`.
    public var remoteRejectedTooLarge = 0
    /// Remote calls that failed, other than timeouts. None is ever thrown to a caller.
    public var remoteErrors = 0
    /// Remote calls that missed their deadline (`YCache.Remote.Options.operationTimeout`).
    public var remoteTimeouts = 0
    /// Failed remote calls whose credentials the server refused (also in `remoteErrors`).
    public var remoteAuthenticationFailures = 0
    /// Failed remote calls that could not connect or lost the connection (also in `remoteErrors`).
    public var remoteConnectionFailures = 0
    /// Failed remote calls the server throttled: HTTP 429, or 503 with `Retry-After` or S3's `SlowDown`
    /// (also in `remoteErrors`). Every process using the directory then skips the server for its
    /// `Retry-After` (at most the longest breaker cooldown).
    public var remoteThrottled = 0
    /// Values a remote chain's member received because a later member had them (backfills; also in
    /// `remotePuts`).
    public var remoteBackfills = 0
    /// Remote calls not made because the tier was bypassed after a failure (or, for writes, read-only).
    public var remoteBypassedCalls = 0
    /// Waits for another host's remote lease on a key.
    public var remoteLeaseWaits = 0
    /// Leases taken over after the holder's lease expired without a release (the holder died, hung or
    /// was cut off).
    public var remoteLeaseTakeovers = 0
    /// The time spent waiting for other hosts' leases (`remoteLeaseWaits` waits in all).
    public var remoteLeaseWaitTime: Duration = .zero
    /// Leases this instance released by a separate call after storing its value and releasing the lease
    /// in one round trip failed (the server paused or refused writes, a failover, a timeout).
    public var remoteReleasesAfterFailedStore = 0
    /// Remote stores left undone because this host has no secret and a signed value was there (the trust
    /// rule: see `YCache.Remote`).
    public var remoteSignedValuesKept = 0
}
