// The judge's own look at a storage directory, independent of the library: entry files, their allocated
// bytes (st_blocks × 512) and payload bytes, staging files and lock files, found with readdir, lstat and
// pread. Uses only the documented layout (entries/<xx>/*.entry, tmp/, locks/<xx>/*.lock) and, of the
// entry format, only the payload-length field Docs/Format.md documents (8 bytes little-endian at offset 24).

import Foundation
import Glibc

enum StorageProbe {
    struct File {
        let path: String
        let size: Int64
        let allocated: Int64
        let modifiedSeconds: Int
        /// Inode and change time: together they tell whether a path still names the same file.
        let inode: UInt
        let changed: timespec

        /// Whether `path` still names this file (same inode, not changed since it was seen).
        var isStillThere: Bool {
            guard let now = StorageProbe.status(path) else { return false }
            return now.inode == inode && now.changed.tv_sec == changed.tv_sec
                && now.changed.tv_nsec == changed.tv_nsec
        }
    }

    /// Entry files under `root/entries` (every regular file ending in `.entry`; with `anyName`, every
    /// regular file in the fan-out folders).
    static func entryFiles(_ root: String, anyName: Bool = false) -> [File] {
        var files: [File] = []
        for folder in names(in: root + "/entries") {
            let folderPath = root + "/entries/" + folder
            for name in names(in: folderPath) where anyName || name.hasSuffix(".entry") {
                if let file = status(folderPath + "/" + name) { files.append(file) }
            }
        }
        return files
    }

    /// A directory's usage as the judge measures it.
    struct Usage {
        /// Allocated bytes of the entry files (st_blocks × 512).
        let allocated: Int64
        /// Payload bytes of the entry files (what the storage budget counts).
        let payload: Int64
        /// The largest payload of one entry file.
        let largestPayload: Int64
        let files: Int
    }

    /// Allocated and payload bytes of the files under `root/entries` that all existed at one instant, and
    /// the largest payload (for the quota sampler). A scan alone is not a snapshot: while writers publish and trim
    /// unlinks, it can count an entry unlinked after its folder was read together with one published
    /// later into a folder read after it, files that never existed together, and so overstate the usage.
    /// A second look keeps only the files still there as the same file: all of them existed when the
    /// scan ended, so the sum never overstates the usage at that instant. In a quiet directory both
    /// looks agree.
    static func usage(_ root: String) -> Usage {
        var allocated: Int64 = 0
        var payload: Int64 = 0
        var largest: Int64 = 0
        var count = 0
        for file in entryFiles(root, anyName: true) {
            let bytes = payloadBytes(file.path) ?? file.size  // not an entry: counts whole, as the library does
            guard file.isStillThere else { continue }
            allocated += file.allocated
            payload += bytes
            largest = max(largest, bytes)
            count += 1
        }
        return Usage(allocated: allocated, payload: payload, largestPayload: largest, files: count)
    }

    /// The payload length in an entry file's header (offset 24, 8 bytes little-endian, Docs/Format.md), or
    /// nil when the file is too short or has no entry magic.
    static func payloadBytes(_ path: String) -> Int64? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 32)
        guard pread(fd, &header, 32, 0) == 32, header.prefix(8).elementsEqual("YSHENTRY".utf8) else { return nil }
        let length = header[24..<32].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return length <= UInt64(Int64.max) ? Int64(length) : nil
    }

    /// Files in `root/tmp` (staging files and debris).
    static func stagingFiles(_ root: String) -> [File] {
        names(in: root + "/tmp").compactMap { status(root + "/tmp/" + $0) }
    }

    /// Lock files under `root/locks`.
    static func lockFiles(_ root: String) -> [File] {
        var files: [File] = []
        for folder in names(in: root + "/locks") {
            let folderPath = root + "/locks/" + folder
            for name in names(in: folderPath) where name.hasSuffix(".lock") {
                if let file = status(folderPath + "/" + name) { files.append(file) }
            }
        }
        return files
    }

    /// Sets a file's modification time `seconds` into the past (fake debris of a long-dead process).
    static func backdate(_ path: String, bySeconds seconds: Int) -> Bool {
        var times = [timespec](repeating: timespec(), count: 2)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        times[0] = timespec(tv_sec: now.tv_sec - seconds, tv_nsec: 0)
        times[1] = times[0]
        return utimensat(AT_FDCWD, path, &times, 0) == 0
    }

    static func status(_ path: String) -> File? {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return File(
            path: path, size: Int64(info.st_size), allocated: Int64(info.st_blocks) * 512,
            modifiedSeconds: Int(info.st_mtim.tv_sec), inode: UInt(info.st_ino), changed: info.st_ctim)
    }

    /// Names in a directory (no `.`/`..`); empty if it does not exist.
    static func names(in directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
