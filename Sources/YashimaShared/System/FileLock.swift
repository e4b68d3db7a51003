// The one owner of flock(2) (I7): every file lock is a noncopyable `FileLock`, flock only (never fcntl),
// LOCK_UN before close, and never unlocked by a forked child that inherited it. Blocking waits run on
// threads of their own.

import CFileLock

/// A file lock (`flock(2)`) this process holds on `descriptor`. Owns the descriptor: releasing the lock
/// closes it.
struct FileLock: ~Copyable {
    /// Shared (`LOCK_SH`) or exclusive (`LOCK_EX`).
    enum Kind: Sendable {
        case shared
        case exclusive

        fileprivate var operation: Int32 { self == .shared ? ysh_LOCK_SH : ysh_LOCK_EX }
    }

    /// What one attempt that does not wait found.
    enum Attempt: ~Copyable {
        /// The lock is ours.
        case locked(FileLock)
        /// Another open file description holds a conflicting lock. The descriptor stays open (the caller's).
        case busy
        /// The call failed (the descriptor stays open): a filesystem that cannot lock, a bad descriptor.
        case failed(SystemCallError)
    }

    let descriptor: Int32
    /// The process the lock belongs to (I7): where another pid finds this value (a forked child), it
    /// only closes the descriptor.
    private let ownerProcessID: Int32

    private init(descriptor: Int32, ownerProcessID: Int32) {
        self.descriptor = descriptor
        self.ownerProcessID = ownerProcessID
    }

    /// One attempt that never waits (`LOCK_NB`).
    /// - Parameter ownerProcessID: The process the lock belongs to: the one that opened the storage root
    ///   the descriptor was opened in (tests pass another pid to play a forked child, I7).
    /// - Parameter path: The locked file's path, for the error (as Go's lockedfile names its file).
    static func attempt(
        _ kind: Kind, on descriptor: Int32, path: String? = nil, ownerProcessID: Int32 = Syscall.processID
    ) -> Attempt {
        var err: Int32 = 0
        if ysh_flock(descriptor, kind.operation | ysh_LOCK_NB, &err) == 0 {
            return .locked(FileLock(descriptor: descriptor, ownerProcessID: ownerProcessID))
        }
        if Errno(rawValue: err) == .wouldBlock { return .busy }
        return .failed(SystemCallError(operation: "flock", path: path, errno: Errno(rawValue: err)))
    }

    /// Waits until the lock is granted. The descriptor stays open (the caller's) when this fails.
    /// Blocking: call only on a thread of its own, never on the cooperative pool.
    static func wait(
        for kind: Kind, on descriptor: Int32, path: String? = nil, ownerProcessID: Int32 = Syscall.processID
    ) -> Result<FileLock, SystemCallError> {
        var err: Int32 = 0
        guard ysh_flock(descriptor, kind.operation, &err) == 0 else {
            return .failure(SystemCallError(operation: "flock", path: path, errno: Errno(rawValue: err)))
        }
        return .success(FileLock(descriptor: descriptor, ownerProcessID: ownerProcessID))
    }

    /// Whether a `kind` lock could be had now, without keeping it: one attempt that does not wait, given
    /// back at once (the descriptor stays open). False when another description holds a conflicting lock
    /// or the call fails. For probes: is anyone observing (`signals/`), is a marker's remover alive.
    static func isAvailable(_ kind: Kind, on descriptor: Int32) -> Bool {
        var err: Int32 = 0
        guard ysh_flock(descriptor, kind.operation | ysh_LOCK_NB, &err) == 0 else { return false }
        _ = ysh_flock(descriptor, ysh_LOCK_UN, &err)
        return true
    }

    /// Whether this process may unlock: false in a forked child (I7).
    private var isOwnedByThisProcess: Bool { Syscall.processID == ownerProcessID }

    /// Gives the lock up (`LOCK_UN`, I7) and closes the descriptor; in a forked child only closes it.
    consuming func release() {
        let descriptor = descriptor
        if isOwnedByThisProcess {
            var err: Int32 = 0
            _ = ysh_flock(descriptor, ysh_LOCK_UN, &err)
        }
        Syscall.close(descriptor)
        discard self
    }

    /// The safety net: a lock dropped without `release()` (only on a path that threw while holding it)
    /// is released here, exactly as `release()` would.
    deinit {
        if isOwnedByThisProcess {
            var err: Int32 = 0
            _ = ysh_flock(descriptor, ysh_LOCK_UN, &err)
        }
        Syscall.close(descriptor)
    }
}
