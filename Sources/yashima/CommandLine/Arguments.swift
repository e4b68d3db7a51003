// Command-line parsing for `yashima`, written here (no package dependencies): `--flag value` and
// `--flag=value`, repeated options, `--` ends options, and for `run` the first word that is not an option
// starts the command. Unknown options get a "did you mean". Sizes (K/M/G/T suffixes) and durations
// (90s, 15m, 2h, 7d) are parsed here too. Every problem is a `UsageError`: exit status 2.

import Foundation

/// Bad usage: the message is printed after `yashima: ` and the command exits with status 2.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One option a command accepts.
struct OptionSpec: Sendable {
    let name: String
    /// A one-letter alias (`-h`, `-v`).
    var short: Character?
    /// The value's placeholder in help (`FILE`, `SIZE`); nil for a flag that takes no value.
    var value: String?
    /// What the option does, for help.
    let help: String

    static func flag(_ name: String, short: Character? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: nil, help: help)
    }

    static func option(_ name: String, _ value: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: nil, value: value, help: help)
    }
}

/// What a command line said, as exact bytes: option values and the command's words are `Word`s, and
/// text is asked for explicitly (`string`), which refuses bytes that are not UTF-8 rather than guess.
struct ParsedArguments {
    /// Each option given, with its values in order. Lists, not a dictionary and a set: a command line has a
    /// few options, and a process's first `[String: …]` costs a `yashima` hit more to set up (the
    /// runtime's conformance lookup) than the comparisons.
    private var values: [(name: String, words: [Word])] = []
    private var flags: [String] = []
    /// Words that are not options (most commands accept none).
    private(set) var positional: [Word] = []
    /// For `run` and `rm`: the command and its arguments (after `--` or from the first non-option word).
    private(set) var command: [Word] = []
    /// Whether `--` was given.
    private(set) var sawDoubleDash = false

    func flag(_ name: String) -> Bool { flags.contains(name) }
    /// The last value of `--name`, exact.
    func word(_ name: String) -> Word? { words(name).last }
    /// Every value of `--name`, in order, exact.
    func words(_ name: String) -> [Word] { values.first { $0.name == name }?.words ?? [] }

    private mutating func append(_ word: Word, to name: String) {
        if let index = values.firstIndex(where: { $0.name == name }) {
            values[index].words.append(word)
        } else {
            values.append((name, [word]))
        }
    }

    private mutating func insertFlag(_ name: String) {
        if !flags.contains(name) { flags.append(name) }
    }

    /// The last value of `--name` as text; bytes that are not UTF-8 are bad usage (a name, a size, a
    /// URL is text: guessing would make two different words one).
    func string(_ name: String) throws -> String? {
        try word(name).map { try Self.text($0, option: name) }
    }

    /// Every value of `--name` as text (see `string`).
    func strings(_ name: String) throws -> [String] {
        try words(name).map { try Self.text($0, option: name) }
    }

    static func text(_ word: Word, option: String) throws -> String {
        guard let text = word.text else {
            throw UsageError("--\(option) must be UTF-8 text, not \(word.quoted)")
        }
        return text
    }

    /// Parses `words` (the command line after the subcommand's name).
    /// - Parameters:
    ///   - commandName: For messages (`yashima run`).
    ///   - takesCommand: Options end at the first word that is not an option, which starts a command.
    init(_ words: [Word], options: [OptionSpec], commandName: String, takesCommand: Bool) throws {
        var index = 0
        func spec(named name: String) -> OptionSpec? { options.first { $0.name == name } }
        while index < words.count {
            let word = words[index]
            if word.bytes == Array("--".utf8) {
                sawDoubleDash = true
                command = Array(words[(index + 1)...])
                break
            }
            if word.hasPrefix("--") {
                let body = word.bytes.dropFirst(2)
                let nameBytes = body.prefix { $0 != UInt8(ascii: "=") }
                let name = String(decoding: nameBytes, as: UTF8.self)
                let inlineValue = nameBytes.count < body.count ? Word(Array(body.dropFirst(nameBytes.count + 1))) : nil
                guard let option = spec(named: name), name.utf8.elementsEqual(nameBytes) else {
                    throw UsageError(Self.unknownOption(word, options: options, commandName: commandName))
                }
                if option.value == nil {
                    guard inlineValue == nil else { throw UsageError("--\(name) takes no value") }
                    insertFlag(name)
                } else if let inlineValue {
                    append(inlineValue, to: name)
                } else {
                    guard index + 1 < words.count else {
                        throw UsageError("--\(name) needs a value (\(option.value!))")
                    }
                    append(words[index + 1], to: name)
                    index += 1
                }
            } else if word.hasPrefix("-") && word.bytes.count > 1 {
                let letters = word.bytes.dropFirst()
                guard letters.count == 1, let option = options.first(where: { $0.short?.asciiValue == letters.first })
                else {
                    throw UsageError(Self.unknownOption(word, options: options, commandName: commandName))
                }
                guard option.value == nil else {
                    throw UsageError("-\(option.short!) needs a value; use --\(option.name)")
                }
                insertFlag(option.name)
            } else if takesCommand {
                command = Array(words[index...])
                break
            } else {
                positional.append(word)
            }
            index += 1
        }
    }

    /// "unknown option --inptu for yashima run; did you mean --input?"
    static func unknownOption(_ word: Word, options: [OptionSpec], commandName: String) -> String {
        let bare = word.bytes.drop(while: { $0 == UInt8(ascii: "-") }).prefix(while: { $0 != UInt8(ascii: "=") })
        var message = "unknown option \(word.quoted) for \(commandName)"
        if let suggestion = closest(String(decoding: bare, as: UTF8.self), among: options.map(\.name)) {
            message += "; did you mean --\(suggestion)?"
        } else {
            message += " (see \(commandName) --help)"
        }
        return message
    }
}

/// The candidate nearest to `word` (edit distance at most 2, or a prefix of it), if any.
func closest(_ word: String, among candidates: [String]) -> String? {
    let word = word.lowercased()
    if word.isEmpty { return nil }
    var best: (candidate: String, distance: Int)?
    for candidate in candidates {
        var distance = editDistance(word, candidate)
        if candidate.hasPrefix(word) && word.count >= 2 { distance = min(distance, 1) }
        if distance <= max(1, min(2, word.count / 3)), best == nil || distance < best!.distance {
            best = (candidate, distance)
        }
    }
    return best?.candidate
}

/// Levenshtein distance with adjacent transpositions counting as one edit.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previousPrevious = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                current[j] = min(current[j], previousPrevious[j - 2] + 1)
            }
        }
        (previousPrevious, previous, current) = (previous, current, previousPrevious)
    }
    return previous[b.count]
}

// MARK: Values

/// A byte count: digits (a fraction allowed) and an optional K, M, G or T suffix (powers of 1024), with
/// an optional trailing `B` or `iB`: `4096`, `500M`, `10G`, `1.5GiB`. `unlimited` gives `Int64.max`
/// when `allowUnlimited`.
func parseSize(_ text: String, option: String, allowUnlimited: Bool = false) throws -> Int64 {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    if allowUnlimited, ["unlimited", "none"].contains(trimmed.lowercased()) { return Int64.max }
    var number = Substring(trimmed)
    var unit = ""
    while let last = number.last, last.isLetter {
        unit = String(last) + unit
        number = number.dropLast()
    }
    let kibi = 1024.0
    let multipliers: [String: Double] = [
        "": 1, "b": 1, "k": kibi, "kb": kibi, "kib": kibi, "m": kibi * kibi, "mb": kibi * kibi, "mib": kibi * kibi,
        "g": kibi * kibi * kibi, "gb": kibi * kibi * kibi, "gib": kibi * kibi * kibi,
        "t": kibi * kibi * kibi * kibi, "tb": kibi * kibi * kibi * kibi, "tib": kibi * kibi * kibi * kibi,
    ]
    guard let multiplier = multipliers[unit.lowercased()], let value = Double(number), value.isFinite, value >= 0,
        !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." })
    else {
        throw UsageError(
            "--\(option) must be a size such as 4096, 500M or 10G\(allowUnlimited ? " (or unlimited)" : ""), not '\(text)'"
        )
    }
    let bytes = value * multiplier
    guard bytes < 9.2e18 else { throw UsageError("--\(option) is too large: '\(text)'") }
    guard bytes >= 1 else {
        throw UsageError(
            "--\(option) must be at least 1 byte, not '\(text)'\(allowUnlimited ? " (use unlimited for no limit)" : "")"
        )
    }
    return Int64(bytes)
}

/// A duration: a number (a fraction allowed) with a unit `ms`, `s`, `m`, `h` or `d` (seconds when none):
/// `90s`, `15m`, `2h`, `7d`, `1.5h`.
func parseDuration(_ text: String, option: String) throws -> Duration {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    var number = Substring(trimmed)
    var unit = ""
    while let last = number.last, last.isLetter {
        unit = String(last) + unit
        number = number.dropLast()
    }
    let seconds: [String: Double] = [
        "": 1, "ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800,
    ]
    guard let scale = seconds[unit.lowercased()], !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }),
        let value = Double(number), value.isFinite, value * scale < 9e9
    else {
        throw UsageError("--\(option) must be a duration such as 90s, 15m, 2h or 7d, not '\(text)'")
    }
    guard value > 0 else { throw UsageError("--\(option) must be longer than zero, not '\(text)'") }
    let nanoseconds = value * scale * 1e9
    return .nanoseconds(Int64(nanoseconds.rounded()))
}

/// A `NAME=VALUE` pair for `--variant` and `--version`.
func parsePair(_ text: String, option: String) throws -> (String, String) {
    guard let equals = text.firstIndex(of: "=") else {
        throw UsageError("--\(option) must be NAME=VALUE, not '\(text)'")
    }
    return (String(text[..<equals]), String(text[text.index(after: equals)...]))
}
