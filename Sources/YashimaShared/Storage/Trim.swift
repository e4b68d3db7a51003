// Trimming and directory scans: keeping usage under the budget in LRU order (I9, I11), sweeping debris
// (old staging files, unlocked lock files), and the whole-directory walks behind removeAll, listing and
// usage. Everything here may take long: callers run it off the cooperative pool (BlockingWork).

import Synchronization

/// One entry file seen by a scan.
struct ScannedEntry: Sendable {
    let relative: String
    let modified: Int64
    let allocatedBytes: Int64
}

/// Budget enforcement and scans for one storage root.
final class Trimmer: Sendable {
    let directory: Directory

    /// Victims from the last scan, oldest first, consumed from the front. Re-checked before each unlink,
    /// so a stale index costs a skipped victim, never a wrong unlink. Rebuilt when exhausted: a write
    /// pays for a full scan only once per index's worth of evictions (O(1) amortised).
    private let index = Mutex<(victims: [ScannedEntry], next: Int)>(([], 0))

    init(directory: Directory) {
        self.directory = directory
    }

    private var files: EntryFile { EntryFile(directory: directory) }

    // MARK: Scans

    /// Every entry file (regular files ending in `.entry` under the fan-out folders). Blocking.
    func scanEntries() -> [ScannedEntry] {
        let root = directory.descriptor
        var found: [ScannedEntry] = []
        guard case .success(let folders) = Syscall.listDirectory(Directory.entriesFolder, in: root) else {
            return found
        }
        for folder in folders where folder.isDirectory != false && folder.name.count == 2 {
            let folderPath = Directory.entriesFolder + "/" + folder.name
            // Statuses relative to the listed folder: one fstatat per name, no path walk (I13).
            guard case .success(let names) = Syscall.listDirectoryWithStatus(folderPath, in: root) else { continue }
            for name in names where name.name.hasSuffix(Directory.entrySuffix) {
                let relative = folderPath + "/" + name.name
                // A file that vanished between listing and stat was removed by someone else: skip it.
                guard let status = name.status, status.isRegularFile else { continue }
                found.append(
                    ScannedEntry(
                        relative: relative, modified: status.modifiedNanoseconds, allocatedBytes: status.allocatedBytes)
                )
            }
        }
        return found
    }

    // MARK: Trim (I9)

    /// Brings usage to at most `budget` if it is over: takes `trim.lock` (waiting for another trimmer, so
    /// that the bound holds when this returns), then unlinks least-recently-used entries down to the low
    /// water mark. Blocking.
    func trimIfNeeded(budget: Int64, force: Bool = false) -> Result<Void, SystemCallError> {
        let state = directory.state
        guard force || state.usage > budget else { return .success(()) }
        let lock: Int32
        switch lockTrimLock() {
        case .success(let fd): lock = fd
        case .failure(let error): return .failure(error)
        }
        defer {
            Syscall.unlock(lock)  // I7: LOCK_UN before close
            Syscall.close(lock)
        }
        // Another process may have trimmed while we waited.
        guard force || state.usage > budget else { return .success(()) }
        var rescanned = false
        if force || state.needsRecount {
            rebuildIndex()  // an explicit trim, or a repaired state file, recounts usage first (I9, I14)
            rescanned = true
        }
        let target = force ? budget : Int64(Double(budget) * Policy.trimLowWaterFraction)
        var unlinked = 0
        // The counter itself, never the "unknown" of a state file repaired meanwhile (I14): that one
        // starts at 0 and this pass stops; the next writer recounts.
        while state.recordedUsage > target {
            guard let victim = nextVictim(rescanIfEmpty: !rescanned, rescanned: &rescanned) else { break }
            // Re-check right before unlinking: an entry used since the scan has a newer mtime (I9, P7).
            guard case .success(let status) = Syscall.status(of: victim.relative, in: directory.descriptor),
                status.isRegularFile, status.modifiedNanoseconds == victim.modified
            else { continue }
            if case .success(true) = files.remove(victim.relative) { unlinked += 1 }
            if unlinked >= Policy.trimMaximumUnlinksPerPass && !force { break }
        }
        if rescanned { sweepDebris() }
        return .success(())
    }

    private func nextVictim(rescanIfEmpty: Bool, rescanned: inout Bool) -> ScannedEntry? {
        if let victim = popIndex() { return victim }
        guard rescanIfEmpty else { return nil }
        rescanned = true
        rebuildIndex()
        return popIndex()
    }

    private func rebuildIndex() {
        let before = directory.state.recordedUsage
        let entries = scanEntries().sorted { $0.modified < $1.modified }
        // Reconcile the usage hint with the scan (I9); concurrent publishes during the scan keep their delta.
        let total = entries.reduce(Int64(0)) { $0 + $1.allocatedBytes }
        directory.state.reconcileUsage(scanned: total, before: before)
        index.withLock { $0 = (entries, 0) }
    }

    private func popIndex() -> ScannedEntry? {
        index.withLock { index in
            guard index.next < index.victims.count else { return nil }
            defer { index.next += 1 }
            return index.victims[index.next]
        }
    }

    /// Opens `trim.lock` and takes `flock(LOCK_EX)` on it, waiting for another trimmer. Checks after the
    /// lock is granted that the path still names the locked file (as I6 for lock files): a repair may
    /// have replaced it meanwhile, and two trimmers holding locks on two files would both trim. Blocking.
    private func lockTrimLock() -> Result<Int32, SystemCallError> {
        for _ in 0..<4 {
            let fd: Int32
            switch openTrimLock() {
            case .success(let value): fd = value
            case .failure(let error): return .failure(error)
            }
            if case .failure(let error) = Syscall.lock(fd, exclusive: true, wait: true) {
                Syscall.close(fd)
                return .failure(error)
            }
            if case .success(let mine) = Syscall.status(of: fd), mine.linkCount > 0,
                case .success(let current) = Syscall.status(of: Directory.trimLockFile, in: directory.descriptor),
                current.isSameFile(as: mine)
            {
                return .success(fd)
            }
            Syscall.unlock(fd)  // I7: LOCK_UN before close
            Syscall.close(fd)
        }
        return .failure(SystemCallError(call: "flock", errno: .staleHandle))
    }

    /// Opens `trim.lock`, creating it when missing. Its contents mean nothing (it is only locked), so
    /// damaged contents need no repair; what cannot serve as a lock file is replaced (I14, counted): a
    /// symlink (never followed), a folder (moved into `tmp/`, never removed), a FIFO, socket or device,
    /// a file this user may not open.
    private func openTrimLock() -> Result<Int32, SystemCallError> {
        let open = { self.directory.openLockFile(Directory.trimLockFile) }
        var result = open()
        if case .failure(let error) = result, error.errno == .symlinkLoop {
            // A symlink planted at trim.lock is never followed: remove the link and create the real file.
            directory.removeSymbolicLink(Directory.trimLockFile)
            directory.onRepair()
            result = open()
        }
        if case .failure(let error) = result, Trimmer.unusableLockFileErrors.contains(error.errno) {
            if case .failure(let replaceError) = replaceTrimLock() { return .failure(replaceError) }
            result = open()
        } else if case .success(let fd) = result, case .success(let status) = Syscall.status(of: fd),
            !status.isRegularFile
        {
            Syscall.close(fd)  // never locked
            if case .failure(let replaceError) = replaceTrimLock() { return .failure(replaceError) }
            result = open()
        }
        // Never trust the umask; but never chmod a file reached through a planted hard link (I13).
        if case .success(let fd) = result, case .success(let status) = Syscall.status(of: fd), status.isOurs,
            status.permissionBits != directory.fileMode
        {
            _ = Syscall.setMode(fd, directory.fileMode)
        }
        return result
    }

    /// errnos of opening `trim.lock` that mean something other than a lock file sits there.
    private static let unusableLockFileErrors: Set<Errno> = [
        .isDirectory, .permissionDenied, .operationNotPermitted,
        Errno(rawValue: 6),  // ENXIO: a socket
        Errno(rawValue: 95),  // EOPNOTSUPP
    ]

    /// Replaces whatever sits at `trim.lock` by a new, empty lock file (renamed over it; a folder is
    /// moved into `tmp/` first). Counted as a repair.
    private func replaceTrimLock() -> Result<Void, SystemCallError> {
        let root = directory.descriptor
        if case .success(let status) = Syscall.status(of: Directory.trimLockFile, in: root), status.isDirectory {
            let aside = Directory.stagingFolder + "/trim.lock-" + Directory.randomHex(byteCount: 8) + ".damaged"
            if case .failure(let error) = Syscall.rename(Directory.trimLockFile, in: root, to: aside, in: root),
                error.errno != .noSuchFile
            {
                return .failure(error)
            }
        }
        do throws(YCacheError) {
            try Directory.createReplacing(
                Directory.trimLockFile, in: root, bytes: [], mode: directory.fileMode,
                folderMode: directory.directoryMode, rootPath: directory.path)
        } catch {
            if case .storageFull = error { return .failure(SystemCallError(call: "write", errno: .noSpace)) }
            return .failure(SystemCallError(call: "renameat", errno: .ioError))
        }
        directory.onRepair()
        return .success(())
    }

    /// Recounts usage from a scan and stores it (I9). Blocking.
    func reconcileUsage() -> (bytes: Int64, entries: Int) {
        let before = directory.state.recordedUsage
        let entries = scanEntries()
        let total = entries.reduce(Int64(0)) { $0 + $1.allocatedBytes }
        directory.state.reconcileUsage(scanned: total, before: before)
        return (total, entries.count)
    }

    // MARK: Debris

    /// Unlinks staging files older than `Policy.stagingDebrisAge`, empty staging folders of that age left
    /// in the root by a process killed while making a folder, and lock files nobody holds. Blocking.
    func sweepDebris() {
        let root = directory.descriptor
        let now = Syscall.realtimeNanoseconds
        var budget = Policy.sweepMaximumPerPass
        if case .success(let names) = Syscall.listDirectoryWithStatus(".", in: root) {
            for name in names where name.name.hasPrefix(Directory.folderStagingPrefix) && budget > 0 {
                guard let status = name.status, status.isDirectory,
                    now - status.modifiedNanoseconds >= Policy.stagingDebrisAge
                else { continue }
                _ = Syscall.unlink(name.name, in: root, isDirectory: true)  // rmdir: never one with contents
                budget -= 1
            }
        }
        if case .success(let names) = Syscall.listDirectoryWithStatus(Directory.stagingFolder, in: root) {
            for name in names where budget > 0 {
                let relative = Directory.stagingFolder + "/" + name.name
                guard let status = name.status, status.isRegularFile,
                    now - status.modifiedNanoseconds >= Policy.stagingDebrisAge
                else { continue }
                _ = Syscall.unlink(relative, in: root)
                budget -= 1
            }
        }
        guard case .success(let folders) = Syscall.listDirectory(Directory.locksFolder, in: root) else { return }
        for folder in folders where folder.name.count == 2 && budget > 0 {
            let folderPath = Directory.locksFolder + "/" + folder.name
            guard case .success(let names) = Syscall.listDirectory(folderPath, in: root) else { continue }
            for name in names where name.name.hasSuffix(Directory.lockSuffix) && budget > 0 {
                let path = LockPath(fanOut: folderPath, relative: folderPath + "/" + name.name)
                // Lock files never written are as old as their creation; old ones belong to keys whose
                // entries are gone or to killed processes. I6: unlink only what we can lock.
                guard case .success(let status) = Syscall.status(of: path.relative, in: root),
                    now - status.modifiedNanoseconds >= Policy.stagingDebrisAge
                else { continue }
                LockFile.removeIfUnused(path, in: directory)
                budget -= 1
            }
        }
    }
}
