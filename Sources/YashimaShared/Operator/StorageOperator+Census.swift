// The operator's census of what is not an entry: lock files (held by a generator, waited on, or left by
// a killed process), staging files and staging folders, young (a write in progress) or old (debris that
// trim sweeps, I2, I6), and whether a trim is running. Held locks are read from /proc/locks, so counting
// takes no lock and cannot disturb a generation; waiting processes are those with an inotify watch on a
// `locks/<xx>/` folder (how LockWatch waits, from /proc/<pid>/fdinfo; processes of other users are not
// readable) or blocked in flock on a lock file (builds before LockWatch). Sweeping is trim's own
// (`Maintenance.sweepDebris`). Blocking: call off the cooperative pool.

import Foundation

/// What the storage directory holds besides entries.
@_spi(Operator)
public struct DirectoryCensus: Sendable, Equatable {
    /// Lock files in `locks/` (each names a key in flight, or was left by a killed process).
    public var lockFiles = 0
    /// Lock files some process holds exclusively: keys being generated now. Nil when /proc/locks
    /// cannot be read.
    public var lockFilesHeld: Int?
    /// Processes waiting for a lock file's holder (this user's: another user's descriptors are not
    /// readable in /proc). Nil when /proc/locks cannot be read.
    public var waitingProcesses: Int?
    /// Lock files nobody holds that are older than an hour: debris of killed processes, which trim and
    /// `verify --repair` sweep.
    public var staleLockFiles = 0
    /// Staging files in `tmp/` (writes in progress, or debris when old).
    public var stagingFiles = 0
    /// Staging files older than an hour: debris of killed processes, which trim sweeps.
    public var staleStagingFiles = 0
    /// Allocated bytes of all staging files.
    public var stagingBytes: Int64 = 0
    /// Empty `.folder-*` staging folders in the root (a folder being made, or debris when old).
    public var stagingFolders = 0
    /// Staging folders older than an hour.
    public var staleStagingFolders = 0
    /// Whether a process holds `trim.lock` (a trim is running). False when /proc/locks cannot be read.
    public var trimRunning = false

    /// Debris that a sweep removes: stale lock files, staging files and staging folders.
    public var debris: Int { staleLockFiles + staleStagingFiles + staleStagingFolders }
}

extension StorageOperator {
    /// Counts lock files, staging files and staging folders, and which locks are held now.
    /// - Returns: The census. Counting takes no lock.
    public func census() -> DirectoryCensus {
        let root = directory.descriptor
        let now = Syscall.realtimeNanoseconds
        let locks = ProcLocks.read()
        var census = DirectoryCensus()
        var held = 0
        var blocked = Set<Int32>()
        var lockFolders = Set<ProcLocks.File>()
        func isOld(_ status: FileStatus) -> Bool { now - status.modifiedNanoseconds >= stagingDebrisAge }
        if case .success(let folders) = Syscall.listDirectoryWithStatus(Directory.locksFolder, in: root) {
            for folder in folders where folder.name.count == 2 {
                if let status = folder.status { lockFolders.insert(ProcLocks.File(status)) }
                let folderPath = Directory.locksFolder + "/" + folder.name
                guard case .success(let names) = Syscall.listDirectoryWithStatus(folderPath, in: root) else {
                    continue
                }
                for name in names where name.name.hasSuffix(Directory.lockSuffix) {
                    guard let status = name.status, status.isRegularFile else { continue }
                    census.lockFiles += 1
                    let use = locks?.use(of: status) ?? ProcLocks.Use()
                    if use.exclusive { held += 1 }
                    blocked.formUnion(use.waitingProcesses)
                    if !use.exclusive && !use.shared && isOld(status) { census.staleLockFiles += 1 }
                }
            }
        }
        if case .success(let names) = Syscall.listDirectoryWithStatus(Directory.stagingFolder, in: root) {
            for name in names {
                guard let status = name.status, status.isRegularFile else { continue }
                census.stagingFiles += 1
                census.stagingBytes += status.allocatedBytes
                if isOld(status) { census.staleStagingFiles += 1 }
            }
        }
        if case .success(let names) = Syscall.listDirectoryWithStatus(".", in: root) {
            for name in names {
                if name.name.hasPrefix(Directory.folderStagingPrefix), let status = name.status, status.isDirectory {
                    census.stagingFolders += 1
                    if isOld(status) { census.staleStagingFolders += 1 }
                }
                if name.name == Directory.trimLockFile, let status = name.status, let locks {
                    census.trimRunning = locks.use(of: status).exclusive
                }
            }
        }
        if locks != nil {
            census.lockFilesHeld = held
            let watching = census.lockFiles > 0 ? ProcLocks.processesWatching(lockFolders) : []
            census.waitingProcesses = blocked.union(watching).count
        }
        return census
    }

    /// Removes debris as trim does: staging files and empty staging folders older than an hour, and
    /// lock files nobody holds that are older than an hour (I2, I6). Younger ones may be a write in
    /// progress and stay.
    public func sweepDebris() {
        Maintenance.sweepDebris(context)
    }
}

/// The file locks (FLOCK lines) the kernel lists in /proc/locks, by file.
struct ProcLocks {
    struct File: Hashable {
        let major: UInt64
        let minor: UInt64
        let inode: UInt64

        init(major: UInt64, minor: UInt64, inode: UInt64) {
            self.major = major
            self.minor = minor
            self.inode = inode
        }

        /// The file `status` describes (glibc's gnu_dev_major / gnu_dev_minor of its device).
        init(_ status: FileStatus) {
            let device = status.device
            major = ((device >> 8) & 0xFFF) | ((device >> 32) & ~UInt64(0xFFF))
            minor = (device & 0xFF) | ((device >> 12) & ~UInt64(0xFF))
            inode = status.inode
        }
    }

    struct Use {
        var exclusive = false
        var shared = false
        var waiters = 0
        /// The processes blocked waiting for it.
        var waitingProcesses: Set<Int32> = []
    }

    let files: [File: Use]

    /// How many times `read` reads /proc/locks.
    static let reads = 3

    /// Parses /proc/locks `reads` times and merges what they show; nil when it cannot be read. The kernel
    /// prints the list a page at a time and starts each page again at a position in it, so while other
    /// locks come and go a read skips a line now and then: 2–7% of reads missed a held lock beside 1,000
    /// others locked and unlocked in a loop (measured 2026-12-02; three reads merged missed none in 100).
    /// A lock any of the reads shows is counted (a lock let go between them counts as a snapshot a moment
    /// earlier would).
    static func read() -> ProcLocks? {
        var texts: [String] = []
        for _ in 0..<reads {
            guard let text = procText("/proc/locks") else { return nil }
            texts.append(text)
        }
        return ProcLocks(merging: texts)
    }

    /// What any of `texts` (reads of /proc/locks) shows: a file is locked when one of them says so, and
    /// waited on by every process one of them shows waiting.
    init(merging texts: [String]) {
        var merged: [File: Use] = [:]
        for text in texts {
            for (file, use) in ProcLocks(parsing: text).files {
                var known = merged[file] ?? Use()
                known.exclusive = known.exclusive || use.exclusive
                known.shared = known.shared || use.shared
                known.waiters = max(known.waiters, use.waiters)
                known.waitingProcesses.formUnion(use.waitingProcesses)
                merged[file] = known
            }
        }
        files = merged
    }

    /// A /proc file's whole text. `String(contentsOfFile:)` stops after the first 4 KiB of a /proc file
    /// (it reports a size of 0): with a few thousand locks held on the machine, the census missed ours.
    static func procText(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// Lines look like `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`, and a process blocked on a
    /// lock like `1: -> FLOCK  ADVISORY  READ 1235 08:01:5678 0 EOF`. Device numbers are hex.
    init(parsing text: String) {
        var files: [File: Use] = [:]
        for line in text.split(separator: "\n") {
            var fields = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst()
            let waiting = fields.first == "->"
            if waiting { fields = fields.dropFirst() }
            let words = Array(fields)
            guard words.count >= 5, words[0] == "FLOCK" else { continue }
            let device = words[4].split(separator: ":")
            guard device.count == 3, let major = UInt64(device[0], radix: 16), let minor = UInt64(device[1], radix: 16),
                let inode = UInt64(device[2])
            else { continue }
            let file = File(major: major, minor: minor, inode: inode)
            var use = files[file] ?? Use()
            if waiting {
                use.waiters += 1
                if let pid = Int32(words[3]) { use.waitingProcesses.insert(pid) }
            } else if words[2] == "WRITE" {
                use.exclusive = true
            } else {
                use.shared = true
            }
            files[file] = use
        }
        self.files = files
    }

    /// How `status`'s file is locked now.
    func use(of status: FileStatus) -> Use {
        files[File(status)] ?? Use()
    }

    /// The processes (of those whose descriptors this user may read) with an inotify watch on one of
    /// `folders`: lock waits (Coordination/LockWatch). One listing of /proc and of each process's fds.
    static func processesWatching(_ folders: Set<File>) -> Set<Int32> {
        var found = Set<Int32>()
        guard !folders.isEmpty, let processes = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else {
            return found
        }
        for name in processes {
            guard let pid = Int32(name),
                let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(name)/fd")
            else { continue }
            for descriptor in descriptors {
                guard
                    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(name)/fd/\(descriptor)"))
                        == "anon_inode:inotify",
                    let info = procText("/proc/\(name)/fdinfo/\(descriptor)")
                else { continue }
                if watchedFiles(fdinfo: info).contains(where: folders.contains) {
                    found.insert(pid)
                    break
                }
            }
        }
        return found
    }

    /// The files an inotify descriptor's fdinfo lists: `inotify wd:1 ino:5e2 sdev:fe00001 mask:…`, the
    /// inode and the kernel's device number (major << 20 | minor) in hex.
    static func watchedFiles(fdinfo: String) -> [File] {
        fdinfo.split(separator: "\n").compactMap { line -> File? in
            guard line.hasPrefix("inotify ") else { return nil }
            var inode: UInt64?
            var device: UInt64?
            for field in line.split(separator: " ") {
                if field.hasPrefix("ino:") { inode = UInt64(field.dropFirst(4), radix: 16) }
                if field.hasPrefix("sdev:") { device = UInt64(field.dropFirst(5), radix: 16) }
            }
            guard let inode, let device else { return nil }
            return File(major: device >> 20, minor: device & 0xFFFFF, inode: inode)
        }
    }
}
