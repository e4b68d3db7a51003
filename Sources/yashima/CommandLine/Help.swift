// What each subcommand accepts and says about itself: its options (the parser's input) and its `--help`
// text, generated from the same list so the two never disagree. Also the top-level help.

/// A subcommand: its name, options and help, and what runs it. `commands` (Entry.swift) lists them all;
/// the dispatch, the help, the man page and the completions are built from that list.
struct CommandSpec: Sendable {
    let name: String
    let summary: String
    let usage: String
    let description: String
    let options: [OptionSpec]
    /// `run`: the first word that is not an option starts a command.
    var takesCommand = false
    /// `config`: words that are not options are its arguments.
    var takesPositional = false
    /// Who takes the signals (Run/Process.swift): blocked before any thread exists unless `.defaultActions`.
    var signals = SignalTaking.defaultActions
    /// Runs the command with its parsed arguments; returns the exit status (or throws a `UsageError`,
    /// `CacheProblem` or `CommandFailure`, which `main` prints).
    let run: @Sendable (ParsedArguments) async throws -> Int32

    /// Who takes SIGINT, SIGTERM and SIGHUP while a command runs.
    enum SignalTaking: Sendable {
        /// Their default actions.
        case defaultActions
        /// `SignalControl`'s thread, started once the command may block (a hit may never start it); the
        /// process then ends as signalled (`run`).
        case takenBySignalControl
        /// The command's own handler, started once it has parsed its arguments (`watch`).
        case takenByCommand
    }

    /// Options every command that works on a directory accepts.
    static let storageOptions: [OptionSpec] = [
        .option(
            "dir", "DIR",
            "storage directory (default: $YASHIMA_DIR, else $XDG_CACHE_HOME/yashima, else ~/.cache/yashima)"),
        .flag("group-shared", "create the directory group-shared (setgid 2770, files 0660); detected when it exists"),
        .flag(
            "allow-network-filesystem",
            "use a directory on NFS, SMB, FUSE and the like (flock and mmap may not work across machines there)"),
        .flag("help", short: "h", "show this help"),
    ]

    static let json = OptionSpec.flag("json", "print one JSON object instead of text")

    /// The full `--help` text.
    var help: String {
        var text =
            "Usage: \(usage)\n\n\(summary.prefix(1).uppercased() + summary.dropFirst()).\n\n\(description)\n\nOptions:\n"
        let labels = options.map { option -> String in
            let short = option.short.map { "-\($0), " } ?? ""
            return "  " + short + "--" + option.name + (option.value.map { " " + $0 } ?? "")
        }
        let width = min(30, (labels.map(\.count).max() ?? 0) + 2)
        for (label, option) in zip(labels, options) {
            if label.count + 2 > width {
                text += label + "\n" + String(repeating: " ", count: width) + option.help + "\n"
            } else {
                text += label.padding(toLength: width, withPad: " ", startingAt: 0) + option.help + "\n"
            }
        }
        return text
    }
}

enum Help {
    /// The package's version (the Debian package's version is this plus the commit).
    static let versionNumber = "0.1.0"

    static let introduction = "Memoizes shell commands across processes and operates a YashimaShared storage directory."

    static let notes = """
        The storage directory is --dir DIR, else $YASHIMA_DIR, else the user's dir setting (yashima
        config), else $XDG_CACHE_HOME/yashima, else ~/.cache/yashima. Options may come before COMMAND.
        Sizes take K, M, G, T suffixes (powers of 1024); durations s, m, h, d.
        Exit status: 0 ok, 1 failed (or a miss, for get), 2 bad usage; run passes its command's through
        (a cache it cannot use runs the command uncached, with a warning, unless --strict); watch runs
        until stopped (Ctrl-C: 0).
        "yashima COMMAND --help" describes a command; "yashima help --man" prints the manual page and
        "yashima help --completion bash|zsh|fish" a shell completion.
        """

    static func topLevel(_ commands: [CommandSpec]) -> String {
        var text = "Usage: yashima COMMAND [OPTIONS]\n\n\(introduction)\n\nCommands:\n"
        let width = (commands.map(\.name.count).max() ?? 0) + 4
        for command in commands {
            text += "  " + command.name.padding(toLength: width, withPad: " ", startingAt: 0) + command.summary + "\n"
        }
        return text + "\n" + notes + "\n"
    }
}
