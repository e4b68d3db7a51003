// Which storage directory a command uses (`--dir`, else `$YASHIMA_DIR`, else `$XDG_CACHE_HOME/yashima`,
// else `~/.cache/yashima`), the checks that turn a bad directory into a clear message with exit status 2
// before the library sees it, opening the cache on it, and the budget a writer enforces. Also the
// failure type every command throws.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

/// A command failed: print `message` (unless empty) after `yashima: ` and exit with `status`.
struct CommandFailure: Error {
    let status: Int32
    let message: String

    /// Bad usage or a bad input (status 2).
    static func usage(_ message: String) -> CommandFailure { CommandFailure(status: 2, message: message) }
    /// Something failed (status 1).
    static func failed(_ message: String) -> CommandFailure { CommandFailure(status: 1, message: message) }

    /// A library error: a directory that cannot be used is a bad input (2); anything else failed (1).
    static func from(_ error: YCache.Error) -> CommandFailure {
        switch error {
        case .storageUnavailable, .insecureStorageDirectory, .networkFilesystem, .unsupportedLayout:
            return .usage(error.description)
        default:
            return .failed(error.description)
        }
    }
}

/// The storage budget when neither `--max-size` nor a recorded budget says otherwise.
let defaultBudget: Int64 = 1 << 30

/// The storage directory a command works on.
struct Location {
    let url: URL
    let sharing: StorageSharingMode
    /// Whether the directory exists (read-only commands do not create it).
    let exists: Bool

    var path: String { url.path }

    /// The names a storage directory holds itself; anything else means the folder is someone else's.
    private static let ownNames: Set<String> = ["entries", "locks", "tmp", "layout", "state", "trim.lock"]

    /// Resolves and checks the directory from `--dir` or the environment.
    /// - Parameters:
    ///   - arguments: The parsed command line (`--dir`, `--group-shared`).
    init(_ arguments: ParsedArguments) throws {
        let environment = ProcessInfo.processInfo.environment
        let path: String
        if let dir = arguments.string("dir") {
            guard !dir.isEmpty else { throw CommandFailure.usage("--dir needs a path") }
            path = dir
        } else if let dir = environment["YASHIMA_DIR"], !dir.isEmpty {
            path = dir
        } else if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            path = xdg + "/yashima"
        } else if let home = environment["HOME"], !home.isEmpty {
            path = home + "/.cache/yashima"
        } else {
            throw CommandFailure.usage("no storage directory: pass --dir DIR or set YASHIMA_DIR")
        }
        url = URL(fileURLWithPath: path).standardizedFileURL
        var status = stat()
        if stat(url.path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFDIR else {
                throw CommandFailure.usage("the storage directory \(url.path) is a file, not a directory")
            }
            guard access(url.path, R_OK | W_OK | X_OK) == 0 else {
                throw CommandFailure.usage(
                    "the storage directory \(url.path) is not readable and writable by you (\(String(cString: strerror(errno))))"
                )
            }
            exists = true
            // A setgid folder its group may write: the group-shared mode (an app and a helper, two users).
            let groupShared = status.st_mode & S_ISGID != 0 && status.st_mode & 0o070 == 0o070
            sharing = groupShared || arguments.flag("group-shared") ? .groupShared : .privateToUser
            if access(url.path + "/layout", F_OK) != 0,
                let names = try? FileManager.default.contentsOfDirectory(atPath: url.path),
                !names.contains("layout"),
                let foreign = names.first(where: { !Location.ownNames.contains($0) && !$0.hasPrefix(".folder-") })
            {
                throw CommandFailure.usage(
                    "\(url.path) is not a yashima storage directory (it holds \(Format.shellQuoted(foreign)) and no "
                        + "layout file); give an empty or new directory")
            }
        } else if errno == ENOENT {
            exists = false
            sharing = arguments.flag("group-shared") ? .groupShared : .privateToUser
        } else if errno == ENOTDIR {
            throw CommandFailure.usage("the storage directory \(url.path) is below a file, not a directory")
        } else {
            throw CommandFailure.usage(
                "cannot use the storage directory \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// A cache on this directory with no memory layer (one command, one process), opened now.
    /// - Parameter budget: The disk budget this process enforces when it writes (allocated bytes: what the
    ///   directory takes on disk, headers and block rounding included); nil for none.
    func openCache(budget: Int64?, remote: YCache.Remote? = nil) throws -> YCache {
        let cache = YCache(
            configuration: YCache.Configuration(
                storageDirectory: url, memoryMaximumCost: 0, storageMaximumByteCount: nil,
                storageMaximumAllocatedByteCount: budget.map { $0 == Int64.max ? nil : Int($0) } ?? nil,
                sharing: sharing, remote: remote))
        do {
            try cache.openStorage()
        } catch {
            throw CommandFailure.from(error)
        }
        return cache
    }

    /// The operator's view of an open cache.
    func storageOperator(_ cache: YCache) throws -> StorageOperator {
        do {
            return try cache.storageOperator()
        } catch {
            throw CommandFailure.from(error)
        }
    }
}

/// The budget a writer enforces: `--max-size` (recorded for the directory), else the recorded one, else
/// the default. `Int64.max` is unlimited.
func effectiveBudget(explicit: Int64?, storage: StorageOperator) -> Int64 {
    if let explicit {
        if storage.recordedBudget != explicit { storage.recordBudget(explicit) }
        return explicit
    }
    return storage.recordedBudget ?? defaultBudget
}

/// Runs blocking work (a scan, a read of every entry) on a thread of its own, never on the cooperative pool.
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

/// Like `offPool`, for work that throws.
func offPool<T: Sendable>(throwing body: @escaping @Sendable () throws -> T) async throws -> T {
    try await offPool { Result { try body() } }.get()
}
