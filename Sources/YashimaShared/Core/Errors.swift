// The public error type `YCache.Error` (Yashima's name). Every failure of the cache itself is one of these
// cases, with a message that names the problem (and the system call and errno where one failed). Corrupt
// entries are misses unless the caller chose `.throwError`. A codec's or a generator's own errors are not
// wrapped: callers get them as thrown.

extension YCache {
    /// An error from a `YCache` operation.
    public enum Error: Swift.Error, Sendable, Equatable, CustomStringConvertible {
        /// A cache-only lookup (`lookupPolicy: .cacheOnly`) found nothing.
        case cacheMiss
        /// This process's memory holds the key and codec identifier with a value of another type (two
        /// codecs share one identifier), or a call it joined produced one.
        case valueTypeMismatch
        /// The storage directory cannot be used: it is a file, cannot be created or opened, or is damaged.
        case storageUnavailable(path: String, reason: String)
        /// The storage directory is writable by users it should not be, or owned by another user.
        case insecureStorageDirectory(path: String, reason: String)
        /// The storage directory sits on a network or virtual filesystem (NFS, SMB/CIFS, FUSE, 9p, Ceph, AFS,
        /// Lustre, GPFS, OCFS2), refused unless `allowNetworkFilesystem` is set.
        case networkFilesystem(path: String, filesystem: String)
        /// The storage directory's `layout` file names another layout version than this build's (newer or
        /// older). Nothing is written or created in the directory.
        case unsupportedLayout(path: String, found: Int, supported: Int)
        /// The disk, a quota or the file-size limit is full: nothing was stored.
        case storageFull(path: String, detail: String)
        /// A system call on the storage directory failed (other than for lack of space: `storageFull`).
        case ioFailure(operation: String, detail: String)
        /// A stored entry is corrupt (only thrown under `readFailurePolicy: .throwError`; otherwise a miss).
        case corruptEntry(reason: String)
        /// A budget or option has a value that cannot work. Not thrown by this version: negative budgets
        /// are treated as 0 (that layer keeps nothing).
        case invalidConfiguration(reason: String)
        /// Changes in the storage directory cannot be observed (`YCache.observe`): the user's inotify limit
        /// is reached (the reason names `fs.inotify.max_user_watches` or `max_user_instances`), or the
        /// directory was removed or replaced while it was observed.
        case observationUnavailable(path: String, reason: String)
        /// A removal (`remove(for:codec:)`, or `removeAll()` with `removeAllRemotely`) removed the local
        /// copies, but could not delete the remote one: the server is down, hung or refused it, or its
        /// breaker is open. The remote copy may survive, and another host's next miss may fetch it again:
        /// remove it again once the server is back. After `remove(for:codec:)` this host never takes it
        /// back: the delete is owed in its storage directory and paid by its next lookup of the key; after
        /// `removeAll()` any key's copy may come back here too.
        case remoteRemovalIncomplete(reason: String)

        /// A readable explanation of the error.
        public var description: String {
            switch self {
            case .cacheMiss: return "cache miss"
            case .valueTypeMismatch: return "a cached value for this key and codec identifier has another type"
            case .storageUnavailable(let path, let reason): return "storage directory \(path) is unavailable: \(reason)"
            case .insecureStorageDirectory(let path, let reason):
                return "storage directory \(path) is insecure: \(reason)"
            case .networkFilesystem(let path, let filesystem):
                return "storage directory \(path) is on \(filesystem), a network or virtual filesystem; flock and mmap "
                    + "are not reliable there (set allowNetworkFilesystem to use it without mmap or cross-process dedup)"
            case .unsupportedLayout(let path, let found, let supported):
                let remedy =
                    found > supported
                    ? "use it with a newer build of YashimaShared, or give this build another directory"
                    : "delete the directory (everything in a cache can be regenerated) or give this build another one"
                return
                    "storage directory \(path) has layout version \(found); this build supports \(supported): \(remedy)"
            case .storageFull(let path, let detail): return "storage directory \(path) is full: \(detail)"
            case .ioFailure(let operation, let detail): return "\(operation) failed: \(detail)"
            case .corruptEntry(let reason): return "corrupt cache entry: \(reason)"
            case .invalidConfiguration(let reason): return "invalid configuration: \(reason)"
            case .observationUnavailable(let path, let reason):
                return "cannot observe storage directory \(path): \(reason)"
            case .remoteRemovalIncomplete(let reason):
                return "removed locally, but the remote copy may survive (a later miss may fetch it again): \(reason)"
            }
        }
    }
}

extension YCache.Error {
    /// Maps a failed system call on `path` to the public error.
    static func system(_ error: SystemCallError, path: String, operation: String) -> YCache.Error {
        if error.errno.isOutOfSpace { return .storageFull(path: path, detail: "\(error)") }
        return .ioFailure(operation: operation, detail: "\(error) (in \(path))")
    }
}
