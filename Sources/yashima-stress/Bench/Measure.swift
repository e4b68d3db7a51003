// Timing primitives for the benchmarks: per-operation samples, rounds, and summaries (median, p99,
// min, max). Figures are only ever compared as ratios to a baseline measured in the same run.

import Foundation
import Glibc

@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// A set of samples in nanoseconds.
struct Samples: Sendable {
    private(set) var values: [Double] = []

    init(_ values: [Double] = []) { self.values = values }

    mutating func append(_ nanoseconds: Double) { values.append(nanoseconds) }
    mutating func append(contentsOf other: Samples) { values.append(contentsOf: other.values) }

    func percentile(_ p: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let rank = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count - 1)).rounded())))
        return sorted[rank]
    }

    var median: Double { percentile(50) }
    var p99: Double { percentile(99) }
    var minimum: Double { values.min() ?? .nan }
    var maximum: Double { values.max() ?? .nan }
    var count: Int { values.count }
}

/// Runs `body` `iterations` times per round for `rounds` rounds, timing each call; returns per-op
/// samples. One warm-up round is discarded.
func measure(rounds: Int, iterations: Int, _ body: () throws -> Void) rethrows -> Samples {
    var samples = Samples()
    for round in 0...rounds {
        for _ in 0..<iterations {
            let start = monotonicNanoseconds()
            try body()
            let elapsed = Double(monotonicNanoseconds() - start)
            if round > 0 { samples.append(elapsed) }
        }
    }
    return samples
}

/// The async flavour of `measure`.
func measureAsync(rounds: Int, iterations: Int, _ body: () async throws -> Void) async rethrows -> Samples {
    var samples = Samples()
    for round in 0...rounds {
        for _ in 0..<iterations {
            let start = monotonicNanoseconds()
            try await body()
            let elapsed = Double(monotonicNanoseconds() - start)
            if round > 0 { samples.append(elapsed) }
        }
    }
    return samples
}

/// Human-readable duration.
func formatNanoseconds(_ ns: Double) -> String {
    if ns.isNaN { return "-" }
    if ns < 1_000 { return String(format: "%.0f ns", ns) }
    if ns < 1_000_000 { return String(format: "%.2f µs", ns / 1_000) }
    if ns < 1_000_000_000 { return String(format: "%.2f ms", ns / 1_000_000) }
    return String(format: "%.2f s", ns / 1_000_000_000)
}

func formatBytes(_ bytes: Int) -> String {
    if bytes >= 1 << 20 { return "\(bytes >> 20) MiB" }
    if bytes >= 1 << 10 { return "\(bytes >> 10) KiB" }
    return "\(bytes) B"
}
