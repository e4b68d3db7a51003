// Typed wrappers over CFileLock's one-call shims (files, mappings, renames, links, folders, modes, times,
// listing), each a `Result<_, SystemCallError>` naming the call and its path; errno captured and EINTR
// retried in C. Nothing here waits for another process.

import CFileLock
import Glibc

/// File status fields the cache uses (from `fstat(2)` / `fstatat(2)`).
struct FileStatus: Sendable, Equatable {
    var device: UInt64
    var inode: UInt64
    var linkCount: UInt64
    var size: Int64
    var allocatedBytes: Int64
    var modifiedNanoseconds: Int64
    var changedNanoseconds: Int64
    var mode: UInt32
    var owner: UInt32
    var group: UInt32

    init(_ raw: ysh_stat) {
        device = raw.device
        inode = raw.inode
        linkCount = raw.link_count
        size = raw.size
        allocatedBytes = raw.allocated_bytes
        modifiedNanoseconds = raw.modified_ns
        changedNanoseconds = raw.changed_ns
        mode = raw.mode
        owner = raw.owner
        group = raw.group
    }

    var isDirectory: Bool { mode & ysh_S_IFMT == ysh_S_IFDIR }
    var isRegularFile: Bool { mode & ysh_S_IFMT == ysh_S_IFREG }
    var isSymbolicLink: Bool { mode & ysh_S_IFMT == ysh_S_IFLNK }
    /// A regular file with one link, owned by this user: a file the cache created itself, whose mode it
    /// may set. (A hard link planted in the directory has two or more links and is never `fchmod`ed.)
    var isOurs: Bool { isRegularFile && linkCount == 1 && owner == Syscall.effectiveUserID }
    var permissionBits: UInt32 { mode & 0o7777 }
    /// Same file: device and inode match.
    func isSameFile(as other: FileStatus) -> Bool { device == other.device && inode == other.inode }
}

/// Open flags, spelled in Swift. O_CLOEXEC and O_NOFOLLOW are always added by the shim.
struct OpenFlags: OptionSet, Sendable {
    let rawValue: Int32
    static let readOnly = OpenFlags([])
    static let writeOnly = OpenFlags(rawValue: ysh_O_WRONLY)
    static let readWrite = OpenFlags(rawValue: ysh_O_RDWR)
    static let create = OpenFlags(rawValue: ysh_O_CREAT)
    static let exclusive = OpenFlags(rawValue: ysh_O_EXCL)
    static let directory = OpenFlags(rawValue: ysh_O_DIRECTORY)
    /// For opening a name that may be a FIFO without blocking on it.
    static let nonBlocking = OpenFlags(rawValue: ysh_O_NONBLOCK)
    /// Reading does not update the access time (which the cache never uses): no inode write on the first
    /// read after each change. Only the file's owner may (EPERM otherwise).
    static let noAccessTime = OpenFlags(rawValue: ysh_O_NOATIME)
}

/// Typed wrappers over the CFileLock shims. Each names its C call in its doc.
enum Syscall {
    @inline(__always)
    private static func check(_ rc: Int32, _ err: Int32, _ call: String, path: String? = nil)
        -> Result<Void, SystemCallError>
    {
        rc == -1 ? .failure(SystemCallError(operation: call, path: path, errno: Errno(rawValue: err))) : .success(())
    }

    /// `openat(2)` relative to `directory`, never following a symlink, close-on-exec.
    static func open(
        _ path: String, in directory: Int32, flags: OpenFlags, mode: UInt32 = 0o600
    ) -> Result<Int32, SystemCallError> {
        var err: Int32 = 0
        let fd = ysh_openat(directory, path, flags.rawValue, mode, &err)
        if fd == -1 { return .failure(SystemCallError(operation: "openat", path: path, errno: Errno(rawValue: err))) }
        return .success(fd)
    }

    /// `open(2)` with `O_PATH | O_DIRECTORY` of a folder on the user-given path, to create in it with `*at`
    /// calls: needs no read permission on the folder, as `mkdir` needs none.
    static func openDirectoryPath(_ path: String) -> Result<Int32, SystemCallError> {
        var err: Int32 = 0
        let fd = ysh_open_directory_path(path, &err)
        if fd == -1 { return .failure(SystemCallError(operation: "open", path: path, errno: Errno(rawValue: err))) }
        return .success(fd)
    }

    /// `open(2)` of the user-given storage root (O_DIRECTORY; symlinks in that path are the user's choice).
    static func openRoot(_ path: String) -> Result<Int32, SystemCallError> {
        var err: Int32 = 0
        let fd = ysh_open_root(path, &err)
        if fd == -1 { return .failure(SystemCallError(operation: "open", path: path, errno: Errno(rawValue: err))) }
        return .success(fd)
    }

    /// `close(2)`. Never retried; errors are reported but the descriptor is gone either way.
    @discardableResult
    static func close(_ fd: Int32) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_close(fd, &err), err, "close")
    }

    /// `fstat(2)`.
    static func status(of fd: Int32) -> Result<FileStatus, SystemCallError> {
        var raw = ysh_stat()
        var err: Int32 = 0
        if ysh_fstat(fd, &raw, &err) == -1 {
            return .failure(SystemCallError(operation: "fstat", errno: Errno(rawValue: err)))
        }
        return .success(FileStatus(raw))
    }

    /// `fstatat(2)` with AT_SYMLINK_NOFOLLOW; no symlink is followed in any component of `path`.
    static func status(of path: String, in directory: Int32) -> Result<FileStatus, SystemCallError> {
        var raw = ysh_stat()
        var err: Int32 = 0
        if ysh_fstatat(directory, path, &raw, &err) == -1 {
            return .failure(SystemCallError(operation: "fstatat", path: path, errno: Errno(rawValue: err)))
        }
        return .success(FileStatus(raw))
    }

    /// `stat(2)` of the user's root path (symlinks in that path are the user's choice).
    static func status(ofRootPath path: String) -> Result<FileStatus, SystemCallError> {
        var raw = ysh_stat()
        var err: Int32 = 0
        if ysh_stat_path(path, &raw, &err) == -1 {
            return .failure(SystemCallError(operation: "stat", path: path, errno: Errno(rawValue: err)))
        }
        return .success(FileStatus(raw))
    }

    /// `pread(2)` until `buffer` is full or the file ends; returns the byte count read.
    static func read(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64
    ) -> Result<Int, SystemCallError> {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .success(0) }
        var err: Int32 = 0
        let n = ysh_pread_full(fd, base, buffer.count, offset, &err)
        if n < 0 { return .failure(SystemCallError(operation: "pread", errno: Errno(rawValue: err))) }
        return .success(n)
    }

    /// `pwrite(2)` of the whole buffer at `offset` (the descriptor's file position does not move).
    static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Result<Void, SystemCallError>
    {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .success(()) }
        var err: Int32 = 0
        let n = ysh_pwrite_full(fd, base, buffer.count, offset, &err)
        if n < 0 { return .failure(SystemCallError(operation: "pwrite", errno: Errno(rawValue: err))) }
        return .success(())
    }

    /// `write(2)` of the whole buffer.
    static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Result<Void, SystemCallError> {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .success(()) }
        var err: Int32 = 0
        let n = ysh_write_full(fd, base, buffer.count, &err)
        if n < 0 { return .failure(SystemCallError(operation: "write", errno: Errno(rawValue: err))) }
        return .success(())
    }

    /// `writev(2)` of two buffers, in order, as one write.
    static func write(_ fd: Int32, _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer)
        -> Result<Void, SystemCallError>
    {
        var err: Int32 = 0
        let n = ysh_write2_full(fd, first.baseAddress, first.count, second.baseAddress, second.count, &err)
        if n < 0 { return .failure(SystemCallError(operation: "writev", errno: Errno(rawValue: err))) }
        return .success(())
    }

    /// `mmap(2)`, PROT_READ|PROT_WRITE, MAP_SHARED.
    static func mapShared(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, SystemCallError> {
        var err: Int32 = 0
        guard let p = ysh_mmap_shared(fd, length, &err) else {
            return .failure(SystemCallError(operation: "mmap", errno: Errno(rawValue: err)))
        }
        return .success(p)
    }

    /// `munmap(2)`.
    static func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        _ = ysh_munmap(address, length)
    }

    /// Puts a `MAP_SHARED` mapping under the SIGBUS guard (CFileLock): if the file is truncated under
    /// it, an access past the new end reads zeros instead of killing the process. Call right after
    /// mapping, before the first access.
    static func guardMapping(_ address: UnsafeMutableRawPointer, length: Int) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_sigbus_guard_register(address, length, &err), err, "sigaction")
    }

    /// Takes a mapping off the SIGBUS guard; call before unmapping it.
    static func unguardMapping(_ address: UnsafeMutableRawPointer) {
        ysh_sigbus_guard_unregister(address)
    }

    /// Faults the SIGBUS guard has absorbed in this process (tests).
    static var guardedFaultCount: UInt64 { ysh_sigbus_guard_trips() }

    /// `renameat(2)`: atomically replaces `to`. No symlink is followed in any component of either path.
    static func rename(
        _ from: String, in fromDirectory: Int32, to: String, in toDirectory: Int32
    ) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(
            ysh_renameat(fromDirectory, from, toDirectory, to, &err), err, "renameat", path: "\(from) -> \(to)")
    }

    /// `renameat2(2)` with `RENAME_NOREPLACE`: moves `from` to `to` only if `to` does not exist (EEXIST
    /// otherwise; EINVAL where the filesystem cannot do it). No symlink is followed in any component.
    static func renameWithoutReplacing(
        _ from: String, in fromDirectory: Int32, to: String, in toDirectory: Int32
    ) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(
            ysh_renameat_noreplace(fromDirectory, from, toDirectory, to, &err), err, "renameat2",
            path: "\(from) -> \(to)")
    }

    /// `renameat2(2)` with `RENAME_EXCHANGE`: swaps `from` and `to` atomically (ENOENT when either is
    /// missing; EINVAL where the filesystem cannot do it). No symlink is followed in any component.
    static func exchange(
        _ from: String, in fromDirectory: Int32, with to: String, in toDirectory: Int32
    ) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(
            ysh_renameat_exchange(fromDirectory, from, toDirectory, to, &err), err, "renameat2",
            path: "\(from) <-> \(to)")
    }

    /// `linkat(2)`: creates `to` only if it does not exist (EEXIST otherwise). First writer wins. No symlink
    /// is followed in any component of either path.
    static func link(
        _ from: String, in fromDirectory: Int32, to: String, in toDirectory: Int32
    ) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_linkat(fromDirectory, from, toDirectory, to, &err), err, "linkat", path: "\(from) -> \(to)")
    }

    /// `unlinkat(2)`: removes the last component itself (a symlink, never its target); no symlink is
    /// followed in the components before it.
    static func unlink(_ path: String, in directory: Int32, isDirectory: Bool = false) -> Result<Void, SystemCallError>
    {
        var err: Int32 = 0
        return check(
            ysh_unlinkat(directory, path, isDirectory ? ysh_AT_REMOVEDIR : 0, &err), err, "unlinkat", path: path)
    }

    /// `mkdirat(2)`; no symlink is followed in any component of `path`.
    static func makeDirectory(_ path: String, in directory: Int32, mode: UInt32) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_mkdirat(directory, path, mode, &err), err, "mkdirat", path: path)
    }

    /// `fchmod(2)`: modes are always set explicitly, never left to the umask.
    static func setMode(_ fd: Int32, _ mode: UInt32) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_fchmod(fd, mode, &err), err, "fchmod")
    }

    /// `futimens(2)`: sets access and modification times (nanoseconds since the epoch).
    static func setTimes(_ fd: Int32, nanoseconds: Int64) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_futimens(fd, nanoseconds, &err), err, "futimens")
    }

    /// `utimensat(2)` with no times, AT_SYMLINK_NOFOLLOW: sets the access and modification times to now,
    /// the one form allowed to a writer that does not own the file; no symlink is followed in any
    /// component of `path`.
    static func touch(_ path: String, in directory: Int32) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_touch_at(directory, path, &err), err, "utimensat", path: path)
    }

    /// `utimensat(2)` with explicit times, AT_SYMLINK_NOFOLLOW: sets the access and modification times to
    /// `nanoseconds` since the epoch. Only the file's owner may (EPERM otherwise); no symlink is followed in
    /// any component of `path`.
    static func setTimes(_ path: String, in directory: Int32, nanoseconds: Int64) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_set_times_at(directory, path, nanoseconds, &err), err, "utimensat", path: path)
    }

    /// `ftruncate(2)`. Only for files nobody else can see yet (staging files).
    static func truncate(_ fd: Int32, length: Int64) -> Result<Void, SystemCallError> {
        var err: Int32 = 0
        return check(ysh_ftruncate(fd, length, &err), err, "ftruncate")
    }

    /// `fstatfs(2)`: the filesystem magic number.
    static func filesystemType(_ fd: Int32) -> Result<Int64, SystemCallError> {
        var type: Int64 = 0
        var err: Int32 = 0
        if ysh_fstatfs_type(fd, &type, &err) == -1 {
            return .failure(SystemCallError(operation: "fstatfs", errno: Errno(rawValue: err)))
        }
        return .success(type)
    }

    /// How many names in the directory `path` end in `suffix` and are not directories (as the filesystem
    /// says), without making a string of each: a count of a fan-out folder's entries. 0 when it cannot be
    /// listed.
    static func countNames(in path: String, under directory: Int32, suffix: String) -> Int {
        var err: Int32 = 0
        guard let stream = ysh_dir_open(directory, path, &err) else { return 0 }
        defer { ysh_dir_close(stream) }
        let tail = Array(suffix.utf8)
        var count = 0
        var kind: Int32 = -1
        while let name = ysh_dir_next(stream, &kind) {
            guard kind != 1 else { continue }
            let length = strlen(name)
            guard length >= tail.count else { continue }
            let matches = tail.withUnsafeBytes {
                memcmp(name + (length - tail.count), $0.baseAddress!, tail.count) == 0
            }
            if matches { count += 1 }
        }
        return count
    }

    /// Names in a directory (not "." or ".."), with whether each is a directory when the filesystem says.
    static func listDirectory(
        _ path: String, in directory: Int32
    ) -> Result<[(name: String, isDirectory: Bool?)], SystemCallError> {
        var err: Int32 = 0
        guard let stream = ysh_dir_open(directory, path, &err) else {
            return .failure(SystemCallError(operation: "opendir", path: path, errno: Errno(rawValue: err)))
        }
        defer { ysh_dir_close(stream) }
        var names: [(name: String, isDirectory: Bool?)] = []
        var kind: Int32 = -1
        while let name = ysh_dir_next(stream, &kind) {
            names.append((String(cString: name), kind < 0 ? nil : kind == 1))
        }
        return .success(names)
    }

    /// Names in a directory with their `fstatat(2)` status (AT_SYMLINK_NOFOLLOW, relative to the open
    /// directory, so one call per name and no path walk); `nil` for a name that vanished meanwhile.
    static func listDirectoryWithStatus(
        _ path: String, in directory: Int32
    ) -> Result<[(name: String, status: FileStatus?)], SystemCallError> {
        var err: Int32 = 0
        guard let stream = ysh_dir_open(directory, path, &err) else {
            return .failure(SystemCallError(operation: "opendir", path: path, errno: Errno(rawValue: err)))
        }
        defer { ysh_dir_close(stream) }
        var found: [(name: String, status: FileStatus?)] = []
        var kind: Int32 = -1
        while let name = ysh_dir_next(stream, &kind) {
            var raw = ysh_stat()
            var statErr: Int32 = 0
            let status = ysh_dir_stat(stream, name, &raw, &statErr) == 0 ? FileStatus(raw) : nil
            found.append((String(cString: name), status))
        }
        return .success(found)
    }

    /// `getrandom(2)`: unpredictable bytes for staging-file names.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let rc = bytes.withUnsafeMutableBytes { ysh_random_bytes($0.baseAddress, count) }
        if rc != 0 {
            // getrandom and /dev/urandom both failed (no such Linux here): fall back to the system RNG.
            var generator = SystemRandomNumberGenerator()
            for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &generator) }
        }
        return bytes
    }

    /// `geteuid(2)`.
    static var effectiveUserID: UInt32 { ysh_geteuid() }
    /// Whether `group` is this process's effective group or a supplementary group (`getgroups(2)`).
    static func isMember(ofGroup group: UInt32) -> Bool { ysh_is_group_member(group) != 0 }
    /// `getpid(2)`.
    static var processID: Int32 { ysh_getpid() }
    /// Whether this is the process's main thread, as `Thread.isMainThread` (its thread id is the process id),
    /// without its two system calls per question: both ids are cached (CFileLock).
    static var isMainThread: Bool { ysh_is_main_thread() != 0 }
    /// CLOCK_REALTIME in nanoseconds since the epoch.
    static var realtimeNanoseconds: Int64 { ysh_realtime_ns() }
    /// CLOCK_MONOTONIC in nanoseconds.
    static var monotonicNanoseconds: Int64 { ysh_monotonic_ns() }
    /// CLOCK_REALTIME_COARSE in nanoseconds since the epoch: the last tick's time, a fifth of the exact
    /// clock's cost; never ahead of `realtimeNanoseconds` and behind it by at most `coarseResolution`.
    static var coarseRealtimeNanoseconds: Int64 { ysh_realtime_coarse_ns() }
    /// CLOCK_MONOTONIC_COARSE in nanoseconds (as `coarseRealtimeNanoseconds`, for CLOCK_MONOTONIC).
    static var coarseMonotonicNanoseconds: Int64 { ysh_monotonic_coarse_ns() }
    /// How far the coarse clocks may lag the exact ones (one tick: 4 ms at 250 Hz), nil when the kernel
    /// does not say.
    static var coarseResolution: Int64? {
        let resolution = ysh_coarse_resolution_ns()
        return resolution >= 0 ? resolution : nil
    }
}
