// The judge's check of I10 from workers' event logs, shared by the lifecycle and corruption scenarios:
// workers log every read (`read LABEL START CREATED HOW`), generation (`made LABEL CREATED RETURNED`),
// remote fetch (`fetched LABEL CREATED RETURNED`, with `--remote`), explicit store (`store LABEL START END`)
// and removal (`remove LABEL START END`, `removeAll NAMESPACE START
// END`, `removeEverything * START END`), in wall-clock nanoseconds; a read that started after a removal
// finished must never return an entry that existed when the removal began.

import Foundation

struct RemovalVisibility {
    struct Read {
        let label: String
        let start: Int64
        let created: Int64
        let how: String
    }

    private(set) var reads: [Read] = []
    private(set) var made: [String: [(created: Int64, returned: Int64)]] = [:]
    private(set) var fetched: [String: [(created: Int64, returned: Int64)]] = [:]
    private(set) var keyRemovals: [String: [(start: Int64, end: Int64)]] = [:]
    private(set) var namespaceRemovals: [String: [(start: Int64, end: Int64)]] = [:]
    private(set) var globalRemovals: [(start: Int64, end: Int64)] = []
    private(set) var stores: [String: [(start: Int64, end: Int64)]] = [:]

    /// Parses the records of `ScenarioRun.eventRecords()` (other lines are ignored).
    init(_ records: [[Substring]]) {
        for words in records where words.count >= 4 {
            let label = String(words[1])
            switch words[0] {
            case "read" where words.count >= 5:
                reads.append(
                    Read(
                        label: label, start: Int64(words[2]) ?? 0, created: Int64(words[3]) ?? 0, how: String(words[4]))
                )
            case "made": made[label, default: []].append((Int64(words[2]) ?? 0, Int64(words[3]) ?? 0))
            case "fetched": fetched[label, default: []].append((Int64(words[2]) ?? 0, Int64(words[3]) ?? 0))
            case "remove": keyRemovals[label, default: []].append((Int64(words[2]) ?? 0, Int64(words[3]) ?? 0))
            case "removeAll": namespaceRemovals[label, default: []].append((Int64(words[2]) ?? 0, Int64(words[3]) ?? 0))
            case "removeEverything": globalRemovals.append((Int64(words[2]) ?? 0, Int64(words[3]) ?? 0))
            case "store": stores[label, default: []].append((Int64(words[2]) ?? 0, Int64(words[3]) ?? 0))
            default: break
            }
        }
    }

    var keyRemovalCount: Int { keyRemovals.values.reduce(0) { $0 + $1.count } }
    var namespaceRemovalCount: Int { namespaceRemovals.values.reduce(0) { $0 + $1.count } }
    var storeCount: Int { stores.values.reduce(0) { $0 + $1.count } }

    /// I10: a read that started after a removal finished never returns an entry that existed when the
    /// removal started. A stamp before the removal is allowed only for a generation or a store whose call
    /// was still running when the removal started (it may have published after the removal). One line per
    /// stale read.
    ///
    /// - Parameter localRemovalsOnly: With a remote tier (`--remote`), namespace and global removals are
    ///   local by design (`removeAll(in:)`, `removeAll()`): the remote value comes back, so only key
    ///   removals (which remove remotely too) are judged.
    func staleReads(localRemovalsOnly: Bool = false) -> [String] {
        let margin: Int64 = 1_000  // metadata dates carry ~0.25 µs of rounding
        var stale: [String] = []
        for read in reads {
            let namespace = String(read.label.prefix { $0 != "/" })
            let removals =
                (keyRemovals[read.label] ?? [])
                + (localRemovalsOnly ? [] : (namespaceRemovals[namespace] ?? []) + globalRemovals)
            for removal in removals where removal.end < read.start && read.created + margin < removal.start {
                // A remote value fetched before the removal and published after it (I16) is unlinked again
                // before its fetch returns: only reads that began before then may see it.
                let excused =
                    (made[read.label] ?? []).contains { $0.created == read.created && $0.returned >= removal.start }
                    || (fetched[read.label] ?? []).contains {
                        $0.created == read.created && $0.returned >= removal.start && read.start <= $0.returned
                    }
                    || (stores[read.label] ?? []).contains {
                        $0.start - margin <= read.created && read.created <= $0.end + margin && $0.end >= removal.start
                    }
                if !excused {
                    let age = Double(removal.start - read.created) / 1e6
                    stale.append(
                        "\(read.label) (\(read.how)) returned an entry stamped \(String(format: "%.2f", age)) ms before a removal "
                            + "that finished \(String(format: "%.2f", Double(read.start - removal.end) / 1e6)) ms before the read began"
                    )
                    break
                }
            }
        }
        return stale
    }
}
