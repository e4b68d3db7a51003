// Trimming and directory scans: keeping usage (payload bytes, optionally allocated bytes) under the budget
// in LRU order (I9, I11), sweeping debris (old staging files, unlocked lock files), and the whole-directory
// walks behind removeAll, listing and usage. Everything here may take long: callers run it off the
// cooperative pool (BlockingWork).

import Synchronization

/// One entry file seen by a scan.
struct ScannedEntry: Sendable {
    let relative: String
    let modified: Int64
    let allocatedBytes: Int64
    /// The file's size (to notice, before unlinking, that it was replaced since the scan).
    let size: Int64
    /// Payload bytes from its header (`EntryFile.chargedPayloadBytes`); 0 when the scan did not read them.
    let payloadBytes: Int64
}

/// What trim keeps usage under (I9): the payload bytes of all entries (the storage budget, as Yashima
/// counts it) and, optionally, their allocated bytes (a disk cap). Nil bounds nothing.
struct StorageBudget: Sendable, Equatable {
    var payloadBytes: Int64?
    var allocatedBytes: Int64?

    var isBounded: Bool { payloadBytes != nil || allocatedBytes != nil }

    /// Whether `state`'s counters are over this budget, or cannot be trusted yet (counters no scan has
    /// counted, in a state file made by 0.1 or by a repair, I14).
    func isExceeded(by state: SharedState) -> Bool {
        guard isBounded else { return false }
        if !state.isPayloadCounted { return true }
        if let payloadBytes, state.payloadBytes > payloadBytes { return true }
        if let allocatedBytes, state.usage > allocatedBytes { return true }
        return false
    }
}

/// A directory's usage, counted by a scan.
struct CountedUsage: Sendable, Equatable {
    var payloadBytes: Int64
    var allocatedBytes: Int64
    var entries: Int
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
    /// - Parameter readingPayloads: Also read each file's fixed header for its payload bytes (one open
    ///   and one 128-byte read per file, on top of the listing's fstatat).
    func scanEntries(readingPayloads: Bool = false) -> [ScannedEntry] {
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
                        relative: relative, modified: status.modifiedNanoseconds, allocatedBytes: status.allocatedBytes,
                        size: status.size,
                        payloadBytes: readingPayloads ? files.chargedPayloadBytes(relative, status: status) : 0))
            }
        }
        return found
    }

    // MARK: Trim (I9)

    /// Brings usage within `budget` if it is over: takes `trim.lock` (waiting for another trimmer, so
    /// that the bound holds when this returns), then unlinks least-recently-used entries down to the low
    /// water mark of each bound. A payload counter no scan has counted yet is counted first. Blocking.
    /// - Parameter force: Recount first and trim down to the budget itself with no per-pass limit (an
    ///   explicit `trimStorageIfNeeded()`).
    /// - Returns: With `force`, the usage left: the scan's count minus what this pass unlinked.
    @discardableResult
    func trimIfNeeded(budget: StorageBudget, force: Bool = false) -> Result<CountedUsage?, SystemCallError> {
        let state = directory.state
        guard budget.isBounded, force || budget.isExceeded(by: state) else { return .success(nil) }
        let lock: Int32
        switch lockTrimLock() {
        case .success(let fd): lock = fd
        case .failure(let error): return .failure(error)
        }
        defer {
            Syscall.unlock(lock)  // I7: LOCK_UN before close
            Syscall.close(lock)
        }
        // Another process may have trimmed (or counted) while we waited.
        guard force || budget.isExceeded(by: state) else { return .success(nil) }
        var rescanned = false
        var left: CountedUsage?
        if force || !state.isPayloadCounted {
            // An explicit trim, or counters never counted (0.1, a repair: I14), recounts first (I9).
            left = rebuildIndex()
            rescanned = true
            // Counted, the directory may be within the budget after all: then the low-water mark is not due.
            if !force && !budget.isExceeded(by: state) {
                sweepDebris()
                return .success(nil)
            }
        }
        func target(_ bound: Int64?) -> Int64? {
            bound.map { force ? $0 : Int64(Double($0) * Policy.trimLowWaterFraction) }
        }
        let payloadTarget = target(budget.payloadBytes)
        let allocatedTarget = target(budget.allocatedBytes)
        func isOver() -> Bool {
            (payloadTarget.map { state.payloadBytes > $0 } ?? false)
                || (allocatedTarget.map { state.usage > $0 } ?? false)
        }
        var unlinked = 0
        while isOver() {
            guard let victim = nextVictim(rescanIfEmpty: !rescanned, rescanned: &rescanned) else { break }
            // Re-check right before unlinking: an entry used since the scan has a newer mtime, a replaced one
            // a newer mtime or another size (I9, P7).
            guard case .success(let status) = Syscall.status(of: victim.relative, in: directory.descriptor),
                status.isRegularFile, status.modifiedNanoseconds == victim.modified, status.size == victim.size
            else { continue }
            if case .success(true) = files.remove(victim.relative, payload: .known(victim.payloadBytes)) {
                unlinked += 1
                left?.payloadBytes -= victim.payloadBytes
                left?.allocatedBytes -= victim.allocatedBytes
                left?.entries -= 1
            }
            if unlinked >= Policy.trimMaximumUnlinksPerPass && !force { break }
        }
        if rescanned { sweepDebris() }
        return .success(force ? left : nil)
    }

    private func nextVictim(rescanIfEmpty: Bool, rescanned: inout Bool) -> ScannedEntry? {
        if let victim = popIndex() { return victim }
        guard rescanIfEmpty else { return nil }
        rescanned = true
        rebuildIndex()
        return popIndex()
    }

    /// Scans (reading payload sizes), reconciles both counters and replaces the victim index; returns the count.
    @discardableResult
    private func rebuildIndex() -> CountedUsage {
        let state = directory.state
        let (allocatedBefore, payloadBefore) = (state.usage, state.payloadBytes)
        let entries = scanEntries(readingPayloads: true).sorted { $0.modified < $1.modified }
        let counted = CountedUsage(
            payloadBytes: entries.reduce(Int64(0)) { $0 + $1.payloadBytes },
            allocatedBytes: entries.reduce(Int64(0)) { $0 + $1.allocatedBytes }, entries: entries.count)
        // Reconcile both counters with the scan (I9); concurrent publishes during the scan keep their delta.
        state.adjustUsage(by: counted.allocatedBytes - allocatedBefore)
        state.adjustPayloadBytes(by: counted.payloadBytes - payloadBefore)
        state.markPayloadCounted()
        index.withLock { $0 = (entries, 0) }
        return counted
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
        do throws(YCache.Error) {
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

    /// Recounts usage from a scan (reading every entry's fixed header) and stores it in both counters (I9).
    /// Blocking.
    func reconcileUsage() -> CountedUsage {
        let state = directory.state
        let (allocatedBefore, payloadBefore) = (state.usage, state.payloadBytes)
        let entries = scanEntries(readingPayloads: true)
        let counted = CountedUsage(
            payloadBytes: entries.reduce(Int64(0)) { $0 + $1.payloadBytes },
            allocatedBytes: entries.reduce(Int64(0)) { $0 + $1.allocatedBytes }, entries: entries.count)
        state.adjustUsage(by: counted.allocatedBytes - allocatedBefore)
        state.adjustPayloadBytes(by: counted.payloadBytes - payloadBefore)
        state.markPayloadCounted()
        return counted
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
