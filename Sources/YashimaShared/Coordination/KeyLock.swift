// The per-key lock across processes (I5–I8): `step` (look in storage after every wake and once locked,
// check the path still names the locked inode; the waits between steps are a flight's, FlightCoordination),
// then exactly one of `publish` (the lock file is the staging file) or `abandon`. Noncopyable.

/// The exclusive lock of one key's lock file: this process is the key's one generator (I5).
///
/// Noncopyable: consumed by exactly one of `publish(_:to:)` or `abandon()`. A `KeyLock` dropped without
/// either (only on a path that threw while holding it) still has its file lock released by `FileLock`'s
/// deinit; its lock file then stays, unlocked, for the next generator to reuse or a sweep to remove.
///
/// Small on purpose (a descriptor and a reference): the async frames of every caller up to the public
/// API hold several copies of it and of `Step` while a lookup waits, so its size is paid per key
/// waited on (measured: 12.5 KB of frame in the production's coordination when it held its fields inline and
/// the acquisition's outcome held the found value inline).
struct KeyLock: ~Copyable {
    private let lock: FileLock
    private let file: LockedFile

    /// What a lock knows of its file, immutable.
    private final class LockedFile: Sendable {
        let path: LockPath
        let directory: Directory
        /// The lock file's size when locked: non-zero only for one left by a killed holder mid-write.
        let sizeWhenLocked: Int64

        init(path: LockPath, directory: Directory, sizeWhenLocked: Int64) {
            self.path = path
            self.directory = directory
            self.sizeWhenLocked = sizeWhenLocked
        }
    }

    var path: LockPath { file.path }
    var directory: Directory { file.directory }
    private var sizeWhenLocked: Int64 { file.sizeWhenLocked }

    private init(lock: consuming FileLock, path: LockPath, directory: Directory, sizeWhenLocked: Int64) {
        self.lock = lock
        file = LockedFile(path: path, directory: directory, sizeWhenLocked: sizeWhenLocked)
    }

    /// A value storage had, boxed so that a `Step` stays small (see `KeyLock`).
    final class Found<Value: Sendable>: Sendable {
        let value: Value

        init(_ value: Value) { self.value = value }
    }

    /// What one step of an acquisition found (`step`).
    enum Step<Found: Sendable>: ~Copyable {
        /// Another process published while we waited (or just before we locked).
        case found(KeyLock.Found<Found>)
        /// We hold the key's lock, and storage had no entry once we held it.
        case acquired(KeyLock)
        /// Another process holds it: wait for it (LockWait, or a flight's wait), then step again.
        case busy
        /// The lock file could not be used (an I/O error, a filesystem that cannot lock): generate
        /// without the lock. A duplicate generation at worst, never a wrong value.
        case unavailable(SystemCallError)
    }

    /// One step of taking the key's lock (I5), without waiting: after a wait (`afterWait`), storage is
    /// looked at first, since the holder most likely published; then the lock is tried, and once held,
    /// storage is looked at again before the lock is handed over. A few syscalls: safe on any thread.
    /// - Parameter lookAgain: The storage lookup of the entry; nil for a refresh, which must not be
    ///   answered from storage.
    /// - Throws: Whatever `lookAgain` throws.
    static func step<Found: Sendable>(
        _ path: LockPath, in directory: Directory, afterWait: Bool, lookAgain: (() throws -> Found?)?
    ) throws -> Step<Found> {
        if afterWait, let found = try lookAgain?() { return .found(KeyLock.Found(found)) }
        while true {
            switch attempt(path, in: directory) {
            case .failed(let error):
                return .unavailable(error)
            case .locked(let lock):
                // I5: another process may have published while we waited or before we locked.
                guard let lookAgain else { return .acquired(lock) }
                let found: Found?
                do { found = try lookAgain() } catch {
                    lock.abandon()
                    throw error
                }
                if let found {
                    lock.abandon()  // nothing to publish: the lock file goes (I6)
                    return .found(KeyLock.Found(found))
                }
                return .acquired(lock)
            case .busy:
                return .busy
            case .stale:
                // The lock file was renamed or unlinked under us (I6): look in storage before trying again.
                if let found = try lookAgain?() { return .found(KeyLock.Found(found)) }
            }
        }
    }

    /// What one attempt at the lock found.
    private enum Attempt: ~Copyable {
        /// We hold the lock on the file the path names.
        case locked(KeyLock)
        /// Someone else holds it.
        case busy
        /// We locked an inode the path no longer names (its holder published or unlinked it, I6).
        case stale
        case failed(SystemCallError)
    }

    /// One attempt that does not wait: opens (or creates) the lock file and locks it exclusively.
    private static func attempt(_ path: LockPath, in directory: Directory) -> Attempt {
        let lock: FileLock
        switch LockFileOpening.open(path, in: directory) {
        case .failed(let error):
            return .failed(error)
        case .createdLocked(let created):
            lock = created
        case .existing(let fd):
            switch FileLock.attempt(.exclusive, on: fd, path: path.relative, ownerProcessID: directory.ownerProcessID) {
            case .locked(let locked):
                lock = locked
            case .busy:
                Syscall.close(fd)  // we hold nothing on it
                return .busy
            case .failed(let error):
                Syscall.close(fd)
                return .failed(error)
            }
        }
        let root = directory.descriptor
        // I6: the path must still name the inode we locked.
        guard case .success(let mine) = Syscall.status(of: lock.descriptor), mine.linkCount > 0,
            case .success(let current) = Syscall.status(of: path.relative, in: root), current.isSameFile(as: mine)
        else {
            lock.release()
            return .stale
        }
        // The lock file becomes the entry (I6), so it must be a file we own with no other name: a planted
        // hard link of someone else's file is unlinked (the name only; the file is never written, truncated
        // or chmod'ed, I13) and the attempt starts over on a fresh file.
        guard mine.isOurs else {
            _ = Syscall.unlink(path.relative, in: root)
            lock.release()
            return .stale
        }
        if mine.permissionBits != directory.fileMode { _ = Syscall.setMode(lock.descriptor, directory.fileMode) }
        return .locked(KeyLock(lock: lock, path: path, directory: directory, sizeWhenLocked: mine.size))
    }

    // MARK: Ending

    /// Publishes `content` at `entry` through this lock file by `mode`, then releases the lock (I6): the
    /// lock file, filled, is moved to the entry path (`EntryFile.place`), so waiters wake to find it gone
    /// and read the entry. When the publish fails, or an `.adding` publish left a live entry in place, the
    /// lock file is abandoned instead. Either way the lock is released once. With `room`, a publish that
    /// finds the disk full makes room and writes into the lock file once more (a failed write empties it,
    /// and it stays ours).
    consuming func publish(
        _ content: EntryContent, to entry: EntryPath, mode: PublishMode, room: RoomForWrite? = nil
    ) async -> Result<
        PublishOutcome, SystemCallError
    > {
        let staging = HeldStagingFile(
            descriptor: lock.descriptor, relative: path.relative, leftoverBytes: sizeWhenLocked)
        let files = EntryFile(directory: directory)
        let write = { await files.publishOffPoolWhenLarge(content, to: entry, through: .held(staging), mode: mode) }
        let outcome = if let room { await room.retrying(write) } else { await write() }
        switch outcome {
        case .success(let published) where published.placed:
            lock.release()  // the path names the entry now: nothing to unlink
        case .success, .failure:
            abandon()
        }
        return outcome
    }

    /// Gives the lock up without publishing (a failed, cancelled or nil generation, or an entry found):
    /// unlinks the lock file if the path still names the inode we hold (I6: only a holder unlinks, so lock
    /// files exist only while a key is in flight), then releases the lock. The next waiter, if any, then
    /// holds the lock and becomes the generator. A forked child only closes its inherited descriptor (I7).
    consuming func abandon() {
        if directory.isOwnedByThisProcess, case .success(let mine) = Syscall.status(of: lock.descriptor),
            mine.linkCount > 0,
            case .success(let current) = Syscall.status(of: path.relative, in: directory.descriptor),
            current.isSameFile(as: mine)
        {
            _ = Syscall.unlink(path.relative, in: directory.descriptor)
        }
        lock.release()
    }

    /// The locked descriptor (tests: a dup of it plays a forked child's inherited copy).
    var descriptor: Int32 { lock.descriptor }
}
