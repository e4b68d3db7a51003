// Opening a key's lock file, creating it when missing, never through a symlink (I13); in the group-shared
// mode a new one appears only with its final mode and already locked, made in `tmp/` and linked (I6).

/// Opening lock files (see the file's header).
enum LockFileOpening {
    /// An opened lock file.
    enum Opened: ~Copyable {
        /// This call created it, and it is already locked exclusively (group-shared mode).
        case createdLocked(FileLock)
        /// An existing file, or one created in place (private mode): still to be locked.
        case existing(Int32)
        case failed(SystemCallError)

        /// The error of a failed open, nil otherwise.
        var failure: SystemCallError? {
            switch self {
            case .failed(let error): return error
            case .createdLocked: return nil
            case .existing: return nil
            }
        }

        /// The descriptor of an existing file, nil otherwise.
        var existingDescriptor: Int32? {
            switch self {
            case .existing(let fd): return fd
            case .createdLocked: return nil
            case .failed: return nil
            }
        }
    }

    /// Opens `path` for reading and writing, creating it when missing. When its fan-out folder is
    /// missing or replaced, or a symlink sits at the lock path (never followed), repairs that and tries
    /// once more: a symlink is no lock anyone can hold, so removing it keeps I6.
    static func open(_ path: LockPath, in directory: Directory) -> Opened {
        let first = openOrCreate(path.relative, in: directory)
        guard let error = first.failure, error.errno.isFolderMissingOrReplaced else { return first }
        if case .failure(let repairError) = directory.ensureFanOut(path.fanOut) { return .failed(repairError) }
        directory.removeSymbolicLink(path.relative)
        return openOrCreate(path.relative, in: directory)
    }

    /// Opens the lock file `relative` (a key's, or `trim.lock`) for reading and writing, creating it when
    /// missing as the file's header says.
    static func openOrCreate(_ relative: String, in directory: Directory) -> Opened {
        let root = directory.descriptor
        guard directory.sharing == .groupShared else {
            switch Syscall.open(relative, in: root, flags: [.readWrite, .create], mode: directory.fileMode) {
            case .success(let fd): return .existing(fd)
            case .failure(let error): return .failed(error)
            }
        }
        for _ in 0..<Policy.nameRaceRetries {
            switch Syscall.open(relative, in: root, flags: [.readWrite]) {
            case .success(let fd): return .existing(fd)
            case .failure(let error) where error.errno == .noSuchFile: break
            case .failure(let error): return .failed(error)
            }
            let staging = directory.newStagingPath()
            let flags: OpenFlags = [.readWrite, .create, .exclusive]
            var opened = Syscall.open(staging, in: root, flags: flags, mode: directory.fileMode)
            if case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced,
                case .success = directory.repairStagingFolder()
            {
                opened = Syscall.open(staging, in: root, flags: flags, mode: directory.fileMode)
            }
            let fd: Int32
            switch opened {
            case .success(let value): fd = value
            case .failure(let error): return .failed(error)
            }
            if case .failure(let error) = Syscall.setMode(fd, directory.fileMode) {
                _ = Syscall.unlink(staging, in: root)
                Syscall.close(fd)
                return .failed(error)
            }
            let lock: FileLock
            switch FileLock.attempt(.exclusive, on: fd, path: staging, ownerProcessID: directory.ownerProcessID) {
            case .locked(let locked):
                lock = locked
            case .busy:  // nobody else can know this new file: only a failure of the call itself
                _ = Syscall.unlink(staging, in: root)
                Syscall.close(fd)
                return .failed(SystemCallError(operation: "flock", path: staging, errno: .wouldBlock))
            case .failed(let error):
                _ = Syscall.unlink(staging, in: root)
                Syscall.close(fd)
                return .failed(error)
            }
            let linked = Syscall.link(staging, in: root, to: relative, in: root)
            _ = Syscall.unlink(staging, in: root)
            if case .success = linked { return .createdLocked(lock) }
            lock.release()  // I7: LOCK_UN before close
            if case .failure(let error) = linked, error.errno != .fileExists { return .failed(error) }
            // Someone else linked theirs first: open that one.
        }
        return .failed(SystemCallError(operation: "linkat", path: relative, errno: .fileExists))
    }
}
