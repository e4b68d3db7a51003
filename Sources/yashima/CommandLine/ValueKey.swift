// The key options of `get` and `put` (namespace, identity, variants and versions as flags, and the codec
// identifier) and the key they make; `RawCodec`, which stores the bytes as given under any identifier.

import Foundation
@_spi(Operator) import YashimaShared

/// Stores bytes as they are, under any codec identifier (`data-v1` is the library's `DataCodec`).
struct RawCodec: CacheCodec {
    let identifier: String
    func encode(_ value: Data) throws -> Data { value }
    func decode(_ data: Data) throws -> Data { data }
}

/// The key `get` and `put` take from their options.
enum ValueKey {
    static let options: [OptionSpec] = [
        .option("namespace", "NAME", "the key's namespace (default: default)"),
        .option("identity", "TEXT", "the key's identity (required)"),
        .option("variant", "NAME=VALUE", "a variant component (repeatable)"),
        .option("version", "NAME=VALUE", "a version component (repeatable)"),
        .option("codec", "ID", "the codec identifier (default: data-v1, the library's DataCodec)"),
    ]

    static func key(_ arguments: ParsedArguments) throws -> CacheKey {
        guard let identity = try arguments.string("identity") else {
            throw CommandFailure.usage("--identity is required (the key's identity)")
        }
        var key = CacheKey(namespace: try arguments.string("namespace") ?? "default", identity: identity)
        for text in try arguments.strings("variant") {
            let (name, value) = try parsePair(text, option: "variant")
            key = key.variant(name, value)
        }
        for text in try arguments.strings("version") {
            let (name, value) = try parsePair(text, option: "version")
            key = key.version(name, value)
        }
        return key
    }
}
