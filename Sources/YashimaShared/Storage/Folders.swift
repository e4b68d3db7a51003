// The cache's own folders, made with their exact mode and never followed: a folder is made under a
// staging name, given its mode and moved into place without replacing anything (I2), so no process ever
// sees it with its creator's umasked mode; a symlink where a folder should be is removed (the link, never
// its target) and replaced by a real folder (I13). Fan-out folders are made when first needed.

extension Directory {
    /// Makes a fan-out folder a real folder: creates it when missing (another process may create it at the
    /// same moment) and replaces a symlink or file found there. Repairs its parent (`entries/`, `locks/`)
    /// the same way when that was removed or replaced by a symlink.
    func ensureFanOut(_ relative: String) -> Result<Void, SystemCallError> {
        let created = Directory.ensureDirectory(relative, in: descriptor, mode: directoryMode, replacingFiles: true)
        guard case .failure(let error) = created, error.errno.isFolderMissingOrReplaced else { return created }
        let parent = String(relative.prefix(while: { $0 != "/" }))
        if case .failure(let parentError) = Directory.ensureDirectory(
            parent, in: descriptor, mode: directoryMode, replacingFiles: false)
        {
            return .failure(parentError)
        }
        return Directory.ensureDirectory(relative, in: descriptor, mode: directoryMode, replacingFiles: true)
    }

    /// Makes the fan-out folder `relative` on a task of its own (returned: the production awaits it before
    /// it returns), once per folder in this process, so that a production's publish finds it: made at the
    /// publish, it came between the generator's return and the rename that wakes the key's waiters (two or
    /// three journal operations; issue 25). It runs beside the generation; a publish that comes first makes
    /// the folder itself (EntryFile.commit), and two creators do not conflict (`ensureDirectory`). A
    /// failure is left to the publish, which reports it. Nil when this process prepared it already.
    func prepareFanOut(_ relative: String) -> Task<Void, Never>? {
        guard preparedFanOuts.withLock({ $0.insert(relative).inserted }) else { return nil }
        return Task { _ = self.ensureFanOut(relative) }
    }

    /// Makes `tmp/` a real folder again after it was removed or replaced by a symlink (never followed).
    func repairStagingFolder() -> Result<Void, SystemCallError> {
        Directory.ensureDirectory(Directory.stagingFolder, in: descriptor, mode: directoryMode, replacingFiles: false)
    }

    /// Removes a symlink planted at `relative` (the link itself, never its target); anything else stays.
    func removeSymbolicLink(_ relative: String) {
        guard case .success(let status) = Syscall.status(of: relative, in: descriptor), status.isSymbolicLink else {
            return
        }
        _ = Syscall.unlink(relative, in: descriptor)
    }

    /// Makes `relative` a real folder with `mode` set explicitly (never the umask): creates it when
    /// missing, removes a symlink found there (the link, never its target) and, with `replacingFiles`,
    /// any other non-folder. Fails with ENOTDIR for a non-folder it may not replace, and with ELOOP,
    /// ENOTDIR or ENOENT when a parent is the problem. Concurrent creators are fine (EEXIST).
    static func ensureDirectory(
        _ relative: String, in root: Int32, mode: UInt32, replacingFiles: Bool
    ) -> Result<Void, SystemCallError> {
        for _ in 0..<Policy.nameRaceRetries {
            switch Syscall.status(of: relative, in: root) {
            case .success(let status) where status.isDirectory:
                return .success(())
            case .success(let status):
                guard status.isSymbolicLink || replacingFiles else {
                    return .failure(SystemCallError(operation: "fstatat", path: relative, errno: .notDirectory))
                }
                if case .failure(let error) = Syscall.unlink(relative, in: root), error.errno != .noSuchFile {
                    return .failure(error)
                }
            case .failure(let error) where error.errno == .noSuchFile:
                switch makeDirectoryWithExactMode(relative, in: root, mode: mode) {
                case .success:
                    return .success(())
                case .failure(let error) where error.errno == .fileExists || error.errno == .directoryNotEmpty:
                    continue  // someone else made something there: look at what it is
                case .failure(let error):
                    return .failure(error)
                }
            case .failure(let error):
                return .failure(error)
            }
        }
        return .failure(SystemCallError(operation: "mkdirat", path: relative, errno: .fileExists))
    }

    /// Creates folder `relative` with exactly `mode`, whatever the umask, so that no process ever sees it
    /// with another mode: it is made under a staging name in the root, given its mode (mkdirat applies
    /// the umask, and setgid must be set explicitly), then moved into place without replacing anything.
    /// Another user of a group-shared directory could not write into a folder caught with its umasked
    /// mode, and a process killed between mkdir and chmod would leave it that way. EEXIST: someone else
    /// made it. (A plain rename would replace a folder another process had just made and was about to
    /// create its lock file in; that process's create then fails, and it generates without the lock.)
    static func makeDirectoryWithExactMode(
        _ relative: String, in root: Int32, mode: UInt32
    ) -> Result<Void, SystemCallError> {
        let staging = folderStagingPrefix + randomHex(byteCount: 8)
        if case .failure(let error) = Syscall.makeDirectory(staging, in: root, mode: mode) { return .failure(error) }
        var outcome = Syscall.open(staging, in: root, flags: [.directory]).flatMap { fd in
            defer { Syscall.close(fd) }
            return Syscall.setMode(fd, mode)
        }
        if case .success = outcome {
            outcome = Syscall.renameWithoutReplacing(staging, in: root, to: relative, in: root)
        }
        if case .failure = outcome { _ = Syscall.unlink(staging, in: root, isDirectory: true) }
        if case .failure(let error) = outcome, error.errno == .invalidArgument {
            // A filesystem without RENAME_NOREPLACE: create in place, then set the mode.
            return Syscall.makeDirectory(relative, in: root, mode: mode).flatMap {
                Syscall.open(relative, in: root, flags: [.directory]).flatMap { fd in
                    defer { Syscall.close(fd) }
                    return Syscall.setMode(fd, mode)
                }
            }
        }
        return outcome
    }

    /// Names of folders being created in the root (`makeDirectoryWithExactMode`); only a process killed
    /// within those few system calls leaves one behind, empty: scans ignore it and trim removes it once it
    /// is older than `Policy.stagingDebrisAge`.
    static let folderStagingPrefix = ".folder-"

    /// A top-level folder (`entries`, `locks`, `tmp`): created when missing, a symlink there replaced;
    /// a file or anything else there is an error naming it.
    static func ensureFolder(
        _ name: String, in root: Int32, mode: UInt32, rootPath: String
    ) throws(YCache.Error) {
        switch ensureDirectory(name, in: root, mode: mode, replacingFiles: false) {
        case .success:
            return
        case .failure(let error) where error.errno == .notDirectory:
            throw .storageUnavailable(path: rootPath, reason: "\(name) exists and is not a directory")
        case .failure(let error):
            throw .storageUnavailable(path: rootPath, reason: "cannot create \(name): \(error)")
        }
    }
}
