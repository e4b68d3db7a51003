// The progress line on a terminal's standard error for work that lasts over a second (`ls` when its
// listing goes elsewhere, `stats --namespaces`).

import Foundation
import Synchronization
@_spi(Operator) import YashimaShared

/// A progress line on a terminal's stderr for work that lasts over a second: at most ten updates a
/// second, cleared at the end. Counts entries as they come and folders as each is done.
final class ProgressLine: Sendable {
    private let verb: String
    private let unit: String
    private let enabled: Bool
    private let started = ContinuousClock.now
    private let state = Mutex<(entries: Int, lastShown: ContinuousClock.Instant?, shown: Bool)>((0, nil, false))

    /// - Parameter enabled: Also false when what it would interleave with goes to the same terminal.
    init(verb: String, unit: String, enabled: Bool = true) {
        self.verb = verb
        self.unit = unit
        self.enabled = enabled && Output.standardErrorIsTerminal
    }

    func count() {
        state.withLock { $0.entries += 1 }
    }

    func show(_ progress: ListingProgress) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let elapsed = started.duration(to: now)
        guard elapsed >= .seconds(1) else { return }
        let line = state.withLock { state -> String? in
            if let last = state.lastShown, last.duration(to: now) < .milliseconds(100) { return nil }
            state.lastShown = now
            state.shown = true
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let entries = max(state.entries, progress.entries)
            let done = Double(progress.foldersDone) / Double(max(1, progress.folders))
            var text =
                "\(verb) \(entries) \(unit), \(Int(done * 100))% of the folders, "
                + String(format: "%.0f \(unit)/s", Double(entries) / max(seconds, 1e-3))
            if done > 0 && done < 1 { text += ", ETA " + Format.seconds(seconds / done * (1 - done)) }
            return text
        }
        if let line { Output.error("\r\u{1B}[K" + line, terminator: false) }
    }

    func finish() {
        if state.withLock({ $0.shown }) { Output.error("\r\u{1B}[K", terminator: false) }
    }
}
