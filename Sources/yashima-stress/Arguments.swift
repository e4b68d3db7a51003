// A tiny command-line parser: `--name value`, `--flag`, repeated options, and positional words.
// Bad arguments become `ArgumentError`, which main turns into exit status 2 with a one-line reason.

struct ArgumentError: Error, CustomStringConvertible {
    let description: String
}

struct Arguments {
    private(set) var positional: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []
    private var consumed: Set<String> = []

    /// Parses `words`; `flagNames` take no value.
    init(_ words: [String], flagNames: Set<String>) throws {
        var index = 0
        while index < words.count {
            let word = words[index]
            if word.hasPrefix("--") {
                let name = String(word.dropFirst(2))
                if let equals = name.firstIndex(of: "=") {
                    values[String(name[..<equals]), default: []].append(String(name[name.index(after: equals)...]))
                } else if flagNames.contains(name) {
                    flags.insert(name)
                } else {
                    guard index + 1 < words.count else { throw ArgumentError(description: "--\(name) needs a value") }
                    values[name, default: []].append(words[index + 1])
                    index += 1
                }
            } else {
                positional.append(word)
            }
            index += 1
        }
    }

    mutating func flag(_ name: String) -> Bool {
        consumed.insert(name)
        return flags.contains(name)
    }

    mutating func string(_ name: String) -> String? {
        consumed.insert(name)
        return values[name]?.last
    }

    mutating func strings(_ name: String) -> [String] {
        consumed.insert(name)
        return values[name] ?? []
    }

    mutating func int(_ name: String, default defaultValue: Int? = nil, range: ClosedRange<Int>? = nil) throws -> Int? {
        guard let text = string(name) else { return defaultValue }
        guard let value = Int(text) else {
            throw ArgumentError(description: "--\(name) must be a whole number, not '\(text)'")
        }
        if let range, !range.contains(value) {
            throw ArgumentError(
                description: "--\(name) must be in \(range.lowerBound)...\(range.upperBound), not \(value)")
        }
        return value
    }

    mutating func uint64(_ name: String) throws -> UInt64? {
        guard let text = string(name) else { return nil }
        guard let value = UInt64(text) else {
            throw ArgumentError(description: "--\(name) must be a non-negative number")
        }
        return value
    }

    /// Throws if an option was given that nothing asked for.
    func rejectUnknown() throws {
        let given = Set(values.keys).union(flags)
        if let unknown = given.subtracting(consumed).sorted().first {
            throw ArgumentError(description: "unknown option --\(unknown) (see --help)")
        }
    }
}
