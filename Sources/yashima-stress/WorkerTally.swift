// What one scenario worker counted (operations, hits by source, wrong values, errors, latencies and the
// scenario's own counters), sent to the orchestrator as one `RESULT` JSON line and merged there. The
// orchestrator never judges from these alone: every scenario also re-reads the ledger and the directory.

import Foundation
import Synchronization
import YashimaShared

/// Latencies in buckets a quarter power of two wide (about ±9 %), so workers' histograms merge exactly.
/// Reported only, never judged.
struct LatencyHistogram: Codable, Sendable {
    private static let bucketsPerDoubling = 4.0
    private(set) var counts: [Int] = []

    var count: Int { counts.reduce(0, +) }

    mutating func record(nanoseconds: UInt64) {
        let index = nanoseconds <= 1 ? 0 : Int(log2(Double(nanoseconds)) * Self.bucketsPerDoubling)
        if counts.count <= index { counts.append(contentsOf: repeatElement(0, count: index + 1 - counts.count)) }
        counts[index] += 1
    }

    mutating func merge(_ other: LatencyHistogram) {
        if counts.count < other.counts.count {
            counts.append(contentsOf: repeatElement(0, count: other.counts.count - counts.count))
        }
        for (index, value) in other.counts.enumerated() { counts[index] += value }
    }

    /// The `p`th percentile in nanoseconds (the bucket's geometric middle), or nil with no samples.
    func percentile(_ p: Double) -> Double? {
        let total = count
        guard total > 0 else { return nil }
        let rank = min(total, max(1, Int((p / 100 * Double(total)).rounded(.up))))
        var seen = 0
        for (index, value) in counts.enumerated() {
            seen += value
            if seen >= rank { return pow(2, (Double(index) + 0.5) / Self.bucketsPerDoubling) }
        }
        return nil
    }
}

/// One worker's counts, as sent in its `RESULT` line.
struct WorkerResult: Codable, Sendable {
    var operations = 0
    var memoryHits = 0
    var storageHits = 0
    /// Values another task or process generated while this call waited.
    var sharedHits = 0
    var generated = 0
    /// Lookups that found nothing where that is allowed (cache-only reads of removed or expired keys).
    var misses = 0
    var wrongValues = 0
    var errors = 0
    /// `CacheStatistics.corruptEntries` of the worker's caches.
    var corruptEntries = 0
    var latency = LatencyHistogram()
    /// The first few wrong values and errors, described.
    var notes: [String] = []
    var counters: [String: Int] = [:]
    var lists: [String: [String]] = [:]

    static let noteLimit = 12

    mutating func merge(_ other: WorkerResult) {
        operations += other.operations
        memoryHits += other.memoryHits
        storageHits += other.storageHits
        sharedHits += other.sharedHits
        generated += other.generated
        misses += other.misses
        wrongValues += other.wrongValues
        errors += other.errors
        corruptEntries += other.corruptEntries
        latency.merge(other.latency)
        for note in other.notes where notes.count < Self.noteLimit { notes.append(note) }
        for (name, value) in other.counters { counters[name, default: 0] += value }
        for (name, values) in other.lists { lists[name, default: []].append(contentsOf: values) }
    }
}

/// A worker's running tally, shared by all of its tasks.
final class Tally: Sendable {
    private let state = Mutex(WorkerResult())

    var operations: Int { state.withLock { $0.operations } }

    /// Counts one lookup that returned a value, by where it came from, and checks it.
    func record(_ fetched: Fetched, nanoseconds: UInt64, describe: @autoclosure () -> String) {
        let description = fetched.correct ? nil : describe()
        state.withLock { result in
            result.operations += 1
            result.latency.record(nanoseconds: nanoseconds)
            if fetched.shared {
                result.sharedHits += 1
            } else {
                switch fetched.source {
                case .memory: result.memoryHits += 1
                case .storage: result.storageHits += 1
                case .generated: result.generated += 1
                }
            }
            if let description {
                result.wrongValues += 1
                if result.notes.count < WorkerResult.noteLimit { result.notes.append("wrong value: " + description) }
            }
        }
    }

    /// Counts an operation that returned no value (a miss, a removal, a metadata call).
    func operation(nanoseconds: UInt64, miss: Bool = false) {
        state.withLock { result in
            result.operations += 1
            result.latency.record(nanoseconds: nanoseconds)
            if miss { result.misses += 1 }
        }
    }

    /// A wrong value found by a check other than a lookup's (metadata, expiry, a value seen twice).
    func wrong(_ description: String) {
        state.withLock { result in
            result.wrongValues += 1
            if result.notes.count < WorkerResult.noteLimit { result.notes.append("wrong value: " + description) }
        }
    }

    /// An operation failed in a way the scenario does not allow.
    func error(_ description: String) {
        state.withLock { result in
            result.errors += 1
            if result.notes.count < WorkerResult.noteLimit { result.notes.append("error: " + description) }
        }
    }

    func count(_ name: String, _ amount: Int = 1) {
        state.withLock { $0.counters[name, default: 0] += amount }
    }

    func list(_ name: String, _ value: String) {
        state.withLock { $0.lists[name, default: []].append(value) }
    }

    func snapshot() -> WorkerResult { state.withLock { $0 } }
}
