// The open storage root: the descriptor every Storage call works relative to, its identity, and whether it
// may still be used by this process (I7) and at this path (I13: writes check the path names it, lookups
// once per rootCheckInterval). Opening: Root, Folders, LayoutFile, SharedState. Docs/Internals.md.

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

/// An open storage root. The descriptor stays open for the life of the object; every path operation is
/// relative to it, and no symlink is followed in any component below it (openat2 with
/// RESOLVE_NO_SYMLINKS for opens; the other calls resolve their folder the same way, see CFileLock.h).
final class Directory: Sendable {
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
    /// The fan-out folders this process made or asked to be made ahead of a publish (`prepareFanOut`).
    let preparedFanOuts = Mutex<Set<String>>([])
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
        let fd = try Directory.openOrCreateRoot(
            path, mode: sharing.directoryMode, allowNetwork: allowNetworkFilesystem)
        var succeeded = false
        defer { if !succeeded { Syscall.close(fd) } }

        let filesystem = try Directory.checkFilesystem(fd, path: path, allowNetwork: allowNetworkFilesystem)
        networkFilesystemName = filesystem
        rootIdentity = try Directory.checkOwnership(fd, path: path, sharing: sharing)
        rootCheckedAt = Atomic(Syscall.monotonicNanoseconds)
        let layoutFound = try Directory.refuseUnsupportedLayout(fd, path: path)  // before creating anything
        for folder in [Directory.entriesFolder, Directory.locksFolder, Directory.stagingFolder] {
            try Directory.ensureFolder(folder, in: fd, mode: sharing.directoryMode, rootPath: path)
        }
        // Fan-out folders are made when first needed (`ensureFanOut`): making all 512 here cost 0.15–0.7 s
        // on ext4 (Benchmarks/repro/folder_cost.py), on the thread of whoever opened a fresh directory first.
        // An existing directory's layout was read and checked above: one read, not two (issue 14).
        if !layoutFound { try Directory.ensureLayout(fd, path: path, fileMode: sharing.fileMode) }
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

    /// Whether the root path still names this root, checked again only when the last check is at least
    /// `age` nanoseconds old (a publish after a long production, `Policy.publishRootRecheckAge`, I13).
    func isStillNamedByPath(checkedWithin age: Int64, now: Int64) -> Bool {
        if now - rootCheckedAt.load(ordering: .relaxed) < age { return true }
        rootCheckedAt.store(now, ordering: .relaxed)
        return isStillNamedByPath()
    }

    /// Whether this handle may still be used: owned by this process and, when `verifyingRoot` or at most
    /// once per `Policy.rootCheckInterval` otherwise, still named by the root path (I13).
    func isUsable(verifyingRoot: Bool, now: Int64) -> Bool {
        guard isOwnedByThisProcess else { return false }
        if !verifyingRoot && now - rootCheckedAt.load(ordering: .relaxed) < rootCheckInterval { return true }
        rootCheckedAt.store(now, ordering: .relaxed)
        return isStillNamedByPath()
    }
}

/// `Policy.rootCheckInterval` in nanoseconds, read once (every lookup compares against it).
private let rootCheckInterval = Policy.rootCheckInterval.nanoseconds

/// The opened storage root and the helpers bound to it: what every storage operation of a cache gets
/// from the engine's one accessor (`StorageTier.context(for:)`). A class (made once per opening, never
/// changed): each lookup that passes it on copies one reference, not one per helper.
final class StorageContext: Sendable {
    let directory: Directory
    let trimmer: Trimmer

    init(directory: Directory) {
        self.directory = directory
        trimmer = Trimmer(directory: directory)
    }

    var files: EntryFile { EntryFile(directory: directory) }
    /// False on an allowed network filesystem: read instead of mmap, and no cross-process dedup.
    var isLocalFilesystem: Bool { directory.networkFilesystemName == nil }
}
