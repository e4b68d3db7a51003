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
/// - **removal marker**: `signals/ns-<SHA-256 of the namespace>.<16 hex>.removal` (or `signals/all.<16
///   hex>.removal` for `removeAll()`), the file by which a `removeAll` announces itself to observers
///   (I14). `signals/` is made by the first process that observes the directory; nothing else uses it.
/// - **observer**: a process watching the directory with inotify (`YCache.observe`). It only reads
///   entry headers; it never writes, touches or unlinks an entry.
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
/// - **I9 Usage is a hint, reconciled by trim.** The state file holds the directory's payload bytes (what
///   the storage budget counts, as Yashima counts it) and allocated bytes (the disk measure, for the
///   optional disk cap), adjusted atomically by whoever publishes (the payload's length; the file size
///   rounded up to 4 KiB) or unlinks (the payload length; the file's `st_blocks × 512`); where the
///   allocated measures differ (another block size, inline or compressed files), that counter drifts until
///   the next scan. Trim runs in one process at a time (a writer over budget waits for `trim.lock`, so the
///   bound holds when its write returns), recounts both from a scan (reading every entry's fixed header),
///   re-checks each victim's mtime and size right before unlinking it, and never touches staging files
///   younger than `Policy.stagingDebrisAge`. A payload counter no scan has counted yet (a state file made
///   by 0.1 has none) is recounted by the first budgeted write before it is trusted.
/// - **I10 Removal is seen everywhere.** `remove`, `removeAll(in:)` and `removeAll()` bump epochs in the
///   state file (per key slot, per namespace slot, global) before unlinking, and again after (a reader
///   that recorded its epochs between the first bump and the unlink may have read the entry). Every
///   in-memory (L1) hit compares the epochs it recorded with the current ones, so no process's L1 serves
///   a removed entry on its next lookup. Epoch slots are shared by many keys, so when they moved an L1
///   copy of a stored entry is checked against storage instead of dropped: it is kept, under epochs read
///   before the check, only while the entry file is the same publish (its header's created time, payload
///   length and checksum); a check that raced an unlink or a replacing rename saw epochs older than that
///   removal's or replacement's last bump, so the next lookup checks again. A value kept only in memory is
///   dropped. A call that joins another call's in-process flight takes its
///   value only while the epochs that value was read or made under are still current (the flight may have
///   read it before a removal that finished before the joiner began); a writer that replaces a value
///   stamps its own copy from just before its publish, unless nobody else bumped in between.
/// - **I11 Touch is debounced, but never behind a publish.** A publish gives its entry an mtime to the
///   nanosecond and raises the state file's last-publish time to it. A hit (from storage, or from memory
///   for a stored entry) touches the entry when something was published after its last use (its mtime,
///   as the process saw or set it), to now and at least one nanosecond past the last publish; otherwise at
///   most once per `Policy.touchInterval`. So an entry read after another was written is newer than it in
///   trim's LRU order, and a read-only workload writes nothing (beyond one touch per entry and process
///   after a publish, and one a minute). In group-shared mode another user's file only takes the kernel's
///   "now" (explicit times need the owner), exact to within a clock tick.
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
/// - **I15 Removals of a namespace or of everything are announced, and only while someone observes.**
///   Observers learn of changes from inotify alone: an entry appears only by `rename(2)` into its fan-out
///   folder (I1: `IN_MOVED_TO`; a planted hard link gives `IN_CREATE`) and goes only by `unlink` (I4:
///   `IN_DELETE`); a fan-out folder appears by `RENAME_NOREPLACE` into `entries/` (or `mkdir` where that
///   flag is missing), so observers watch `entries/` too and read a new folder once after watching it.
///   Writes to the mapped `state` file make no inotify event, so `removeAll(in:)` and `removeAll()`
///   announce themselves: every broad observer (namespace or directory) holds `flock(LOCK_SH)` on
///   `signals/` while it observes; a remover that cannot take `LOCK_EX | LOCK_NB` on it (someone
///   observes) makes its marker in `tmp/` (file mode, a record naming the namespace, `flock(LOCK_EX)`),
///   renames it into `signals/` before its first unlink, unlinks it after its last, and only then
///   releases it. One inotify instance reports one process's changes in the order they happened, so an
///   observer sees the marker appear, the entries' unlinks, the marker's unlink: it folds the unlinks of
///   entries of that namespace into one `removedAll` and reports the publications it saw in between
///   after it. A marker whose remover died stays named but unlocked: an observer's probe (once a second
///   while a removal is open) finds it so and reports `missedEvents`; the next remover sweeps such
///   markers (lock, check still named, rename to `.dead`, unlink). A process that does not follow this
///   (an older build) only makes observers see its removal entry by entry; the layout version does not
///   change, since nothing that reads or writes entries depends on `signals/`.
enum CrossProcessProtocol {
    /// The on-disk layout version written to the `layout` file. Bump when any invariant or path changes.
    static let layoutVersion = 1
}

/// Policy constants, each with its reason.
enum Policy {
    /// How often a hit may rewrite an entry's mtime when nothing was published since its last use (I11).
    /// One minute keeps LRU order meaningful while a hot entry costs one `utimensat` a minute, not one per
    /// hit (ccache learned that hits must touch; Go touches hourly).
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

    /// A cache touch sets an mtime whose nanoseconds leave this remainder modulo this modulus (it rounds
    /// the time up by under a microsecond), so that a reader can tell a changed ctime that only a touch
    /// made from a write, which sets mtime and ctime to the same kernel time (`VerifiedInodes`). A write's
    /// mtime carries the mark by chance once in a thousand times, and then still differs from nothing: its
    /// ctime equals it.
    static let touchMark: (modulus: Int64, remainder: Int64) = (1000, 777)

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
