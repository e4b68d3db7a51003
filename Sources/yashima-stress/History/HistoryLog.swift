// The history scenario's record of what every call did: one operation per line (process, call, kind, key,
// version or none, start and end on CLOCK_MONOTONIC, flags), appended by its process with one write(2) per
// line to an O_APPEND file of its own, so a SIGKILL loses at most the call in flight (a write announces
// itself with a begin line first). Also the values' bytes: each write's version inside, parsed back by reads.

import Foundation
import Glibc

/// One operation of a history, as the checker sees it.
struct HistoryOperation: Sendable, Equatable {
    enum Kind: String, Sendable {
        /// A write of a new version (store, a refresh or get-or-generate whose generator ran).
        case write = "W"
        /// A read: the version a call returned, or none (a miss).
        case read = "R"
        /// A removal of one key: a write of its own "absent" value.
        case remove = "D"
        /// `removeAll(in:)`: a removal of every key of the namespace named in `key`.
        case purge = "P"
        /// A cache-only read of every key once every writer has stopped.
        case final = "F"
        /// A write about to be made (its version, its call's start): the write counts even if its process
        /// dies before the call returns.
        case begin = "B"
    }

    enum Flag: String, Sendable {
        /// The call threw, or its generator ran and the call returned another write's value (its publish
        /// found that entry and left it): the write may or may not have taken effect.
        case uncertain
        /// The value returned had expired before the call began.
        case expired
        /// The bytes returned were no value any writer makes (torn, or of another key).
        case bad
        /// Where a read's value came from (`YCache.Resolved.origin`, and whether it was another caller's or
        /// process's generation): for the report only, the checker ignores them.
        case memory, storage, remote, generated, shared
    }

    /// Who made the call: `p<worker>.<lane>`.
    var process: String
    /// The public call: value, valueIfCached, store, refresh, remove, removeAll, final.
    var call: String
    var kind: Kind
    /// `namespace/identity` (for a purge: the namespace).
    var key: String
    /// The version written or read; nil for none (a miss, or a removal's line that names none).
    var version: String?
    /// Nanoseconds on CLOCK_MONOTONIC: before the call.
    var start: Int64
    /// After the call returned; nil when it never did (its process was killed).
    var end: Int64?
    var flags: Set<Flag> = []

    init(
        process: String, call: String, kind: Kind, key: String, version: String?, start: Int64, end: Int64?,
        flags: Set<Flag> = []
    ) {
        self.process = process
        self.call = call
        self.kind = kind
        self.key = key
        self.version = version
        self.start = start
        self.end = end
        self.flags = flags
    }

    /// `p3.1 store W ha/k0 p3.1#17 1200 1500 -`.
    var line: String {
        let flagText = flags.isEmpty ? "-" : flags.map(\.rawValue).sorted().joined(separator: ",")
        return
            "\(process) \(call) \(kind.rawValue) \(key) \(version ?? "-") \(start) \(end.map(String.init) ?? "-") \(flagText)"
    }

    /// Parses one line made by `line`; nil for anything else.
    init?(line: Substring) {
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        guard words.count == 8, let kind = Kind(rawValue: String(words[2])), let start = Int64(words[5]) else {
            return nil
        }
        let end: Int64?
        if words[6] == "-" {
            end = nil
        } else {
            guard let value = Int64(words[6]) else { return nil }
            end = value
        }
        var flags: Set<Flag> = []
        if words[7] != "-" {
            for word in words[7].split(separator: ",") {
                guard let flag = Flag(rawValue: String(word)) else { return nil }
                flags.insert(flag)
            }
        }
        self.init(
            process: String(words[0]), call: String(words[1]), kind: kind, key: String(words[3]),
            version: words[4] == "-" ? nil : String(words[4]), start: start, end: end, flags: flags)
    }
}

enum HistoryLog {
    /// The operations of a log's text, and how many lines were not operations.
    static func parse(_ text: String) -> (operations: [HistoryOperation], malformed: Int) {
        var operations: [HistoryOperation] = []
        var malformed = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if let operation = HistoryOperation(line: line) {
                operations.append(operation)
            } else {
                malformed += 1
            }
        }
        return (operations, malformed)
    }
}

/// A process's history file: opened O_APPEND, one write(2) per line, shared by the process's lanes (appends
/// of whole lines under PIPE_BUF never interleave).
final class HistoryLogFile: Sendable {
    private let descriptor: Int32

    init(path: String) throws {
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw ArgumentError(description: "cannot open \(path): errno \(errno)") }
    }

    deinit { close(descriptor) }

    /// Appends `operation`. A line that cannot be written ends the process: a history missing an operation
    /// could make the checker pass a run it cannot see, or flag one that did nothing wrong.
    func append(_ operation: HistoryOperation) {
        let text = operation.line + "\n"
        let written = text.withCString { write(descriptor, $0, strlen($0)) }
        guard written == text.utf8.count else { fatalError("cannot append to the history: errno \(errno)") }
    }
}

/// A history value's bytes: `ysh-history <key> <version>\n`, then a pattern that depends on the version, to
/// the value's size. Any process can tell which write made a value, and whether the bytes are whole.
enum HistoryValue {
    enum Parsed: Equatable {
        case version(String)
        case bad(String)
    }

    static func bytes(key: String, version: String, size: Int) -> Data {
        var data = Data("ysh-history \(key) \(version)\n".utf8)
        let header = data.count
        if size > header {
            data.count = size
            let seed = pattern(version)
            data.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in
                for index in header..<size { raw[index] = byte(index, seed) }
            }
        }
        return data
    }

    /// The version a value of `key` carries, or why it is no value of `key`'s writers.
    static func parse(_ data: Data, key: String) -> Parsed {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Parsed in
            let limit = min(raw.count, 512)
            guard let newline = raw[..<limit].firstIndex(of: 0x0A) else { return .bad("no header") }
            let words = String(decoding: raw[..<newline], as: UTF8.self).split(separator: " ")
            guard words.count == 3, words[0] == "ysh-history" else { return .bad("not a history value") }
            guard words[1] == key else { return .bad("a value of \(words[1])") }
            let version = String(words[2])
            let seed = pattern(version)
            for index in (newline + 1)..<raw.count where raw[index] != byte(index, seed) {
                return .bad("\(version) with a wrong byte at offset \(index) of \(raw.count)")
            }
            return .version(version)
        }
    }

    private static func pattern(_ version: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in version.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0100_0000_01B3 }
        return hash
    }

    @inline(__always)
    private static func byte(_ index: Int, _ seed: UInt64) -> UInt8 {
        UInt8(truncatingIfNeeded: (UInt64(index) &* 0x9E37_79B9) ^ (seed >> (UInt64(index) & 31)))
    }
}
