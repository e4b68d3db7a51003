// The stress run's report: per scenario workers, operations, generations (expected vs seen), hits by
// source, wrong values, hangs, latency p50/p99 (reported, never judged), notes and failures; as text
// (whose last line is exactly `N passed, N failed`) or as one JSON object.

import Foundation

/// One scenario's outcome (summed over rounds in a soak).
struct ScenarioReport: Codable {
    var name: String
    var seed: UInt64
    var rounds = 1
    var workers = 0
    var operations = 0
    var generationsExpected: Int?
    /// True when `generationsExpected` is a lower bound (regeneration after removal, expiry, kills).
    var generationsExpectedIsMinimum = false
    var generationsSeen = 0
    var memoryHits = 0
    var storageHits = 0
    var sharedHits = 0
    var generated = 0
    var wrongValues = 0
    var hangs = 0
    var crashes = 0
    var errors = 0
    var latencyP50Nanoseconds: Double?
    var latencyP99Nanoseconds: Double?
    var seconds = 0.0
    var notes: [String] = []
    var failures: [String] = []
    /// Kept for merging rounds; not part of the JSON report.
    var latency = LatencyHistogram()

    var passed: Bool { failures.isEmpty }

    init(name: String, seed: UInt64) {
        self.name = name
        self.seed = seed
    }

    mutating func add(_ result: WorkerResult) {
        operations += result.operations
        memoryHits += result.memoryHits
        storageHits += result.storageHits
        sharedHits += result.sharedHits
        generated += result.generated
        wrongValues += result.wrongValues
        errors += result.errors
    }

    /// Folds a later round of the same scenario into this one (soak).
    mutating func merge(round other: ScenarioReport, number: Int) {
        rounds += 1
        workers += other.workers
        operations += other.operations
        if let expected = generationsExpected, let more = other.generationsExpected {
            generationsExpected = expected + more
        } else {
            generationsExpected = nil
        }
        generationsExpectedIsMinimum = generationsExpectedIsMinimum || other.generationsExpectedIsMinimum
        generationsSeen += other.generationsSeen
        memoryHits += other.memoryHits
        storageHits += other.storageHits
        sharedHits += other.sharedHits
        generated += other.generated
        wrongValues += other.wrongValues
        hangs += other.hangs
        crashes += other.crashes
        errors += other.errors
        seconds += other.seconds
        latency.merge(other.latency)
        latencyP50Nanoseconds = latency.percentile(50)
        latencyP99Nanoseconds = latency.percentile(99)
        notes = other.notes  // the notes describe the latest round
        failures.append(contentsOf: other.failures.map { "round \(number) (seed \(other.seed)): \($0)" })
    }

    private enum CodingKeys: String, CodingKey {
        case name, seed, rounds, workers, operations, generationsExpected, generationsExpectedIsMinimum
        case generationsSeen, memoryHits, storageHits, sharedHits, generated, wrongValues, hangs, crashes, errors
        case latencyP50Nanoseconds, latencyP99Nanoseconds, seconds, notes, failures, passed
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(passed, forKey: .passed)
        try container.encode(seed, forKey: .seed)
        try container.encode(rounds, forKey: .rounds)
        try container.encode(workers, forKey: .workers)
        try container.encode(operations, forKey: .operations)
        try container.encodeIfPresent(generationsExpected, forKey: .generationsExpected)
        try container.encode(generationsExpectedIsMinimum, forKey: .generationsExpectedIsMinimum)
        try container.encode(generationsSeen, forKey: .generationsSeen)
        try container.encode(memoryHits, forKey: .memoryHits)
        try container.encode(storageHits, forKey: .storageHits)
        try container.encode(sharedHits, forKey: .sharedHits)
        try container.encode(generated, forKey: .generated)
        try container.encode(wrongValues, forKey: .wrongValues)
        try container.encode(hangs, forKey: .hangs)
        try container.encode(crashes, forKey: .crashes)
        try container.encode(errors, forKey: .errors)
        try container.encodeIfPresent(latencyP50Nanoseconds.map { $0.rounded() }, forKey: .latencyP50Nanoseconds)
        try container.encodeIfPresent(latencyP99Nanoseconds.map { $0.rounded() }, forKey: .latencyP99Nanoseconds)
        try container.encode((seconds * 1000).rounded() / 1000, forKey: .seconds)
        try container.encode(notes, forKey: .notes)
        try container.encode(failures, forKey: .failures)
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        seed = try container.decode(UInt64.self, forKey: .seed)
        failures = try container.decode([String].self, forKey: .failures)
        notes = try container.decode([String].self, forKey: .notes)
    }
}

/// The whole run.
struct StressReport {
    var profile: String
    var processes: Int
    var seed: UInt64
    var directory: String
    var keptArtifacts: Bool
    var seconds = 0.0
    var scenarios: [ScenarioReport] = []
    /// The command line that reproduces the run.
    var reproduce: String

    var passedCount: Int { scenarios.filter(\.passed).count }
    var failedCount: Int { scenarios.count - passedCount }

    // MARK: Text

    func text() -> String {
        var lines: [String] = []
        lines.append(
            "yashima-stress: profile \(profile), \(processes == 1 ? "1 worker process" : "\(processes) worker processes"), seed \(seed), "
                + String(format: "%.1f s", seconds))
        lines.append("directory: \(directory)" + (keptArtifacts ? " (kept)" : " (removed)"))
        lines.append("")
        let header = [
            "scenario", "result", "workers", "ops", "generations", "memory", "storage", "shared", "generated", "wrong",
            "hangs", "p50", "p99", "time",
        ]
        var rows = [header]
        for scenario in scenarios {
            let generations: String
            if let expected = scenario.generationsExpected {
                generations =
                    (scenario.generationsExpectedIsMinimum ? "≥" : "") + "\(expected)/\(scenario.generationsSeen)"
            } else {
                generations = "-/\(scenario.generationsSeen)"
            }
            rows.append([
                scenario.name, scenario.passed ? "pass" : "FAIL", "\(scenario.workers)", "\(scenario.operations)",
                generations, "\(scenario.memoryHits)", "\(scenario.storageHits)", "\(scenario.sharedHits)",
                "\(scenario.generated)", "\(scenario.wrongValues)", "\(scenario.hangs)",
                duration(scenario.latencyP50Nanoseconds), duration(scenario.latencyP99Nanoseconds),
                String(format: "%.1f s", scenario.seconds),
            ])
        }
        lines.append(contentsOf: table(rows))
        lines.append(
            "generations: expected/seen from the ledger (≥: at least); memory/storage/shared/generated: hits by source")
        lines.append("")
        for scenario in scenarios where !scenario.notes.isEmpty {
            lines.append("\(scenario.name):")
            for note in scenario.notes { lines.append("  " + note) }
        }
        let failed = scenarios.filter { !$0.passed }
        if !failed.isEmpty {
            lines.append("")
            lines.append("FAILURES")
            for scenario in failed {
                for failure in scenario.failures { lines.append("  \(scenario.name): \(failure)") }
            }
        }
        lines.append("")
        lines.append("reproduce: \(reproduce)")
        lines.append("\(passedCount) passed, \(failedCount) failed")
        return lines.joined(separator: "\n")
    }

    private func table(_ rows: [[String]]) -> [String] {
        guard let columns = rows.first?.count else { return [] }
        let widths = (0..<columns).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column < 2 ? cell + padding : padding + cell  // names left, numbers right
            }.joined(separator: "  ")
        }
    }

    private func duration(_ nanoseconds: Double?) -> String {
        guard let nanoseconds else { return "-" }
        return formatNanoseconds(nanoseconds)
    }

    // MARK: JSON

    func json() throws -> String {
        struct Document: Encodable {
            let profile: String
            let processes: Int
            let seed: UInt64
            let directory: String
            let keptArtifacts: Bool
            let seconds: Double
            let passed: Int
            let failed: Int
            let reproduce: String
            let scenarios: [ScenarioReport]
        }
        let document = Document(
            profile: profile, processes: processes, seed: seed, directory: directory, keptArtifacts: keptArtifacts,
            seconds: (seconds * 1000).rounded() / 1000, passed: passedCount, failed: failedCount, reproduce: reproduce,
            scenarios: scenarios)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(document), as: UTF8.self)
    }
}
