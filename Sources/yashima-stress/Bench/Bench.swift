// `yashima-stress bench`: the benchmark suite. Every figure with a baseline is printed as a ratio to a
// baseline measured in the same run (machines are noisy; ratios hold). Sections: single (one process),
// crossprocess (many processes), scale (directory size, trimming), observation (publish → observer in
// another process). Output: text table or JSON; --svg
// draws the main results.

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

/// One measured figure.
struct BenchRow: Codable, Sendable {
    var section: String
    var name: String
    var medianNs: Double
    var p90Ns: Double
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
        p90Ns = samples.percentile(90)
        p99Ns = samples.p99
        minNs = samples.minimum
        maxNs = samples.maximum
        self.note = note
    }

    init(section: String, name: String, note: String, met: Bool? = nil, target: String? = nil) {
        self.section = section
        self.name = name
        medianNs = .nan
        p90Ns = .nan
        p99Ns = .nan
        minNs = .nan
        maxNs = .nan
        self.note = note
        self.met = met
        self.target = target
    }

    enum CodingKeys: String, CodingKey {
        case section, name, medianNs, p90Ns, p99Ns, minNs, maxNs, baseline, ratio, target, met, note
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(section, forKey: .section)
        try container.encode(name, forKey: .name)
        for (value, key) in [
            (medianNs, CodingKeys.medianNs), (p90Ns, .p90Ns), (p99Ns, .p99Ns), (minNs, .minNs), (maxNs, .maxNs),
        ]
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
        guard !json else { return }
        print("\n## \(title)\n")
        print(columns("figure", "median", "p90", "p99", "min", "max") + "  vs baseline / notes")
    }

    /// One table line. (`String(format:)` ignores widths for `%@` on Linux, so pad by hand.)
    private func columns(_ name: String, _ figures: String...) -> String {
        func pad(_ text: String, _ width: Int, leading: Bool) -> String {
            let gap = String(repeating: " ", count: max(0, width - text.count))
            return leading ? gap + text : text + gap
        }
        return pad(name, Self.nameWidth, leading: false) + figures.map { " " + pad($0, 10, leading: true) }.joined()
    }

    static let nameWidth = 48

    private func printRow(_ row: BenchRow) {
        var line: String
        if row.medianNs.isFinite {
            line = columns(
                row.name, formatNanoseconds(row.medianNs), formatNanoseconds(row.p90Ns), formatNanoseconds(row.p99Ns),
                formatNanoseconds(row.minNs), formatNanoseconds(row.maxNs))
        } else {
            line = columns(row.name)
        }
        if let ratio = row.ratio, let baseline = row.baseline { line += String(format: "  %.2fx %@", ratio, baseline) }
        if let note = row.note { line += "  " + note }
        if let met = row.met {
            line += met ? "  [target met: \(row.target ?? "")]" : "  [TARGET MISSED: \(row.target ?? "")]"
        }
        print(line)
        fflush(nil)
    }
}

enum Bench {
    static let sections = ["single", "crossprocess", "scale", "observation", "remote"]
    /// Parts of the sections above that can be run alone (only when named): `stampede` (fresh and warm
    /// stampedes against the bare-flock C floor, from crossprocess), `executors` (hits from the main
    /// actor, an actor and a detached task, from single), `http` (the HTTP hits against curl, from
    /// remote) and `s3` (the S3 hits against curl --aws-sigv4, from remote); and, run only when named, `targets` (issue 34's targets against the C floors, one run) and
    /// `instructions` (instructions per operation under callgrind, beside the C floors').
    static let parts = ["stampede", "executors", "http", "s3", "targets", "instructions"]

    static let help = """
        usage: yashima-stress bench [--quick] [--format text|json] [--svg FILE] [--section NAME ...]
                                    [--directory D]

        Measures YashimaShared against raw baselines in the same run. Sections: \(sections.joined(separator: ", ")).
          --quick          fewer rounds (under a minute)
          --format         text (default) or json
          --svg FILE       also draw the main results as an SVG chart
          --section NAME   run only these sections (repeatable); also \(parts.joined(separator: ", ")), parts
                           of crossprocess, single and remote run alone
          --stampede-sizes N,N,...  the process counts of the stampede against the bare-flock floor
                           (default 8,32,64)
          --directory D    where to put benchmark files (default: a fresh folder under $TMPDIR)
          --remote URL     the Redis server of the remote section (default: a redis-server started there;
                           none installed: the section is skipped)
          --scale-directory D   where the scale section keeps its directories of many entries, made once
                           and reused by later runs (default: $TMPDIR/yashima-bench-scale; 1M entries of
                           1 KiB take about 4.3 GB)
          --scale-sizes N,N,...  the entry counts the scale section measures (default 1000,100000,1000000;
                           with --quick 1000,100000)
          --ceilings FILE  with --section instructions: exit 1 when a count exceeds its ceiling in FILE
                           (Benchmarks/instructions/ceilings.json)

        Ratios are against floors written in C (Benchmarks/floors, built here with the system cc; its
        sources are found above this executable, or at $YASHIMA_FLOORS_SOURCE).

        Peers (python-diskcache, LMDB) on the same workloads: Benchmarks/peers/run.sh [--quick].
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
        let remoteURL = arguments.string("remote")
        let ceilings = arguments.string("ceilings")
        var chosen = arguments.strings("section")
        for name in chosen where !sections.contains(name) && !parts.contains(name) {
            throw ArgumentError(
                description: "unknown section '\(name)' (sections: \((sections + parts).joined(separator: ", ")))")
        }
        if chosen.isEmpty { chosen = sections }
        let base =
            arguments.string("directory")
            ?? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/yashima-bench-\(getpid())"
        let scaleDirectory =
            arguments.string("scale-directory")
            ?? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/yashima-bench-scale"
        var scaleSizes = quick ? [1_000, 100_000] : [1_000, 100_000, 1_000_000]
        if let sizes = arguments.string("scale-sizes") {
            scaleSizes = try sizes.split(separator: ",").map {
                guard let size = Int($0), size > 0, size <= 10_000_000 else {
                    throw ArgumentError(description: "--scale-sizes: '\($0)' is not an entry count (1 to 10,000,000)")
                }
                return size
            }
        }
        var stampedeSizes = [8, 32, 64]
        if let sizes = arguments.string("stampede-sizes") {
            stampedeSizes = try sizes.split(separator: ",").map {
                guard let size = Int($0), size >= 2, size <= 256 else {
                    throw ArgumentError(description: "--stampede-sizes: '\($0)' is not a process count (2 to 256)")
                }
                return size
            }
        }
        try arguments.rejectUnknown()
        removeTree(base)
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer {
            removeTree(base)
            removeTree(Floors.buildDirectory(base))
        }

        let report = BenchReport(json: format == "json")
        if !report.json {
            print("YashimaShared benchmarks — \(hostDescription()) — \(ISO8601DateFormatter().string(from: Date()))")
            print("bench directory: \(base) (\(filesystemDescription(base)))")
            print("load average at start: \(loadAverage()) (other work on the machine skews absolute times)")
            print(quick ? "(quick mode: fewer rounds)" : "(full mode)")
        }
        let context = BenchContext(
            base: base, quick: quick, report: report, scaleDirectory: scaleDirectory, scaleSizes: scaleSizes,
            stampedeSizes: stampedeSizes, remoteURL: remoteURL)
        var status: Int32 = 0
        var sectionSeconds: [String: Double] = [:]
        var cleanupSeconds: [String: Double] = [:]
        let began = monotonicNanoseconds()
        for name in sections + parts where chosen.contains(name) {
            let start = monotonicNanoseconds()
            switch name {
            case "single": try await SingleProcessBench.run(context)
            case "crossprocess": try await CrossProcessBench.run(context)
            case "observation": try await ObservationBench.run(context)
            case "stampede": try await StampedeBench.run(context)
            case "targets": try await TargetsBench.run(context)
            case "instructions":
                if try await !InstructionsBench.run(context, ceilings: ceilings) { status = 1 }
            case "executors": try await SingleProcessBench.executors(context)
            case "http": try await HTTPRemoteBench.run(context)
            case "s3": try await S3RemoteBench.run(context)
            case "remote":
                try await RemoteBench.run(context, url: remoteURL)
                try await HTTPRemoteBench.run(context)
                try await S3RemoteBench.run(context)
            default: try await ScaleBench.run(context)
            }
            sectionSeconds[name] = Double(monotonicNanoseconds() - start) / 1e9
            let cleanupStart = monotonicNanoseconds()
            context.cleanUp()
            cleanupSeconds[name] = Double(monotonicNanoseconds() - cleanupStart) / 1e9
            if !report.json {
                print(
                    String(
                        format: "(section %@: %.1f s, then %.1f s removing its files)", name, sectionSeconds[name]!,
                        cleanupSeconds[name]!))
            }
        }
        let totalSeconds = Double(monotonicNanoseconds() - began) / 1e9

        if report.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let document = BenchDocument(
                host: hostDescription() + ", bench directory on " + filesystemDescription(base),
                date: ISO8601DateFormatter().string(from: Date()), quick: quick,
                load: loadAverage(), sectionSeconds: sectionSeconds, cleanupSeconds: cleanupSeconds,
                totalSeconds: totalSeconds, rows: report.rows)
            print(String(decoding: try encoder.encode(document), as: UTF8.self))
        } else {
            let missed = report.rows.filter { $0.met == false }.map(\.name)
            let met = report.rows.filter { $0.met == true }.count
            print(
                "\nTargets: \(met) met, \(missed.count) missed"
                    + (missed.isEmpty ? "" : ": " + missed.joined(separator: "; ")))
            print(String(format: "Total %.1f s; load average now %@", totalSeconds, loadAverage()))
        }
        if let svg {
            let caption =
                "\(hostDescription()) · \(ISO8601DateFormatter().string(from: Date())) · "
                + (quick ? "--quick" : "full run") + " · load average \(loadAverage())"
            try BenchChart.svg(report.rows, caption: caption).write(toFile: svg, atomically: true, encoding: .utf8)
        }
        return status
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
        let kernel = withUnsafeBytes(of: &name.release) {
            String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        var memory = ""
        if let info = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8),
            let line = info.split(separator: "\n").first(where: { $0.hasPrefix("MemTotal:") }),
            let kibibytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        {
            memory = String(format: ", %.0f GiB RAM", kibibytes / 1_048_576)
        }
        return "\(cores) cores, \(model)\(memory), Linux \(kernel)"
    }

    /// The file system type holding `path` (the bench directory): the longest mount point in
    /// /proc/mounts that contains it.
    static func filesystemDescription(_ path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let mounts = ProcFile.text("/proc/mounts") else {  // past its first page, too
            return "unknown file system"
        }
        var best: (point: String, type: String)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 2 else { continue }
            let point = String(fields[1])
            let contains = point == "/" || resolved == point || resolved.hasPrefix(point + "/")
            if contains, point.count > (best?.point.count ?? -1) { best = (point, String(fields[2])) }
        }
        return best.map { "\($0.type) at \($0.point)" } ?? "unknown file system"
    }
}

struct BenchDocument: Codable {
    var host: String
    var date: String
    var quick: Bool
    /// /proc/loadavg's 1/5/15-minute figures when the run ended.
    var load: String
    var sectionSeconds: [String: Double]
    /// Time spent removing each section's files afterwards (not part of any figure).
    var cleanupSeconds: [String: Double]
    var totalSeconds: Double
    var rows: [BenchRow]
}

/// Removes a directory tree, unlinking its files from several threads. On a virtual disk mounted with
/// `discard`, each unlink of a written-back file waits milliseconds; in parallel those waits overlap
/// (measured here: 300 files 0.94 s serially, 0.06 s from 4 threads).
func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    guard info.st_mode & S_IFMT == S_IFDIR else {
        unlink(path)
        return
    }
    var files: [String] = []
    var directories: [String] = [path]
    if let enumerator = FileManager.default.enumerator(atPath: path) {
        while let relative = enumerator.nextObject() as? String {
            let full = path + "/" + relative
            if lstat(full, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
                directories.append(full)
            } else {
                files.append(full)
            }
        }
    }
    inParallel(files) { unlink($0) }
    // Folders go deepest level first; folders of one level are independent, so they go in parallel too
    // (a fresh cache directory has over 500 fan-out folders).
    let byDepth = Dictionary(grouping: directories) { $0.reduce(0) { $1 == "/" ? $0 + 1 : $0 } }
    for depth in byDepth.keys.sorted(by: >) { inParallel(byDepth[depth]!) { rmdir($0) } }
}

/// Runs `body` on every path from up to 8 threads (the waits are I/O, not CPU).
private func inParallel(_ paths: [String], _ body: @escaping @Sendable (String) -> Void) {
    let threads = min(8, max(1, paths.count / 64))
    let group = DispatchGroup()
    for worker in 0..<threads {
        group.enter()
        let thread = Thread {
            var index = worker
            while index < paths.count {
                body(paths[index])
                index += threads
            }
            group.leave()
        }
        thread.start()
    }
    group.wait()
}

/// The 1, 5 and 15-minute load averages from /proc/loadavg.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// What every section gets.
struct BenchContext {
    let base: String
    let quick: Bool
    let report: BenchReport
    /// Where the scale section keeps its directories of 1k, 100k and 1M entries between runs.
    var scaleDirectory: String = ""
    /// The directory sizes the scale section measures.
    var scaleSizes: [Int] = []
    /// The process counts of the stampede against the bare-flock floor.
    var stampedeSizes: [Int] = [8, 32, 64]
    /// `--remote URL`: the Redis server of the remote hits (nil: one started here).
    var remoteURL: String?

    /// A fresh directory for one measurement.
    func directory(_ name: String) -> URL {
        let url = URL(fileURLWithPath: base).appendingPathComponent(name)
        removeTree(url.path)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Removes everything under `base` (between sections, so one section's files do not slow the next).
    func cleanUp() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] { removeTree(base + "/" + name) }
    }

    /// The path of this executable, for spawning workers.
    var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }
}
