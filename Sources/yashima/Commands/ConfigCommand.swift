// `yashima config [NAME [VALUE]]`: the settings in force and where each came from (Cache/Settings.swift);
// one setting; or set one for the directory (`--user`: for the user). Passwords in a remote URL are never
// printed.

import Foundation
@_spi(Operator) import YashimaShared

/// `yashima config [NAME [VALUE]]`: the settings in force and where each came from; one setting; or set
/// one for the directory (`--user`: for the user).
enum ConfigCommand {
    static let spec = CommandSpec(
        name: "config", summary: "show or set defaults: max-size, min-free, namespace, remote, expire, dir",
        usage: "yashima config [--user] [--unset] [NAME [VALUE]] [--json] [--dir DIR]",
        description: """
            Without NAME, lists every setting in force and where it came from. With NAME, prints its value.
            With NAME VALUE, sets it for the storage directory (its config file; max-size is recorded in
            the directory, as run --max-size does), or with --user in the user's file; --unset NAME removes it.
            A setting is taken from the command line, else its environment variable, else the directory,
            else the user's file ($XDG_CONFIG_HOME/yashima/config, else ~/.config/yashima/config), else
            the default. Settings (and variables): dir (YASHIMA_DIR, user file only), max-size
            (YASHIMA_MAX_SIZE), min-free (YASHIMA_MIN_FREE: the free space writers leave on the
            filesystem, trimming the least recently used entries when it runs short; a size such as 2G, a
            percentage such as 5%, or 0; default 5%, at most 1 GiB), namespace (YASHIMA_NAMESPACE), remote
            (YASHIMA_REMOTE), expire (YASHIMA_EXPIRE). Other variables: YASHIMA_DISABLE=1 (run commands, touch no cache),
            YASHIMA_RECACHE=1 (as --recache), YASHIMA_STRICT=1 (as --strict), YASHIMA_ALLOW_NETWORK_FS=1.
            Passwords in a remote URL are never printed.
            """,
        options: [
            .flag("user", "set or unset in the user's file instead of the directory"),
            .flag("unset", "remove NAME"),
            CommandSpec.json,
        ] + CommandSpec.storageOptions,
        takesPositional: true, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let names = try arguments.positional.map { try ParsedArguments.text($0, option: "config") }
        guard names.count <= 2 else { throw UsageError("yashima config takes at most NAME and VALUE") }
        if let name = names.first, !Settings.specs.contains(where: { $0.name == name }) {
            var message = "unknown setting \(Shell.quote(Array(name.utf8)))"
            if let suggestion = closest(name, among: Settings.specs.map(\.name)) {
                message += "; did you mean \(suggestion)?"
            }
            throw UsageError(message + " (yashima config lists them)")
        }
        let location = try Location.resolve(arguments)
        if names.count == 2 || arguments.flag("unset") {
            guard let name = names.first else { throw UsageError("--unset needs a NAME") }
            return try set(name, arguments.flag("unset") ? nil : names.count == 2 ? names[1] : nil, arguments, location)
        }
        var rows: [[String]] = []
        var object: [String: Any] = [:]
        for spec in Settings.specs where names.isEmpty || names.first == spec.name {
            let (value, source) = try current(spec.name, arguments, location)
            rows.append([spec.name, value ?? "-", "(\(source.description))"])
            object[spec.name] = ["value": value.map { $0 as Any } ?? NSNull(), "source": source.description]
        }
        if arguments.flag("json") {
            Output.json(object)
        } else if names.count == 1 {
            Output.line(rows[0][1])
        } else {
            Output.line(Format.table(rows))
        }
        return 0
    }

    /// A setting's value for display (passwords redacted) and its source.
    private static func current(_ name: String, _ arguments: ParsedArguments, _ location: Location)
        throws -> (String?, SettingSource)
    {
        switch name {
        case "dir":
            return (location.path.quoted, location.source)
        case "max-size":
            if let text = try arguments.string("max-size") { return (text, .commandLine) }
            if let value = Word.environment("YASHIMA_MAX_SIZE"), !value.isEmpty {
                return (value.text ?? value.quoted, .environment("YASHIMA_MAX_SIZE"))
            }
            if location.exists, let recorded = (try? location.recordedBudget()) ?? nil {
                return (recorded == Int64.max ? "unlimited" : Format.bytes(recorded), .directory(location.path))
            }
            if let file = Settings.userFile, let text = try Settings.read(file)["max-size"] {
                return (text, .user(file))
            }
            return (Format.bytes(Budget.defaultBytes), .builtIn)
        case "min-free":
            let (_, text, source) = try FreeSpaceSetting.current(location)
            return (text, source)
        default:
            guard let (text, source) = try Settings.value(name, arguments, directory: location.path) else {
                return (nil, .builtIn)
            }
            return (name == "remote" ? RemoteOption.redacted(text) : text, source)
        }
    }

    private static func set(_ name: String, _ value: String?, _ arguments: ParsedArguments, _ location: Location)
        throws -> Int32
    {
        // Check the value as the commands will read it.
        if let value {
            switch name {
            case "max-size": _ = try Budget.parse(value)
            case "expire": _ = try Expiry.parse(value)
            case "min-free": _ = try FreeSpaceSetting.parse(value)
            case "remote": _ = try RemoteOption.remote(value, readOnly: false)
            case "namespace": guard !value.isEmpty else { throw UsageError("a namespace cannot be empty") }
            default: break
            }
        }
        if arguments.flag("user") || name == "dir" {
            guard let file = Settings.userFile else { throw UsageError("no user file: set HOME or XDG_CONFIG_HOME") }
            try Settings.write(name, value, in: file, mode: 0o600)
            Output.line(
                value.map { "\(name) = \(name == "remote" ? RemoteOption.redacted($0) : $0) (in \(file.quoted))" }
                    ?? "\(name) unset (in \(file.quoted))")
            return 0
        }
        let cache = try location.openCache(budget: nil)
        if name == "max-size" {
            let storage = try location.storageOperator(cache)
            let budget = try value.map(Budget.parse)
            storage.recordBudget(budget ?? Budget.defaultBytes)
        } else {
            try Settings.write(
                name, value, in: Settings.directoryFile(location.path),
                mode: location.sharing == .groupShared ? 0o660 : 0o600)
        }
        Output.line(
            value.map { "\(name) = \(name == "remote" ? RemoteOption.redacted($0) : $0) (for \(location.path.quoted))" }
                ?? "\(name) unset (for \(location.path.quoted))")
        return 0
    }
}
