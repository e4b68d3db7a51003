// `trim.lock`, locked exclusively by the directory's one trimmer (I9); whatever cannot serve as a lock file
// is replaced (I14), and a trimmer that finds the path replaced after locking waits on the new file, however
// often that happens (Docs/Internals.md: the soak's made-up ESTALE).

import Glibc

/// The exclusive lock of `trim.lock`: this process is the directory's one trimmer.
struct TrimLock: ~Copyable {
    private let lock: FileLock

    /// Opens `trim.lock` and locks it exclusively, waiting for another trimmer, so that a budget bound
    /// holds once the caller's trim returns. Blocking: call off the cooperative pool.
    ///
    /// A `trim.lock` replaced while this process waited for it (a repair of a damaged one, I14) is not an
    /// error: the wait starts over on the new file, as many times as it is replaced, up to
    /// `Policy.trimLockReplacements` (each needs another process to replace it within one wait).
    static func acquire(in directory: Directory) -> Result<TrimLock, SystemCallError> {
        for _ in 0..<Policy.trimLockReplacements {
            let lock: FileLock
            switch open(in: directory) {
            case .failed(let error):
                return .failure(error)
            case .createdLocked(let created):
                lock = created
            case .existing(let fd):
                switch FileLock.wait(
                    for: .exclusive, on: fd, path: Directory.trimLockFile, ownerProcessID: directory.ownerProcessID)
                {
                case .success(let locked): lock = locked
                case .failure(let error):
                    Syscall.close(fd)
                    return .failure(error)
                }
            }
            if case .success(let mine) = Syscall.status(of: lock.descriptor), mine.linkCount > 0,
                case .success(let current) = Syscall.status(of: Directory.trimLockFile, in: directory.descriptor),
                current.isSameFile(as: mine)
            {
                return .success(TrimLock(lock: lock))
            }
            lock.release()  // a repair replaced it while we waited: lock the new one
        }
        return .failure(SystemCallError(operation: "flock", path: Directory.trimLockFile, errno: .staleHandle))
    }

    /// `acquire(in:)` for a writer that needs room (SpacePressure), waiting for another trimmer at most
    /// `limit`: the lock is tried without blocking, `Policy.pressureTrimLockPause` between attempts, so a
    /// trimmer stopped or hung while holding it delays the writer by `limit`, never more. Nil when another
    /// process held it all that time. Blocking: call off the cooperative pool.
    static func acquire(in directory: Directory, waitingAtMost limit: Duration) -> Result<TrimLock?, SystemCallError> {
        let deadline = Syscall.monotonicNanoseconds + limit.nanoseconds
        for _ in 0..<Policy.trimLockReplacements {
            let lock: FileLock
            switch open(in: directory) {
            case .failed(let error):
                return .failure(error)
            case .createdLocked(let created):
                lock = created
            case .existing(let fd):
                switch poll(fd, in: directory, until: deadline) {
                case .locked(let acquired):
                    lock = acquired
                case .busy:
                    Syscall.close(fd)
                    return .success(nil)
                case .failed(let error):
                    Syscall.close(fd)
                    return .failure(error)
                }
            }
            if case .success(let mine) = Syscall.status(of: lock.descriptor), mine.linkCount > 0,
                case .success(let current) = Syscall.status(of: Directory.trimLockFile, in: directory.descriptor),
                current.isSameFile(as: mine)
            {
                return .success(TrimLock(lock: lock))
            }
            lock.release()  // a repair replaced it while we waited: lock the new one
        }
        return .failure(SystemCallError(operation: "flock", path: Directory.trimLockFile, errno: .staleHandle))
    }

    /// What polling `trim.lock` found.
    private enum Polled: ~Copyable {
        case locked(FileLock)
        /// Held by another trimmer until the deadline.
        case busy
        case failed(SystemCallError)
    }

    /// Tries to lock `fd` exclusively without blocking until it is had or `deadline` (monotonic ns) passes.
    private static func poll(_ fd: Int32, in directory: Directory, until deadline: Int64) -> Polled {
        var pause = Policy.pressureTrimLockPause.first.nanoseconds
        while true {
            switch FileLock.attempt(
                .exclusive, on: fd, path: Directory.trimLockFile, ownerProcessID: directory.ownerProcessID)
            {
            case .locked(let lock):
                return .locked(lock)
            case .busy:
                guard Syscall.monotonicNanoseconds < deadline else { return .busy }
                usleep(UInt32(pause / 1000))
                pause = min(pause * 2, Policy.pressureTrimLockPause.longest.nanoseconds)
            case .failed(let error):
                return .failed(error)
            }
        }
    }

    /// Ends this trimmer's turn (LOCK_UN, then close; I7).
    consuming func release() {
        lock.release()
    }

    /// Opens `trim.lock`, creating it when missing, and replacing what cannot serve as a lock file.
    private static func open(in directory: Directory) -> LockFileOpening.Opened {
        var result = LockFileOpening.openOrCreate(Directory.trimLockFile, in: directory)
        if let error = result.failure, error.errno == .symlinkLoop {
            // A symlink planted at trim.lock is never followed: remove the link and create the real file.
            directory.removeSymbolicLink(Directory.trimLockFile)
            directory.onRepair()
            result = LockFileOpening.openOrCreate(Directory.trimLockFile, in: directory)
        }
        var replace = false
        var unusable: FileStatus?
        if let error = result.failure, unusableLockFileErrors.contains(error.errno) {
            replace = true
            unusable = try? Syscall.status(of: Directory.trimLockFile, in: directory.descriptor).get()
        } else if let fd = result.existingDescriptor, case .success(let status) = Syscall.status(of: fd),
            !status.isRegularFile
        {
            Syscall.close(fd)  // never locked
            replace = true
            unusable = status
        }
        if replace {
            if case .failure(let error) = replaceTrimLock(in: directory, unusable: unusable) { return .failed(error) }
            result = LockFileOpening.openOrCreate(Directory.trimLockFile, in: directory)
        }
        // Never trust the umask; but never chmod a file reached through a planted hard link (I13).
        if let fd = result.existingDescriptor, case .success(let status) = Syscall.status(of: fd), status.isOurs,
            status.permissionBits != directory.fileMode
        {
            _ = Syscall.setMode(fd, directory.fileMode)
        }
        return result
    }

    /// The errnos of opening `trim.lock` that mean something other than a lock file sits there (a symlink
    /// is handled before: its link is removed).
    private static let unusableLockFileErrors = Errno.foreignFile.subtracting([.symlinkLoop])

    /// Replaces whatever sits at `trim.lock` by a new, empty lock file (renamed over it; a folder is
    /// moved into `tmp/` first). Counted as a repair. Nothing is done when the path no longer names
    /// `unusable` (what this process could not use) and names a regular file: another process repaired it
    /// first, and replacing its new file would send every trimmer waiting on it round again.
    private static func replaceTrimLock(in directory: Directory, unusable: FileStatus?) -> Result<Void, SystemCallError>
    {
        let root = directory.descriptor
        let now = try? Syscall.status(of: Directory.trimLockFile, in: root).get()
        if let now, now.isRegularFile, let unusable, !now.isSameFile(as: unusable) { return .success(()) }
        if let status = now, status.isDirectory {
            let aside = Directory.stagingFolder + "/trim.lock-" + Directory.randomHex(byteCount: 8) + ".damaged"
            if case .failure(let error) = Syscall.rename(Directory.trimLockFile, in: root, to: aside, in: root),
                error.errno != .noSuchFile
            {
                // Moving a folder needs write permission on it (its `..`): another user's, in a group-shared
                // root, is removed instead when it is empty (rmdir needs only the root's).
                guard error.errno == .permissionDenied || error.errno == .operationNotPermitted,
                    case .success = Syscall.unlink(Directory.trimLockFile, in: root, isDirectory: true)
                else { return .failure(error) }
            }
        }
        do throws(YCache.Error) {
            try Directory.createReplacing(
                Directory.trimLockFile, in: root, bytes: [], mode: directory.fileMode,
                folderMode: directory.directoryMode, rootPath: directory.path)
        } catch {
            if case .storageFull = error {
                return .failure(SystemCallError(operation: "write", path: Directory.trimLockFile, errno: .noSpace))
            }
            return .failure(SystemCallError(operation: "renameat", path: Directory.trimLockFile, errno: .ioError))
        }
        directory.onRepair()
        return .success(())
    }
}
