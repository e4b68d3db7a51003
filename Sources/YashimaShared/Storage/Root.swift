// Opening the user's root path: created when missing, refused when it is a file, on a network filesystem
// (unless allowed), writable by other users or owned by someone else. Root gets no exemption.

extension Directory {
    static func openOrCreateRoot(_ path: String, mode: UInt32, allowNetwork: Bool) throws(YCache.Error) -> Int32 {
        switch Syscall.openRoot(path) {
        case .success(let fd): return fd
        case .failure(let error) where error.errno == .noSuchFile:
            // A root that would be refused is not created first: check where it would be made.
            if !allowNetwork { try checkFilesystemOfNearestFolder(path) }
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
    static func createDirectoryChain(_ path: String, mode: UInt32) throws(YCache.Error) {
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

    /// Refuses a missing root whose nearest existing folder is on a network filesystem.
    private static func checkFilesystemOfNearestFolder(_ path: String) throws(YCache.Error) {
        var folder = path
        while true {
            if let slash = folder.lastIndex(of: "/") {
                folder = slash == folder.startIndex ? "/" : String(folder[..<slash])
            } else {
                folder = "."
            }
            if case .success(let fd) = Syscall.openRoot(folder) {
                defer { Syscall.close(fd) }
                _ = try checkFilesystem(fd, path: path, allowNetwork: false)
                return
            }
            if folder == "/" || folder == "." { return }
        }
    }

    /// Known network and virtual filesystems (statfs f_type), refused by default.
    /// A list, not a dictionary: looked up once per open, and a process's first `[Int64: String]` costs
    /// more to set up (the runtime's conformance lookup) than the few comparisons.
    static let networkFilesystems: [(type: Int64, name: String)] = [
        (0x6969, "NFS"), (0x517B, "SMB"), (0xFF53_4D42, "CIFS"), (0xFE53_4D42, "SMB2"), (0x6573_5546, "FUSE"),
        (0x0102_1997, "9p"), (0x00C3_6400, "Ceph"), (0x5346_414F, "AFS"), (0x0BD0_0BD0, "Lustre"),
        (0x4750_4653, "GPFS"), (0x0133_7021, "OCFS2"),
    ]

    static func checkFilesystem(_ fd: Int32, path: String, allowNetwork: Bool) throws(YCache.Error)
        -> String?
    {
        guard case .success(let type) = Syscall.filesystemType(fd) else { return nil }
        guard let name = networkFilesystems.first(where: { $0.type == type })?.name else { return nil }
        if allowNetwork { return name }
        throw .networkFilesystem(path: path, filesystem: name)
    }

    /// Checks the root: a directory, not writable by other users, owned by this user (in the
    /// group-shared mode: or by a user of its group, when this process is in that group). Root gets no
    /// exemption: a root-run process must not use a directory another user controls. Returns its status.
    static func checkOwnership(_ fd: Int32, path: String, sharing: StorageSharingMode) throws(YCache.Error)
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
        // Writable by others: anyone could plant entries. Group-writable only in group-shared mode.
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
}

private func octal(_ mode: UInt32) -> String { "0" + String(mode & 0o7777, radix: 8) }
