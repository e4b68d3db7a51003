// `yashima get` (write a stored value to standard output; exit 1 on a miss) and `yashima put` (store
// standard input), for scripts that manage their own keys: namespace, identity, variants and versions as
// flags, and the codec identifier (the bytes are stored as given; `zlib-data-v1` values are
// decompressed by get and compressed by put, as the library's CompressedDataCodec does).

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

/// Stores bytes as they are, under any codec identifier (`data-v1` is the library's `DataCodec`).
struct RawCodec: CacheCodec {
    let identifier: String
    func encode(_ value: Data) throws -> Data { value }
    func decode(_ data: Data) throws -> Data { data }
}

enum ValueCommands {
    static let keyOptions: [OptionSpec] = [
        .option("namespace", "NAME", "the key's namespace (default: default)"),
        .option("identity", "TEXT", "the key's identity (required)"),
        .option("variant", "NAME=VALUE", "a variant component (repeatable)"),
        .option("version", "NAME=VALUE", "a version component (repeatable)"),
        .option("codec", "ID", "the codec identifier (default: data-v1, the library's DataCodec)"),
    ]

    static let getSpec = CommandSpec(
        name: "get", summary: "write a stored value to standard output (exit 1 on a miss)",
        usage: "yashima get --identity TEXT [--namespace NAME] [--variant N=V]... [--version N=V]... [--dir DIR]",
        description: """
            Looks the key up and writes the value's bytes to standard output. Exit status 1 on a miss
            (nothing is written), 0 on a hit. Values of Swift programs are found with the same key and
            codec: data-v1 (DataCodec) and string-utf8-v1 (StringCodec) are their bytes as stored;
            zlib-data-v1 (CompressedDataCodec) is decompressed. With --remote, a local miss is looked up
            remotely (a hit is also stored locally); get never writes remotely.
            """,
        options: keyOptions + [RemoteOption.spec] + CommandSpec.storageOptions)

    static let putSpec = CommandSpec(
        name: "put", summary: "store standard input under a key",
        usage: "yashima put --identity TEXT [--namespace NAME] [--variant N=V]... [--expire DURATION] [--dir DIR]",
        description: """
            Reads standard input to its end and stores it under the key, replacing any value (every
            process's next lookup sees the new one). Exit status 1 when it cannot be stored: a value larger
            than the whole budget, or a full disk. With --remote, the value is also stored remotely (best
            effort: a remote that is down is skipped, with a warning on standard error; exit status 0).
            """,
        options: keyOptions + [
            .option("expire", "DURATION", "the value expires after DURATION (90s, 15m, 2h, 7d)"),
            .option("max-size", "SIZE", "budget for the whole directory (recorded, as with run)"),
            RemoteOption.spec,
        ] + CommandSpec.storageOptions)

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

    static func get(_ arguments: ParsedArguments) async throws -> Int32 {
        let key = try key(arguments)
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

    static func put(_ arguments: ParsedArguments) async throws -> Int32 {
        let key = try key(arguments)
        let codecIdentifier = try arguments.string("codec") ?? DataCodec().identifier
        let location = try Location(arguments)
        let expiry = try Settings.value("expire", arguments, directory: location.path).map {
            try parseDuration($0.0, option: "expire")
        }
        let explicit = try arguments.string("max-size").map {
            try parseSize($0, option: "max-size", allowUnlimited: true)
        }
        let remote = try RemoteOption.parse(arguments, directory: location.path)
        let probe = try location.openCache(budget: explicit, remote: remote)
        let (budget, _) = try effectiveBudget(arguments, storage: try location.storageOperator(probe))
        let cache = budget == explicit ? probe : try location.openCache(budget: budget, remote: remote)
        let input = await offPool { FileHandle.standardInput.readDataToEndOfFile() }
        var options = YCache.Options()
        if let expiry { options.expiry = .after(expiry) }
        let (before, started) = (cache.statistics, ContinuousClock.now)
        let stored: Bool
        do {
            if codecIdentifier == CompressedDataCodec().identifier {
                try await cache.store(input, for: key, codec: CompressedDataCodec(), options: options)
                stored = try await cache.contains(for: key, codec: CompressedDataCodec())
            } else {
                let codec = RawCodec(identifier: codecIdentifier)
                try await cache.store(input, for: key, codec: codec, options: options)
                stored = try await cache.contains(for: key, codec: codec)
            }
        } catch let error as YCache.Error {
            throw CommandFailure.from(error)
        }
        // The remote tier is best effort: a value it did not take is still stored here (exit status 0).
        if let remote, stored, cache.statistics.remotePuts == before.remotePuts {
            let what =
                RemoteReport.clause(
                    since: before, to: cache.statistics, options: remote.options,
                    elapsed: started.duration(to: .now)) ?? "not stored"
            Output.error("yashima: warning: the remote tier did not take the value (\(what)); stored locally only")
        }
        guard stored else {
            throw CommandFailure.failed(
                "not stored: the value (\(Format.bytes(Int64(input.count)))) does not fit the budget of "
                    + "\(Format.bytes(budget)) (or expires at once)")
        }
        return 0
    }
}
