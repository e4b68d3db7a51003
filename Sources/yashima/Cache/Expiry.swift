// The expiry a writer (`run`, `put`) gives its entries, parsed once: `--expire`, else `$YASHIMA_EXPIRE`,
// else the directory's or the user's `expire` setting; none when nothing sets it.

/// The expiry a writer gives its entries, parsed once: `--expire`, else `$YASHIMA_EXPIRE`, else the
/// directory's or the user's `expire` setting; nil for none.
enum Expiry {
    /// A duration as `--expire` and the `expire` setting give it.
    static func parse(_ text: String) throws -> Duration {
        try parseDuration(text, option: "expire")
    }

    /// `--expire`, parsed; nil when not given.
    static func commandLine(_ arguments: ParsedArguments) throws -> Duration? {
        try arguments.string("expire").map(parse)
    }

    /// `commandLine` (the parsed `--expire`), else the setting for `directory`.
    static func effective(commandLine: Duration?, directory: Word) throws -> Duration? {
        if let commandLine { return commandLine }
        return try Settings.value("expire", directory: directory).map { try parse($0.0) }
    }
}
