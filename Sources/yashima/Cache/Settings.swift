// The defaults `yashima` takes when an option is not given, and where each comes from: the command line,
// then an environment variable (`YASHIMA_MAX_SIZE`, …), then the storage directory (its `config` file;
// the budget is recorded in its `state` file), then the user's file (`$XDG_CONFIG_HOME/yashima/config`,
// else `~/.config/yashima/config`), then the built-in default. `yashima config` shows and sets them.

import Foundation
import Glibc
import Synchronization
@_spi(Operator) import YashimaShared

/// One setting `yashima config` knows.
struct SettingSpec: Sendable {
    let name: String
    let variable: String
    let help: String
    /// Only the user's file may set it (the directory cannot name itself).
    var userOnly = false
}

/// Where a setting's value came from.
enum SettingSource: Equatable {
    case commandLine, environment(String), directory(Word), user(Word), builtIn

    var description: String {
        switch self {
        case .commandLine: return "command line"
        case .environment(let variable): return "environment: " + variable
        case .directory(let file): return "directory: " + file.quoted
        case .user(let file): return "user file: " + file.quoted
        case .builtIn: return "default"
        }
    }
}

enum Settings {
    static let specs: [SettingSpec] = [
        SettingSpec(
            name: "dir", variable: "YASHIMA_DIR",
            help: "the storage directory (default: $XDG_CACHE_HOME/yashima, else ~/.cache/yashima)", userOnly: true),
        SettingSpec(name: "max-size", variable: "YASHIMA_MAX_SIZE", help: "the directory's budget (default 1 GiB)"),
        SettingSpec(name: "namespace", variable: "YASHIMA_NAMESPACE", help: "run's namespace (default run)"),
        SettingSpec(name: "remote", variable: "YASHIMA_REMOTE", help: "the remote tier's URL (default none)"),
        SettingSpec(name: "expire", variable: "YASHIMA_EXPIRE", help: "run's expiry (default never)"),
        SettingSpec(
            name: "min-free", variable: "YASHIMA_MIN_FREE",
            help: "free space to leave on the filesystem, a size or a percentage (default 5%, at most 1 GiB; 0: none)"),
    ]

    /// The user's file: `$XDG_CONFIG_HOME/yashima/config`, else `$HOME/.config/yashima/config`.
    static var userFile: Word? {
        if let base = Word.environment("XDG_CONFIG_HOME"), base.hasPrefix("/") {
            return base.appending(Word("yashima/config"))
        }
        guard let home = Word.environment("HOME"), !home.isEmpty else { return nil }
        return home.appending(Word(".config/yashima/config"))
    }

    /// The name of a storage directory's file (the one name this tool adds to a directory).
    static let directoryFileName = "config"

    /// A storage directory's file.
    static func directoryFile(_ directory: Word) -> Word { directory.appending(Word(directoryFileName)) }

    /// The value of `name` from the environment or the files, and its source (nil: the default). The
    /// command line is the caller's to check first.
    static func value(_ name: String, directory: Word?) throws -> (String, SettingSource)? {
        guard let spec = specs.first(where: { $0.name == name }) else { return nil }
        if let value = Word.environment(spec.variable), !value.isEmpty {
            guard let text = value.text else { throw UsageError("\(spec.variable) must be UTF-8 text") }
            return (text, .environment(spec.variable))
        }
        if !spec.userOnly, let directory, let value = try read(directoryFile(directory))[name] {
            return (value, .directory(directoryFile(directory)))
        }
        if let file = userFile, let value = try read(file)[name] { return (value, .user(file)) }
        return nil
    }

    /// `--NAME` from the command line, else the setting; with its source.
    static func value(_ name: String, _ arguments: ParsedArguments, directory: Word?) throws -> (String, SettingSource)?
    {
        if let text = try arguments.string(name) { return (text, .commandLine) }
        return try value(name, directory: directory)
    }

    /// A settings file's values by name. A list, as the cache of files below: a few entries, and a
    /// process's first dictionary of a key type costs a `yashima` hit more to set up (the runtime's
    /// conformance lookup) than the comparisons.
    struct Values {
        private var pairs: [(name: String, value: String)] = []

        subscript(name: String) -> String? {
            get { pairs.first { $0.name == name }?.value }
            set {
                pairs.removeAll { $0.name == name }
                if let newValue { pairs.append((name, newValue)) }
            }
        }
    }

    /// Files already read by this process (a command reads each at most once).
    private static let cache = Mutex<[(file: Word, values: Values)]>([])

    /// The `name = value` lines of a settings file (none when it does not exist). `#` starts a comment.
    /// - Throws: `UsageError` naming the file and line of anything else.
    static func read(_ file: Word) throws -> Values {
        if let known = cache.withLock({ $0.first { $0.file == file }?.values }) { return known }
        let values = try parse(file)
        cache.withLock { $0.append((file, values)) }
        return values
    }

    private static func parse(_ file: Word) throws -> Values {
        let fd = file.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return Values() }
            throw UsageError("cannot read \(file.quoted): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        guard let contents = try? mapFile(fd), let text = String(validating: contents, as: UTF8.self) else {
            throw UsageError("\(file.quoted) is not UTF-8 text")
        }
        var values = Values()
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = line.trimmingCharacters(in: .whitespaces)
            if content.isEmpty || content.hasPrefix("#") { continue }
            guard let equals = content.firstIndex(of: "=") else {
                throw UsageError("\(file.quoted) line \(number + 1): expected NAME = VALUE")
            }
            let name = content[..<equals].trimmingCharacters(in: .whitespaces)
            let value = content[content.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard let spec = specs.first(where: { $0.name == name }) else {
                throw UsageError(
                    "\(file.quoted) line \(number + 1): unknown setting \(Shell.quote(Array(name.utf8)))"
                        + " (known: \(specs.map(\.name).joined(separator: ", ")))")
            }
            values[spec.name] = value
        }
        return values
    }

    /// Sets (or with nil removes) `name` in `file`, keeping its other lines; written beside and renamed.
    static func write(_ name: String, _ value: String?, in file: Word, mode: mode_t) throws {
        var lines: [String] = []
        let fd = file.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        if fd >= 0 {
            defer { close(fd) }
            if let contents = try? mapFile(fd) {
                lines = String(decoding: contents, as: UTF8.self).split(separator: "\n").map(String.init)
            }
        }
        lines.removeAll { line in
            let content = line.trimmingCharacters(in: .whitespaces)
            return content.split(separator: "=", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces) == name
        }
        if let value { lines.append("\(name) = \(value)") }
        let folder = file.parentFolder
        if folder.withCString({ access($0, F_OK) }) != 0 {
            try FileManager.default.createDirectory(
                atPath: String(decoding: folder.bytes, as: UTF8.self), withIntermediateDirectories: true)
        }
        try OutputFiles.writeFile(Data((lines.joined(separator: "\n") + "\n").utf8), to: file, mode: UInt32(mode))
        cache.withLock { $0.removeAll { $0.file == file } }
    }
}
