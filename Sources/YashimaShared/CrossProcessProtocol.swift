// The cross-process protocol of a YashimaShared storage directory, written once. Code that relies on an
// invariant cites it as `// I3` and so on; the README links here instead of restating it. Changing an
// invariant or the on-disk layout bumps `CrossProcessProtocol.layoutVersion`. (I14 did not: it only adds
// words older builds never read, so files of either build work with the other; see Docs/Format.md §1.2.)

/// The contract every process that opens a storage directory follows.
///
/// ## Glossary
/// - **root**: the storage directory given to `YCache(storageDirectory:)`.
/// - **entry**: one file `entries/<xx>/<entry identity hex>.entry` holding a header, the key's canonical
///   bytes, the codec identifier and the payload (see `EntryFormat`). `<xx>` is the first byte of the
///   entry identity: 256 fan-out folders. No path contains key text.
/// - **staging file**: the key's lock file held by its generator (I6), or `tmp/<random>.staging`
///   (created `O_CREAT|O_EXCL` with an unpredictable name) when a write is not coordinated; it becomes
///   an entry by `rename(2)`.
/// - **publish**: the `rename(2)` of a complete staging file over the entry path: the commit point.
/// - **lock file**: `locks/<xx>/<key stableIdentifier>.lock`, one per key in flight, locked with
///   `flock(LOCK_EX)`. Its holder is the only process generating that key; it exists only while a
///   generation is in flight (I6).
/// - **state file**: `state`, a small file every process maps shared: usage counter, epochs and the
///   file's instance id (I14).
/// - **touch**: setting an entry's mtime to now to mark it recently used (the LRU signal).
/// - **trim**: unlinking least-recently-used entries until usage is under the budget.
///
/// ## Invariants
/// - **I1 Published entries are immutable.** New content is written to a staging file and published
///   with `rename`; nothing ever opens a published path for writing, truncates it or rewrites it in
///   place. So a reader that mapped an entry can never see it change or get SIGBUS from us.
/// - **I2 Staging files live under the root** (`tmp/` or `locks/`: same filesystem, no EXDEV), are
///   created with their mode set explicitly (`O_EXCL` in `tmp/`), and end either published or unlinked. Files in `tmp/` older than
///   `Policy.stagingDebrisAge` are debris of a killed process and trim removes them, as it removes empty
///   `.folder-*` folders of that age in the root (a folder is made under that name, given its mode and
///   moved into place with `RENAME_NOREPLACE`, never over one another process made).
/// - **I3 Readers take no lock.** A reader opens the entry, checks the header (magic, version, lengths
///   against the file size, header checksum), that the stored key bytes and codec identifier are the
///   ones asked for, expiry, and the payload checksum. Anything else is a miss; a missing file (ENOENT)
///   is a normal miss. Readers never unlink on a lookup except an entry proven corrupt or expired.
/// - **I4 Unlinking keeps mappings valid.** Remove and trim only unlink; pages a reader already mapped stay
///   readable, so trim may remove what others are reading.
/// - **I5 One generator per key across processes.** After the in-process single-flight has chosen one
///   task per process, that task (1) looks in storage, (2) opens the key's lock file and takes
///   `flock(LOCK_EX | LOCK_NB)` — if another process holds it, waits (off the cooperative pool) with
///   `flock(LOCK_SH)` until the holder releases, so all waiters wake together, then looks in storage and
///   tries again — (3) with the lock held, looks in storage again, and only on a miss (4) generates,
///   publishes, and then releases the lock. A failed, cancelled or nil generation publishes nothing; the next waiter then
///   holds the lock and becomes the generator.
/// - **I6 Lock files bind to an inode.** A lock file is unlinked (or renamed away) only by a process
///   holding its lock. Every process, once `flock` returns, checks that the path still names the inode
///   it locked (`fstat` against `fstatat`, `st_nlink > 0`); if not, it first looks in storage and
///   otherwise retries on the new file. A generator fills its lock file with the entry and renames it
///   into place (the lock file is its staging file: one file created per generation, as a bare
///   write-temp-and-rename would); a holder that publishes nothing unlinks it. So lock files exist only
///   while a key is in flight; trim sweeps those left by killed processes once nobody has held them for
///   `Policy.stagingDebrisAge`. (A lock file per entry, unlinked with it, would make every create pay
///   ext4's scan past recently deleted inodes: measured, it doubled the write path.) In group-shared mode
///   a lock file appears only with its final mode and already locked (made in `tmp/`, `fchmod`, `flock`,
///   `linkat`): caught with its creator's umasked mode, another user could not open it and would
///   generate without the lock.
/// - **I7 Locks die with their process.** Every descriptor is `O_CLOEXEC`; locks are `flock` only (never
///   `fcntl`/`lockf`); a lock is released with `LOCK_UN` before `close`. A process that finds its pid
///   changed (a forked child) never unlocks a descriptor it inherited.
/// - **I8 A waiter never waits forever on a live but hung holder** when the caller set
///   `YCache.Options.crossProcessWaitTimeout`: past it, the waiter generates without the lock. That may
///   duplicate work; it never yields a wrong value, because values for one key are interchangeable and
///   publish is atomic.
/// - **I9 Usage is a hint, reconciled by trim.** The state file holds the directory's allocated bytes,
///   adjusted atomically by whoever publishes (the file size rounded up to 4 KiB) or unlinks (the file's
///   `st_blocks × 512`); where the two measures differ (another block size, inline or compressed files),
///   the counter drifts until the next scan. Trim runs in one process at a time (a writer over budget
///   waits for `trim.lock`, so the bound holds when its write returns), recounts from a scan, re-checks
///   each victim's mtime right before unlinking it, and never touches staging files younger than
///   `Policy.stagingDebrisAge`.
/// - **I10 Removal is seen everywhere.** `remove`, `removeAll(in:)` and `removeAll()` bump epochs in the
///   state file (per key slot, per namespace slot, global) before unlinking, and again after (a reader
///   that recorded its epochs between the first bump and the unlink may have read the entry). Every
///   in-memory (L1) hit compares the epochs it recorded with the current ones, so no process's L1 serves
///   a removed entry on its next lookup.
/// - **I11 Touch is debounced.** A hit touches an entry's mtime at most once per `Policy.touchInterval`;
///   trim's LRU order is therefore exact to within that interval.
/// - **I12 The layout file is written once.** `layout` is created by `linkat` of a complete staging file
///   (first creator wins); a process that finds a newer layout version refuses to use the directory.
/// - **I13 Writes go only where the root path points, and never through a link.** The root descriptor is
///   opened once; before every write (publish, remove, trim) a process checks that the root path still
///   names the directory it holds (`stat` of the path against the descriptor's device and inode); lookups
///   check at most once per `Policy.rootCheckInterval`. A deleted or replaced root is reopened (created
///   again when missing); a path that now names a file is `storageUnavailable`. Below the root no symlink
///   is followed in any component of any call (openat2 `RESOLVE_NO_SYMLINKS`, and the folder of every
///   other `*at` call opened the same way); a symlink where the cache's own folder should be is removed
///   (the link, not its target) and replaced by a real folder. A hard link planted at an entry path
///   cannot be prevented, but it is never written through: entries only ever appear by `rename` of a new
///   file, readers trust only validated contents, and lock files get `fchmod` only when they have one
///   link and belong to this user.
/// - **I14 Damaged auxiliary files are repaired, never fatal.** Everything in `state` can be rebuilt, so
///   a damaged one (not a regular file with one link, not 65,536 bytes, wrong magic or version; later,
///   the magic gone) is replaced by the first process that notices: under `flock` on the root, it looks
///   again (another repairer may have finished), marks the damaged inode dead with a `pwrite` of a
///   non-magic word 0 (never a store through a mapping, never a truncation), and renames a complete new
///   file from `tmp/` over it, with a new random instance id and usage to be recounted by the next
///   trim. Every access checks word 0 first; a mapping of a file truncated under it is kept from SIGBUS
///   by CFileLock's guard (which maps zeros there, read as dead), so every process switches to the new
///   file. Stamps in memory carry the instance id, so none taken from the old file ever matches again
///   (this costs each process its memory layer once); bumps re-check word 0 after landing. `trim.lock`
///   is only locked: damage to its contents is harmless, and anything that cannot serve as a lock file
///   (a symlink, folder, FIFO, socket, a file this user may not open) is replaced; a trimmer checks
///   after locking that the path still names its inode. `layout` is never repaired (I12): unparsable or
///   of another version, it is a refusal that says what to do.
enum CrossProcessProtocol {
    /// The on-disk layout version written to the `layout` file. Bump when any invariant or path changes.
    static let layoutVersion = 1
}

/// Policy constants, each with its reason.
enum Policy {
    /// How often a hit may rewrite an entry's mtime. One minute keeps LRU order meaningful while a hot
    /// entry costs one `utimensat` a minute, not one per hit (ccache learned that hits must touch; Go
    /// touches hourly).
    static let touchInterval: Int64 = 60 * 1_000_000_000

    /// Staging files younger than this are someone's write in progress; older ones are debris of a
    /// killed process. An hour is far longer than any write (Bazel and our PITFALLS rule R7 agree).
    static let stagingDebrisAge: Int64 = 3600 * 1_000_000_000

    /// Payloads at least this large are mapped (mmap) instead of read. Measured on this machine
    /// (notes/LINUX.md §3): read(2) into a buffer wins below about 64 KiB, mmap wins above.
    static let mapThreshold = 64 * 1024

    /// Payloads at least this large are checksummed and written on a thread of their own instead of the
    /// caller's cooperative thread. Measured here (open+write+close of a new file, 2026-11-30): 4 KiB
    /// 46 µs, 256 KiB 114 µs, 1 MiB 355 µs, 16 MiB 59 ms (the kernel throttles a writer with many dirty
    /// pages); starting a thread and handing back costs 70–190 µs on this VM. From 1 MiB on the hop is
    /// small beside the write, and the write can block for far longer than a pool thread should.
    static let offPoolWriteThreshold = 1024 * 1024

    /// Trim stops at this fraction of the budget, so a full directory is not trimmed on every write.
    static let trimLowWaterFraction = 0.9

    /// The most entries one trim pass unlinks before giving the trim lock back (bounded work per pass).
    static let trimMaximumUnlinksPerPass = 4096

    /// Staging files and lock files that trim may sweep in one pass.
    static let sweepMaximumPerPass = 4096

    /// A mapped payload's checksum is re-verified unless this process verified the same inode with the
    /// same ctime before. Only ctimes older than this are trusted for that, because a coarse kernel
    /// timestamp can leave ctime unchanged by a write within the same tick.
    static let verifiedCtimeMinimumAge: Int64 = 2 * 1_000_000_000

    /// How many (inode, ctime) verifications a process remembers.
    static let verifiedInodeCapacity = 65_536

    /// A state file that could not be opened or repaired is tried again at most this often; meanwhile
    /// lookups skip memory (no stamp matches) and removals fail with the error.
    static let stateReopenInterval: Int64 = 1_000_000_000

    /// The longest a process waits for another process's repair of the state file (I14) before giving up
    /// with an error. A repair holds the lock for a few system calls (well under a millisecond); the wait
    /// polls `LOCK_NB` with sleeps of 0.1–10 ms, so it blocks a thread of the cooperative pool only while
    /// a repairer is stopped or hung inside those calls, and never for longer than this.
    static let stateRepairLockWait: Int64 = 1_000_000_000

    /// Lookups re-check at most this often that the root path still names the open root (I13); writes
    /// always check. One second bounds how long a process reads a directory that was renamed away, at
    /// the cost of one `stat(2)` a second.
    static let rootCheckInterval: Int64 = 1_000_000_000
}
