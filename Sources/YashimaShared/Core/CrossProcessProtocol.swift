// The cross-process protocol of a storage directory, written once: the glossary and the invariants I1–I17,
// each a rule in a line or two naming the files that keep it (how: their headers and Docs/Internals.md;
// byte for byte: Docs/Format.md). Code relying on one cites it (`// I3`).

/// The contract every process that opens a storage directory follows.
///
/// ## Glossary
/// - **root**: the storage directory given to `YCache(storageDirectory:)`.
/// - **entry**: one file `entries/<xx>/<entry identity hex>.entry` holding a header, the key's canonical
///   bytes, the codec identifier and the payload (see `EntryFormat`). `<xx>` is the first byte of the
///   entry identity: 256 fan-out folders. No path contains key text.
/// - **staging file**: the key's lock file held by its generator (I6), or `tmp/<random>.staging` when a
///   write is not coordinated; it becomes an entry by `rename(2)`.
/// - **publish**: the `rename(2)` of a complete staging file over the entry path: the commit point.
/// - **lock file**: `locks/<xx>/<key stableIdentifier>.lock`, one per key in flight, locked exclusively
///   (flock) by the key's one generator.
/// - **state file**: `state`, a small file every process maps shared: usage counters, last publish time,
///   removal epochs, shared statistics and the file's instance id.
/// - **touch**: setting an entry's mtime to mark it recently used (the LRU signal).
/// - **trim**: unlinking least-recently-used entries until usage is under the budget.
/// - **removal marker**: `signals/ns-<SHA-256 of the namespace>.<16 hex>.removal` (or `signals/all.<16
///   hex>.removal` for `removeAll()`), the file by which a removal announces itself to observers.
/// - **observer**: a process watching the directory with inotify (`YCache.observe`). It only reads
///   entry headers; it never writes, touches or unlinks an entry.
///
/// ## Invariants
/// - **I1 Published entries are immutable.** Content reaches an entry path only by `rename` of a complete
///   staging file; nothing opens a published entry for writing, truncates or rewrites it. (EntryPublish)
/// - **I2 Staging files live under the root**, get their mode set explicitly and end published or
///   unlinked; a killed process's are swept once `Policy.stagingDebrisAge` old. (EntryPublish, Trim)
/// - **I3 Readers take no lock**: a reader accepts an entry only once fully validated, anything else is a
///   miss; it reads the file into memory of its own (never a mapping handed out, so a file truncated by
///   anyone is a short read, a miss, never SIGBUS), and it unlinks only the very file it proved corrupt
///   or expired. (EntryFile, StorageTier)
/// - **I4 Removal only unlinks** (after renaming the file aside into `tmp/`), so a reader that opened the
///   file still reads it whole, and trim may remove what others are reading. A remover that judged one
///   file (trim, expiry, a corrupt read) takes that file only: another one found at the path goes back.
///   (EntryRemove)
/// - **I5 One generator per key across processes**: the holder of the key's lock file; waiters look in
///   storage after every wake and once they hold the lock, and only then generate. A process waits on any
///   number of keys with one thread: an inotify watch per `locks/<xx>/` folder makes it probe a key (open
///   read-only, `LOCK_SH|LOCK_NB`) when its lock file is closed after writing; a close means "probe now",
///   never "free"; an unlink or rename away of the name is a release (what the probe would find). Worst case for a release no event reports (a forked child
///   still holding the descriptor, a lost event): 1 s, the recheck every wait gets; a probe that an event
///   found busy is repeated after 1 and 10 ms (a dead holder's close is reported just before its lock
///   goes); without inotify a wait polls, doubling from 1 ms to 100 ms. A flight waiting on another
///   process holds no task: the wait's end wakes one of its callers, which looks in storage and tries the
///   lock again (a small entry of the library's codecs is looked at by the lock-wait thread itself, the
///   same validated read). (KeyLock, LockWait, LockWatch, SingleFlight)
/// - **I6 Lock files bind to an inode**: only its holder unlinks or renames one, every locker checks the
///   path still names what it locked, and a generator's lock file is its staging file (a large remote
///   hit's is a file in `tmp/`, renamed into place while the lock is held). (KeyLock, RemoteStaging)
/// - **I7 Locks die with their process**: close-on-exec descriptors, flock only, `LOCK_UN` before
///   `close`, and a forked child never unlocks a description it inherited. (FileLock)
/// - **I8 A waiter never waits forever on a live, hung holder** when the caller set
///   `crossProcessWaitTimeout`: past it, it generates without the lock. (KeyLock)
/// - **I9 Usage is a hint, reconciled by trim**: publishes and unlinks adjust the state file's counters;
///   one process at a time trims, from a scan, re-checking each victim. Each file is charged off once, by
///   whoever moved it away: a remover renames it aside, a replacing publish swaps it out
///   (`RENAME_EXCHANGE`), and a publish charges its file before it can be seen, so the counters never
///   clamp at zero. Only a process killed mid-publish or mid-removal leaves them off. A full filesystem is
///   trimmed the same way, by the writer that needs room. (EntryPublish, EntryRemove, Trim, Maintenance,
///   SpacePressure)
/// - **I10 Each key is linearizable on one machine**: every publish and every removal renames inside a
///   write window on its key's epoch slot (opened just before the rename, closed just after; `removeAll`
///   opens one per entry, and bumps its namespace's or the global word before and after); memory serves
///   a value without a look at storage only under a quiet stamp (no window open when it was read) equal
///   to the current one, and after a look that finds the same publish it serves it, confirming it only
///   under a quiet stamp. A lookup's publish adds only where no live entry is (first wins), and a lookup
///   whose publish left a live entry answers with that entry; `store` and `refresh` replace. A judged remover moves another file back only inside an undisturbed window.
///   (SharedState+Epochs, EntryPublish, EntryPlacement, MemoryStore, MemoryTier)
/// - **I11 Touch is debounced, but never behind a publish**: a hit touches its entry when something was
///   published since its last use, otherwise at most once per `Policy.touchInterval`. (Touch)
/// - **I12 The layout file is written once**, first creator wins; a process that finds another layout
///   version refuses the directory. (LayoutFile)
/// - **I13 Writes go only where the root path points, never through a link**: a write first checks the
///   root path still names the open root, and no symlink below the root is followed. (Directory, pathwalk.c)
/// - **I14 Damaged auxiliary files are repaired, never fatal**: the first process to notice replaces a
///   damaged `state` or `trim.lock` under a lock; `layout` is never repaired. (SharedState, TrimLock)
/// - **I15 Removals of a namespace or of everything are announced while someone observes**, by a locked
///   marker in `signals/` that brackets the removal's unlinks. (RemovalSignal, DirectoryWatch+Removals)
/// - **I16 Across hosts (a remote tier), one generator per key while leases hold**: a host asks the remote
///   tier only while holding the key's local lock (I5); it uses a remote value only once verified for the
///   entry's identity (and secret), publishing it locally through that lock; on a miss it generates only
///   holding the key's remote lease, or once the tier is unavailable, the caller's wait timed out, or the
///   holder's lease expired. Only the holder releases a lease. A key removal deletes the remote value
///   before the local one, and a remote value published while a removal of its key ran is unlinked again
///   (I10). A write that stores remotely, and a removal, hold one write window across their local and
///   remote steps, and delete the key's remote value before closing it when another window of the slot
///   overlapped (RemoteWriteWindow); a remote value fetched while its slot was written is neither
///   published nor returned. A host paused past the lease TTL may duplicate a generation, never corrupt a value (I8). No
///   on-disk change. A holder whose store fails still releases its lease (a separate delete-if-mine);
///   one that cannot leaves it to expire within the lease TTL, since it renews while it generates.
///   (RemoteTier, Production, RedisRemoteStore, RedisLeaseWait)
/// - **I17 One remote health and one remote count per machine**: a remote server's circuit breaker (open
///   until, cooldown, the probe in flight) lives in a slot of the `state` file named by the server's label
///   digest, claimed by compare-and-swap and changed only by the C atomics, so a server one process found
///   down is skipped by every process using the directory, one probe (any process's, claimed by
///   compare-and-swap) decides for all, and the remote counters (by reason) add up over processes. The
///   words are hints like the counters: lost with a repaired state file, never a reason to refuse one;
///   older builds leave them zero and keep their own breakers. Additive: layout version unchanged.
///   (RemoteCircuitBreaker, DirectoryMachineBoard, SharedState+Remote)
enum CrossProcessProtocol {
    /// The on-disk layout version written to the `layout` file. Bump when any invariant or path changes.
    static let layoutVersion = 1
}
