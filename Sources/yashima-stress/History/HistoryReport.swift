// How the history checker's findings read: one anomaly as its summary, the operations that make it one and
// the operations around it, each with its time span in ms from the history's first call (as in issue 32's
// example); and the per-phase summary line with the anomaly count by class. Pure formatting.

import Foundation

extension HistoryAnomaly {
    /// The anomaly in a few lines; times in ms after `origin` (nanoseconds on CLOCK_MONOTONIC).
    func described(origin: Int64, indent: String = "    ") -> String {
        var lines = ["\(kind.rawValue) on \(key): \(summary)"]
        let width = (operations.map(\.operation) + context).map(\.call.count).max() ?? 5
        for (operation, role) in operations {
            lines.append(indent + Self.line(operation, origin: origin, width: width) + "  ← " + role)
        }
        if !context.isEmpty {
            lines.append(indent + "around it:")
            for operation in context { lines.append(indent + Self.line(operation, origin: origin, width: width)) }
        }
        return lines.joined(separator: "\n")
    }

    /// `store          p1.0#876  by p1.0  [  609.370 ..   612.450] ms`.
    static func line(_ operation: HistoryOperation, origin: Int64, width: Int) -> String {
        let call = operation.call.padding(toLength: max(width, operation.call.count), withPad: " ", startingAt: 0)
        let what: String
        switch operation.kind {
        case .remove, .purge: what = "removes " + (operation.kind == .purge ? operation.key + "/*" : operation.key)
        case .read, .final: what = operation.version.map { "got \($0)" } ?? "got nothing"
        case .write, .begin: what = "writes " + (operation.version ?? "?")
        }
        let start = milliseconds(operation.start - origin)
        let end = operation.end.map { milliseconds($0 - origin) } ?? "   (never returned)"
        let flags =
            operation.flags.isEmpty ? "" : " (" + operation.flags.map(\.rawValue).sorted().joined(separator: ", ") + ")"
        return "\(call) \(operation.process.padding(toLength: 7, withPad: " ", startingAt: 0)) "
            + "[\(start) .. \(end)] ms  \(what)\(flags)"
    }

    private static func milliseconds(_ nanoseconds: Int64) -> String {
        String(format: "%10.3f", Double(nanoseconds) / 1e6)
    }
}

extension HistoryVerdict {
    /// `history plain: 12000 operations on 4 keys by 8 processes (16 lanes): 3 anomalies (stale read 2, …)`.
    func summaryLine(_ label: String) -> String {
        "history \(label): \(operationCount) operations on \(keyCount) keys by \(processCount) processes "
            + "(\(laneCount) lanes): \(countText)"
    }

    /// The first `perClass` anomalies of each class, described.
    func examples(perClass: Int, origin: Int64) -> [String] {
        AnomalyClass.allCases.flatMap { kind in
            anomalies.filter { $0.kind == kind }.prefix(perClass).map { $0.described(origin: origin) }
        }
    }
}
