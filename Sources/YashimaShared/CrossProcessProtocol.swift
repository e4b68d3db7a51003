// The cross-process protocol of a YashimaShared storage directory, written once: a glossary and the
// numbered invariants, each a rule in a line or two. How each is kept is told in the header of the file
// that keeps it (named after each rule). Code that relies on an invariant cites it as `// I3` and so on;
// the README links here instead of restating it. Changing an invariant or the on-disk layout bumps
// `CrossProcessProtocol.layoutVersion` (I14 and I15 did not: they only add files and words older builds
// never read, so files of either build work with the other; see Docs/Format.md §1.2).

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
/// - **I1 Published entries are immutable.** New content is written to a staging file and published by
///   `rename`; nothing opens a published path for writing, truncates or rewrites it. (EntryPublish.swift)
/// - **I2 Staging files live under the root** (same filesystem), get their mode set explicitly, and end
///   published or unlinked; those of killed processes are swept once `Policy.stagingDebrisAge` old. (Trim.swift)
/// - **I3 Readers take no lock.** An entry is accepted only after its header, identity, expiry and payload
///   checksum are checked; anything else is a miss, and a reader unlinks only an entry proven corrupt or
///   expired. (EntryFile.swift)
/// - **I4 Removal only unlinks**, so pages a reader already mapped stay readable and trim may remove
///   what others are reading. (EntryRemove.swift)
/// - **I5 One generator per key across processes.** The process holding the key's lock file generates;
///   the others wait off the cooperative pool and look in storage after every wake and once they hold the
///   lock; a generation that publishes nothing hands the lock to the next waiter. (KeyLock.swift)
/// - **I6 Lock files bind to an inode.** Only a lock file's holder unlinks or renames it, and every locker
///   checks after locking that the path still names the inode it locked; a generator's lock file is its
///   staging file, so lock files exist only while a key is in flight. (KeyLock.swift)
/// - **I7 Locks die with their process.** Descriptors are close-on-exec, locks are flock only, released
///   with `LOCK_UN` before `close`; a forked child never unlocks a description it inherited. (FileLock.swift)
/// - **I8 A waiter never waits forever on a live, hung holder** when the caller set
///   `crossProcessWaitTimeout`: past it, it generates without the lock (a duplicate at worst). (KeyLock.swift)
/// - **I9 Usage is a hint, reconciled by trim.** Publishes and unlinks adjust the state file's counters;
///   one process at a time trims (under `trim.lock`) from a scan, re-checking each victim. (Trim.swift)
/// - **I10 Removal is seen everywhere.** Removals bump the state file's epochs before and after unlinking,
///   replacing writes after publishing; memory serves a value only under current epochs. (SharedState+Epochs.swift)
/// - **I11 Touch is debounced, but never behind a publish.** A hit touches its entry when something was
///   published since its last use, otherwise at most once per `Policy.touchInterval`. (Touch.swift)
/// - **I12 The layout file is written once** (first creator wins); a process that finds another layout
///   version refuses the directory. (LayoutFile.swift)
/// - **I13 Writes go only where the root path points, and never through a link.** A write first checks
///   that the root path still names the open root; below the root no symlink is followed. (Directory.swift)
/// - **I14 Damaged auxiliary files are repaired, never fatal.** A damaged `state` or `trim.lock` is
///   replaced, under a lock, by the first process that notices; `layout` never is. (SharedState.swift)
/// - **I15 Removals of a namespace or of everything are announced while someone observes**: the remover
///   brackets its unlinks with a locked marker in `signals/`, which observers see. (RemovalSignal.swift)
enum CrossProcessProtocol {
    /// The on-disk layout version written to the `layout` file. Bump when any invariant or path changes.
    static let layoutVersion = 1
}
