// `yashima trim [--max-size SIZE]`: trim now, least recently used first, to the directory's budget or the
// given size (this time only), sweeping debris; with the library's public operations.

import Foundation
@_spi(Operator) import YashimaShared

enum TrimCommand {
    static let spec = CommandSpec(
        name: "trim", summary: "trim now, least recently used first, to the budget or --max-size",
        usage: "yashima trim [--max-size SIZE] [--json] [--dir DIR]",
        description: """
            Recounts the directory's usage and unlinks least-recently-used entries until it is within the
            budget: --max-size SIZE for this trim only (4096, 500M, 10G), else the budget recorded by
            "yashima run --max-size", else 1 GiB. Also sweeps debris older than an hour. Entries in use by
            other processes stay readable by them (they are only unlinked). With an unlimited budget it only
            sweeps debris.
            """,
        options: [.option("max-size", "SIZE", "trim to this size (this time only)"), CommandSpec.json]
            + CommandSpec.storageOptions, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        let explicit = try arguments.string("max-size").map { try parseSize($0, option: "max-size") }
        let json = arguments.flag("json")
        guard location.exists else {
            if json {
                Output.json(["directory": location.shown, "exists": false])
            } else {
                Output.line("nothing to trim: \(location.shown) does not exist")
            }
            return 0
        }
        let probe = try location.openCache(budget: nil)
        let storage = try location.storageOperator(probe)
        let budget = explicit ?? storage.recordedBudget ?? Budget.defaultBytes
        let cache = try location.openCache(budget: budget)
        do {
            let before = try await cache.storageUsage()
            try await cache.trimStorageIfNeeded()
            let after = try await cache.storageUsage()
            if json {
                Output.json([
                    "directory": location.shown, "budget": budget == Int64.max ? NSNull() : budget,
                    "before": ["entries": before.entryCount, "bytes": before.allocatedByteCount],
                    "after": ["entries": after.entryCount, "bytes": after.allocatedByteCount],
                    "removed": max(0, before.entryCount - after.entryCount),
                ])
            } else {
                let target = budget == Int64.max ? "no budget" : "budget \(Format.bytes(budget))"
                Output.line(
                    "\(Format.bytes(before.allocatedByteCount)) → \(Format.bytes(after.allocatedByteCount)) (\(target)); removed "
                        + Format.count(max(0, before.entryCount - after.entryCount), "entry", "entries")
                        + ", \(Format.count(after.entryCount, "entry", "entries")) left")
            }
        } catch let error as YCache.Error {
            throw CommandFailure.from(error)
        }
        return 0
    }
}
