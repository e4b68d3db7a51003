// `yashima ls [--namespace N] [--long] [--json]`: the entries, from their headers (no payload is read):
// namespace, identity (a `yashima run` entry's identity shown as its command line), variants, versions,
// codec, size, created, expires and last used. Streamed in storage order, one fan-out folder at a time:
// the first line comes at once and memory does not grow with the directory (a million entries list at
// header-read speed); lines and JSON are written by hand into one buffer (Foundation's formatters and
// JSONSerialization cost more than reading the header). A progress line goes to a terminal's stderr
// after a second when the listing itself goes elsewhere. Also the progress line `stats --namespaces` uses.

import Foundation
import Glibc
import Synchronization
@_spi(Operator) import YashimaShared

enum ListCommand {
    static let spec = CommandSpec(
        name: "ls", summary: "list entries (from their headers; no payload is read)",
        usage: "yashima ls [--namespace NAME] [--long] [--json] [--dir DIR]",
        description: """
            One line per entry: namespace, size, last use and identity (a "yashima run" entry shows its
            command line). --long adds the codec, created and expiry times, variants and versions. Entries
            come in storage order as they are read (pipe to sort for another), so the first line is
            printed at once whatever the directory holds. Expired entries are listed (marked expired)
            until a lookup or trim removes them. --json prints one document whose "entries" array is
            streamed the same way.
            """,
        options: [
            .option("namespace", "NAME", "only entries of this namespace"),
            .flag("long", short: "l", "codec, created, expires, variants and versions too"), CommandSpec.json,
        ] + CommandSpec.storageOptions)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        let json = arguments.flag("json")
        let long = arguments.flag("long")
        let namespace = try arguments.string("namespace")
        let output = StreamWriter(fd: STDOUT_FILENO)
        if json { output.append("{\"directory\":" + JSONText.string(location.shown) + ",\"entries\":[") }
        if location.exists {
            let storage = try location.storageOperator(try location.openCache(budget: nil))
            let progress = ProgressLine(verb: "listed", unit: "entries", enabled: isatty(STDOUT_FILENO) == 0)
            await offPool {
                var first = true
                var headerWritten = false
                storage.forEachEntry(inNamespace: namespace, progress: progress.show) { entry in
                    if json {
                        output.append { buffer in
                            if !first { buffer.append(UInt8(ascii: ",")) }
                            append(entry, to: &buffer)
                        }
                    } else {
                        if !headerWritten {
                            output.append(
                                row(
                                    long
                                        ? ["NAMESPACE", "SIZE", "LAST USED", "CREATED", "EXPIRES", "CODEC", "IDENTITY"]
                                        : ["NAMESPACE", "SIZE", "LAST USED", "IDENTITY"]))
                            headerWritten = true
                        }
                        output.append(row(line(entry, long: long)))
                    }
                    progress.count()
                    // The first line at once; then whole buffers.
                    if first { output.flush() }
                    first = false
                    return !output.failed
                }
                progress.finish()
            }
        }
        if json { output.append("]}\n") }
        output.flush()
        return 0
    }

    /// One table row: fixed-width columns (the listing is streamed, so widths cannot follow the data; a
    /// longer cell pushes the rest of its line right), separated by two spaces, the last not padded.
    private static func row(_ cells: [String]) -> String {
        let widths = cells.count == 4 ? [16, 9, 29] : [16, 9, 19, 19, 19, 14]
        var text = ""
        for (index, cell) in cells.enumerated() {
            text += cell
            if index < cells.count - 1 {
                text += String(repeating: " ", count: max(0, widths[index] - cell.count) + 2)
            }
        }
        return text + "\n"
    }

    private static func line(_ entry: OperatorEntry, long: Bool) -> [String] {
        var identity = displayIdentity(entry)
        let lastUsed = LocalTime.text(entry.lastUsedAt)
        guard long else {
            return [
                Format.printable(entry.key.namespace), Format.bytes(entry.payloadByteCount),
                lastUsed + (entry.isExpired ? " (expired)" : ""), identity,
            ]
        }
        let components = components(entry.key)
        if !components.isEmpty { identity += "  [" + components + "]" }
        return [
            Format.printable(entry.key.namespace), Format.bytes(entry.payloadByteCount), lastUsed,
            LocalTime.text(entry.createdAt),
            entry.isExpired ? "expired" : entry.expiresAt.map(LocalTime.text) ?? "never",
            Format.printable(entry.codecIdentifier), identity,
        ]
    }

    /// A `yashima run` entry's identity is its argv: shown as a command line a shell runs as it is.
    static func displayIdentity(_ entry: OperatorEntry) -> String {
        displayIdentity(entry.key, codec: entry.codecIdentifier)
    }

    /// The identity of `key`, printable; for a `yashima run` entry (`codec`), its command line.
    static func displayIdentity(_ key: CacheKey, codec: String?) -> String {
        if codec == RunRecordCodec.identifier, let argv = RunKey.argv(of: key) { return Shell.command(argv) }
        return Format.printable(key.identity)
    }

    /// Variants and versions for people: `size=small, version renderer=3` (empty when there are none).
    static func components(_ key: CacheKey) -> String {
        (key.variants.map { "\($0.name)=\($0.value)" } + key.versions.map { "version \($0.name)=\($0.value)" })
            .map(Format.printable).joined(separator: ", ")
    }

    /// The JSON fields that name a key (and, for a `yashima run` entry, its `argv`).
    static func keyObject(_ key: CacheKey, codec: String) -> [String: Any] {
        var object: [String: Any] = [
            "namespace": key.namespace, "identity": key.identity,
            "variants": key.variants.map { ["name": $0.name, "value": $0.value] },
            "versions": key.versions.map { ["name": $0.name, "value": $0.value] },
            "codec": codec, "stableIdentifier": key.stableIdentifier,
        ]
        if codec == RunRecordCodec.identifier, let argv = RunKey.argv(of: key) {
            // JSON text cannot hold bytes that are not UTF-8: `argv` has them replaced, `command` is exact.
            object["argv"] = argv.map { String(decoding: $0.bytes, as: UTF8.self) }
            object["command"] = Shell.command(argv)
        }
        return object
    }

    /// One entry as a JSON object, written by hand into `out` (the same fields `keyObject` and
    /// JSONSerialization would give, keys sorted).
    static func append(_ entry: OperatorEntry, to out: inout [UInt8]) {
        let key = entry.key
        func components(_ list: [CacheKeyComponent]) {
            out.append(UInt8(ascii: "["))
            for (index, component) in list.enumerated() {
                out.append(contentsOf: index == 0 ? #"{"name":"#.utf8 : #",{"name":"#.utf8)
                JSONText.append(component.name, to: &out)
                out.append(contentsOf: #","value":"#.utf8)
                JSONText.append(component.value, to: &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(contentsOf: #"{"allocated":"#.utf8)
        out.append(contentsOf: String(entry.allocatedByteCount).utf8)
        let argv = entry.codecIdentifier == RunRecordCodec.identifier ? RunKey.argv(of: key) : nil
        if let argv {
            // JSON text cannot hold bytes that are not UTF-8: `argv` has them replaced, `command` is exact.
            out.append(contentsOf: #","argv":["#.utf8)
            for (index, word) in argv.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.append(String(decoding: word.bytes, as: UTF8.self), to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(contentsOf: #","codec":"#.utf8)
        JSONText.append(entry.codecIdentifier, to: &out)
        if let argv {
            out.append(contentsOf: #","command":"#.utf8)
            JSONText.append(Shell.command(argv), to: &out)
        }
        out.append(contentsOf: #","created":""#.utf8)
        UTCTime.append(entry.createdAt, to: &out)
        out.append(
            contentsOf: (entry.isExpired ? #"","expired":true,"expires":"# : #"","expired":false,"expires":"#).utf8)
        if let expires = entry.expiresAt {
            out.append(UInt8(ascii: "\""))
            UTCTime.append(expires, to: &out)
            out.append(UInt8(ascii: "\""))
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","file":"#.utf8)
        JSONText.append(entry.relativePath, to: &out)
        out.append(contentsOf: #","identity":"#.utf8)
        JSONText.append(key.identity, to: &out)
        out.append(contentsOf: #","lastUsed":""#.utf8)
        UTCTime.append(entry.lastUsedAt, to: &out)
        out.append(contentsOf: #"","namespace":"#.utf8)
        JSONText.append(key.namespace, to: &out)
        out.append(contentsOf: #","size":"#.utf8)
        out.append(contentsOf: String(entry.payloadByteCount).utf8)
        out.append(contentsOf: #","stableIdentifier":""#.utf8)
        out.append(contentsOf: entry.stableIdentifier.utf8)
        out.append(contentsOf: #"","variants":"#.utf8)
        components(key.variants)
        out.append(contentsOf: #","versions":"#.utf8)
        components(key.versions)
        out.append(UInt8(ascii: "}"))
    }
}

/// JSON text written by hand: strings escaped as JSONSerialization escapes them (without escaping `/`).
enum JSONText {
    static func string(_ text: String) -> String {
        var bytes: [UInt8] = []
        append(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` quoted and escaped; bytes that need no escape (all of most keys) are copied as is.
    static func append(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                case 0x08: out.append(contentsOf: #"\b"#.utf8)
                case 0x0C: out.append(contentsOf: #"\f"#.utf8)
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0xF)])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// `2026-11-30T12:34:56.789Z` (what `Format.iso` prints) without a formatter per call.
enum UTCTime {
    static func iso(_ date: Date) -> String {
        var bytes: [UInt8] = []
        append(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func append(_ date: Date, to out: inout [UInt8]) {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())  // as ISO8601DateFormatter rounds
        var seconds = time_t(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
        let millis = Int(milliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        appendCalendar(parts, dateSeparator: UInt8(ascii: "T"), to: &out)
        out.append(UInt8(ascii: "."))
        appendDigits(millis, 3, to: &out)
        out.append(UInt8(ascii: "Z"))
    }
}

/// `2026-11-30 12:34:56` in local time (what `Format.local` prints) without a formatter per call.
enum LocalTime {
    static func text(_ date: Date) -> String {
        var seconds = time_t(Int64(date.timeIntervalSince1970.rounded(.down)))
        var parts = tm()
        localtime_r(&seconds, &parts)
        var bytes: [UInt8] = []
        appendCalendar(parts, dateSeparator: UInt8(ascii: " "), to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

private func appendCalendar(_ parts: tm, dateSeparator: UInt8, to out: inout [UInt8]) {
    appendDigits(Int(parts.tm_year) + 1900, 4, to: &out)
    out.append(UInt8(ascii: "-"))
    appendDigits(Int(parts.tm_mon) + 1, 2, to: &out)
    out.append(UInt8(ascii: "-"))
    appendDigits(Int(parts.tm_mday), 2, to: &out)
    out.append(dateSeparator)
    appendDigits(Int(parts.tm_hour), 2, to: &out)
    out.append(UInt8(ascii: ":"))
    appendDigits(Int(parts.tm_min), 2, to: &out)
    out.append(UInt8(ascii: ":"))
    appendDigits(Int(parts.tm_sec), 2, to: &out)
}

/// `value` in decimal, zero-padded to `width` digits (more when it has more).
private func appendDigits(_ value: Int, _ width: Int, to out: inout [UInt8]) {
    let digits = Array(String(value).utf8)
    if digits.count < width { out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width - digits.count)) }
    out.append(contentsOf: digits)
}

/// Output gathered into 64 KiB writes; `failed` once the reader went away (EPIPE).
final class StreamWriter: Sendable {
    private let state = Mutex<(buffer: [UInt8], failed: Bool)>(([], false))
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    var failed: Bool { state.withLock { $0.failed } }

    func append(_ text: String) {
        append { $0.append(contentsOf: text.utf8) }
    }

    /// Lets `body` write into the buffer directly.
    func append(_ body: (inout [UInt8]) -> Void) {
        let full = state.withLock { state -> Bool in
            body(&state.buffer)
            return state.buffer.count >= 64 * 1024
        }
        if full { flush() }
    }

    func flush() {
        state.withLock { state in
            guard !state.buffer.isEmpty, !state.failed else { return }
            if !state.buffer.withUnsafeBytes({ Output.write($0, to: fd) }) { state.failed = true }
            state.buffer.removeAll(keepingCapacity: true)
        }
    }
}

/// A progress line on a terminal's stderr for work that lasts over a second: at most ten updates a
/// second, cleared at the end. Counts entries as they come and folders as each is done.
final class ProgressLine: Sendable {
    private let verb: String
    private let unit: String
    private let enabled: Bool
    private let started = ContinuousClock.now
    private let state = Mutex<(entries: Int, lastShown: ContinuousClock.Instant?, shown: Bool)>((0, nil, false))

    /// - Parameter enabled: Also false when what it would interleave with goes to the same terminal.
    init(verb: String, unit: String, enabled: Bool = true) {
        self.verb = verb
        self.unit = unit
        self.enabled = enabled && Output.standardErrorIsTerminal
    }

    func count() {
        state.withLock { $0.entries += 1 }
    }

    func show(_ progress: ListingProgress) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let elapsed = started.duration(to: now)
        guard elapsed >= .seconds(1) else { return }
        let line = state.withLock { state -> String? in
            if let last = state.lastShown, last.duration(to: now) < .milliseconds(100) { return nil }
            state.lastShown = now
            state.shown = true
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let entries = max(state.entries, progress.entries)
            let done = Double(progress.foldersDone) / Double(max(1, progress.folders))
            var text =
                "\(verb) \(entries) \(unit), \(Int(done * 100))% of the folders, "
                + String(format: "%.0f \(unit)/s", Double(entries) / max(seconds, 1e-3))
            if done > 0 && done < 1 { text += ", ETA " + Format.seconds(seconds / done * (1 - done)) }
            return text
        }
        if let line { Output.error("\r\u{1B}[K" + line, terminator: false) }
    }

    func finish() {
        if state.withLock({ $0.shown }) { Output.error("\r\u{1B}[K", terminator: false) }
    }
}
