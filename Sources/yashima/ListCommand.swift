// `yashima ls [--namespace N] [--long] [--json]`: the entries, from their headers (no payload is read):
// namespace, identity (a `yashima run` entry's identity shown as its command line), variants, versions,
// codec, size, created, expires and last used.

import Foundation
@_spi(Operator) import YashimaShared

enum ListCommand {
    static let spec = CommandSpec(
        name: "ls", summary: "list entries (from their headers; no payload is read)",
        usage: "yashima ls [--namespace NAME] [--long] [--json] [--dir DIR]",
        description: """
            One line per entry: namespace, size, last use and identity (a "yashima run" entry shows its
            command line). --long adds the codec, created and expiry times, variants and versions. Entries
            are sorted by namespace, then identity. Expired entries are listed (marked expired) until a
            lookup or trim removes them.
            """,
        options: [
            .option("namespace", "NAME", "only entries of this namespace"),
            .flag("long", short: "l", "codec, created, expires, variants and versions too"), CommandSpec.json,
        ] + CommandSpec.storageOptions)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        var entries: [OperatorEntry] = []
        if location.exists {
            let storage = try location.storageOperator(try location.openCache(budget: nil))
            let namespace = try arguments.string("namespace")
            entries = await offPool { storage.entries(inNamespace: namespace).entries }
        }
        entries.sort {
            ($0.key.namespace, $0.key.identity, $0.relativePath) < ($1.key.namespace, $1.key.identity, $1.relativePath)
        }
        if arguments.flag("json") {
            Output.json(["directory": location.shown, "entries": entries.map(object)])
            return 0
        }
        let long = arguments.flag("long")
        var rows: [[String]] = []
        if !entries.isEmpty {
            rows.append(
                long
                    ? ["NAMESPACE", "SIZE", "LAST USED", "CREATED", "EXPIRES", "CODEC", "IDENTITY"]
                    : ["NAMESPACE", "SIZE", "LAST USED", "IDENTITY"])
        }
        for entry in entries {
            var identity = displayIdentity(entry)
            if long {
                let components = components(entry.key)
                if !components.isEmpty { identity += "  [" + components + "]" }
                rows.append([
                    Format.printable(entry.key.namespace), Format.bytes(entry.payloadByteCount),
                    Format.local(entry.lastUsedAt), Format.local(entry.createdAt),
                    entry.isExpired ? "expired" : entry.expiresAt.map(Format.local) ?? "never",
                    Format.printable(entry.codecIdentifier), identity,
                ])
            } else {
                rows.append([
                    Format.printable(entry.key.namespace), Format.bytes(entry.payloadByteCount),
                    Format.local(entry.lastUsedAt) + (entry.isExpired ? " (expired)" : ""), identity,
                ])
            }
        }
        if !rows.isEmpty { Output.line(Format.table(rows)) }
        return 0
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

    static func object(_ entry: OperatorEntry) -> [String: Any] {
        keyObject(entry.key, codec: entry.codecIdentifier).merging([
            "size": entry.payloadByteCount, "allocated": entry.allocatedByteCount,
            "created": Format.iso(entry.createdAt), "expires": entry.expiresAt.map(Format.iso) ?? NSNull(),
            "lastUsed": Format.iso(entry.lastUsedAt), "expired": entry.isExpired, "file": entry.relativePath,
        ]) { $1 }
    }
}
