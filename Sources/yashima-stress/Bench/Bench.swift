// `yashima-stress bench`: the benchmark suite. Every figure with a baseline is printed as a ratio to a
// baseline measured in the same run (machines are noisy; ratios hold). Sections: single (one process),
// crossprocess (many processes), scale (directory size, trimming). Output: text table or JSON; --svg
// draws the main results.

import Foundation
import Glibc
import YashimaShared

/// One measured figure.
struct BenchRow: Codable, Sendable {
    var section: String
    var name: String
    var medianNs: Double
    var p99Ns: Double
    var minNs: Double
    var maxNs: Double
    /// The baseline row's name, when this figure is compared to one.
    var baseline: String?
    /// median / baseline median.
    var ratio: Double?
    /// The target, in words, and whether this run met it.
    var target: String?
    var met: Bool?
    /// Free-form figures (counts, throughput).
    var note: String?

    init(section: String, name: String, samples: Samples, note: String? = nil) {
        self.section = section
        self.name = name
        medianNs = samples.median
        p99Ns = samples.p99
        minNs = samples.minimum
        maxNs = samples.maximum
        self.note = note
    }

    init(section: String, name: String, note: String, met: Bool? = nil, target: String? = nil) {
        self.section = section
        self.name = name
        medianNs = .nan
        p99Ns = .nan
        minNs = .nan
        maxNs = .nan
        self.note = note
        self.met = met
        self.target = target
    }

    enum CodingKeys: String, CodingKey {
        case section, name, medianNs, p99Ns, minNs, maxNs, baseline, ratio, target, met, note
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(section, forKey: .section)
        try container.encode(name, forKey: .name)
        for (value, key) in [(medianNs, CodingKeys.medianNs), (p99Ns, .p99Ns), (minNs, .minNs), (maxNs, .maxNs)]
        where value.isFinite {
            try container.encode(value, forKey: key)
        }
        try container.encodeIfPresent(baseline, forKey: .baseline)
        try container.encodeIfPresent(ratio, forKey: .ratio)
        try container.encodeIfPresent(target, forKey: .target)
        try container.encodeIfPresent(met, forKey: .met)
        try container.encodeIfPresent(note, forKey: .note)
    }
}

/// Collects rows and prints them as they come (text) or at the end (JSON).
final class BenchReport {
    private(set) var rows: [BenchRow] = []
    let json: Bool

    init(json: Bool) { self.json = json }

    func add(_ row: BenchRow) {
        rows.append(row)
        if !json { printRow(row) }
    }

    /// Adds `row` compared to the already-added row named `baseline`; `limit` is the target ratio.
    func add(_ row: BenchRow, comparedTo baseline: String, limit: Double? = nil, targetText: String? = nil) {
        var row = row
        if let base = rows.last(where: { $0.name == baseline && $0.section == row.section }) {
            row.baseline = baseline
            row.ratio = row.medianNs / base.medianNs
            if let limit {
                row.target = targetText ?? String(format: "≤ %.2fx %@", limit, baseline)
                row.met = row.ratio! <= limit
            }
        }
        add(row)
    }

    func section(_ title: String) {
        if !json { print("\n## \(title)\n" + String(format: "%-46@ %11@ %11@ %11@ %11@  %@", "figure", "median", "p99", "min", "max", "vs baseline")) }
    }

    private func printRow(_ row: BenchRow) {
        var line: String
        if row.medianNs.isFinite {
            line = String(
                format: "%-46@ %11@ %11@ %11@ %11@", row.name, formatNanoseconds(row.medianNs),
                formatNanoseconds(row.p99Ns), formatNanoseconds(row.minNs), formatNanoseconds(row.maxNs))
        } else {
            line = String(format: "%-46@", row.name)
        }
        if let ratio = row.ratio, let baseline = row.baseline { line += String(format: "  %.2fx %@", ratio, baseline) }
        if let note = row.note { line += "  " + note }
        if let met = row.met { line += met ? "  [target met: \(row.target ?? "")]" : "  [TARGET MISSED: \(row.target ?? "")]" }
        print(line)
        fflush(nil)
    }
}

enum Bench {
    static let sections = ["single", "crossprocess", "scale"]

    static let help = """
        usage: yashima-stress bench [--quick] [--format text|json] [--svg FILE] [--section NAME ...]
                                    [--directory D]

        Measures YashimaShared against raw baselines in the same run. Sections: \(sections.joined(separator: ", ")).
          --quick          fewer rounds (under a minute)
          --format         text (default) or json
          --svg FILE       also draw the main results as an SVG chart
          --section NAME   run only these sections (repeatable)
          --directory D    where to put benchmark files (default: a fresh folder under $TMPDIR)
        """

    static func run(_ words: [String]) async throws -> Int32 {
        var arguments = try Arguments(words, flagNames: ["quick", "help"])
        if arguments.flag("help") {
            print(help)
            return 0
        }
        let quick = arguments.flag("quick")
        let format = arguments.string("format") ?? "text"
        guard format == "text" || format == "json" else {
            throw ArgumentError(description: "--format must be text or json, not '\(format)'")
        }
        let svg = arguments.string("svg")
        var chosen = arguments.strings("section")
        for name in chosen where !sections.contains(name) {
            throw ArgumentError(description: "unknown section '\(name)' (sections: \(sections.joined(separator: ", ")))")
        }
        if chosen.isEmpty { chosen = sections }
        let base =
            arguments.string("directory")
            ?? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/yashima-bench-\(getpid())"
        try arguments.rejectUnknown()
        try? FileManager.default.removeItem(atPath: base)
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }

        let report = BenchReport(json: format == "json")
        if !report.json {
            print("YashimaShared benchmarks — \(hostDescription()) — \(ISO8601DateFormatter().string(from: Date()))")
            print(quick ? "(quick mode: fewer rounds)" : "(full mode)")
        }
        let context = BenchContext(base: base, quick: quick, report: report)
        if chosen.contains("single") { try await SingleProcessBench.run(context) }
        if chosen.contains("crossprocess") { try await CrossProcessBench.run(context) }
        if chosen.contains("scale") { try await ScaleBench.run(context) }

        if report.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let document = BenchDocument(host: hostDescription(), date: ISO8601DateFormatter().string(from: Date()), quick: quick, rows: report.rows)
            print(String(decoding: try encoder.encode(document), as: UTF8.self))
        } else {
            let missed = report.rows.filter { $0.met == false }.map(\.name)
            let met = report.rows.filter { $0.met == true }.count
            print("\nTargets: \(met) met, \(missed.count) missed" + (missed.isEmpty ? "" : ": " + missed.joined(separator: "; ")))
        }
        if let svg { try BenchChart.svg(report.rows).write(toFile: svg, atomically: true, encoding: .utf8) }
        return 0
    }

    static func hostDescription() -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var model = "unknown CPU"
        if let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
            let line = info.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
            let colon = line.firstIndex(of: ":")
        {
            model = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var name = utsname()
        uname(&name)
        let kernel = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        return "\(cores) cores, \(model), Linux \(kernel)"
    }
}

struct BenchDocument: Codable {
    var host: String
    var date: String
    var quick: Bool
    var rows: [BenchRow]
}

/// What every section gets.
struct BenchContext {
    let base: String
    let quick: Bool
    let report: BenchReport

    /// A fresh directory for one measurement.
    func directory(_ name: String) -> URL {
        let url = URL(fileURLWithPath: base).appendingPathComponent(name)
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The path of this executable, for spawning workers.
    var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }
}
