// The `state` file every process maps shared (I14): switching to the live one, creating it (first creator
// wins) and repairing a damaged one under a lock on the root. Its words are in the other files of this
// folder; the repair, step by step: Docs/Internals.md.

import CFileLock
import Glibc
import Synchronization

/// The shared state of one storage directory, mapped `MAP_SHARED` in every process.
///
/// Layout (little-endian, 8-byte words):
/// | offset | field |
/// |---|---|
/// | 0 | magic `YSHSTATE` (any other value: the file is dead or damaged) |
/// | 8 | state format version (1) |
/// | 16 | usage: allocated bytes of all entries (Int64, a hint reconciled by trim) |
/// | 24 | instance id: random, chosen when the file is made (0 in files of older builds) |
/// | 32 | global epoch (bumped by `removeAll()`) |
/// | 40 | payload bytes of all entries (Int64, a hint reconciled by trim): what the storage budget counts |
/// | 48 | last publish: the largest mtime a publish gave an entry, ns since 1970 (Int64; I11) |
/// | 56 | accounting flags: bit 0 set once a full scan has counted both usage words (clear in a file made |
/// |    | by 0.1 or by a repair: the next budgeted writer recounts before trusting them) |
/// | 64 | namespace epochs, `namespaceSlots` words, slot = namespace digest mod count |
/// | 64 + 8·namespaceSlots | key epochs, `keySlots` words, slot = key digest mod count |
/// | 41,024 | shared counters and the operator's words (`SharedState+Counters.swift`) |
///
/// Every access first checks that word 0 still holds the magic; when it does not (another process
/// marked the file dead, it was zeroed, or the SIGBUS guard replaced a mapping of a truncated file with
/// zeros), this object switches to the file the path names now, repairing that one when it is damaged
/// too. So a process never keeps reading an abandoned mapping.
final class SharedState: Sendable {
    static let size = 65_536
    /// "YSHSTATE" as a little-endian word: a literal, so that the check every access makes (`isLive`) is a
    /// compare with a constant, not a read through a lazily made global (FormatSpecTests checks the bytes).
    static let magic: UInt64 = 0x4554_4154_5348_5359
    /// What a repairer writes over word 0 of a damaged file (with `pwrite`), so that every process still
    /// mapping it switches to the new one.
    static let deadMarker: UInt64 = UInt64(
        littleEndian: Array("YSHDEAD!".utf8).withUnsafeBytes { $0.load(as: UInt64.self) })
    static let version: UInt64 = 1
    static let namespaceSlots = 1024
    static let keySlots = 4096
    static let versionOffset = 8
    static let usageOffset = 16
    static let instanceOffset = 24
    static let globalEpochOffset = 32
    static let payloadOffset = 40
    static let lastPublishOffset = 48
    static let accountingFlagsOffset = 56
    /// Bit of the accounting flags: a full scan has counted the usage words.
    static let countedFlag: UInt64 = 1
    static let namespaceOffset = 64
    static let keyOffset = 64 + 8 * 1024

    /// A descriptor of the root of its own (a separate open file description): every path call of a
    /// reopen or repair is relative to it.
    private let root: Int32
    private let rootPath: String
    private let sharing: StorageSharingMode
    private let ownerProcessID: Int32
    private let onRepair: @Sendable () -> Void
    /// The mapping in use, or none after a switch that failed (retried at most once per second).
    private let current: Mutex<Current>

    private struct Current {
        var mapping: StateMapping?
        var failure: (error: YCache.Error, at: Int64)?
    }

    /// Opens (creating once when missing, repairing when damaged) and maps the state file.
    /// - Parameter onRepair: Called once for each damaged file this object replaces.
    init(
        rootDescriptor: Int32, rootPath: String, sharing: StorageSharingMode, ownerProcessID: Int32,
        onRepair: @escaping @Sendable () -> Void
    ) throws(YCache.Error) {
        switch Syscall.open(".", in: rootDescriptor, flags: [.directory]) {
        case .success(let fd): root = fd
        case .failure(let error):
            throw .storageUnavailable(path: rootPath, reason: "cannot open the root for the state file: \(error)")
        }
        self.rootPath = rootPath
        self.sharing = sharing
        self.ownerProcessID = ownerProcessID
        self.onRepair = onRepair
        current = Mutex(Current())
        do throws(YCache.Error) {
            let mapping = try openGoodFile()
            current.withLock { $0.mapping = mapping }
        } catch {
            Syscall.close(root)
            throw error
        }
    }

    deinit {
        Syscall.close(root)
    }

    // MARK: The mapping in use

    /// The live mapping, after switching away from a dead one; nil when no good state file can be had
    /// now (the switch failed less than a second ago, or fails now).
    func live() -> StateMapping? {
        if let mapping = current.withLock({ $0.mapping }), mapping.isLive { return mapping }
        return switchFile()
    }

    /// Replaces the mapping in use (dead, or gone after a failure) by one of the file the path names now,
    /// repairing it when damaged. One thread at a time; the others wait here and take its result.
    private func switchFile() -> StateMapping? {
        current.withLock { current -> StateMapping? in
            if let mapping = current.mapping, mapping.isLive { return mapping }  // another thread switched
            let now = Syscall.monotonicNanoseconds
            if let failure = current.failure, now - failure.at < stateReopenInterval { return nil }
            do throws(YCache.Error) {
                let mapping = try openGoodFile()
                current = Current(mapping: mapping, failure: nil)
                return mapping
            } catch {
                current = Current(mapping: nil, failure: (error, now))
                return nil
            }
        }
    }

    /// The error that keeps the state unavailable, for callers that must report it.
    var unavailableError: YCache.Error {
        current.withLock { $0.failure?.error }
            ?? .storageUnavailable(path: rootPath, reason: "the state file keeps being damaged")
    }

    /// Whether the path `state` still names the file in use; when it does not (replaced or deleted by
    /// someone else), marks the old file dead so that every process still mapping it switches too, and
    /// switches. One `fstatat(2)`. Called before every write and removal, and with the root check
    /// otherwise (I13: at most once per `Policy.rootCheckInterval`).
    func verifyPath() {
        guard let mapping = current.withLock({ $0.mapping }), mapping.isLive else {
            _ = switchFile()
            return
        }
        if case .success(let status) = Syscall.status(of: Directory.stateFile, in: root),
            status.isSameFile(as: mapping.file)
        {
            return
        }
        mapping.markDead()
        _ = switchFile()
    }

    // MARK: Opening and repairing (I14)

    /// What the path `state` names, judged.
    private enum Inspection {
        case good(StateMapping)
        case missing
        /// Damaged or foreign; `descriptor` is open on it when it is a regular file with one link (a file
        /// the repairer may mark dead; never one reached through a planted hard link, I13).
        case damaged(reason: String, descriptor: Int32?, isDirectory: Bool)
    }

    /// Opens the file the path names, or makes one: created once when missing, repaired when damaged.
    private func openGoodFile() throws(YCache.Error) -> StateMapping {
        for _ in 0..<Policy.nameRaceRetries {
            switch try inspect() {
            case .good(let mapping):
                return mapping
            case .missing:
                if let mapping = try repair() { return mapping }
            case .damaged(_, let descriptor, _):
                if let descriptor { Syscall.close(descriptor) }
                if let mapping = try repair() { return mapping }
            }
        }
        throw .storageUnavailable(path: rootPath, reason: "the state file keeps disappearing or being damaged")
    }

    private func inspect() throws(YCache.Error) -> Inspection {
        let fd: Int32
        switch Syscall.open(Directory.stateFile, in: root, flags: [.readWrite]) {
        case .success(let value):
            fd = value
        case .failure(let error) where error.errno == .noSuchFile:
            return .missing
        case .failure(let error) where Errno.foreignFile.contains(error.errno):
            // A symlink (never followed), a folder, a socket, a file this user may not open.
            let isDirectory = error.errno == .isDirectory
            return .damaged(reason: "cannot open it (\(error))", descriptor: nil, isDirectory: isDirectory)
        case .failure(let error):
            throw .storageUnavailable(path: rootPath, reason: "cannot open the state file: \(error)")
        }
        let status: FileStatus
        switch Syscall.status(of: fd) {
        case .success(let value): status = value
        case .failure(let error):
            Syscall.close(fd)
            throw .storageUnavailable(path: rootPath, reason: "cannot inspect the state file: \(error)")
        }
        guard status.isRegularFile, status.linkCount == 1 else {
            // A FIFO or device, or a hard link (perhaps of a file outside): never written, only replaced.
            Syscall.close(fd)
            return .damaged(reason: "not a regular file with one link", descriptor: nil, isDirectory: false)
        }
        guard status.size == Int64(SharedState.size) else {
            return .damaged(reason: "\(status.size) bytes, not \(SharedState.size)", descriptor: fd, isDirectory: false)
        }
        let base: UnsafeMutableRawPointer
        switch Syscall.mapShared(fd, length: SharedState.size) {
        case .success(let pointer): base = pointer
        case .failure(let error):
            Syscall.close(fd)
            throw .storageUnavailable(path: rootPath, reason: "cannot map the state file: \(error)")
        }
        // Guarded before the first access: a truncation from now on reads zeros instead of killing us.
        let guarded: Bool
        if case .success = Syscall.guardMapping(base, length: SharedState.size) {
            guarded = true
        } else {
            guarded = false
        }
        let mapping = StateMapping(base: base, descriptor: fd, file: status, guarded: guarded)
        guard mapping.isLive, mapping.load(SharedState.versionOffset) == SharedState.version else {
            // The mapping goes; its descriptor stays open for the repairer to mark the file dead.
            return .damaged(reason: "bad magic or version", descriptor: mapping.takeDescriptor(), isDirectory: false)
        }
        return .good(mapping)
    }

    /// Creates a missing state file once (first creator wins). When entries exist already (the file was
    /// deleted under a used directory), usage is unknown until the next scan.
    private func create() throws(YCache.Error) {
        let entriesExist: Bool
        if case .success(let folders) = Syscall.listDirectory(Directory.entriesFolder, in: root) {
            entriesExist = !folders.isEmpty
        } else {
            entriesExist = false
        }
        _ = try Directory.createOnce(
            Directory.stateFile, in: root, bytes: SharedState.header(recount: entriesExist), mode: sharing.fileMode,
            rootPath: rootPath, size: SharedState.size)
    }

    /// The first words of a new state file: magic, version, usage 0, a fresh instance id, global epoch 0,
    /// payload bytes 0, and the accounting flags (counted, unless `recount`).
    static func header(recount: Bool) -> [UInt8] {
        var instance: UInt64 = 0
        while instance == 0 {
            instance = Syscall.randomBytes(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        }
        var bytes = [UInt8](repeating: 0, count: 64)
        bytes.withUnsafeMutableBytes {
            $0.storeBytes(of: magic, toByteOffset: 0, as: UInt64.self)
            $0.storeBytes(of: version.littleEndian, toByteOffset: versionOffset, as: UInt64.self)
            $0.storeBytes(of: instance, toByteOffset: instanceOffset, as: UInt64.self)
            $0.storeBytes(
                of: (recount ? 0 : countedFlag).littleEndian, toByteOffset: accountingFlagsOffset, as: UInt64.self)
        }
        return bytes
    }

    /// Creates a missing state file or replaces a damaged one, serialized across processes by a file lock
    /// on the root (repairers in this process are already serialized by `current`). Under the lock it
    /// looks again: a file another process made or repaired meanwhile is used as it is. A missing file
    /// is created once (`linkat`, first creator wins). A damaged one is marked dead first (`pwrite` of
    /// `deadMarker` at offset 0: never a store through a mapping, which a truncated file would fault on,
    /// and never a truncation; on an empty file it makes word 0 readable again), so every process still
    /// mapping it switches; then a complete new file made in `tmp/` is renamed over the path (a folder
    /// there is moved into `tmp/` first, which leaves the path empty for a moment: creators take the
    /// lock too, so none links a file there that the rename would then replace unseen). Returns nil
    /// when the path changed meanwhile (look again).
    private func repair() throws(YCache.Error) -> StateMapping? {
        // A forked child must not take (and release) locks on descriptors it inherited (I7).
        let owned = Syscall.processID == ownerProcessID
        let lock = owned ? try lockForRepair() : nil
        let repaired = Result { () throws(YCache.Error) in try repairLocked(owned: owned) }
        if let lock { lock.release() }
        return try repaired.get()
    }

    /// The repair itself, with the repair lock held (or where it cannot be had).
    private func repairLocked(owned: Bool) throws(YCache.Error) -> StateMapping? {
        let damage: (reason: String, descriptor: Int32?, isDirectory: Bool)
        switch try inspect() {
        case .good(let mapping):
            return mapping  // made or repaired by someone else while we waited
        case .missing:
            try create()
            guard case .good(let mapping) = try inspect() else { return nil }
            return mapping
        case .damaged(let reason, let descriptor, let isDirectory):
            damage = (reason, descriptor, isDirectory)
        }
        guard owned else {
            if let descriptor = damage.descriptor { Syscall.close(descriptor) }
            throw .storageUnavailable(path: rootPath, reason: "the state file needs repair, in a forked process")
        }
        if let descriptor = damage.descriptor {
            var dead = SharedState.deadMarker
            _ = withUnsafeBytes(of: &dead) { Syscall.write(descriptor, $0, at: 0) }
            Syscall.close(descriptor)
        }
        if damage.isDirectory {
            // Never removed (it may hold someone's files): moved aside, where trim leaves folders alone.
            let aside = Directory.stagingFolder + "/state-" + Directory.randomHex(byteCount: 8) + ".damaged"
            if case .failure(let error) = Syscall.rename(Directory.stateFile, in: root, to: aside, in: root),
                error.errno != .noSuchFile
            {
                throw .storageUnavailable(path: rootPath, reason: "cannot move the folder at state aside: \(error)")
            }
        }
        try Directory.createReplacing(
            Directory.stateFile, in: root, bytes: SharedState.header(recount: true), mode: sharing.fileMode,
            folderMode: sharing.directoryMode, rootPath: rootPath, size: SharedState.size)
        onRepair()
        guard case .good(let mapping) = try inspect() else { return nil }
        return mapping
    }

    /// The repair lock: an exclusive file lock on a descriptor of the root opened for it (repairers in
    /// other processes, and other caches of this process, lock their own), without blocking a thread of
    /// the cooperative pool for long: a repair holds it for a few system calls, so this polls without
    /// waiting, pausing between attempts, for at most `Policy.stateRepairLockWait` (a repairer stopped or
    /// hung inside those calls), then throws. Nil (go on unlocked) where the filesystem cannot lock a
    /// folder (an allowed network filesystem): there two repairers at one moment could each rename a file
    /// in, and the processes of the loser notice within `Policy.rootCheckInterval` (`verifyPath`).
    private func lockForRepair() throws(YCache.Error) -> FileLock? {
        let fd: Int32
        switch Syscall.open(".", in: root, flags: [.directory]) {
        case .success(let value): fd = value
        case .failure(let error):
            throw .storageUnavailable(path: rootPath, reason: "cannot open the root to lock it for a repair: \(error)")
        }
        let deadline = Syscall.monotonicNanoseconds + Policy.stateRepairLockWait.nanoseconds
        var pause = Policy.stateRepairLockPause.first.nanoseconds
        while true {
            switch FileLock.attempt(.exclusive, on: fd, ownerProcessID: ownerProcessID) {
            case .locked(let lock):
                return lock
            case .busy:
                guard Syscall.monotonicNanoseconds < deadline else {
                    Syscall.close(fd)
                    throw .storageUnavailable(
                        path: rootPath, reason: "another process has been repairing the state file for too long")
                }
                usleep(UInt32(pause / 1000))
                pause = min(pause * 2, Policy.stateRepairLockPause.longest.nanoseconds)
            case .failed:
                Syscall.close(fd)
                return nil
            }
        }
    }

    /// The file in use (device and inode), for tests.
    var fileInUse: FileStatus? { current.withLock { $0.mapping?.file } }
}

/// `Policy.stateReopenInterval` in nanoseconds, read once.
private let stateReopenInterval = Policy.stateReopenInterval.nanoseconds
