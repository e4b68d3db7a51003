// `yashima stats [--namespaces] [--zero]`: what a storage directory holds (entries, bytes, budget), what
// is in flight (keys being generated, waiting processes, a trim), its debris, and the hit/miss/generation
// counters every process using the directory shares (since the last `--zero`). From the shared counters
// in `state`, the fan-out folders' names, and the small folders (locks, tmp): under a second at a million
// entries. `--namespaces` adds a census of every entry's header (per namespace, oldest and newest use,
// expired and unreadable entries), at header-read speed with a progress line on a terminal. Writes nothing
// except with --zero.

import Foundation
@_spi(Operator) import YashimaShared

enum StatsCommand {
    static let spec = CommandSpec(
        name: "stats", summary: "show what the directory holds and the counters all processes share",
        usage: "yashima stats [--namespaces] [--zero] [--json] [--dir DIR]",
        description: """
            Entries, bytes on disk and the budget (from the usage counters every process keeps in the
            directory's state file, reconciled by each trim), lock files in flight (keys being generated
            now, processes waiting for them), debris (lock files, staging files and folders left by killed
            processes, swept by trim and verify --repair), and the hit, miss and generation counters that
            every process using the directory adds to, since the last "yashima stats --zero"; with a remote
            tier, its counters (hits, errors by kind, values rejected by reason, waits for other hosts) and
            each remote server's health as every process shares it (up, or down and skipped until when); the
            filesystem's free space, the floor writers keep free on it (min-free), and the trims that made
            room for a write (on a full disk, or below the floor).
            Reads no entry: fast at any size (where listing the folders' names takes over half a second, the
            count is scaled up from those listed and shown as "about"). --namespaces also reads every entry's
            header, for exact counts: per-namespace counts and bytes, the oldest and newest use (entry
            mtimes, which hits set at most once a minute), expired and unreadable entries. A directory that
            does not exist shows as empty.
            """,
        options: [
            .flag("namespaces", "also read every entry's header: per namespace, oldest and newest use"),
            .flag("zero", "reset the shared counters to zero (for every process), after printing them"),
            CommandSpec.json,
            .option(
                "format", "FORMAT",
                "text (default), json (as --json), or prometheus: the text exposition format, for "
                    + "node_exporter's textfile collector"),
        ]
            + CommandSpec.storageOptions, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        let format = try arguments.string("format") ?? (arguments.flag("json") ? "json" : "text")
        guard ["text", "json", "prometheus"].contains(format) else {
            throw UsageError("--format must be text, json or prometheus, not \(Shell.quote(Array(format.utf8)))")
        }
        let json = format == "json"
        let withCensus = arguments.flag("namespaces")
        guard location.exists else {
            if arguments.flag("zero") { throw CommandFailure.usage("no storage directory at \(location.shown)") }
            if json {
                Output.json(["directory": location.shown, "exists": false, "entries": 0, "bytes": 0])
            } else {
                Output.line("directory   \(location.shown) (does not exist yet: nothing stored)")
            }
            return 0
        }
        let cache = try location.openCache(budget: nil)
        let storage = try location.storageOperator(cache)
        let (counted, census, entryCensus) = await StorageOperator.offPool {
            () -> ((count: Int, exact: Bool), DirectoryCensus, EntryCensus?) in
            // Names only, for at most half a second: past that the count is scaled up from the folders
            // listed (keys spread evenly over them) and said to be an estimate.
            guard withCensus else {
                return (storage.countEntryFiles(within: .milliseconds(500)), storage.census(), nil)
            }
            let progress = ProgressLine(verb: "read", unit: "headers")
            let entries = storage.entryCensus(progress: progress.show)
            progress.finish()
            return ((entries.entries + entries.unreadableEntries, true), storage.census(), entries)
        }
        let count = counted.count
        let counters = storage.counters()
        let (remoteCounters, remoteHealth) = (storage.remoteCounters(), storage.remoteHealth())
        let remoteMembers = storage.remoteMembers()
        if arguments.flag("zero") { storage.zeroCounters() }
        let bytes = entryCensus?.bytes ?? storage.usageCounter
        let recorded = storage.recordedBudget
        let budget = recorded ?? Budget.defaultBytes
        let hits = counters.memoryHits + counters.storageHits
        let lookups = hits + counters.misses
        let hitRate: Double? = lookups > 0 ? Double(hits) / Double(lookups) : nil
        let space = storage.filesystemSpace
        let minFree = FreeSpaceSetting.inForce(location)
        let floor = space.map { minFree.floor?.bytes(ofFilesystemBytes: $0.totalBytes) ?? 0 }

        if format == "prometheus" {
            let snapshot = StatsSnapshot(
                entries: count, bytes: bytes, budget: budget,
                counters: .init(
                    memoryHits: counters.memoryHits, storageHits: counters.storageHits, misses: counters.misses,
                    generations: counters.generations, sharedGenerations: counters.sharedGenerations,
                    corruptEntries: counters.corruptEntries, writeFailures: counters.writeFailures,
                    crossProcessTimeouts: counters.crossProcessTimeouts,
                    crossProcessLockFailures: counters.crossProcessLockFailures,
                    savedNanoseconds: counters.savedNanoseconds, pressureTrims: counters.pressureTrims),
                census: census.lockFilesHeld.map { held in
                    .init(
                        lockFiles: census.lockFiles, held: held, waiting: census.waitingProcesses ?? 0,
                        trimRunning: census.trimRunning, debris: census.debris)
                }, zeroedAt: counters.zeroedAt,
                filesystem: space.map { (total: $0.totalBytes, free: $0.availableBytes, floor: floor ?? 0) })
            let families =
                Metrics.families(snapshot) + RemoteReport.families(remoteCounters, remoteHealth, members: remoteMembers)
            Output.out(Metrics.exposition(families, directory: location.shown))
            return 0
        }

        if json {
            var object: [String: Any] = [
                "directory": location.shown, "exists": true, "entries": count, "entriesExact": counted.exact,
                "bytes": bytes,
                "usageCounter": storage.usageCounter, "payloadBytes": storage.payloadCounter,
                "budget": budget == Int64.max ? NSNull() : budget,
                "budgetSource": recorded == nil ? "default" : "recorded",
                "lockFiles": census.lockFiles, "lockFilesHeld": census.lockFilesHeld ?? NSNull(),
                "waitingProcesses": census.waitingProcesses ?? NSNull(), "trimRunning": census.trimRunning,
                "debris": [
                    "total": census.debris, "staleLockFiles": census.staleLockFiles,
                    "stagingFiles": census.stagingFiles, "staleStagingFiles": census.staleStagingFiles,
                    "stagingBytes": census.stagingBytes, "stagingFolders": census.stagingFolders,
                    "staleStagingFolders": census.staleStagingFolders,
                ],
            ]
            if let entryCensus {
                object["namespaces"] = entryCensus.namespaces.mapValues { ["entries": $0.entries, "bytes": $0.bytes] }
                object["oldestUse"] = entryCensus.oldestUse.map(UTCTime.iso) ?? NSNull()
                object["newestUse"] = entryCensus.newestUse.map(UTCTime.iso) ?? NSNull()
                object["expiredEntries"] = entryCensus.expiredEntries
                object["unreadableEntries"] = entryCensus.unreadableEntries
            }
            object["counters"] = [
                "memoryHits": counters.memoryHits, "storageHits": counters.storageHits, "hits": hits,
                "misses": counters.misses, "generations": counters.generations,
                "sharedGenerations": counters.sharedGenerations, "corruptEntries": counters.corruptEntries,
                "writeFailures": counters.writeFailures, "crossProcessTimeouts": counters.crossProcessTimeouts,
                "crossProcessLockFailures": counters.crossProcessLockFailures,
                "trimFailures": counters.trimFailures, "pressureTrims": counters.pressureTrims,
                "savedSeconds": Double(counters.savedNanoseconds) / 1e9,
                "hitRate": hitRate.map { $0 as Any } ?? NSNull(),
                "since": counters.zeroedAt.map(Format.iso) ?? NSNull(), "zeroed": arguments.flag("zero"),
            ]
            object["filesystem"] = [
                "bytes": space.map { $0.totalBytes as Any } ?? NSNull(),
                "freeBytes": space.map { $0.availableBytes as Any } ?? NSNull(),
                "floorBytes": floor.map { $0 as Any } ?? NSNull(), "minFree": minFree.text,
                "minFreeSource": minFree.2.description,
            ]
            object["remote"] = RemoteReport.json(remoteCounters, remoteHealth, members: remoteMembers)
            Output.json(object)
            return 0
        }

        var rows: [[String]] = [["directory", location.shown]]
        var holding =
            (counted.exact ? "" : "about ")
            + "\(Format.count(count, "entry", "entries")), \(Format.bytes(bytes)) on disk"
        if budget == Int64.max {
            holding += "; no budget (unlimited)"
        } else {
            let percent = String(format: "%.1f", Double(bytes) / Double(budget) * 100)
            holding += "; budget \(Format.bytes(budget))\(recorded == nil ? " (default)" : ""), \(percent)% used"
            if bytes > budget {
                // Writers trim after they publish; a budget lowered since, or a writer with a larger
                // budget of its own, leaves the directory over it until then.
                holding += " (over budget: the next write trims it; yashima trim trims now)"
            }
        }
        rows.append(["stored", holding])
        if let entryCensus {
            if entryCensus.expiredEntries > 0 || entryCensus.unreadableEntries > 0 {
                rows.append([
                    "",
                    "\(entryCensus.expiredEntries) expired, \(entryCensus.unreadableEntries) unreadable (see yashima verify)",
                ])
            }
            for (index, name) in entryCensus.namespaces.keys.sorted().enumerated() {
                let value = entryCensus.namespaces[name]!
                rows.append([
                    index == 0 ? "namespaces" : "",
                    "\(Format.printable(name)): \(Format.count(value.entries, "entry", "entries")), \(Format.bytes(value.bytes))",
                ])
            }
            if let oldest = entryCensus.oldestUse, let newest = entryCensus.newestUse {
                rows.append(["oldest use", "\(LocalTime.text(oldest)) (\(Format.relative(oldest)))"])
                rows.append(["newest use", "\(LocalTime.text(newest)) (\(Format.relative(newest)))"])
            }
        } else {
            rows.append(["namespaces", "yashima stats --namespaces reads every header for them"])
        }
        var flight = "\(Format.count(census.lockFiles, "lock file"))"
        if let held = census.lockFilesHeld, let waiting = census.waitingProcesses {
            flight += ": \(held) being generated, \(Format.count(waiting, "process", "processes")) waiting"
        }
        flight += census.trimRunning ? "; a trim is running" : ""
        if let space, let floor {
            rows.append([
                "filesystem",
                "\(Format.bytes(space.availableBytes)) free of \(Format.bytes(space.totalBytes)); writers keep "
                    + "\(Format.bytes(floor)) free (min-free \(minFree.text)\(minFree.2 == .builtIn ? ", the default" : "")); "
                    + "\(Format.count(Int(counters.pressureTrims), "trim")) to make room",
            ])
        }
        rows.append(["in flight", flight])
        rows.append([
            "debris",
            "\(census.debris) to sweep (\(census.staleLockFiles) lock files, \(census.staleStagingFiles) staging files, "
                + "\(census.staleStagingFolders) folders older than an hour); \(census.stagingFiles) staging files "
                + "(\(Format.bytes(census.stagingBytes))) in all",
        ])
        rows.append([
            "hits",
            "\(hits) (memory \(counters.memoryHits), storage \(counters.storageHits)), misses \(counters.misses)"
                + (hitRate.map { String(format: ", hit rate %.1f%%", $0 * 100) } ?? ""),
        ])
        rows.append([
            "generations",
            "\(counters.generations), waited for another \(counters.sharedGenerations); corrupt entries "
                + "\(counters.corruptEntries), write failures \(counters.writeFailures), wait timeouts "
                + "\(counters.crossProcessTimeouts), lock failures \(counters.crossProcessLockFailures)"
                + (counters.trimFailures > 0 ? ", trim failures \(counters.trimFailures)" : ""),
        ])
        rows += RemoteReport.rows(remoteCounters, remoteHealth, members: remoteMembers)
        rows.append(["time saved", Format.seconds(Double(counters.savedNanoseconds) / 1e9) + " (by yashima run)"])
        rows.append([
            "counting since",
            counters.zeroedAt.map { "\(Format.local($0)) (\(Format.relative($0)))" } ?? "the directory was created",
        ])
        if arguments.flag("zero") { rows.append(["", "counters zeroed now"]) }
        Output.line(Format.table(rows))
        return 0
    }
}
