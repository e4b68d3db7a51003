// `--output` files and folders of `yashima run`: collected after the command ran (a file's contents, or a
// folder's whole tree of regular files and folders with their modes; a symbolic link or special file
// inside is refused), and written back on a hit so that each output appears at once — a file written
// beside its path and renamed into place, a folder built beside and swapped in (renameat2 EXCHANGE).

import CFileLock
import Foundation
import Glibc

/// An output that cannot be stored (a symlink in a folder): the command's result still stands.
struct UnstorableOutput: Error {
    let message: String
}

enum OutputFiles {
    /// The items of every output, in order, as the command left them.
    /// - Throws: `CommandOutcome.missingOutput` when an output is missing or not a file or folder;
    ///   `UnstorableOutput` when a folder holds something other than files and folders.
    static func collect(_ outputs: [Word]) throws -> [RunRecord.Item] {
        var items: [RunRecord.Item] = []
        for (index, path) in outputs.enumerated() {
            let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
            guard fd >= 0 else {
                throw CommandOutcome.missingOutput(
                    "the command exited 0 but did not write --output \(path.quoted) (\(String(cString: strerror(errno))))"
                )
            }
            defer { close(fd) }
            var status = stat()
            guard fstat(fd, &status) == 0 else { throw CommandOutcome.missingOutput("cannot inspect \(path.quoted)") }
            switch status.st_mode & S_IFMT {
            case S_IFREG:
                items.append(
                    .init(
                        output: index, relativePath: [], mode: S_IFREG | status.st_mode & 0o7777,
                        contents: try mapFile(fd)))
            case S_IFDIR:
                items.append(
                    .init(output: index, relativePath: [], mode: S_IFDIR | status.st_mode & 0o7777, contents: Data()))
                try collectTree(fd, output: index, root: path, prefix: [], into: &items)
            default:
                throw CommandOutcome.missingOutput(
                    "--output \(path.quoted) is not a file or folder after the command ran")
            }
        }
        return items
    }

    /// Everything in the folder open at `folder`, sorted by name, folders before their contents.
    private static func collectTree(
        _ folder: Int32, output: Int, root: Word, prefix: [UInt8], into items: inout [RunRecord.Item]
    ) throws {
        for name in try names(in: folder, path: root) {
            let relative = prefix.isEmpty ? name : prefix + [UInt8(ascii: "/")] + name
            let shown = root.appending(Word(relative)).quoted
            var status = stat()
            guard Word(name).withCString({ fstatat(folder, $0, &status, AT_SYMLINK_NOFOLLOW) }) == 0 else {
                throw UnstorableOutput(message: "cannot inspect \(shown): \(String(cString: strerror(errno)))")
            }
            let kind = status.st_mode & S_IFMT
            guard kind == S_IFREG || kind == S_IFDIR else {
                let what = kind == S_IFLNK ? "a symbolic link" : "a special file"
                throw UnstorableOutput(
                    message: "--output folder \(root.quoted) holds \(what), \(shown); only files and folders are stored"
                )
            }
            let flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (kind == S_IFDIR ? O_DIRECTORY : 0)
            let fd = Word(name).withCString { openat(folder, $0, flags) }
            guard fd >= 0 else {
                throw UnstorableOutput(message: "cannot read \(shown): \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            let mode = kind | status.st_mode & 0o7777
            if kind == S_IFREG {
                items.append(.init(output: output, relativePath: relative, mode: mode, contents: try mapFile(fd)))
            } else {
                items.append(.init(output: output, relativePath: relative, mode: mode, contents: Data()))
                try collectTree(fd, output: output, root: root, prefix: relative, into: &items)
            }
        }
    }

    /// The names in a folder (without `.` and `..`), sorted by their bytes.
    private static func names(in folder: Int32, path: Word) throws -> [[UInt8]] {
        let copy = dup(folder)
        guard copy >= 0, let stream = fdopendir(copy) else {
            throw UnstorableOutput(
                message: "cannot read the folder \(path.quoted): \(String(cString: strerror(errno)))")
        }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix { $0 != 0 })
            }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            names.append(name)
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }

    // MARK: Writing outputs back

    /// Writes every output of `record` to its path (`outputs`, in the key's order), each atomically.
    static func write(_ record: RunRecord, to outputs: [Word]) throws {
        guard record.outputCount == outputs.count else {
            throw CommandFailure.failed("the stored entry does not hold the --output files asked for")
        }
        for (index, path) in outputs.enumerated() {
            let items = record.items.filter { $0.output == index }
            guard let root = items.first else { continue }
            if root.isFolder {
                try writeFolder(items, to: path)
            } else {
                try writeFile(root.contents, to: path, mode: root.mode)
            }
        }
    }

    /// Writes `contents` to a new file beside `path` and renames it over `path`, so `path` never holds a
    /// partial file.
    static func writeFile(_ contents: Data, to path: Word, mode: UInt32) throws {
        let staging = stagingName(for: path)
        SignalControl.shared.track(staging)
        defer { SignalControl.shared.untrack(staging) }
        let fd = staging.withCString { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
        guard fd >= 0 else {
            throw CommandFailure.failed("cannot write --output \(path.quoted): \(String(cString: strerror(errno)))")
        }
        let written = Output.write(contents, to: fd) && fchmod(fd, mode_t(mode & 0o7777)) == 0
        let reason = String(cString: strerror(errno))
        close(fd)
        guard written, staging.withCString({ from in path.withCString { rename(from, $0) } }) == 0 else {
            _ = staging.withCString { unlink($0) }
            throw CommandFailure.failed("cannot write --output \(path.quoted): \(reason)")
        }
    }

    /// Builds the folder's tree beside `path`, then swaps it in (or renames it, when nothing is there)
    /// and removes what was there before.
    private static func writeFolder(_ items: [RunRecord.Item], to path: Word) throws {
        let staging = stagingName(for: path)
        SignalControl.shared.track(staging)
        defer { SignalControl.shared.untrack(staging) }
        func failure(_ what: String) -> CommandFailure {
            let reason = String(cString: strerror(errno))
            removeTree(staging)
            return CommandFailure.failed("cannot write --output \(path.quoted): \(what): \(reason)")
        }
        guard staging.withCString({ mkdir($0, 0o700) }) == 0 else { throw failure("mkdir") }
        for item in items.dropFirst() {
            let target = staging.appending(Word(item.relativePath))
            if item.isFolder {
                guard target.withCString({ mkdir($0, 0o700) }) == 0 else { throw failure("mkdir") }
                continue
            }
            let fd = target.withCString { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600) }
            guard fd >= 0 else { throw failure("open") }
            let written = Output.write(item.contents, to: fd) && fchmod(fd, mode_t(item.mode & 0o7777)) == 0
            close(fd)
            guard written else { throw failure("write") }
        }
        // Folder modes last, deepest first (a read-only folder could not be filled).
        for item in items.reversed() where item.isFolder {
            let target = item.relativePath.isEmpty ? staging : staging.appending(Word(item.relativePath))
            guard target.withCString({ chmod($0, mode_t(item.mode & 0o7777)) }) == 0 else { throw failure("chmod") }
        }
        var status = stat()
        if path.withCString({ lstat($0, &status) }) != 0 && errno == ENOENT {
            guard staging.withCString({ from in path.withCString { rename(from, $0) } }) == 0 else {
                throw failure("rename")
            }
            return
        }
        var error: Int32 = 0
        guard staging.withCString({ from in path.withCString { ysh_rename_exchange(from, $0, &error) } }) == 0 else {
            errno = error
            throw failure("swap")
        }
        removeTree(staging)  // what was at `path` before
    }

    /// `.NAME.yashima-XXXXXXXXXXXX` in the folder of `path`.
    private static func stagingName(for path: Word) -> Word {
        let suffix = Hex.encode((0..<6).map { _ in UInt8.random(in: 0...255) })
        return path.parentFolder.appending(Word(".") + path.lastComponent + Word(".yashima-" + suffix))
    }

    /// Removes a file or a whole tree (never following a symbolic link); errors are ignored.
    static func removeTree(_ path: Word) {
        var status = stat()
        guard path.withCString({ lstat($0, &status) }) == 0 else { return }
        if status.st_mode & S_IFMT == S_IFDIR {
            _ = path.withCString { chmod($0, 0o700) }
            let fd = path.withCString { open($0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if fd >= 0 {
                let names = (try? names(in: fd, path: path)) ?? []
                close(fd)
                for name in names { removeTree(path.appending(Word(name))) }
            }
            _ = path.withCString { rmdir($0) }
        } else {
            _ = path.withCString { unlink($0) }
        }
    }
}
