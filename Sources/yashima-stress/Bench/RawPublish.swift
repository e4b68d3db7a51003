// The filesystem's floor of a miss and publish, in plain syscalls: what any cache that shares a file per
// entry between processes must do for a new value, and nothing else. A look that misses (open of the
// entry's name: ENOENT), the key's lock file created and locked (the cache's lock file is also its
// staging file), the header and the value written in one call, the file renamed into place without
// replacing (RENAME_NOREPLACE), unlocked and closed. The remote section measures it next to its hits and
// its local misses, in the same folder tree, so the time the disk takes to allocate a file (which varies
// with the filesystem and what was deleted on it lately) is shown apart from what the cache adds.

import CFileLock
import Foundation
import Glibc

final class RawPublish {
    private let locks: Int32
    private let entries: Int32
    private let bytes: [UInt8]

    /// A floor publishing `value` (after a 256-byte header, about an entry's) under `directory`.
    init(in directory: String, value: Data) throws {
        for folder in ["locks", "entries"] {
            guard mkdir(directory + "/" + folder, 0o700) == 0 || errno == EEXIST else {
                throw ArgumentError(description: "raw publish: cannot create \(directory)/\(folder)")
            }
        }
        locks = open(directory + "/locks", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        entries = open(directory + "/entries", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard locks >= 0, entries >= 0 else {
            throw ArgumentError(description: "raw publish: cannot open the folders under \(directory)")
        }
        bytes = [UInt8](repeating: 0x59, count: 256) + [UInt8](value)
    }

    deinit {
        close(locks)
        close(entries)
    }

    /// One miss and publish of the same name (its previous entry unlinked first, not timed): nanoseconds.
    func publish() throws -> Double {
        unlinkat(entries, "key.entry", 0)
        let start = monotonicNanoseconds()
        let missing = openat(entries, "key.entry", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        let descriptor = openat(locks, "key.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        var error: Int32 = 0
        let done =
            missing < 0 && descriptor >= 0 && flock(descriptor, LOCK_EX | LOCK_NB) == 0
            && bytes.withUnsafeBytes { ysh_write_full(descriptor, $0.baseAddress, $0.count, &error) } == bytes.count
            && ysh_renameat_noreplace(locks, "key.lock", entries, "key.entry", &error) == 0
            && flock(descriptor, LOCK_UN) == 0
        if descriptor >= 0 { close(descriptor) }
        if missing >= 0 { close(missing) }
        let elapsed = Double(monotonicNanoseconds() - start)
        guard done else { throw ArgumentError(description: "raw publish failed (errno \(errno), \(error))") }
        return elapsed
    }
}
