// Which storage directory a command uses (`--dir`, else `$YASHIMA_DIR`, else the user's `dir` setting,
// else `$XDG_CACHE_HOME/yashima`, else `~/.cache/yashima`), as exact bytes; the checks that turn a
// directory the cache cannot use into a `CacheProblem` that says what to do (run then works uncached;
// other commands exit 2), its layout's names taken from the library's operator surface; opening the
// cache on it.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

/// The storage directory a command works on.
struct Location {
    /// The absolute path, exact, without `.` or `..` components.
    let path: Word
    /// Where the path came from.
    let source: SettingSource
    let sharing: StorageSharingMode
    /// Whether the directory exists (read-only commands do not create it).
    let exists: Bool
    let allowNetworkFilesystem: Bool

    /// The directory the arguments and settings name, not checked (see `checked`).
    static func resolve(_ arguments: ParsedArguments) throws -> Location {
        let chosen: (Word, SettingSource)
        if let dir = arguments.word("dir") {
            guard !dir.isEmpty else { throw UsageError("--dir needs a path") }
            chosen = (dir, .commandLine)
        } else if let dir = Word.environment("YASHIMA_DIR"), !dir.isEmpty {
            chosen = (dir, .environment("YASHIMA_DIR"))
        } else if let (dir, source) = try Settings.value("dir", directory: nil) {
            chosen = (Word(dir), source)
        } else if let xdg = Word.environment("XDG_CACHE_HOME"), xdg.hasPrefix("/") {
            chosen = (xdg.appending(Word("yashima")), .builtIn)
        } else if let home = Word.environment("HOME"), !home.isEmpty {
            chosen = (home.appending(Word(".cache/yashima")), .builtIn)
        } else {
            throw CacheProblem(problem: "no storage directory", advice: "pass --dir DIR or set YASHIMA_DIR")
        }
        let path = absolute(chosen.0)
        var status = stat()
        let exists = path.withCString { stat($0, &status) } == 0 && status.st_mode & S_IFMT == S_IFDIR
        // A setgid folder its group may write: the group-shared mode (an app and a helper, two users).
        let groupShared = exists && status.st_mode & S_ISGID != 0 && status.st_mode & 0o070 == 0o070
        let allow =
            arguments.flag("allow-network-filesystem") || Word.environment("YASHIMA_ALLOW_NETWORK_FS")?.text == "1"
        return Location(
            path: path, source: chosen.1,
            sharing: groupShared || arguments.flag("group-shared") ? .groupShared : .privateToUser,
            exists: exists, allowNetworkFilesystem: allow)
    }

    /// The path as text, for the library (which takes UTF-8 paths).
    var text: String {
        get throws {
            guard let text = path.text else {
                throw CacheProblem(
                    problem: "the storage directory's path \(path.quoted) is not UTF-8, which the cache needs",
                    advice: "use another --dir")
            }
            return text
        }
    }

    /// The checks made before the library sees the directory, each with its advice.
    func check() throws {
        _ = try text
        var status = stat()
        if path.withCString({ stat($0, &status) }) == 0 {
            guard status.st_mode & S_IFMT == S_IFDIR else {
                throw CacheProblem(
                    problem: "the storage directory \(path.quoted) is a file, not a directory",
                    advice: "use another --dir")
            }
            if let owner = Location.otherOwner(status, sharing: sharing) { throw owner }
            guard path.withCString({ access($0, R_OK | W_OK | X_OK) }) == 0 else {
                throw CacheProblem(
                    problem:
                        "the storage directory \(path.quoted) is not readable and writable by you (\(String(cString: strerror(errno))))",
                    advice: "use another --dir")
            }
            if path.appending(Word(StorageOperator.layoutFileName)).withCString({ access($0, F_OK) }) != 0,
                let names = try? FileManager.default.contentsOfDirectory(atPath: try text),
                let foreign = names.first(where: { !Location.isOwnName($0) })
            {
                throw CacheProblem(
                    problem:
                        "\(path.quoted) is not a yashima storage directory (it holds \(Shell.quote(Array(foreign.utf8))) "
                        + "and no layout file)",
                    advice: "give an empty or new directory")
            }
        } else if errno == ENOTDIR {
            throw CacheProblem(
                problem: "the storage directory \(path.quoted) is below a file, not a directory", advice: nil)
        } else if errno != ENOENT {
            throw CacheProblem(
                problem: "cannot use the storage directory \(path.quoted): \(String(cString: strerror(errno)))",
                advice: nil)
        }
    }

    /// A cache on this directory with no memory layer (one command, one process), opened now.
    /// - Parameter budget: The disk budget this process enforces when it writes (allocated bytes: what the
    ///   directory takes on disk, headers and block rounding included); nil for none.
    func openCache(budget: Int64?, remote: YCache.Remote? = nil) throws -> YCache {
        let cache = YCache(
            configuration: YCache.Configuration(
                storageDirectory: URL(fileURLWithPath: try text), memoryMaximumCost: 0, storageMaximumByteCount: nil,
                storageMaximumAllocatedByteCount: budget.map { $0 == Int64.max ? nil : Int($0) } ?? nil,
                storageFreeSpaceFloor: FreeSpaceSetting.inForce(self).floor, sharing: sharing,
                allowNetworkFilesystem: allowNetworkFilesystem, remote: remote))
        do {
            try cache.openStorageForOneLookup()
        } catch {
            throw problem(error)
        }
        return cache
    }

    /// The operator's view of an open cache.
    func storageOperator(_ cache: YCache) throws -> StorageOperator {
        do {
            return try cache.storageOperator()
        } catch {
            throw problem(error)
        }
    }

    /// The budget recorded for the directory, opening it.
    func recordedBudget() throws -> Int64? {
        try storageOperator(try openCache(budget: nil)).recordedBudget
    }

    /// A library error about the directory, with what to do about it.
    func problem(_ error: YCache.Error) -> CacheProblem {
        var status = stat()
        let found = path.withCString { stat($0, &status) } == 0
        switch error {
        case .insecureStorageDirectory where found:
            if let owner = Location.otherOwner(status, sharing: sharing) { return owner }
            if status.st_mode & 0o002 != 0 {
                return CacheProblem(
                    problem: error.description, advice: "chmod o-w \(path.quoted), or use another --dir")
            }
            return CacheProblem(
                problem: error.description,
                advice: "--group-shared if a group shares it, else chmod g-w \(path.quoted)")
        case .networkFilesystem:
            return CacheProblem(
                problem: error.description,
                advice: "--allow-network-filesystem or YASHIMA_ALLOW_NETWORK_FS=1 uses it anyway: flock and mmap "
                    + "may not work across machines; or use a local --dir")
        case .unsupportedLayout:
            return CacheProblem(problem: error.description, advice: "use the yashima that made it, or another --dir")
        case .storageFull:
            return CacheProblem(problem: error.description, advice: "free some space, or lower --max-size")
        default:
            return CacheProblem(problem: error.description, advice: nil)
        }
    }

    /// Whether `name`, in a storage directory, is the cache's (the library's layout) or this tool's
    /// (its settings file); anything else means the folder is someone else's.
    private static func isOwnName(_ name: String) -> Bool {
        StorageOperator.isOwnRootName(name) || name == Settings.directoryFileName
    }

    /// The problem when the directory belongs to another user the sharing mode does not admit.
    private static func otherOwner(_ status: stat, sharing: StorageSharingMode) -> CacheProblem? {
        let me = geteuid()
        guard status.st_uid != me else { return nil }
        if sharing == .groupShared, status.st_mode & 0o070 == 0o070, isMember(of: status.st_gid) { return nil }
        let name = getpwuid(status.st_uid).map { String(cString: $0.pointee.pw_name) }
        let owner = name.map { "\($0) (uid \(status.st_uid))" } ?? "uid \(status.st_uid)"
        return CacheProblem(
            problem: "the storage directory belongs to \(owner), not to you",
            advice:
                "to use it, run as its owner: sudo -u \(name ?? "#\(status.st_uid)") yashima …; or use another --dir")
    }

    private static func isMember(of group: gid_t) -> Bool {
        if getegid() == group { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        return getgroups(count, &groups) >= 0 && groups.contains(group)
    }

    /// `path` made absolute (against the working directory) with `.` and `..` resolved lexically.
    private static func absolute(_ path: Word) -> Word {
        var bytes = path.bytes
        if !path.hasPrefix("/") { bytes = (Word.workingDirectory ?? Word("/")).bytes + [UInt8(ascii: "/")] + bytes }
        var components: [ArraySlice<UInt8>] = []
        for component in bytes.split(separator: UInt8(ascii: "/")) {
            if component == [UInt8(ascii: ".")] { continue }
            if component == [0x2E, 0x2E] {
                _ = components.popLast()
                continue
            }
            components.append(component)
        }
        return Word(
            components.reduce(into: [UInt8]()) { $0 += [UInt8(ascii: "/")] + $1 }.nonEmpty ?? [UInt8(ascii: "/")])
    }
}

extension Location {
    /// The directory the arguments name, checked: a `CacheProblem` when it cannot be used.
    init(_ arguments: ParsedArguments) throws {
        self = try Location.resolve(arguments)
        try check()
    }

    /// The path for messages and JSON: its text (a path that is not UTF-8 never gets this far), else quoted.
    var shown: String { path.text ?? path.quoted }
}

extension Array {
    fileprivate var nonEmpty: Self? { isEmpty ? nil : self }
}
