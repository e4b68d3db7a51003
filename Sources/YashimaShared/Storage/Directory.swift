// The storage root: opening it (creating it if needed, checking the filesystem and the layout version),
// and the only place that makes paths inside it. Paths are typed (`EntryPath`, `LockPath`) so a lock path
// can never be passed where an entry path is expected. Relies on I2, I12, I13. Does no entry I/O.
// Its own folders are repaired, never followed: a symlink where one should be is removed (the link, not
// its target) and replaced by a real folder.

import Synchronization

/// How files in the storage directory are shared between users.
///
/// Modes are set explicitly with `fchmod` on every folder and file the cache creates (entries, staging
/// files, lock files, the state and layout files), so the process umask never matters. At open, the root
/// must be owned by this user (in `.groupShared`: or by a user of its group, when this process is in
/// that group) and must not be writable by others; otherwise `YCache.Error.insecureStorageDirectory`
/// names the problem.
///
/// An app (user `app`) and its helper (user `helper`), both in group `thumbs`, sharing one cache:
///
/// ```swift
/// // Once, as an administrator:  install -d -m 2770 -o app -g thumbs /var/cache/thumbs
/// let cache = YCache(
///     storageDirectory: URL(fileURLWithPath: "/var/cache/thumbs"), sharing: .groupShared)
/// ```
///
/// Both processes pass `.groupShared`; everything either creates is group `thumbs` (inherited through
/// the setgid folders) and readable and writable by the other.
public enum StorageSharingMode: Sendable, Equatable {
    /// Only the owning user: directories 0700, files 0600 (the default).
    case privateToUser
    /// Every member of the directory's group (an app and a helper running as different users):
    /// directories setgid 2770, files 0660.
    case groupShared

    var directoryMode: UInt32 { self == .privateToUser ? 0o700 : 0o2770 }
    var fileMode: UInt32 { self == .privateToUser ? 0o600 : 0o660 }
}

/// A path of an entry file, relative to the root.
struct EntryPath: Hashable, Sendable {
    let fanOut: String  // "entries/ab"
    let relative: String  // "entries/ab/<hex>.entry"
}

/// A path of a key's lock file, relative to the root.
struct LockPath: Hashable, Sendable {
    let fanOut: String  // "locks/ab"
    let relative: String  // "locks/ab/<stableIdentifier>.lock"
}

/// An open storage root. The descriptor stays open for the life of the object; every path operation is
/// relative to it, and no symlink is followed in any component below it (openat2 with
/// RESOLVE_NO_SYMLINKS for opens; the other calls resolve their folder the same way, see CFileLock.h).
final class Directory: Sendable {
    static let entriesFolder = "entries"
    static let locksFolder = "locks"
    static let stagingFolder = "tmp"
    static let layoutFile = "layout"
    static let stateFile = "state"
    static let trimLockFile = "trim.lock"
    static let entrySuffix = ".entry"
    static let lockSuffix = ".lock"
    static let stagingSuffix = ".staging"

    let path: String
    let descriptor: Int32
    let sharing: StorageSharingMode
    let state: SharedState
    /// The process that opened this root. A forked child has another pid (I7).
    let ownerProcessID: Int32
    /// Name of a network or virtual filesystem the root sits on, when the caller allowed it (no mmap then).
    let networkFilesystemName: String?
    /// The root directory's identity (device, inode) when it was opened, to notice a replaced root (I13).
    let rootIdentity: FileStatus
    /// CLOCK_MONOTONIC of the last check that `path` still names `rootIdentity`.
    private let rootCheckedAt: Atomic<Int64>
    /// Called once for each damaged auxiliary file (`state`, `trim.lock`) this process replaced (I14).
    let onRepair: @Sendable () -> Void

    var fileMode: UInt32 { sharing.fileMode }
    var directoryMode: UInt32 { sharing.directoryMode }

    /// Opens (creating when missing) the storage root at `path`.
    /// - Parameters:
    ///   - ownerProcessID: The process the handles belong to (I7); only tests pass another one.
    ///   - onRepair: Called once for each damaged auxiliary file this handle replaces (I14).
    /// - Throws: `YCache.Error` naming the problem: a file where the folder should be, no permission,
    ///   an insecure owner or mode, a network filesystem (unless allowed), an unknown newer layout.
    init(
        path: String, sharing: StorageSharingMode, allowNetworkFilesystem: Bool,
        ownerProcessID: Int32 = Syscall.processID, onRepair: @escaping @Sendable () -> Void = {}
    ) throws(YCache.Error) {
        self.path = path
        self.sharing = sharing
        self.ownerProcessID = ownerProcessID
        self.onRepair = onRepair
        let fd = try Directory.openOrCreateRoot(path, mode: sharing.directoryMode)
        var succeeded = false
        defer { if !succeeded { Syscall.close(fd) } }

        let filesystem = try Directory.checkFilesystem(fd, path: path, allowNetwork: allowNetworkFilesystem)
        networkFilesystemName = filesystem
        rootIdentity = try Directory.checkOwnership(fd, path: path, sharing: sharing)
        rootCheckedAt = Atomic(Syscall.monotonicNanoseconds)
        try Directory.refuseUnsupportedLayout(fd, path: path)  // before creating anything in it
        for folder in [Directory.entriesFolder, Directory.locksFolder, Directory.stagingFolder] {
            try Directory.ensureFolder(folder, in: fd, mode: sharing.directoryMode, rootPath: path)
        }
        // Fan-out folders are made when first needed (`ensureFanOut`): making all 512 here cost 0.15–0.7 s
        // on ext4 (Benchmarks/repro/folder_cost.py), on the thread of whoever opened a fresh directory first.
        try Directory.ensureLayout(fd, path: path, fileMode: sharing.fileMode)
        state = try SharedState(
            rootDescriptor: fd, rootPath: path, sharing: sharing, ownerProcessID: ownerProcessID, onRepair: onRepair)
        descriptor = fd
        succeeded = true
    }

    deinit {
        Syscall.close(descriptor)
    }

    // MARK: Still ours? (I7, I13)

    /// Whether this process opened the root (false in a forked child, which must reopen, I7).
    var isOwnedByThisProcess: Bool { ownerProcessID == Syscall.processID }

    /// Whether the root path still names the directory this object holds open (I13): false when the root
    /// was deleted, renamed away or replaced. One `stat(2)` of the path. Every caller is about to write
    /// (or checks at the root-check interval), so this also looks whether `state` still names the state
    /// file in use, and switches when it does not (I14): one `fstatat(2)` more.
    func isStillNamedByPath() -> Bool {
        guard case .success(let current) = Syscall.status(ofRootPath: path),
            current.isDirectory && current.isSameFile(as: rootIdentity)
        else { return false }
        state.verifyPath()
        return true
    }

    /// Whether this handle may still be used: owned by this process and, when `verifyingRoot` or at most
    /// once per `Policy.rootCheckInterval` otherwise, still named by the root path (I13).
    func isUsable(verifyingRoot: Bool, now: Int64) -> Bool {
        guard isOwnedByThisProcess else { return false }
        if !verifyingRoot && now - rootCheckedAt.load(ordering: .relaxed) < Policy.rootCheckInterval { return true }
        rootCheckedAt.store(now, ordering: .relaxed)
        return isStillNamedByPath()
    }

    // MARK: Paths (the only place paths are made)

    func entryPath(for identity: EntryIdentity) -> EntryPath {
        let hex = identity.hex
        let fanOut = Directory.entriesFolder + "/" + hex.prefix(2)
        return EntryPath(fanOut: fanOut, relative: fanOut + "/" + hex + Directory.entrySuffix)
    }

    func lockPath(forKeyDigest digest: SHA256Digest) -> LockPath {
        let hex = digest.hex
        let fanOut = Directory.locksFolder + "/" + hex.prefix(2)
        return LockPath(fanOut: fanOut, relative: fanOut + "/" + hex + Directory.lockSuffix)
    }

    /// A fresh, unpredictable staging-file path (I2).
    func newStagingPath() -> String {
        Directory.stagingFolder + "/" + Directory.randomHex(byteCount: 12) + Directory.stagingSuffix
    }

    /// `byteCount` random bytes as lowercase hex, two digits each: unpredictable names for staging files
    /// and folders (I2).
    static func randomHex(byteCount: Int) -> String {
        var name = ""
        for byte in Syscall.randomBytes(byteCount) {
            name.append(hexDigits[Int(byte >> 4)])
            name.append(hexDigits[Int(byte & 0xF)])
        }
        return name
    }

    /// Opens lock file `relative` for reading and writing, creating it when missing; never follows a
    /// symlink. In group-shared mode a file this call creates is returned already locked (`LOCK_EX`), so
    /// no other process sees it before its creator holds it; callers lock it exclusively next anyway,
    /// which is then immediate.
    ///
    /// In group-shared mode a new file appears with exactly `fileMode` (I6): one made in place with
    /// `O_CREAT` has its creator's umasked mode (0640 under the usual umask 022) until its `fchmod`, and
    /// another user opening it in that moment gets EACCES and generates without the lock. (Measured before
    /// this: two users missing the same 2,000 keys together generated 40–70% of them twice.) So the file
    /// is made in `tmp/`, given its mode, locked and linked into place; `linkat` fails on an existing
    /// name, and then that file is opened. In private mode every process is the owner, whom no usual
    /// umask shuts out, and the file is created in place.
    func openLockFile(_ relative: String) -> Result<Int32, SystemCallError> {
        guard sharing == .groupShared else {
            return Syscall.open(relative, in: descriptor, flags: [.readWrite, .create], mode: fileMode)
        }
        for _ in 0..<4 {
            switch Syscall.open(relative, in: descriptor, flags: [.readWrite]) {
            case .success(let fd): return .success(fd)
            case .failure(let error) where error.errno == .noSuchFile: break
            case .failure(let error): return .failure(error)
            }
            let staging = newStagingPath()
            var opened = Syscall.open(
                staging, in: descriptor, flags: [.readWrite, .create, .exclusive], mode: fileMode)
            if case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced,
                case .success = repairStagingFolder()
            {
                opened = Syscall.open(
                    staging, in: descriptor, flags: [.readWrite, .create, .exclusive], mode: fileMode)
            }
            let fd: Int32
            switch opened {
            case .success(let value): fd = value
            case .failure(let error): return .failure(error)
            }
            let linked = Syscall.setMode(fd, fileMode)
                .flatMap { Syscall.lock(fd, exclusive: true, wait: false) }
                .flatMap { Syscall.link(staging, in: descriptor, to: relative, in: descriptor) }
            _ = Syscall.unlink(staging, in: descriptor)
            if case .success = linked { return .success(fd) }
            Syscall.unlock(fd)  // I7: LOCK_UN before close
            Syscall.close(fd)
            guard case .failure(let error) = linked, error.errno == .fileExists else { return linked.map { fd } }
            // Someone else linked theirs first: open that one.
        }
        return .failure(SystemCallError(call: "linkat", errno: .fileExists))
    }

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
        for _ in 0..<4 {
            switch Syscall.status(of: relative, in: root) {
            case .success(let status) where status.isDirectory:
                return .success(())
            case .success(let status):
                guard status.isSymbolicLink || replacingFiles else {
                    return .failure(SystemCallError(call: "fstatat", errno: .notDirectory))
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
        return .failure(SystemCallError(call: "mkdirat", errno: .fileExists))
    }

    /// Creates folder `relative` with exactly `mode`, whatever the umask, so that no process ever sees it
    /// with another mode: it is made under a staging name in the root, given its mode (mkdirat applies
    /// the umask, and setgid must be set explicitly), then moved into place without replacing anything.
    /// Another user of a group-shared directory could not write into a folder caught with its umasked
    /// mode, and a process killed between mkdir and chmod would leave it that way. EEXIST: someone else
    /// made it. (A plain rename would replace a folder another process had just made and was about to
    /// create its lock file in; that process's create then fails, and it generates without the lock.)
    private static func makeDirectoryWithExactMode(
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

    // MARK: Opening

    private static func openOrCreateRoot(_ path: String, mode: UInt32) throws(YCache.Error) -> Int32 {
        switch Syscall.openRoot(path) {
        case .success(let fd): return fd
        case .failure(let error) where error.errno == .noSuchFile:
            try createDirectoryChain(path, mode: mode)
            switch Syscall.openRoot(path) {
            case .success(let fd): return fd
            case .failure(let error): throw .storageUnavailable(path: path, reason: "cannot open: \(error)")
            }
        case .failure(let error) where error.errno == .notDirectory:
            throw .storageUnavailable(path: path, reason: "the path (or a parent) is a file, not a directory")
        case .failure(let error):
            throw .storageUnavailable(path: path, reason: "cannot open: \(error)")
        }
    }

    /// mkdir -p of the root path. Every folder it creates appears with exactly `mode` (made under a staging
    /// name in its parent, given its mode, moved into place): in group-shared mode another user's process
    /// that found the root, or a parent it must create the next folder in, with the creator's umasked mode
    /// (02750 under umask 022) could not write into it. Measured with the stress runner's `--users` mode:
    /// a worker failed to open the directory ("cannot create entries: EACCES") while another was between
    /// its mkdir and chmod. Concurrent creators are fine (someone else's folder is used).
    private static func createDirectoryChain(_ path: String, mode: UInt32) throws(YCache.Error) {
        var parent = path.hasPrefix("/") ? "/" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            let name = String(component)
            let prefix = parent == "/" ? "/" + name : parent + "/" + name
            defer { parent = prefix }
            if case .success(let fd) = Syscall.openDirectoryPath(prefix) {
                Syscall.close(fd)
                continue
            }
            let parentDescriptor: Int32
            switch Syscall.openDirectoryPath(parent) {
            case .success(let fd): parentDescriptor = fd
            case .failure(let error):
                throw .storageUnavailable(path: path, reason: "cannot open \(parent): \(error)")
            }
            defer { Syscall.close(parentDescriptor) }
            switch makeDirectoryWithExactMode(name, in: parentDescriptor, mode: mode) {
            case .success: continue
            case .failure(let error) where error.errno == .fileExists || error.errno == .directoryNotEmpty:
                continue  // someone else made it (a file there fails the next open, naming it)
            case .failure(let error) where error.errno == .notDirectory:
                throw .storageUnavailable(path: path, reason: "\(prefix) is a file, not a directory")
            case .failure(let error):
                throw .storageUnavailable(path: path, reason: "cannot create \(prefix): \(error)")
            }
        }
    }

    /// A top-level folder (`entries`, `locks`, `tmp`): created when missing, a symlink there replaced;
    /// a file or anything else there is an error naming it.
    private static func ensureFolder(
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

    /// Known network and virtual filesystems (statfs f_type), refused by default (P11).
    static let networkFilesystems: [Int64: String] = [
        0x6969: "NFS", 0x517B: "SMB", 0xFF53_4D42: "CIFS", 0xFE53_4D42: "SMB2", 0x6573_5546: "FUSE",
        0x0102_1997: "9p", 0x00C3_6400: "Ceph", 0x5346_414F: "AFS", 0x0BD0_0BD0: "Lustre",
        0x4750_4653: "GPFS", 0x0133_7021: "OCFS2",
    ]

    private static func checkFilesystem(_ fd: Int32, path: String, allowNetwork: Bool) throws(YCache.Error)
        -> String?
    {
        guard case .success(let type) = Syscall.filesystemType(fd) else { return nil }
        guard let name = networkFilesystems[type] else { return nil }
        if allowNetwork { return name }
        throw .networkFilesystem(path: path, filesystem: name)
    }

    /// Checks the root (P12): a directory, not writable by other users, owned by this user (in the
    /// group-shared mode: or by a user of its group, when this process is in that group). Root gets no
    /// exemption: a root-run process must not use a directory another user controls. Returns its status.
    private static func checkOwnership(_ fd: Int32, path: String, sharing: StorageSharingMode) throws(YCache.Error)
        -> FileStatus
    {
        let status: FileStatus
        switch Syscall.status(of: fd) {
        case .success(let value): status = value
        case .failure(let error): throw .storageUnavailable(path: path, reason: "cannot inspect: \(error)")
        }
        guard status.isDirectory else {
            throw .storageUnavailable(path: path, reason: "not a directory")
        }
        // Writable by others: anyone could plant entries (P12). Group-writable only in group-shared mode.
        if status.permissionBits & 0o002 != 0 {
            throw .insecureStorageDirectory(path: path, reason: "writable by other users (mode \(octal(status.mode)))")
        }
        if sharing == .privateToUser, status.permissionBits & 0o020 != 0 {
            throw .insecureStorageDirectory(
                path: path, reason: "group-writable (mode \(octal(status.mode))); use the group-shared mode")
        }
        let me = Syscall.effectiveUserID
        if status.owner != me {
            switch sharing {
            case .privateToUser:
                throw .insecureStorageDirectory(
                    path: path, reason: "owned by uid \(status.owner), not this user (uid \(me))")
            case .groupShared where !Syscall.isMember(ofGroup: status.group):
                throw .insecureStorageDirectory(
                    path: path,
                    reason: "owned by uid \(status.owner) and group \(status.group), and this process "
                        + "(uid \(me)) is not in that group")
            case .groupShared:
                break
            }
        }
        return status
    }

    /// Writes `layout` once (first creator wins, I12) and checks the version found.
    private static func ensureLayout(_ root: Int32, path: String, fileMode: UInt32) throws(YCache.Error) {
        for _ in 0..<3 {
            switch readSmallFile(layoutFile, in: root) {
            case .success(let text?):
                try requireSupportedLayout(text, path: path)
                return
            case .success(nil):
                let text = "yashima-shared layout \(CrossProcessProtocol.layoutVersion)\n"
                _ = try createOnce(layoutFile, in: root, bytes: Array(text.utf8), mode: fileMode, rootPath: path)
            case .failure(let error):
                throw .storageUnavailable(path: path, reason: "cannot read the layout file: \(error)")
            }
        }
        throw .storageUnavailable(path: path, reason: "the layout file keeps disappearing")
    }

    /// Throws unless `text` is a layout file of the version this code implements. Never repaired (I12,
    /// I14): an unparsable `layout` may mean the directory is not ours at all, so the error says what to do.
    private static func requireSupportedLayout(_ text: [UInt8], path: String) throws(YCache.Error) {
        guard let version = parseLayoutVersion(text) else {
            throw .storageUnavailable(
                path: path,
                reason: "unreadable layout file: this is not a YashimaShared storage directory, or its layout file "
                    + "is damaged; if it is a cache directory, delete it (everything in it can be regenerated)")
        }
        if version != CrossProcessProtocol.layoutVersion {
            throw .unsupportedLayout(path: path, found: version, supported: CrossProcessProtocol.layoutVersion)
        }
    }

    /// Refuses a directory whose existing layout file this code cannot use, before anything is created
    /// in it. A missing layout file is fine: `ensureLayout` writes one.
    private static func refuseUnsupportedLayout(_ root: Int32, path: String) throws(YCache.Error) {
        if case .success(let text?) = readSmallFile(layoutFile, in: root) {
            try requireSupportedLayout(text, path: path)
        }
    }

    static func parseLayoutVersion(_ bytes: [UInt8]) -> Int? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let prefix = "yashima-shared layout "
        guard text.hasPrefix(prefix) else { return nil }
        return Int(text.dropFirst(prefix.count).trimmingWhitespace())
    }

    /// Creates `name` with `bytes` through a staging file and `linkat` (first creator wins). Returns
    /// whether this call created it.
    static func createOnce(
        _ name: String, in root: Int32, bytes: [UInt8], mode: UInt32, rootPath: String, size: Int = 0
    ) throws(YCache.Error) -> Bool {
        let staging = try writeStagingFile(
            for: name, in: root, bytes: bytes, mode: mode, folderMode: nil, rootPath: rootPath, size: size)
        defer { _ = Syscall.unlink(staging, in: root) }
        switch Syscall.link(staging, in: root, to: name, in: root) {
        case .success: return true
        case .failure(let error) where error.errno == .fileExists: return false
        case .failure(let error):
            throw .storageUnavailable(path: rootPath, reason: "cannot publish \(name): \(error)")
        }
    }

    /// Replaces `name` (a damaged auxiliary file, or a symlink, FIFO or socket there: the name itself,
    /// never what a link points to) by a complete new file with `bytes`, made in `tmp/` and renamed over
    /// it. Only under the lock that serializes its repairers. `tmp/` is made again (with `folderMode`)
    /// when it was removed or replaced by a symlink.
    static func createReplacing(
        _ name: String, in root: Int32, bytes: [UInt8], mode: UInt32, folderMode: UInt32, rootPath: String,
        size: Int = 0
    ) throws(YCache.Error) {
        let staging = try writeStagingFile(
            for: name, in: root, bytes: bytes, mode: mode, folderMode: folderMode, rootPath: rootPath, size: size)
        if case .failure(let error) = Syscall.rename(staging, in: root, to: name, in: root) {
            _ = Syscall.unlink(staging, in: root)
            throw .storageUnavailable(path: rootPath, reason: "cannot replace \(name): \(error)")
        }
    }

    /// A complete staging file `tmp/<name>-<random>.staging` with exactly `mode`, `size` bytes (zeros)
    /// starting with `bytes`. With a `folderMode`, `tmp/` is made again when it is missing or a symlink.
    private static func writeStagingFile(
        for name: String, in root: Int32, bytes: [UInt8], mode: UInt32, folderMode: UInt32?, rootPath: String,
        size: Int
    ) throws(YCache.Error) -> String {
        let staging = stagingFolder + "/" + name + "-" + randomHex(byteCount: 8) + stagingSuffix
        var opened = Syscall.open(staging, in: root, flags: [.writeOnly, .create, .exclusive], mode: mode)
        if case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced, let folderMode,
            case .success = ensureDirectory(stagingFolder, in: root, mode: folderMode, replacingFiles: false)
        {
            opened = Syscall.open(staging, in: root, flags: [.writeOnly, .create, .exclusive], mode: mode)
        }
        let fd: Int32
        switch opened {
        case .success(let value): fd = value
        case .failure(let error):
            throw error.errno.isOutOfSpace
                ? .storageFull(path: rootPath, detail: "\(error)")
                : .storageUnavailable(path: rootPath, reason: "cannot create \(name): \(error)")
        }
        var result: Result<Void, SystemCallError> = Syscall.setMode(fd, mode)
        if case .success = result, size > 0 { result = Syscall.truncate(fd, length: Int64(size)) }
        if case .success = result { result = bytes.withUnsafeBytes { Syscall.write(fd, $0) } }
        Syscall.close(fd)
        if case .failure(let error) = result {
            _ = Syscall.unlink(staging, in: root)
            throw error.errno.isOutOfSpace
                ? .storageFull(path: rootPath, detail: "\(error)")
                : .storageUnavailable(path: rootPath, reason: "cannot write \(name): \(error)")
        }
        return staging
    }

    /// Reads a small file whole; `nil` when it does not exist, no bytes when it is not a regular file
    /// (a FIFO there is opened without blocking and never read).
    static func readSmallFile(_ name: String, in root: Int32, limit: Int = 4096) -> Result<[UInt8]?, SystemCallError> {
        let fd: Int32
        switch Syscall.open(name, in: root, flags: [.readOnly, .nonBlocking]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .success(nil)
        case .failure(let error): return .failure(error)
        }
        defer { Syscall.close(fd) }
        guard case .success(let status) = Syscall.status(of: fd), status.isRegularFile else { return .success([]) }
        var buffer = [UInt8](repeating: 0, count: limit)
        let read = buffer.withUnsafeMutableBytes { Syscall.read(fd, into: $0, at: 0) }
        return read.map { Array(buffer[0..<$0]) }
    }
}

private let hexDigits: [Character] = Array("0123456789abcdef")

private func octal(_ mode: UInt32) -> String { "0" + String(mode & 0o7777, radix: 8) }

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var s = self
        while let last = s.last, last.isWhitespace { s = s.dropLast() }
        while let first = s.first, first.isWhitespace { s = s.dropFirst() }
        return s
    }
}
