// `yashima stats --format prometheus`: the directory's shared counters, sizes, budget and what is in
// flight in the Prometheus text exposition format (version 0.0.4), for node_exporter's textfile
// collector. Names and units follow Prometheus' conventions: counters end in `_total`, sizes are bytes,
// times seconds; every series carries the directory as a label.

import Foundation

/// One metric family: its name, help, type and samples (label set → value).
struct MetricFamily {
    enum Kind: String { case counter, gauge }
    let name: String
    let help: String
    let kind: Kind
    var samples: [(labels: [(String, String)], value: Double)]
}

enum Metrics {
    /// The families for one directory's statistics.
    static func families(_ stats: StatsSnapshot) -> [MetricFamily] {
        let c = stats.counters
        func counter(_ name: String, _ help: String, _ value: UInt64) -> MetricFamily {
            MetricFamily(name: name, help: help, kind: .counter, samples: [([], Double(value))])
        }
        func gauge(_ name: String, _ help: String, _ value: Double) -> MetricFamily {
            MetricFamily(name: name, help: help, kind: .gauge, samples: [([], value)])
        }
        var families = [
            MetricFamily(
                name: "yashima_hits_total", help: "Lookups answered from a process's memory or from storage.",
                kind: .counter,
                samples: [
                    ([("source", "memory")], Double(c.memoryHits)), ([("source", "storage")], Double(c.storageHits)),
                ]),
            counter("yashima_misses_total", "Get-or-generate lookups that found nothing at first.", c.misses),
            counter("yashima_generations_total", "Values generated (commands run).", c.generations),
            counter(
                "yashima_shared_generations_total", "Lookups that used another task's or process's generation.",
                c.sharedGenerations),
            counter("yashima_corrupt_entries_total", "Entries found corrupt.", c.corruptEntries),
            counter("yashima_write_failures_total", "Storage writes that failed.", c.writeFailures),
            counter(
                "yashima_cross_process_timeouts_total", "Waits for another process that passed their timeout.",
                c.crossProcessTimeouts),
            counter(
                "yashima_cross_process_lock_failures_total", "Generations that ran without the key's lock file.",
                c.crossProcessLockFailures),
            MetricFamily(
                name: "yashima_saved_seconds_total", help: "Command time saved by hits, as yashima run measures it.",
                kind: .counter, samples: [([], Double(c.savedNanoseconds) / 1e9)]),
            gauge("yashima_storage_entries", "Entries stored.", Double(stats.entries)),
            gauge("yashima_storage_bytes", "Bytes the entries take on disk (allocated blocks).", Double(stats.bytes)),
            gauge(
                "yashima_storage_budget_bytes", "The directory's budget in bytes (+Inf: unlimited).",
                stats.budget == Int64.max ? .infinity : Double(stats.budget)),
            counter(
                "yashima_pressure_trims_total", "Trims that made room for a write (a full disk, or below min-free).",
                c.pressureTrims),
        ]
        if let filesystem = stats.filesystem {
            families += [
                gauge(
                    "yashima_filesystem_bytes", "The storage directory's filesystem's size.", Double(filesystem.total)),
                gauge("yashima_filesystem_free_bytes", "Bytes free on that filesystem.", Double(filesystem.free)),
                gauge(
                    "yashima_free_space_floor_bytes", "Bytes writers keep free on it (min-free).",
                    Double(filesystem.floor)),
            ]
        }
        if let census = stats.census {
            families += [
                gauge("yashima_lock_files", "Lock files present.", Double(census.lockFiles)),
                gauge("yashima_generations_in_flight", "Keys being generated now.", Double(census.held)),
                gauge(
                    "yashima_waiting_processes", "Processes waiting for another's generation.", Double(census.waiting)),
                gauge("yashima_trim_running", "1 while a trim runs.", census.trimRunning ? 1 : 0),
                gauge("yashima_debris_files", "Files left by killed processes, to be swept.", Double(census.debris)),
            ]
        }
        if let zeroed = stats.zeroedAt {
            families.append(
                gauge(
                    "yashima_counters_zeroed_timestamp_seconds", "When the counters were last zeroed (Unix time).",
                    zeroed.timeIntervalSince1970))
        }
        return families
    }

    /// The exposition text: `# HELP`, `# TYPE`, then the samples of each family, every series labelled
    /// with `directory`.
    static func exposition(_ families: [MetricFamily], directory: String) -> String {
        var text = ""
        for family in families {
            text += "# HELP \(family.name) \(escapeHelp(family.help))\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                let labels = ([("directory", directory)] + sample.labels).map { "\($0.0)=\"\(escapeLabel($0.1))\"" }
                text += "\(family.name){\(labels.joined(separator: ","))} \(format(sample.value))\n"
            }
        }
        return text
    }

    private static func format(_ value: Double) -> String {
        if value == .infinity { return "+Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    private static func escapeHelp(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func escapeLabel(_ text: String) -> String {
        escapeHelp(text).replacingOccurrences(of: "\"", with: "\\\"")
    }
}

/// What `stats` knows of a directory, for every output format.
struct StatsSnapshot {
    var entries: Int
    var bytes: Int64
    var budget: Int64
    var counters: CountersView
    var census: CensusView?
    var zeroedAt: Date?
    /// The filesystem's size, its free bytes and the floor kept free; nil when it cannot be read.
    var filesystem: (total: Int64, free: Int64, floor: Int64)?

    /// The shared counters `stats` shows.
    struct CountersView {
        var memoryHits: UInt64, storageHits: UInt64, misses: UInt64, generations: UInt64, sharedGenerations: UInt64
        var corruptEntries: UInt64, writeFailures: UInt64, crossProcessTimeouts: UInt64
        var crossProcessLockFailures: UInt64, savedNanoseconds: UInt64, pressureTrims: UInt64
    }

    /// What is in flight and left behind.
    struct CensusView {
        var lockFiles: Int, held: Int, waiting: Int, trimRunning: Bool, debris: Int
    }
}
