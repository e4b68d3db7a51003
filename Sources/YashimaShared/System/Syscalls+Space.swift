// The system calls of a full disk (I9): the filesystem's size and free space (`fstatvfs(2)`), for the
// free-space floor and for making room, and the rewind of a held staging file a failed write emptied, so
// that the write once more starts at byte 0. Coordination/SpacePressure.swift says where they are called.

import CFileLock

/// What `fstatvfs(2)` says about the filesystem of a descriptor, in bytes.
struct FilesystemSpace: Sendable, Equatable {
    /// The filesystem's size (`f_blocks × f_frsize`).
    var totalBytes: Int64
    /// What an unprivileged process may still allocate (`f_bavail × f_frsize`: root's reserve left out).
    var availableBytes: Int64
}

extension Syscall {
    /// `fstatvfs(2)` of the filesystem `fd` is on.
    static func filesystemSpace(_ fd: Int32) -> Result<FilesystemSpace, SystemCallError> {
        var (total, available): (Int64, Int64) = (0, 0)
        var err: Int32 = 0
        if ysh_fstatvfs_space(fd, &total, &available, &err) == -1 {
            return .failure(SystemCallError(operation: "fstatvfs", errno: Errno(rawValue: err)))
        }
        return .success(FilesystemSpace(totalBytes: total, availableBytes: available))
    }

    /// `lseek(2)` to offset 0: a staging file emptied after a failed write is written again from its start
    /// (`ftruncate` leaves the file offset where the write stopped, and a write there would leave a hole).
    static func rewind(_ fd: Int32) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        if ysh_rewind(fd, &err) == -1 {
            return .failure(SystemCallError(operation: "lseek", errno: Errno(rawValue: err)))
        }
        return .success(())
    }
}
