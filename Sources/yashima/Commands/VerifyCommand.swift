// `yashima verify [--repair]`: read every entry in full and check it (header, identity, payload
// checksum), one fan-out folder at a time (memory does not grow with the directory), with a progress line
// on a terminal after a second (entries/s, bytes/s, ETA) and a summary; `--repair` removes what is damaged
// and sweeps debris. Exit status 1 if anything damaged is left.

import Foundation
import Synchronization
@_spi(Operator) import YashimaShared

enum VerifyCommand {
    static let spec = CommandSpec(
        name: "verify", summary: "read every entry and check it; --repair removes what is damaged",
        usage: "yashima verify [--repair] [--json] [--dir DIR]",
        description: """
            Reads every entry file in full and checks its header (magic, version, lengths, checksum), that
            its key and codec give the identity in its header and file name, and its payload checksum.
            Prints a progress line on a terminal and a summary: each damaged file and why, expired entries,
            and debris (lock files, staging files and folders left by killed processes for over an hour).
            Lookups already treat a damaged entry as a miss; verify finds them all at once.
            --repair unlinks the damaged files (unless a writer replaced them meanwhile) and sweeps debris.
            Exit status 1 when damaged entries remain (not repaired), else 0.
            """,
        options: [.flag("repair", "remove damaged entries and sweep debris"), CommandSpec.json]
            + CommandSpec.storageOptions, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        let json = arguments.flag("json")
        let repair = arguments.flag("repair")
        guard location.exists else {
            if json {
                Output.json(["directory": location.shown, "checked": 0, "damaged": [Any](), "repaired": repair])
            } else {
                Output.line("nothing to verify: \(location.shown) does not exist")
            }
            return 0
        }
        let storage = try location.storageOperator(try location.openCache(budget: nil))
        let showProgress = !json && Output.standardErrorIsTerminal
        let started = ContinuousClock.now
        let report = await StorageOperator.offPool { () -> VerifyReport in
            let meter = ProgressMeter(started: started)
            return storage.verify { progress in if showProgress { meter.show(progress) } }
        }
        if showProgress { Output.error("\r\u{1B}[K", terminator: false) }
        let elapsed = started.duration(to: .now)
        let (removed, before, after) = await StorageOperator.offPool { () -> (Int, DirectoryCensus, DirectoryCensus) in
            let before = storage.census()
            guard repair else { return (0, before, before) }
            let removed = report.damaged.filter { storage.remove($0) }.count
            storage.sweepDebris()
            return (removed, before, storage.census())
        }
        let remaining = report.damaged.count - removed
        if json {
            Output.json([
                "directory": location.shown, "checked": report.checkedEntries, "bytes": report.checkedBytes,
                "seconds": seconds(elapsed), "expired": report.expiredEntries, "repaired": repair,
                "damaged": report.damaged.map {
                    ["file": $0.relativePath, "reason": $0.reason, "allocated": $0.allocatedByteCount]
                },
                "removed": removed, "remaining": remaining,
                "debris": ["before": before.debris, "after": after.debris],
            ])
        } else {
            Output.line(
                "checked \(Format.count(report.checkedEntries, "entry", "entries")) "
                    + "(\(Format.bytes(report.checkedBytes))) in \(Format.seconds(elapsed))")
            if report.damaged.isEmpty {
                Output.line("damaged: none")
            } else {
                Output.line("damaged: \(report.damaged.count)")
                for entry in report.damaged { Output.line("  \(entry.relativePath): \(entry.reason)") }
            }
            if report.expiredEntries > 0 { Output.line("expired: \(report.expiredEntries) (never returned)") }
            if repair {
                Output.line(
                    "repaired: removed \(Format.count(removed, "damaged entry", "damaged entries")), swept "
                        + "\(before.debris - after.debris) of \(Format.count(before.debris, "piece", "pieces")) of debris"
                )
                if remaining > 0 { Output.line("\(remaining) damaged entries could not be removed") }
            } else if before.debris > 0 || !report.damaged.isEmpty {
                Output.line(
                    "debris: \(before.debris) (lock files, staging files and folders older than an hour); "
                        + "yashima verify --repair removes it and the damaged entries")
            }
        }
        return remaining > 0 ? 1 : 0
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// The progress line: from the first second on, at most ten updates a second, on standard error.
private final class ProgressMeter: Sendable {
    let started: ContinuousClock.Instant
    private let lastShown = Mutex<ContinuousClock.Instant?>(nil)

    init(started: ContinuousClock.Instant) { self.started = started }

    func show(_ progress: VerifyProgress) {
        let now = ContinuousClock.now
        guard started.duration(to: now) >= .seconds(1) else { return }  // only for work that lasts
        let due = lastShown.withLock { last -> Bool in
            if let last, last.duration(to: now) < .milliseconds(100), progress.checkedEntries < progress.totalEntries {
                return false
            }
            last = now
            return true
        }
        guard due else { return }
        let elapsed = started.duration(to: now)
        let seconds = max(1e-3, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        let entryRate = Double(progress.checkedEntries) / seconds
        let byteRate = Double(progress.checkedBytes) / seconds
        var line =
            "verified \(progress.checkedEntries)/\(progress.totalEntries) entries, "
            + "\(Format.bytes(progress.checkedBytes))/\(Format.bytes(progress.totalBytes)), "
            + String(format: "%.0f entries/s, ", entryRate) + "\(Format.bytes(Int64(byteRate)))/s"
        if byteRate > 0, progress.totalBytes > progress.checkedBytes {
            line += ", ETA " + Format.seconds(Double(progress.totalBytes - progress.checkedBytes) / byteRate)
        }
        Output.error("\r\u{1B}[K" + line, terminator: false)
    }
}
