// `yashima get`: write a stored value to standard output (exit 1 on a miss), for scripts that manage their
// own keys (CommandLine/ValueKey.swift); `zlib-data-v1` values are decompressed, as the library's
// CompressedDataCodec does. With `--remote`, a local miss is looked up remotely (read-only).

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

enum GetCommand {
    static let spec = CommandSpec(
        name: "get", summary: "write a stored value to standard output (exit 1 on a miss)",
        usage: "yashima get --identity TEXT [--namespace NAME] [--variant N=V]... [--version N=V]... [--dir DIR]",
        description: """
            Looks the key up and writes the value's bytes to standard output. Exit status 1 on a miss
            (nothing is written), 0 on a hit. Values of Swift programs are found with the same key and
            codec: data-v1 (DataCodec) and string-utf8-v1 (StringCodec) are their bytes as stored;
            zlib-data-v1 (CompressedDataCodec) is decompressed. With --remote, a local miss is looked up
            remotely (a hit is also stored locally); get never writes remotely.
            """,
        options: ValueKey.options + [RemoteOption.spec, RemoteOption.readOnlySpec] + CommandSpec.storageOptions,
        run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let key = try ValueKey.key(arguments)
        let codecIdentifier = try arguments.string("codec") ?? DataCodec().identifier
        let location = try Location(arguments)
        let remote = try RemoteOption.parse(arguments, readOnly: true, directory: location.path)
        guard location.exists || remote != nil else { return 1 }
        let cache = try location.openCache(budget: nil, remote: remote)
        let value: Data?
        do {
            if codecIdentifier == CompressedDataCodec().identifier {
                value = try await lookUp(key, codec: CompressedDataCodec(), in: cache, remotely: remote != nil)
            } else {
                value = try await lookUp(
                    key, codec: RawCodec(identifier: codecIdentifier), in: cache, remotely: remote != nil)
            }
        } catch let error as YCache.Error {
            throw CommandFailure.from(error)
        }
        guard let value else { return 1 }
        guard Output.write(value, to: STDOUT_FILENO) else {
            throw CommandFailure.failed("cannot write to standard output: \(String(cString: strerror(errno)))")
        }
        return 0
    }

    /// The stored value: local only, or with a (read-only) remote tier a production that finds it there
    /// and never generates.
    private static func lookUp<Codec: CacheCodec>(_ key: CacheKey, codec: Codec, in cache: YCache, remotely: Bool)
        async throws -> Codec.Value?
    {
        guard remotely else { return try await cache.valueIfCached(for: key, codec: codec) }
        return try await cache.optionalValue(for: key, codec: codec) { nil }
    }
}
