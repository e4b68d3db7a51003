// Helpers for the hardening suites: where a key's files live, lstat without following links, snapshots
// of outside files and folders (bytes, mode, mtime) to prove they were never written, and running the
// `yashima-stress` worker under a shell that sets a hostile umask or a file-size limit first.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

/// The namespace of every hardening suite, so `swift test --filter Hardening` selects them all.
enum Hardening {}

extension Hardening {
    /// The root-relative and absolute paths of a key's entry and lock file (DataCodec).
    struct KeyFiles {
        let root: String
        let entryIdentity: String
        let keyIdentifier: String

        init(root: String, key: CacheKey, codec: String = DataCodec().identifier) {
            self.root = root
            entryIdentity = EntryIdentity(key: key, codecIdentifier: codec).hex
            keyIdentifier = key.stableIdentifier
        }

        var entryFanOut: String { root + "/entries/" + entryIdentity.prefix(2) }
        var entry: String { entryFanOut + "/" + entryIdentity + ".entry" }
        var lockFanOut: String { root + "/locks/" + keyIdentifier.prefix(2) }
        var lock: String { lockFanOut + "/" + keyIdentifier + ".lock" }
    }

    /// `lstat(2)`: the link itself, never what it points to. Nil when missing.
    static func linkStatus(_ path: String) -> stat? {
        var status = stat()
        return lstat(path, &status) == 0 ? status : nil
    }

    static func isSymbolicLink(_ path: String) -> Bool {
        guard let status = linkStatus(path) else { return false }
        return status.st_mode & S_IFMT == S_IFLNK
    }

    static func isDirectory(_ path: String) -> Bool {
        guard let status = linkStatus(path) else { return false }
        return status.st_mode & S_IFMT == S_IFDIR
    }

    static func isRegularFile(_ path: String) -> Bool {
        guard let status = linkStatus(path) else { return false }
        return status.st_mode & S_IFMT == S_IFREG
    }

    /// Permission bits including setgid (`st_mode & 07777`), of the path itself.
    static func mode(_ path: String) -> UInt32? {
        linkStatus(path).map { UInt32($0.st_mode) & 0o7777 }
    }

    /// Everything that proves a file or folder outside the cache was left alone: for a file its bytes,
    /// mode and mtime; for a folder its mode, mtime and the same for each file in it.
    struct Snapshot: Equatable, CustomStringConvertible {
        var items: [String: String]

        init(_ path: String) {
            items = [:]
            add(path, as: ".")
        }

        private mutating func add(_ path: String, as name: String) {
            guard let status = Hardening.linkStatus(path) else {
                items[name] = "missing"
                return
            }
            let mtime = "\(status.st_mtim.tv_sec).\(status.st_mtim.tv_nsec)"
            let mode = String(UInt32(status.st_mode) & 0o7777, radix: 8)
            if status.st_mode & S_IFMT == S_IFDIR {
                items[name] = "dir mode \(mode) mtime \(mtime)"
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                for child in names { add(path + "/" + child, as: name + "/" + child) }
            } else {
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()
                items[name] =
                    "file mode \(mode) mtime \(mtime) bytes \(SHA256.hash(bytes).hex) links \(status.st_nlink > 0)"
            }
        }

        var description: String {
            items.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
        }
    }

    /// Every path below `root` (relative, without following symlinks).
    static func allNames(under root: String) -> [String] {
        var found: [String] = []
        func walk(_ path: String, _ relative: String) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                let child = relative.isEmpty ? name : relative + "/" + name
                found.append(child)
                if isDirectory(path + "/" + name) { walk(path + "/" + name, child) }
            }
        }
        walk(root, "")
        return found
    }

    /// Writes `text` to a new file at `path` (mode 0644) and sets its mtime to a fixed past instant, so a
    /// later write would be visible as an mtime change.
    static func makeOutsideFile(_ path: String, _ text: String = "outside file: must never change\n") {
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o644])
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        _ = utimensat(AT_FDCWD, path, &times, 0)
    }

    /// Makes a folder (0755) with one file in it and a fixed mtime on both.
    static func makeOutsideFolder(_ path: String, fileName: String = "inside.txt") {
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        makeOutsideFile(path + "/" + fileName)
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        _ = utimensat(AT_FDCWD, path, &times, 0)
    }

    /// Creates a folder with mode 0700 (independent of the umask).
    static func makePrivateFolder(_ path: String) {
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o700)
    }

    /// Sum of `st_blocks × 512` of every `.entry` file: what the usage counter should hold.
    static func entryBytes(_ root: String) -> Int64 {
        allNames(under: root + "/entries").filter { $0.hasSuffix(".entry") }.reduce(Int64(0)) { total, name in
            total + Int64(linkStatus(root + "/entries/" + name)?.st_blocks ?? 0) * 512
        }
    }

    /// The usage counter in the state file, as this instance sees it (I9).
    static func usageHint(_ cache: YCache) throws -> Int64 {
        try cache.engine.storageTier.context().get().directory.state.usage
    }

    /// A `yashima-stress` child started through `/bin/sh -c '<prefix>; exec yashima-stress "$@"'`, so the
    /// shell sets a umask, a file-size limit or ignores a signal before the worker starts.
    static func workerUnderShell(_ prefix: String, _ arguments: [String]) throws -> ChildProcess {
        let executable = productsDirectory().appendingPathComponent("yashima-stress").path
        return try ChildProcess(
            executable: URL(fileURLWithPath: "/bin/sh"),
            ["-c", prefix + "; exec \"$0\" \"$@\"", executable] + arguments)
    }
}
