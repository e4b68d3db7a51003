// Every tunable constant of the library, with its unit and its reason (times are `Duration`s). Code reads
// them from here; a literal number elsewhere is a format field (EntryFormat, SharedState) or a syscall
// argument, not a choice. The remote backends keep their own (RedisConfiguration, HTTPRemoteConfiguration).

/// Policy constants, each with its unit and its reason.
enum Policy {
    // MARK: Storage reads

    /// The largest entry file a lookup reads and decodes on its caller's executor (the main actor, an
    /// actor): a few microseconds of syscalls and copying. A larger one, a first open of the directory,
    /// a decompressing codec, and every miss continue on the cooperative pool (Engine/Lookup.swift).
    static let callerExecutorReadLimit = 64 * 1024

    /// A payload's checksum is re-verified unless this process verified the same inode with the
    /// same ctime before. Only ctimes at least this old are trusted for that, because a coarse kernel
    /// timestamp can leave ctime unchanged by a write within the same tick.
    static let verifiedCtimeMinimumAge: Duration = .seconds(2)

    /// How many (inode, ctime) verifications a process remembers (`VerifiedInodes`, a fixed table): 49
    /// bytes a slot, 3 MiB in all, allocated on the first read. Past it a hit on a file it forgot checksums
    /// the payload again (CRC32C, about 0.1 µs per KiB).
    static let verifiedInodeCapacity = 65_536

    /// Recently used keys whose entry expectations (canonical bytes, identity and key digests: two SHA-256
    /// computations, about 2.5 µs) a cache remembers (`ExpectationCache`, a fixed table): about 90 bytes a
    /// slot (1.5 MiB in all) and 300–500 bytes of keys and paths per key held, so 6–9 MiB when full.
    static let expectationCacheCapacity = 16_384

    // MARK: Storage writes

    /// Payloads of at least this many bytes are checksummed and written on a thread of their own instead
    /// of the caller's cooperative thread. Measured here (open+write+close of a new file, 2026-11-30):
    /// 4 KiB 46 µs, 256 KiB 114 µs, 1 MiB 355 µs, 16 MiB 59 ms (the kernel throttles a writer with many
    /// dirty pages); starting a thread and handing back costs 70–190 µs on this VM. From 1 MiB on the hop
    /// is small beside the write, and the write can block for far longer than a pool thread should.
    static let offPoolWriteThreshold = 1024 * 1024

    /// Staging files, staging folders and lock files younger than this are someone's work in progress;
    /// older ones are debris of a killed process, which trim sweeps (I2, I6). An hour is far longer than
    /// any write.
    static let stagingDebrisAge: Duration = .seconds(3600)

    /// How many times an operation that lost a race with another process over a name (created, replaced
    /// or unlinked between two of its calls) starts over before it reports the name as unusable. Each
    /// retry needs another process to win again within a few syscalls: four never run out in practice.
    static let nameRaceRetries = 4

    /// How many times a trimmer waiting for `trim.lock` starts over on a new file because the one it
    /// waited on was replaced (a repair, I14) before it gives up. Each needs another process to replace
    /// the file within one wait; a soak damaging it every few hundred ms replaced it four times in one
    /// wait, so the margin is wide.
    static let trimLockReplacements = 256

    /// How many times a read or bump of the state file's words starts over when the file died under it (a
    /// repair marked it dead meanwhile, I14). Each retry needs another repair within those few atomics.
    static let stateSwitchRetries = 4
    /// How many times a write or removal that wrote the remote tier deletes the key's remote value before
    /// closing its window when other windows of the slot keep opening or closing (RemoteWriteWindow): each a
    /// guarded remote call, so at most this many operation timeouts; a window still open after them is the
    /// last to close and cleans itself.
    static let remoteCleanupRounds = 3

    // MARK: Lookups

    /// A lookup whose joined flight gave it nothing it may use (a value a removal made stale, an optional
    /// generator's nil, a refresh's error) looks in storage again and joins or starts a flight at most
    /// this many times, then generates on its own: each round needs another process's removal to race it.
    static let joinedFlightAttempts = 3

    // MARK: Touch (I11)

    /// How often a hit may rewrite an entry's mtime when nothing was published since its last use (I11).
    /// One minute keeps LRU order meaningful while a hot entry costs one `utimensat` a minute, not one per
    /// hit (ccache learned that hits must touch; Go touches hourly).
    static let touchInterval: Duration = .seconds(60)

    /// A cache touch sets an mtime whose nanoseconds leave this remainder modulo this modulus (it rounds
    /// the time up by under a microsecond), so that a reader can tell a changed ctime that only a touch
    /// made from a write, which sets mtime and ctime to the same kernel time (`VerifiedInodes`). A write's
    /// mtime carries the mark by chance once in a thousand times, and then still differs from nothing: its
    /// ctime equals it. Nanoseconds.
    static let touchMark: (modulus: Int64, remainder: Int64) = (1000, 777)

    // MARK: Trim (I9)

    /// Trim stops at this fraction of the budget, so a full directory is not trimmed on every write.
    static let trimLowWaterFraction = 0.9

    /// The most entries one trim pass unlinks before giving the trim lock back (bounded work per pass).
    static let trimMaximumUnlinksPerPass = 4096

    /// A trim pass lists fan-out folders until it has seen this many entries (or every folder): the
    /// sample whose oldest share it unlinks. About 2 µs of fstatat and 130 bytes of memory per entry, so
    /// a pass lists for about 60 ms and holds about 4 MiB, whatever the directory holds; a directory this
    /// size or smaller is trimmed in exact LRU order.
    static let trimSampleEntries = 32_768

    /// Staging files, staging folders and lock files one sweep may remove (bounded work per pass).
    static let sweepMaximumPerPass = 4096

    // MARK: Space pressure (I9; Coordination/SpacePressure.swift)

    /// A trim that makes room for a write (after ENOSPC or EDQUOT, or below the free-space floor) frees what
    /// the write needs plus this share of the directory's usage: the hysteresis of `trimLowWaterFraction`,
    /// so a full filesystem is trimmed once per tenth of the cache written, not on every write, and the
    /// other writers of that moment find room too.
    static let pressureMarginFraction = 1 - trimLowWaterFraction

    /// How often a process reads the filesystem's free space (`fstatvfs`) for the free-space floor, at
    /// most, besides the fresh read of every trim that makes room. Between reads the free space is
    /// estimated from the last one and the shared usage counter, which every process's publishes and
    /// removals move: the cache's own writes are seen at once, other data within this interval.
    static let freeSpaceCheckInterval: Duration = .seconds(1)

    /// The longest a writer that needs room waits for another process's `trim.lock` (polled without
    /// blocking, `pressureTrimLockPause` between attempts) before it retries its write counting on that
    /// trimmer's pass. A pass holds the lock for one bounded sample (`trimSampleEntries`, at most
    /// `trimMaximumUnlinksPerPass` unlinks): milliseconds, a second on a very busy machine.
    static let pressureTrimLockWait: Duration = .seconds(1)

    /// The first and the longest pause between two attempts at `trim.lock` while a writer needs room:
    /// doubling from 0.1 ms.
    static let pressureTrimLockPause: (first: Duration, longest: Duration) = (.microseconds(100), .milliseconds(10))

    // MARK: Opening and checking the directory (I7, I13, I14)

    /// Lookups re-check at most this often that the root path still names the open root (I13); writes
    /// always check. One second bounds how long a process reads a directory that was renamed away, at
    /// the cost of one `stat(2)` a second.
    static let rootCheckInterval: Duration = .seconds(1)
    /// A publish checks the root again (I13) when its production's check (when it opened storage) is older
    /// than this: a production that waited for another process or generated for long must not publish into
    /// a root renamed away meanwhile. Below it the two checks are as far apart as a check and any write
    /// always are, and a fast miss makes no second `stat(2)`.
    static let publishRootRecheckAge: Duration = .milliseconds(1)

    /// A storage directory that could not be opened is tried again at most this often (it may become
    /// usable later); meanwhile every call gets the recorded error at no cost.
    static let storageReopenInterval: Duration = .seconds(1)

    /// A state file that could not be opened or repaired is tried again at most this often; meanwhile
    /// lookups skip memory (no stamp matches) and removals fail with the error.
    static let stateReopenInterval: Duration = .seconds(1)

    /// The longest a process waits for another process's repair of the state file (I14) before giving up
    /// with an error. A repair holds the lock for a few system calls (well under a millisecond); the wait
    /// polls without blocking, pausing between attempts (`stateRepairLockPause`), so it holds a thread of
    /// the cooperative pool only while a repairer is stopped or hung inside those calls, never longer.
    static let stateRepairLockWait: Duration = .seconds(1)

    /// The first and the longest pause between two attempts at the state file's repair lock: doubling
    /// from 0.1 ms, so a repair that takes a few syscalls is waited for in well under a millisecond.
    static let stateRepairLockPause: (first: Duration, longest: Duration) = (.microseconds(100), .milliseconds(10))

    // MARK: Threads

    // MARK: Lock waits (I5, I8)

    /// Constants of waiting for another process's key lock (Coordination/LockWatch.swift).
    enum LockWaiting {
        /// Every wait is probed again at least this often, whatever inotify reported: the bound on a
        /// release no event reports (a forked child holding the holder's descriptor delays its close).
        /// A probe costs a few µs (open, flock, close), so 10,000 keys waited on cost about 3% of a core.
        static let recheckInterval: Duration = .seconds(1)
        /// After an event whose probe found the lock still held, probe again after these delays: the
        /// kernel reports a dead holder's close just before it drops its lock (`__fput`), so a probe can
        /// come in between.
        static let rechecksAfterEvent: [Duration] = [.milliseconds(1), .milliseconds(10)]
        /// A wait without a watch (no inotify instance left, a watch refused) is polled: the first and the
        /// longest interval, doubling.
        static let pollInterval: (first: Duration, longest: Duration) = (.milliseconds(1), .milliseconds(100))
        /// Bytes read from the inotify descriptor at once, and reads per wake-up before timers get their turn.
        static let readBufferSize = 64 * 1024
        static let readsPerWake = 16
        /// A folder's watch stays this long after its last wait ended: a wait that ends does not pay
        /// `inotify_rm_watch` before its task resumes, and the next wait in that folder reuses the watch.
        /// An idle watch only wakes the thread for other keys' lock files (a few µs each).
        static let idleWatchLifetime: Duration = .seconds(2)
        /// The largest entry file the lock-wait thread reads itself when a flight's wait ends (tens of µs
        /// at most to read, verify and copy); a larger entry is read on the waiting caller's task.
        static let wakeReadLimit = 16 * 1024
        /// The stack of the one lock-wait thread (it probes, resumes, reads small entries; no deep recursion).
        static let threadStackSize = 256 * 1024
    }

    // MARK: Observation (I15)

    /// Constants of observation.
    enum Observation {
        /// Keys remembered per directory to attribute removals (an unlinked file cannot be read). About
        /// 300–500 bytes each with typical keys: a few MiB at most.
        static let summaryCapacity = 16_384
        /// Canonical key bytes remembered per directory, so that huge keys cannot grow the table past this.
        static let summaryByteCapacity = 8 << 20
        /// Publications held back while a removal covering them runs (reported after it, unless it removed
        /// them); past this many, they are dropped and the observers get `.missedEvents` instead.
        static let deferredCapacity = 4096
        /// While a removal is in progress, how often the watcher checks that its process is still alive (a
        /// killed remover never ends its marker). Only while a removal runs: an idle watcher never wakes.
        static let removalProbeInterval: Duration = .seconds(1)
        /// Headers read per scan step before the watcher looks at new events again, so a scan of a large
        /// directory delays other observers' events by one step at most.
        static let scanStep = 128
        /// Bytes read from the inotify descriptor at once (each event is 16 bytes plus a name under 100).
        static let readBufferSize = 64 * 1024
        /// Identities remembered per directory to recognise an event already reported (by a folder's scan,
        /// or as an unreadable file); cleared when full, which costs at most one repeated report.
        static let recentIdentityCapacity = 4096
        /// Tries at the shared lock on `signals/` when broad observation begins: a remover holds it
        /// exclusively only between two syscalls, so a few tries suffice; without it removals are seen
        /// entry by entry.
        static let signalsLockAttempts = 64
        /// Namespace names remembered per directory by the digest removal markers name them with, and the
        /// longest one remembered (bytes): a marker of a forgotten one reports `.missedEvents` to broad
        /// observers that do not name it.
        static let namespaceNameCapacity = 4096
        static let namespaceNameLongest = 4096
        /// Reads of the inotify descriptor per wake-up before commands and scans get their turn.
        static let readsPerWake = 16
        /// The stack of the watcher thread (it parses events and headers; no deep recursion).
        static let watcherThreadStackSize = 512 * 1024
        /// The stack of the thread that joins an ended watcher thread (it only calls pthread_join).
        static let reaperThreadStackSize = 64 * 1024
    }
}

extension Duration {
    /// This duration in whole nanoseconds (truncated toward zero), for arithmetic on `Int64` clock
    /// readings. Hot paths read it once into a constant of their own.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
