// `yashima ls [--namespace N] [--long] [--json]`: the entries, from their headers (no payload is read):
// namespace, identity (a `yashima run` entry's identity shown as its command line), variants, versions,
// codec, size, created, expires and last used. Streamed in storage order, one fan-out folder at a time:
// the first line comes at once and memory does not grow with the directory (a million entries list at
// header-read speed); lines and JSON are written by hand into one buffer (Foundation's formatters and
// JSONSerialization cost more than reading the header). A progress line goes to a terminal's stderr
// after a second when the listing itself goes elsewhere (Output/ProgressLine.swift).

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
        ] + CommandSpec.storageOptions, run: run)

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
            await StorageOperator.offPool {
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
        var identity = EntryText.displayIdentity(entry)
        let lastUsed = LocalTime.text(entry.lastUsedAt)
        guard long else {
            return [
                Format.printable(entry.key.namespace), Format.bytes(entry.payloadByteCount),
                lastUsed + (entry.isExpired ? " (expired)" : ""), identity,
            ]
        }
        let components = EntryText.components(entry.key)
        if !components.isEmpty { identity += "  [" + components + "]" }
        return [
            Format.printable(entry.key.namespace), Format.bytes(entry.payloadByteCount), lastUsed,
            LocalTime.text(entry.createdAt),
            entry.isExpired ? "expired" : entry.expiresAt.map(LocalTime.text) ?? "never",
            Format.printable(entry.codecIdentifier), identity,
        ]
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
