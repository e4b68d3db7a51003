// Sweeping lock files nobody holds (I6): one older than stagingDebrisAge is unlinked only by a process that
// locks it without waiting and checks the path still names it. Run with trim's debris sweep. Blocking.

enum StaleLockFiles {
    /// Removes up to `limit` lock files nobody holds that are older than `Policy.stagingDebrisAge`.
    static func sweep(in directory: Directory, limit: Int) {
        let root = directory.descriptor
        let now = Syscall.realtimeNanoseconds
        var budget = limit
        guard case .success(let folders) = Syscall.listDirectory(Directory.locksFolder, in: root) else { return }
        for folder in folders where folder.name.count == 2 && budget > 0 {
            let folderPath = Directory.locksFolder + "/" + folder.name
            guard case .success(let names) = Syscall.listDirectory(folderPath, in: root) else { continue }
            for name in names where name.name.hasSuffix(Directory.lockSuffix) && budget > 0 {
                let path = LockPath(fanOut: folderPath, relative: folderPath + "/" + name.name)
                // Lock files never written are as old as their creation; old ones belong to keys whose
                // entries are gone or to killed processes.
                guard case .success(let status) = Syscall.status(of: path.relative, in: root),
                    now - status.modifiedNanoseconds >= stagingDebrisAge
                else { continue }
                removeIfUnused(path, in: directory)
                budget -= 1
            }
        }
    }

    /// Unlinks a key's lock file if nobody holds it (I6: only a holder unlinks). Never creates one.
    static func removeIfUnused(_ path: LockPath, in directory: Directory) {
        let root = directory.descriptor
        guard case .success(let fd) = Syscall.open(path.relative, in: root, flags: [.readWrite]) else {
            return  // no lock file: nothing to do
        }
        switch FileLock.attempt(.exclusive, on: fd, path: path.relative, ownerProcessID: directory.ownerProcessID) {
        case .locked(let lock):
            if case .success(let mine) = Syscall.status(of: lock.descriptor), mine.linkCount > 0,
                case .success(let current) = Syscall.status(of: path.relative, in: root), current.isSameFile(as: mine)
            {
                _ = Syscall.unlink(path.relative, in: root)
            }
            lock.release()
        case .busy:
            Syscall.close(fd)  // a generator holds it and needs it
        case .failed:
            Syscall.close(fd)  // it cannot be locked here
        }
    }
}
