// The storage budget a command enforces and records, parsed once: `--max-size` (recorded for the
// directory), else `$YASHIMA_MAX_SIZE`, else the budget recorded in the directory, else the user's
// `max-size` setting, else 1 GiB. `Int64.max` is unlimited.

@_spi(Operator) import YashimaShared

enum Budget {
    /// The budget when nothing says otherwise.
    static let defaultBytes: Int64 = 1 << 30

    /// A budget as `--max-size`, `$YASHIMA_MAX_SIZE` and the `max-size` setting give it: a size, or
    /// `unlimited`.
    static func parse(_ text: String) throws -> Int64 {
        try parseSize(text, option: "max-size", allowUnlimited: true)
    }

    /// `--max-size`, parsed; nil when not given.
    static func commandLine(_ arguments: ParsedArguments) throws -> Int64? {
        try arguments.string("max-size").map(parse)
    }

    /// The budget a writer enforces: `explicit` (the parsed `--max-size`, recorded for the directory when
    /// it differs from the recorded one), else the environment, the recorded budget, the user's setting,
    /// the default.
    static func effective(explicit: Int64?, storage: StorageOperator?) throws -> Int64 {
        if let explicit {
            if let storage, storage.recordedBudget != explicit { storage.recordBudget(explicit) }
            return explicit
        }
        if let value = Word.environment("YASHIMA_MAX_SIZE"), !value.isEmpty {
            return try parse(try ParsedArguments.text(value, option: "max-size"))
        }
        if let recorded = storage?.recordedBudget { return recorded }
        if let (text, _) = try Settings.value("max-size", directory: nil) { return try parse(text) }
        return defaultBytes
    }
}
