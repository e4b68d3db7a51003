// Command-line words, environment values and paths as the exact bytes Linux gives them (never through a
// lossy String conversion), lowercase hex, and shell quoting of exact bytes for what `yashima` displays.

import Foundation
import Glibc

/// A word of the command line, an environment value or a path: its exact bytes (no NUL).
struct Word: Hashable, Sendable, Comparable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }
    init(_ text: String) { bytes = Array(text.utf8) }
    init(cString: UnsafePointer<CChar>) {
        bytes = Array(UnsafeRawBufferPointer(start: cString, count: strlen(cString)))
    }

    /// The word as text, when its bytes are UTF-8.
    var text: String? { String(validating: bytes, as: UTF8.self) }
    /// The word for a message: shell-quoted, exact (`$'\xff'` for bytes that are not printable UTF-8).
    var quoted: String { Shell.quote(bytes) }
    var isEmpty: Bool { bytes.isEmpty }

    func hasPrefix(_ ascii: String) -> Bool { bytes.starts(with: ascii.utf8) }

    /// Calls `body` with the word as a NUL-terminated C string.
    func withCString<Result>(_ body: (UnsafePointer<CChar>) throws -> Result) rethrows -> Result {
        try (bytes + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    static func < (lhs: Word, rhs: Word) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
    static func + (lhs: Word, rhs: Word) -> Word { Word(lhs.bytes + rhs.bytes) }
}

extension Word {
    /// The process's argv words from index 1 on, exact.
    static var arguments: [Word] {
        (1..<Int(CommandLine.argc)).map { Word(cString: CommandLine.unsafeArgv[$0]!) }
    }

    /// An environment variable's value, exact; nil when unset.
    static func environment(_ name: String) -> Word? {
        getenv(name).map { Word(cString: $0) }
    }

    /// The working directory, exact; nil when it cannot be read (removed, or too deep).
    static var workingDirectory: Word? {
        guard let pointer = getcwd(nil, 0) else { return nil }
        defer { free(pointer) }
        return Word(cString: pointer)
    }

    /// The last path component (the whole word when it has no slash).
    var lastComponent: Word {
        var trimmed = bytes[...]
        while trimmed.count > 1, trimmed.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: UInt8(ascii: "/")), trimmed.count > 1 else {
            return Word(Array(trimmed))
        }
        return Word(Array(trimmed[(slash + 1)...]))
    }

    /// The folder holding the path (`.` for a bare name, `/` for a file at the root).
    var parentFolder: Word {
        var trimmed = bytes[...]
        while trimmed.count > 1, trimmed.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: UInt8(ascii: "/")) else { return Word(".") }
        return slash == trimmed.startIndex ? Word("/") : Word(Array(trimmed[..<slash]))
    }

    /// `self/name`.
    func appending(_ name: Word) -> Word {
        bytes.last == UInt8(ascii: "/") ? self + name : self + Word("/") + name
    }
}

/// Lowercase hexadecimal text of bytes.
enum Hex {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of lowercase hex text; nil for anything else.
    static func decode(_ text: Substring) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

/// Quoting for POSIX shells (and bash, zsh, ksh for `$'…'`): a quoted word, pasted into a shell, is the
/// same bytes again.
enum Shell {
    private static let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%".utf8)

    /// `bytes` as one shell word: bare when every byte is safe; in single quotes when it is printable
    /// UTF-8; else in `$'…'` with `\n`, `\t`, `\\`, `\'` and `\xHH` escapes.
    static func quote(_ bytes: [UInt8]) -> String {
        if !bytes.isEmpty && bytes.allSatisfy({ safe.contains($0) }) { return String(decoding: bytes, as: UTF8.self) }
        if let text = String(validating: bytes, as: UTF8.self), text.unicodeScalars.allSatisfy(isPrintable) {
            return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }
        var result = "$'"
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            // A whole printable multi-byte scalar stays as it is.
            if byte >= 0x80, let (scalar, length) = scalar(in: bytes, at: index), isPrintable(scalar) {
                result.unicodeScalars.append(scalar)
                index += length
                continue
            }
            switch byte {
            case UInt8(ascii: "\n"): result += "\\n"
            case UInt8(ascii: "\t"): result += "\\t"
            case UInt8(ascii: "\r"): result += "\\r"
            case UInt8(ascii: "\\"): result += "\\\\"
            case UInt8(ascii: "'"): result += "\\'"
            case 0x20..<0x7F: result.unicodeScalars.append(Unicode.Scalar(byte))
            default: result += "\\x" + Hex.encode([byte])
            }
            index += 1
        }
        return result + "'"
    }

    /// A command line: each word quoted, separated by spaces.
    static func command(_ words: [Word]) -> String {
        words.map(\.quoted).joined(separator: " ")
    }

    private static func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
        !(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028
            || scalar.value == 0x2029)
    }

    /// The UTF-8 scalar starting at `index`, and its length, when the bytes there are one.
    private static func scalar(in bytes: [UInt8], at index: Int) -> (Unicode.Scalar, Int)? {
        let lead = bytes[index]
        let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0
        guard length > 0, index + length <= bytes.count,
            let text = String(validating: bytes[index..<(index + length)], as: UTF8.self),
            text.unicodeScalars.count == 1
        else { return nil }
        return (text.unicodeScalars.first!, length)
    }
}
