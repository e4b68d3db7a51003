// `yashima put`: store standard input under a key, for scripts that manage their own keys
// (CommandLine/ValueKey.swift); `zlib-data-v1` values are compressed, as the library's CompressedDataCodec
// does. With `--remote`, the value is also stored remotely (best effort).

import Foundation
@_spi(Operator) import YashimaShared

enum PutCommand {
    static let spec = CommandSpec(
        name: "put", summary: "store standard input under a key",
        usage: "yashima put --identity TEXT [--namespace NAME] [--variant N=V]... [--expire DURATION] [--dir DIR]",
        description: """
            Reads standard input to its end and stores it under the key, replacing any value (every
            process's next lookup sees the new one). Exit status 1 when it cannot be stored: a value larger
            than the whole budget, or a full disk. With --remote, the value is also stored remotely (best
            effort: a remote that is down is skipped, with a warning on standard error; exit status 0).
            """,
        options: ValueKey.options + [
            .option("expire", "DURATION", "the value expires after DURATION (90s, 15m, 2h, 7d)"),
            .option("max-size", "SIZE", "budget for the whole directory (recorded, as with run)"),
            RemoteOption.spec, RemoteOption.readOnlySpec,
        ] + CommandSpec.storageOptions, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let key = try ValueKey.key(arguments)
        let codecIdentifier = try arguments.string("codec") ?? DataCodec().identifier
        let location = try Location(arguments)
        let expiry = try Expiry.effective(commandLine: try Expiry.commandLine(arguments), directory: location.path)
        let explicit = try Budget.commandLine(arguments)
        let remote = try RemoteOption.parse(arguments, directory: location.path)
        let probe = try location.openCache(budget: explicit, remote: remote)
        let budget = try Budget.effective(explicit: explicit, storage: try location.storageOperator(probe))
        let cache = budget == explicit ? probe : try location.openCache(budget: budget, remote: remote)
        let input = await StorageOperator.offPool { FileHandle.standardInput.readDataToEndOfFile() }
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
