// The history checker: decides, key by key, whether what the processes saw is a linearizable register with
// unique writes (Gibbons and Korach 1997; the zone test of /work/shared/notes/CONSISTENCY.md), and names
// each violation's class. Pure: operations in, anomalies out, O(n log n) per key. A removal is a write of
// its own "absent" value; a miss is always allowed; a call that never returned ends at infinity.

/// What kind of inconsistency an anomaly is.
enum AnomalyClass: String, CaseIterable, Sendable {
    /// A value read after another write had superseded it: the write's zone lies inside the value's forward
    /// zone, or it began after the value's write returned and returned before the read began.
    case staleRead = "stale read"
    /// A value read after a removal of its key began and ended (a removal inside its forward zone).
    case removedSeenAgain = "removed value seen again"
    /// Two values each read before and after the other (two forward zones overlap) while no real-time order
    /// of their writes makes one a stale read: two processes saw the two writes in opposite orders.
    case oppositeOrders = "writes seen in opposite orders"
    /// A value no writer made (or made only after the read returned), or bytes that are no value at all.
    case neverWritten = "value never written"
    /// Processes holding different values of a key once every writer had stopped.
    case disagreeAtQuiescence = "disagree at quiescence"
    /// A value returned after it had expired.
    case expiredValue = "expired value returned"
}

/// One violation: its class, key, versions, processes, the operations that make it one, and others around.
struct HistoryAnomaly: Sendable {
    var kind: AnomalyClass
    var key: String
    /// The versions involved, the value read wrongly first.
    var versions: [String]
    var processes: [String]
    /// The operations that make it a violation, each with its role ("the stale read", ...).
    var operations: [(operation: HistoryOperation, role: String)]
    /// Other operations on the key around them.
    var context: [HistoryOperation]
    /// One sentence: what went wrong.
    var summary: String
}

/// The checker's verdict on a whole history.
struct HistoryVerdict: Sendable {
    var anomalies: [HistoryAnomaly] = []
    var operationCount = 0
    var keyCount = 0
    var processCount = 0
    /// Lanes (`p<worker>.<lane>`: the tasks of the processes) that made calls.
    var laneCount = 0
    /// Writes whose calls never returned or threw and that nobody read (they may not have happened).
    var uncertainWritesDropped = 0

    var counts: [AnomalyClass: Int] {
        anomalies.reduce(into: [:]) { $0[$1.kind, default: 0] += 1 }
    }

    /// `3 anomalies (stale read 2, removed value seen again 1)` or `0 anomalies`.
    var countText: String {
        let byClass = AnomalyClass.allCases.compactMap { kind in counts[kind].map { "\(kind.rawValue) \($0)" } }
        let total = "\(anomalies.count) anomal\(anomalies.count == 1 ? "y" : "ies")"
        return byClass.isEmpty ? total : "\(total) (\(byClass.joined(separator: ", ")))"
    }
}

enum HistoryChecker {
    /// Checks `operations` (of any number of keys and processes, in any order).
    static func check(_ operations: [HistoryOperation], contextLimit: Int = 6) -> HistoryVerdict {
        var verdict = HistoryVerdict()
        verdict.operationCount = operations.filter { $0.kind != .begin }.count
        let lanes = Set(operations.map(\.process))
        verdict.laneCount = lanes.count
        verdict.processCount = Set(lanes.map { $0.split(separator: ".").first.map(String.init) ?? $0 }).count
        // Every key named by an operation other than a purge; a purge removes those of its namespace.
        var byKey: [String: [HistoryOperation]] = [:]
        for operation in operations where operation.kind != .purge {
            byKey[operation.key, default: []].append(operation)
        }
        var keysOfNamespace: [String: [String]] = [:]
        for key in byKey.keys {
            let namespace = key.split(separator: "/", maxSplits: 1).first.map(String.init) ?? key
            keysOfNamespace[namespace, default: []].append(key)
        }
        for purge in operations where purge.kind == .purge {
            for key in keysOfNamespace[purge.key] ?? [] {
                var removal = purge
                removal.key = key
                byKey[key]?.append(removal)
            }
        }
        verdict.keyCount = byKey.count
        for key in byKey.keys.sorted() {
            var checker = KeyHistory(key: key, operations: byKey[key]!, contextLimit: contextLimit)
            checker.run()
            verdict.anomalies += checker.anomalies
            verdict.uncertainWritesDropped += checker.uncertainDropped
        }
        return verdict
    }
}

/// One key's history and the zone test over it.
private struct KeyHistory {
    /// A value's write and reads, and the zone they span.
    struct Cluster {
        var write: HistoryOperation
        var isRemoval: Bool
        var reads: [HistoryOperation] = []
        /// The earliest end over the cluster, and the operation that has it.
        var low = Int64.max
        var lowOperation: HistoryOperation?
        /// The latest start over the cluster, and the operation that has it.
        var high = Int64.min
        var highOperation: HistoryOperation?

        var version: String { write.version ?? "?" }
        var isForward: Bool { low < high }

        mutating func include(_ operation: HistoryOperation) {
            let end = operation.end ?? .max
            if end < low || lowOperation == nil {
                low = end
                lowOperation = operation
            }
            if operation.start > high || highOperation == nil {
                high = operation.start
                highOperation = operation
            }
        }
    }

    let key: String
    let operations: [HistoryOperation]
    let contextLimit: Int
    var anomalies: [HistoryAnomaly] = []
    var uncertainDropped = 0

    init(key: String, operations: [HistoryOperation], contextLimit: Int) {
        self.key = key
        self.operations = operations.sorted { ($0.start, $0.end ?? .max) < ($1.start, $1.end ?? .max) }
        self.contextLimit = contextLimit
    }

    mutating func run() {
        var clusters = writes()
        readsIntoClusters(&clusters)
        checkQuiescence()
        // Writes that may not have happened constrain nothing unless someone read them.
        let uncertain = clusters.filter { isUncertain($0.value.write) && $0.value.reads.isEmpty }.map(\.key)
        uncertainDropped = uncertain.count
        for version in uncertain { clusters[version] = nil }
        zones(Array(clusters.values))
    }

    private func isUncertain(_ write: HistoryOperation) -> Bool {
        write.end == nil || write.flags.contains(.uncertain)
    }

    /// Every write and removal by version; begin lines stand for writes that never finished.
    private mutating func writes() -> [String: Cluster] {
        var clusters: [String: Cluster] = [:]
        var begun: [String: HistoryOperation] = [:]
        for operation in operations {
            switch operation.kind {
            case .write, .remove, .purge:
                // A removal's line names its own version; one without is given one.
                let version = operation.version ?? "absent@\(operation.process)@\(operation.start)"
                var write = operation
                write.version = version
                if clusters[version] == nil {
                    clusters[version] = Cluster(write: write, isRemoval: operation.kind != .write)
                }
            case .begin:
                if let version = operation.version { begun[version] = operation }
            case .read, .final:
                break
            }
        }
        for (version, begin) in begun where clusters[version] == nil {
            var write = begin
            write.kind = .write
            write.end = nil
            clusters[version] = Cluster(write: write, isRemoval: false)
        }
        for version in clusters.keys {
            clusters[version]!.include(clusters[version]!.write)
        }
        return clusters
    }

    /// Maps each read to its write's cluster; flags reads of values never written, read before their
    /// write began, torn, or expired.
    private mutating func readsIntoClusters(_ clusters: inout [String: Cluster]) {
        var unknown: [String: [HistoryOperation]] = [:]
        for read in operations where read.kind == .read || read.kind == .final {
            guard let version = read.version else { continue }  // a miss: always allowed
            if read.flags.contains(.bad) {
                add(
                    .neverWritten, versions: [version], [(read, "returned bytes no writer makes")],
                    "\(read.process) got bytes that are no value of \(key) (\(version))")
                continue
            }
            guard let cluster = clusters[version], !cluster.isRemoval else {
                unknown[version, default: []].append(read)
                continue
            }
            if let end = read.end, end < cluster.write.start {
                add(
                    .neverWritten, versions: [version],
                    [(read, "the read"), (cluster.write, "its write, begun after the read returned")],
                    "\(read.process) read \(version) before its write began")
                continue
            }
            if read.flags.contains(.expired) {
                add(
                    .expiredValue, versions: [version], [(cluster.write, "the write"), (read, "the read")],
                    "\(read.process) read \(version) after it had expired")
            }
            clusters[version]!.reads.append(read)
            clusters[version]!.include(read)
        }
        for version in unknown.keys.sorted() {
            let reads = unknown[version]!
            add(
                .neverWritten, versions: [version], reads.prefix(4).map { ($0, "the read") },
                "\(reads.count) read\(reads.count == 1 ? "" : "s") returned \(version), which no process wrote")
        }
    }

    /// Final reads: every process that holds a value must hold the same one.
    private mutating func checkQuiescence() {
        let finals = operations.filter { $0.kind == .final && $0.version != nil }
        let versions = Set(finals.compactMap(\.version))
        guard versions.count > 1 else { return }
        let byVersion = Dictionary(grouping: finals, by: { $0.version! })
        let ordered = byVersion.keys.sorted { (-byVersion[$0]!.count, $0) < (-byVersion[$1]!.count, $1) }
        let parts = ordered.map { version in
            "\(version) in \(byVersion[version]!.map(\.process).sorted().joined(separator: ", "))"
        }
        add(
            .disagreeAtQuiescence, versions: ordered,
            ordered.flatMap { byVersion[$0]!.prefix(3).map { ($0, "final read") } },
            "once writers stopped, processes held \(versions.count) values: " + parts.joined(separator: "; "))
    }

    /// The zone test: no two forward zones overlap, no backward zone lies inside a forward zone.
    private mutating func zones(_ clusters: [Cluster]) {
        let forward = clusters.filter(\.isForward).sorted { ($0.low, $0.high) < ($1.low, $1.high) }
        let backward = clusters.filter { !$0.isForward }
        // Overlapping forward zones: sorted by their start, each against the one reaching furthest so far.
        var reach: Int?  // index in `forward` of the zone with the latest end so far
        var overlapping: [Int: [Int]] = [:]  // by that zone: the later ones that start inside it
        for index in forward.indices {
            if let widest = reach, forward[index].low < forward[widest].high {
                overlapping[widest, default: []].append(index)
            }
            if reach == nil || forward[index].high > forward[reach!].high { reach = index }
        }
        for index in overlapping.keys.sorted() {
            // A pair whose writes are ordered in real time, the older value read after the newer one's write
            // returned, is a stale read; otherwise the two processes disagree on the order of the writes.
            var opposed: [Cluster] = []
            for other in overlapping[index]!.map({ forward[$0] }) {
                if Self.supersedes(other, forward[index]) {
                    superseded(forward[index], by: [other], kind: .staleRead)
                } else if Self.supersedes(forward[index], other) {
                    superseded(other, by: [forward[index]], kind: .staleRead)
                } else {
                    opposed.append(other)
                }
            }
            if !opposed.isEmpty { opposite(forward[index], opposed) }
        }
        // Backward zones inside a forward zone: among forward zones starting before it, the one reaching
        // furthest (a prefix maximum), found by binary search.
        var widest: [Int] = []
        for index in forward.indices {
            widest.append(widest.last.map { forward[$0].high >= forward[index].high ? $0 : index } ?? index)
        }
        var inside: [Int: [Cluster]] = [:]
        for zone in backward {
            let (from, to) = (zone.high, zone.low)  // the zone [from, to], with from <= to
            guard to != .max else { continue }
            var (lower, upper) = (0, forward.count)  // the first forward zone starting at or after `from`
            while lower < upper {
                let middle = (lower + upper) / 2
                if forward[middle].low < from { lower = middle + 1 } else { upper = middle }
            }
            guard lower > 0 else { continue }
            let candidate = widest[lower - 1]
            if forward[candidate].high > to { inside[candidate, default: []].append(zone) }
        }
        for index in inside.keys.sorted() {
            let writes = inside[index]!.filter { !$0.isRemoval }
            let removals = inside[index]!.filter(\.isRemoval)
            if !writes.isEmpty { superseded(forward[index], by: writes, kind: .staleRead) }
            if !removals.isEmpty { superseded(forward[index], by: removals, kind: .removedSeenAgain) }
        }
    }

    /// Whether `newer`'s write began after `older`'s returned, and `older` was read again after `newer`'s
    /// write returned.
    private static func supersedes(_ newer: Cluster, _ older: Cluster) -> Bool {
        guard let olderEnd = older.write.end, let newerEnd = newer.write.end else { return false }
        return olderEnd < newer.write.start && (older.highOperation?.start ?? .min) > newerEnd
    }

    /// `value`'s forward zone holds the zones of `others` (writes or removals): a read of `value` began
    /// after they had taken effect.
    private mutating func superseded(_ value: Cluster, by others: [Cluster], kind: AnomalyClass) {
        let sorted = others.sorted { $0.low < $1.low }
        let last = sorted.last!
        var involved: [(HistoryOperation, String)] = [(value.write, "the write of \(value.version)")]
        if let low = value.lowOperation, low != value.write { involved.append((low, "\(value.version) seen")) }
        for other in sorted.suffix(3) {
            involved.append((other.write, kind == .removedSeenAgain ? "the removal" : "the newer write"))
            if let low = other.lowOperation, low != other.write {
                involved.append((low, "\(other.version) seen"))
            }
        }
        if let stale = value.highOperation { involved.append((stale, "the \(value.version) read after it")) }
        let reader = value.highOperation?.process ?? "?"
        let what =
            kind == .removedSeenAgain
            ? "after \(last.write.process) removed it"
                + (sorted.count > 1 ? " (and \(sorted.count - 1) more removals)" : "")
            : "after \(last.version) had superseded it"
                + (sorted.count > 1 ? " (and \(sorted.count - 1) more writes)" : "")
        add(
            kind, versions: [value.version] + sorted.map(\.version), involved, "\(reader) read \(value.version) \(what)"
        )
    }

    /// Forward zones that overlap: each of `others` starts inside `first`'s.
    private mutating func opposite(_ first: Cluster, _ others: [Cluster]) {
        var involved: [(HistoryOperation, String)] = []
        for cluster in [first] + others.prefix(2) {
            involved.append((cluster.write, "the write of \(cluster.version)"))
            if let low = cluster.lowOperation, low != cluster.write {
                involved.append((low, "\(cluster.version) seen"))
            }
            if let high = cluster.highOperation, high != cluster.write {
                involved.append((high, "\(cluster.version) seen again later"))
            }
        }
        let second = others[0]
        let more = others.count > 1 ? " (and \(others.count - 1) more values)" : ""
        add(
            .oppositeOrders, versions: [first.version] + others.map(\.version), involved,
            "\(first.version) and \(second.version)\(more) were each seen after the other: "
                + "\(second.highOperation?.process ?? "?") read \(second.version) after \(first.version) was seen, "
                + "\(first.highOperation?.process ?? "?") read \(first.version) after \(second.version) was seen")
    }

    private mutating func add(
        _ kind: AnomalyClass, versions: [String], _ involved: [(HistoryOperation, String)], _ summary: String
    ) {
        var seen: [HistoryOperation] = []
        var unique: [(operation: HistoryOperation, role: String)] = []
        for (operation, role) in involved where !seen.contains(operation) {
            seen.append(operation)
            unique.append((operation, role))
        }
        unique.sort { $0.operation.start < $1.operation.start }
        let from = unique.map(\.operation.start).min() ?? 0
        let to = unique.map { $0.operation.end ?? $0.operation.start }.max() ?? 0
        let context = around(from: from, to: to, excluding: seen)
        anomalies.append(
            HistoryAnomaly(
                kind: kind, key: key, versions: versions,
                processes: Array(Set(unique.map(\.operation.process))).sorted(), operations: unique, context: context,
                summary: summary))
    }

    /// Up to `contextLimit` other operations on the key that overlap [from, to], nearest the middle first.
    private func around(from: Int64, to: Int64, excluding: [HistoryOperation]) -> [HistoryOperation] {
        guard contextLimit > 0 else { return [] }
        // `operations` is sorted by start: those starting before `to`, ending after `from`.
        var upper = operations.count
        var (lower, high) = (0, operations.count)
        while lower < high {
            let middle = (lower + high) / 2
            if operations[middle].start <= to { lower = middle + 1 } else { high = middle }
        }
        upper = lower
        let middle = from / 2 + to / 2
        var found: [HistoryOperation] = []
        var index = upper - 1
        var scanned = 0
        while index >= 0 && scanned < 4096 {
            let operation = operations[index]
            if (operation.end ?? .max) >= from && operation.kind != .begin && !excluding.contains(operation) {
                found.append(operation)
            }
            index -= 1
            scanned += 1
        }
        found.sort { abs($0.start - middle) < abs($1.start - middle) }
        return Array(found.prefix(contextLimit)).sorted { $0.start < $1.start }
    }
}
