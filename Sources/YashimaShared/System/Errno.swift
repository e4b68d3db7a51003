// Typed errors of the system-call layer: an errno with names for the codes the cache acts on, and the
// failed call it came from, with the path it was given. Callers above System/ see these, never a raw errno.

import Glibc

/// An errno value with names for the codes the cache handles.
struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32

    static let operationNotPermitted = Errno(rawValue: 1)  // EPERM
    static let noSuchFile = Errno(rawValue: 2)  // ENOENT
    static let interrupted = Errno(rawValue: 4)  // EINTR
    static let ioError = Errno(rawValue: 5)  // EIO
    static let badDescriptor = Errno(rawValue: 9)  // EBADF (a test of the envelope reader writing to a closed file)
    static let noDeviceOrAddress = Errno(rawValue: 6)  // ENXIO (opening a socket)
    static let wouldBlock = Errno(rawValue: 11)  // EAGAIN / EWOULDBLOCK
    static let permissionDenied = Errno(rawValue: 13)  // EACCES
    static let fileExists = Errno(rawValue: 17)  // EEXIST
    static let notDirectory = Errno(rawValue: 20)  // ENOTDIR
    static let isDirectory = Errno(rawValue: 21)  // EISDIR
    static let invalidArgument = Errno(rawValue: 22)  // EINVAL
    static let tooManyOpenFiles = Errno(rawValue: 24)  // EMFILE
    static let fileTooLarge = Errno(rawValue: 27)  // EFBIG
    static let noSpace = Errno(rawValue: 28)  // ENOSPC
    static let directoryNotEmpty = Errno(rawValue: 39)  // ENOTEMPTY
    static let symlinkLoop = Errno(rawValue: 40)  // ELOOP (O_NOFOLLOW met a symlink)
    static let notSupported = Errno(rawValue: 95)  // EOPNOTSUPP
    static let staleHandle = Errno(rawValue: 116)  // ESTALE
    static let quotaExceeded = Errno(rawValue: 122)  // EDQUOT

    /// True for the codes that mean "the disk (or a quota, or RLIMIT_FSIZE) is full".
    var isOutOfSpace: Bool { self == .noSpace || self == .quotaExceeded || self == .fileTooLarge }

    /// True for the lack of space that unlinking entries can cure (ENOSPC, EDQUOT): space pressure (I9).
    /// Not EFBIG, a limit on one file's size.
    var isSpacePressure: Bool { self == .noSpace || self == .quotaExceeded }

    /// True when the filesystem does not support a `renameat2` flag (EINVAL, EOPNOTSUPP).
    var cannotSwap: Bool { self == .invalidArgument || self == .notSupported }

    /// True when a folder on the way is missing, or is a symlink or a file (never followed): the codes
    /// after which the cache recreates its own folder and retries once.
    var isFolderMissingOrReplaced: Bool { self == .noSuchFile || self == .symlinkLoop || self == .notDirectory }

    /// The codes of opening a name that mean something other than the cache's own file sits there: a
    /// symlink (never followed), a folder, a socket, a file this user may not open.
    static let foreignFile: Set<Errno> = [
        .symlinkLoop, .isDirectory, .permissionDenied, .operationNotPermitted, .noDeviceOrAddress, .notSupported,
    ]

    var description: String {
        guard let text = strerrorText(rawValue) else { return "errno \(rawValue)" }
        return "\(text) (errno \(rawValue))"
    }
}

private func strerrorText(_ code: Int32) -> String? {
    // strerror is not thread-safe in general, but glibc returns static strings for known codes.
    guard let pointer = strerror(code) else { return nil }
    return String(cString: pointer)
}

/// A failed system call: the operation, the path it was given (as Go's `fs.PathError`: relative to the
/// folder descriptor it was called with; nil for a call on a descriptor alone) and its errno.
struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The call, as `man 2` names it (`openat`, `flock`, ...).
    let operation: String
    /// The path the call was given (`from -> to` for a rename or a link), or nil.
    let path: String?
    let errno: Errno

    init(operation: String, path: String? = nil, errno: Errno) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// `operation path: error`, as Go prints a path error (`openat locks/ab/….lock: No such file …`).
    var description: String { path.map { "\(operation) \($0): \(errno)" } ?? "\(operation): \(errno)" }
}
