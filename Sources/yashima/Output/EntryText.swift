// An entry's key for people and scripts, as `ls` and `watch` show it: the identity (a `yashima run`
// entry's as its command line), variants and versions, and the JSON fields that name a key.

import Foundation
@_spi(Operator) import YashimaShared

enum EntryText {
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
}
