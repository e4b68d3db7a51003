// The `state` file every process maps shared: the directory's usage counters (I9: payload bytes, which
// the budget counts, and allocated bytes), the time of the last publish (I11), the removal epochs (I10)
// and the shared counters (SharedState+Counters.swift). Words are only touched through the C atomics, so
// processes never tear each other's updates.
// Created once (staging file + linkat, first creator wins) and never truncated by the cache. A damaged
// one (wrong size, type, magic or version, truncated or zeroed under the mappings, replaced or deleted)
// is repaired by the first process that notices (I14): everything in it can be rebuilt, and a new file
// with a new instance id makes every in-memory stamp taken from the old one stale at once.

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
    static let magic: UInt64 = UInt64(littleEndian: Array("YSHSTATE".utf8).withUnsafeBytes { $0.load(as: UInt64.self) })
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
    /// reopen or repair is relative to it, and repairers across processes serialize on its `flock`.
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
        Syscall.close(root)  // never locked outside `repair`, which unlocks before returning (I7)
    }

    // MARK: The mapping in use

    /// The live mapping, after switching away from a dead one; nil when no good state file can be had
    /// now (the switch failed less than a second ago, or fails now).
    private func live() -> StateMapping? {
        if let mapping = current.withLock({ $0.mapping }), mapping.isLive { return mapping }
        return switchFile()
    }

    /// Replaces the mapping in use (dead, or gone after a failure) by one of the file the path names now,
    /// repairing it when damaged. One thread at a time; the others wait here and take its result.
    private func switchFile() -> StateMapping? {
        current.withLock { current -> StateMapping? in
            if let mapping = current.mapping, mapping.isLive { return mapping }  // another thread switched
            let now = Syscall.monotonicNanoseconds
            if let failure = current.failure, now - failure.at < Policy.stateReopenInterval { return nil }
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
    private var unavailableError: YCache.Error {
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
        for _ in 0..<4 {
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
        case .failure(let error) where SharedState.foreignFileErrors.contains(error.errno):
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

    /// errnos of `open(2)` that mean something other than our file sits at the path.
    private static let foreignFileErrors: Set<Errno> = [
        .symlinkLoop, .isDirectory, .permissionDenied, .operationNotPermitted,
        Errno(rawValue: 6),  // ENXIO: a socket
        Errno(rawValue: 95),  // EOPNOTSUPP
    ]

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

    /// Creates a missing state file or replaces a damaged one, serialized across processes by `flock`
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
        let locked: Bool
        if owned { locked = try lockForRepair() } else { locked = false }
        defer { if locked { Syscall.unlock(root) } }  // I7: LOCK_UN (the descriptor stays open)
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

    /// `flock(LOCK_EX)` on the root descriptor, without blocking a thread of the cooperative pool for
    /// long: a repair holds it for a few system calls, so this polls `LOCK_NB` with short sleeps, for
    /// at most `Policy.stateRepairLockWait` (a repairer stopped or hung inside those calls), then
    /// throws. False (go on unlocked) where the filesystem cannot lock a folder (an allowed network
    /// filesystem): there two repairers at one moment could each rename a file in, and the processes
    /// of the loser notice within `Policy.rootCheckInterval` (`verifyPath`).
    private func lockForRepair() throws(YCache.Error) -> Bool {
        let deadline = Syscall.monotonicNanoseconds + Policy.stateRepairLockWait
        var pause: UInt32 = 100  // microseconds
        while true {
            switch Syscall.lock(root, exclusive: true, wait: false) {
            case .success: return true
            case .failure(let error) where error.errno == .wouldBlock:
                guard Syscall.monotonicNanoseconds < deadline else {
                    throw .storageUnavailable(
                        path: rootPath, reason: "another process has been repairing the state file for too long")
                }
                usleep(pause)
                pause = min(pause * 2, 10_000)
            case .failure:
                return false
            }
        }
    }

    // MARK: Usage (I9)

    /// Allocated bytes of all entries, as last adjusted (never negative); 0 while no state file can be had.
    var usage: Int64 {
        guard let mapping = live() else { return 0 }
        return max(0, mapping.loadSigned(SharedState.usageOffset))
    }

    /// Adds `delta` (may be negative) to the allocated-bytes counter. Lost if the file dies meanwhile: its
    /// replacement starts uncounted.
    func adjustUsage(by delta: Int64) {
        guard delta != 0, let mapping = live() else { return }
        mapping.adjust(SharedState.usageOffset, by: delta)
    }

    /// Payload bytes of all entries, as last adjusted (never negative): what the storage budget counts.
    var payloadBytes: Int64 {
        guard let mapping = live() else { return 0 }
        return max(0, mapping.loadSigned(SharedState.payloadOffset))
    }

    /// Adds `delta` (may be negative) to the payload-bytes counter.
    func adjustPayloadBytes(by delta: Int64) {
        guard delta != 0, let mapping = live() else { return }
        mapping.adjust(SharedState.payloadOffset, by: delta)
    }

    /// Whether a full scan has counted the usage words since the file was made. A state file made by 0.1
    /// (which had no payload counter) or by a repair (I14) holds 0 there; until a trim scan counts them,
    /// the counters are not trusted and the next budgeted write recounts (I9). True while no state file
    /// can be had (there is nothing to recount into).
    var isPayloadCounted: Bool {
        guard let mapping = live() else { return true }
        return mapping.load(SharedState.accountingFlagsOffset) & SharedState.countedFlag != 0
    }

    /// Records that a scan counted the usage words.
    func markPayloadCounted() {
        guard let mapping = live() else { return }
        mapping.setFlag(SharedState.countedFlag, at: SharedState.accountingFlagsOffset)
    }

    // MARK: Last publish (I11)

    /// The largest mtime any publish gave an entry (nanoseconds since 1970; 0 in a state file made by 0.1
    /// or a repair). An entry last used before this looks older to trim than something published since,
    /// so a hit on it touches (I11).
    var lastPublishNanoseconds: Int64 { live()?.loadSigned(SharedState.lastPublishOffset) ?? 0 }

    /// Raises the last-publish time to `nanoseconds`. It is lowered only when it lies more than the touch
    /// interval ahead (left by a clock that jumped back), so that it cannot keep every later hit touching.
    func notePublish(atNanoseconds nanoseconds: Int64) {
        guard let mapping = live() else { return }
        mapping.raise(SharedState.lastPublishOffset, to: nanoseconds)
    }

    // MARK: The live mapping, for the shared counters

    /// The mapping in use (retained by the caller while it touches words of it), or nil.
    var liveMapping: StateMapping? { live() }

    // MARK: Epochs (I10)

    /// The epochs an in-memory entry is valid for, and which state file they were read from.
    struct Stamp: Equatable, Sendable, CustomStringConvertible {
        var instance: UInt64
        var global: UInt64
        var namespace: UInt64
        var key: UInt64
        /// False when no state file could be had: such a stamp matches nothing, not even itself.
        var isAvailable = true

        static let unavailable = Stamp(instance: 0, global: 0, namespace: 0, key: 0, isAvailable: false)

        /// Whether an item stamped `self` is still valid under the current stamp `other`.
        func matches(_ other: Stamp) -> Bool {
            isAvailable && other.isAvailable && instance == other.instance && global == other.global
                && namespace == other.namespace && key == other.key
        }

        var description: String {
            isAvailable ? "\(instance):\(global)/\(namespace)/\(key)" : "unavailable"
        }
    }

    /// Slots of a key: where its namespace and key epochs live.
    struct Slots: Equatable, Sendable {
        var namespace: Int
        var key: Int
    }

    /// The slots of a key. The namespace slot uses CRC32C of the namespace (stable across processes and
    /// cheap on every lookup); the key slot uses the key's SHA-256 digest, already at hand.
    static func slots(namespace: String, keyDigest: SHA256Digest) -> Slots {
        Slots(namespace: namespaceSlot(namespace), key: Int(keyDigest.prefixWord % UInt64(keySlots)))
    }

    static func namespaceSlot(_ namespace: String) -> Int {
        var namespace = namespace
        let crc = namespace.withUTF8 { CRC32C.checksum(UnsafeRawBufferPointer($0)) }
        return Int(crc % UInt32(namespaceSlots))
    }

    /// The current epochs of `slots`. A stamp is returned only if its file was still live after the
    /// epochs were read, so it never mixes a dead file's words with a live file's instance id.
    func stamp(_ slots: Slots) -> Stamp {
        for _ in 0..<4 {
            guard let mapping = live() else { break }
            let stamp = Stamp(
                instance: mapping.instance, global: mapping.load(SharedState.globalEpochOffset),
                namespace: mapping.load(SharedState.namespaceOffset + 8 * slots.namespace),
                key: mapping.load(SharedState.keyOffset + 8 * slots.key))
            if mapping.isLive { return stamp }
        }
        return .unavailable
    }

    /// Bumps the key slot's epoch. Throws when no state file can be had (the removal could not be
    /// announced to other processes).
    func bumpKey(_ slots: Slots) throws(YCache.Error) { try bump(SharedState.keyOffset + 8 * slots.key) }

    /// Bumps the key slot's epoch like `bumpKey(_:)` and returns the stamp right after that bump, when
    /// nobody else bumped any epoch of `slots` since `expected` was read (in the same file); nil otherwise.
    /// A writer stamps its own memory item with the result; with nil it falls back to `expected`, which
    /// no longer matches, so the item is re-read instead of outliving a removal that ran between
    /// `expected` and the bump (I10).
    func bumpKey(_ slots: Slots, expecting expected: Stamp) throws(YCache.Error) -> Stamp? {
        let offset = SharedState.keyOffset + 8 * slots.key
        var result: Stamp?
        var first = true
        for _ in 0..<4 {
            guard let mapping = live() else { throw unavailableError }
            let previous = mapping.fetchIncrement(offset)
            if first, expected.isAvailable, mapping.instance == expected.instance, previous == expected.key,
                mapping.load(SharedState.globalEpochOffset) == expected.global,
                mapping.load(SharedState.namespaceOffset + 8 * slots.namespace) == expected.namespace
            {
                result = Stamp(
                    instance: expected.instance, global: expected.global, namespace: expected.namespace,
                    key: previous &+ 1)
            }
            first = false
            if mapping.isLive { return result }
            result = nil  // the file died under the bump: bumped again in its successor, our stamp is stale
        }
        throw unavailableError
    }
    func bumpNamespace(slot: Int) throws(YCache.Error) { try bump(SharedState.namespaceOffset + 8 * slot) }
    func bumpGlobal() throws(YCache.Error) { try bump(SharedState.globalEpochOffset) }

    /// Increments the word at `offset` in the live file, and again in the file everyone switched to if
    /// this one died while the increment landed (marked dead by a repairer, or zeroed by the SIGBUS guard
    /// when the increment itself faulted on a truncated page): a bump never ends up only in a file
    /// nobody reads.
    ///
    /// Why no process keeps a removed entry in memory across a repair (I10, I14), given that a removal
    /// is bump, unlink, bump, each bump starting with the magic check of `live()`: a value in memory
    /// carries the stamp (instance id and epochs) it was read under, a stamp is only returned when its
    /// file was still live after the epochs were read (`stamp`), and a lookup compares it with a stamp of
    /// the file live at lookup time. A value stamped from the old file never matches a stamp of the new
    /// one (another instance id), so only values stamped from the new file matter, and those were stamped
    /// after the repairer marked the old file dead (it does so before its rename). If the remover's
    /// second bump found the old file still live, that mark, the stamp and the read after it all came
    /// after the remover's unlink: the entry was gone. If it found the old file dead, it switched first
    /// and bumped the new file after the unlink, so the value's key epoch no longer matches. (A state
    /// file someone else renamed over the path or deleted cannot be marked dead by a repairer, who never
    /// sees it: its holders notice at their next write and within `Policy.rootCheckInterval` of lookups,
    /// `verifyPath`.)
    private func bump(_ offset: Int) throws(YCache.Error) {
        for _ in 0..<4 {
            guard let mapping = live() else { throw unavailableError }
            mapping.increment(offset)
            if mapping.isLive { return }
        }
        throw unavailableError
    }

    // MARK: Tests

    /// The file in use (device and inode), for tests.
    var fileInUse: FileStatus? { current.withLock { $0.mapping?.file } }

    /// Clears the accounting flags, as a state file made by 0.1 has them (tests only).
    func clearAccountingFlagsForTesting() {
        live()?.store(SharedState.accountingFlagsOffset, 0)
    }
}

/// One mapping of one state file (one inode), with the descriptor it was mapped from. The descriptor
/// stays open so a process can mark this very inode dead (`pwrite`) when the path has been made to name
/// another file (`SharedState.verifyPath`).
///
/// Safe to share across tasks (`@unchecked Sendable`): the stored properties are immutable lets, except
/// `descriptor`, which only `takeDescriptor` writes, before the object is shared with anyone; the mapping
/// is never unmapped while the object lives (munmap runs in deinit) and is only read or written through
/// sequentially consistent C atomics, which are safe from any thread and process. After the SIGBUS guard
/// replaced it with zeros, it is private anonymous memory of the same size: still safe to access.
final class StateMapping: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    private(set) var descriptor: Int32
    /// The file's status when it was opened (its device and inode identify it).
    let file: FileStatus
    /// The instance id read at open (0 in files of older builds: a valid id).
    let instance: UInt64
    private let guarded: Bool

    init(base: UnsafeMutableRawPointer, descriptor: Int32, file: FileStatus, guarded: Bool) {
        self.base = base
        self.descriptor = descriptor
        self.file = file
        self.guarded = guarded
        instance = ysh_atomic_load_u64((base + SharedState.instanceOffset).assumingMemoryBound(to: UInt64.self))
    }

    deinit {
        if guarded { Syscall.unguardMapping(base) }
        Syscall.unmap(base, length: SharedState.size)
        if descriptor >= 0 { Syscall.close(descriptor) }
    }

    /// Hands the descriptor to the caller (who closes it); for a mapping that is dropped at once.
    func takeDescriptor() -> Int32 {
        defer { descriptor = -1 }
        return descriptor
    }

    /// Whether word 0 still holds the magic: false once any process marked the file dead, or it was
    /// zeroed, or the SIGBUS guard replaced this mapping.
    var isLive: Bool { load(0) == SharedState.magic }

    /// Marks this inode dead for every process mapping it (`pwrite`, never through the mapping).
    func markDead() {
        guard descriptor >= 0 else { return }
        var dead = SharedState.deadMarker
        _ = withUnsafeBytes(of: &dead) { Syscall.write(descriptor, $0, at: 0) }
    }

    func load(_ offset: Int) -> UInt64 {
        ysh_atomic_load_u64((base + offset).assumingMemoryBound(to: UInt64.self))
    }

    func loadSigned(_ offset: Int) -> Int64 {
        ysh_atomic_load_i64((base + offset).assumingMemoryBound(to: Int64.self))
    }

    func store(_ offset: Int, _ value: UInt64) {
        ysh_atomic_store_u64((base + offset).assumingMemoryBound(to: UInt64.self), value)
    }

    func increment(_ offset: Int) {
        _ = fetchIncrement(offset)
    }

    /// Adds one to the word at `offset`; returns its previous value.
    func fetchIncrement(_ offset: Int) -> UInt64 {
        ysh_atomic_fetch_add_u64((base + offset).assumingMemoryBound(to: UInt64.self), 1)
    }

    /// Adds `delta` to the signed counter at `offset`, clamping a result below zero to 0.
    func adjust(_ offset: Int, by delta: Int64) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        let old = ysh_atomic_fetch_add_i64(word, delta)
        if old &+ delta < 0 {
            // Drift below zero (an unlink counted twice): clamp, the next trim scan recounts.
            _ = ysh_atomic_cas_i64(word, old &+ delta, 0)
        }
    }

    /// Sets `flag` in the word at `offset` (compare-and-swap).
    func setFlag(_ flag: UInt64, at offset: Int) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            if UInt64(bitPattern: old) & flag != 0 { return }
            if ysh_atomic_cas_i64(word, old, Int64(bitPattern: UInt64(bitPattern: old) | flag)) != 0 { return }
        }
    }

    /// Raises the signed word at `offset` to `value`; lowers it only when it lies more than
    /// `Policy.touchInterval` above `value` (a clock that jumped back).
    func raise(_ offset: Int, to value: Int64) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            if old >= value && old - value < Policy.touchInterval { return }
            if ysh_atomic_cas_i64(word, old, value) != 0 { return }
        }
    }
}
