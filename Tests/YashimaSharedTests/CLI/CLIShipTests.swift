// What ships with `yashima`: `stats --format prometheus` checked by a strict parser of the text
// exposition format (and its counters against `stats --json`), the man page generated from the help
// text (every subcommand and option, roff that groff reads without a warning), the completions (bash
// loads and completes subcommands and options), and `--version`.

import Foundation
import Glibc
import Testing

@Suite struct CLIShipTests {
    /// One sample of the exposition format.
    struct Sample: Hashable {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    enum ExpositionError: Error, CustomStringConvertible {
        case line(Int, String)
        var description: String {
            if case .line(let number, let reason) = self { return "line \(number): \(reason)" }
            return ""
        }
    }

    /// Parses the Prometheus text format strictly: HELP and TYPE once per family and before its samples,
    /// a family's samples together, names and label names by the grammar, label values escaped, values
    /// that are floats (or ±Inf, NaN), counters ending in _total, no series twice, a final newline.
    static func parse(_ text: String) throws -> [Sample] {
        guard text.hasSuffix("\n") else { throw ExpositionError.line(0, "no final newline") }
        let name = /[a-zA-Z_:][a-zA-Z0-9_:]*/
        var samples: [Sample] = []
        var types: [String: String] = [:]
        var helps: Set<String> = []
        var finished: Set<String> = []
        var current: String?
        var series: Set<String> = []
        for (index, line) in text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ", maxSplits: 1)
                guard parts.count == 2, (try? name.wholeMatch(in: parts[0])) != nil else {
                    throw ExpositionError.line(number, "bad comment")
                }
                let family = String(parts[0])
                guard !finished.contains(family), current != family || line.hasPrefix("# TYPE") else {
                    throw ExpositionError.line(number, "\(family) described after its samples")
                }
                if line.hasPrefix("# HELP ") {
                    guard helps.insert(family).inserted else { throw ExpositionError.line(number, "HELP twice") }
                } else {
                    guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(String(parts[1])),
                        types[family] == nil
                    else { throw ExpositionError.line(number, "bad or repeated TYPE") }
                    if parts[1] == "counter", !family.hasSuffix("_total") {
                        throw ExpositionError.line(number, "a counter not named _total")
                    }
                    types[family] = String(parts[1])
                }
                if let previous = current, previous != family { finished.insert(previous) }
                current = family
                continue
            }
            guard !line.hasPrefix("#"), !line.isEmpty else { throw ExpositionError.line(number, "stray line") }
            guard let match = try /([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ([^ ]+)( -?[0-9]+)?/.wholeMatch(in: line)
            else {
                throw ExpositionError.line(number, "not a sample")
            }
            let family = String(match.1)
            guard family == current, types[family] != nil, helps.contains(family) else {
                throw ExpositionError.line(number, "\(family) without HELP and TYPE just before")
            }
            var labels: [String: String] = [:]
            if let body = match.3 {
                var rest = Substring(body)
                while !rest.isEmpty {
                    guard
                        let pair = try /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.prefixMatch(in: rest)
                    else { throw ExpositionError.line(number, "bad label in \(body)") }
                    guard labels.updateValue(String(pair.2), forKey: String(pair.1)) == nil else {
                        throw ExpositionError.line(number, "label twice")
                    }
                    rest = rest[pair.range.upperBound...]
                }
            }
            let text = String(match.4)
            guard let value = ["+Inf": Double.infinity, "-Inf": -.infinity, "NaN": .nan][text] ?? Double(text) else {
                throw ExpositionError.line(number, "bad value \(text)")
            }
            guard series.insert(family + "\(labels.sorted { $0.key < $1.key })").inserted else {
                throw ExpositionError.line(number, "series twice")
            }
            samples.append(Sample(name: family, labels: labels, value: value))
        }
        return samples
    }

    @Test func theParserRefusesWhatPrometheusRefuses() {
        for bad in [
            "x 1", "# TYPE x counter\n# HELP x h\nx 1\n", "# HELP x h\n# TYPE x gauge\nx{a=\"1} 2\n",
            "# HELP x h\n# TYPE x gauge\nx one\n", "# HELP x_total h\n# TYPE x_total counter\nx_total 1\nx_total 2\n",
            "# HELP x h\n# TYPE x counter\nx 1\n",
            "# HELP x h\n# TYPE x gauge\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\nx 2\n",
        ] {
            #expect(throws: ExpositionError.self, "\(bad)") { try Self.parse(bad) }
        }
        #expect(throws: Never.self) { try Self.parse("# HELP x h\n# TYPE x gauge\nx{a=\"q\\\"\\n\"} +Inf\n") }
    }

    @Test func prometheusMetricsParseAndMatchTheJSON() async throws {
        let fixture = try CLIFixture()
        for index in 0..<3 {
            _ = try await yashima(["run"] + fixture.dir + ["--", "echo", "\(index)"])
        }
        _ = try await yashima(["run"] + fixture.dir + ["--", "echo", "0"])
        // A directory path that needs escaping in a label value.
        let metrics = try await yashima(["stats", "--format", "prometheus"] + fixture.dir)
        #expect(metrics.status == 0, "\(metrics.error)")
        let samples = try Self.parse(metrics.text)
        let json = try await yashima(["stats", "--json"] + fixture.dir).json
        let counters = try #require(json["counters"] as? [String: Any])
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            samples.first { $0.name == name && $0.labels == ["directory": fixture.storage].merging(labels) { $1 } }?
                .value
        }
        #expect(value("yashima_hits_total", ["source": "storage"]) == Double(counters["storageHits"] as? Int ?? -1))
        #expect(value("yashima_hits_total", ["source": "memory"]) == Double(counters["memoryHits"] as? Int ?? -1))
        #expect(value("yashima_misses_total") == Double(counters["misses"] as? Int ?? -1))
        #expect(value("yashima_generations_total") == 3)
        #expect(value("yashima_storage_entries") == Double(json["entries"] as? Int ?? -1))
        #expect(value("yashima_storage_bytes") == Double(json["bytes"] as? Int ?? -1))
        #expect(value("yashima_storage_budget_bytes") == Double(json["budget"] as? Int ?? -1))
        #expect(value("yashima_lock_files") != nil)
        let filesystem = try #require(json["filesystem"] as? [String: Any])
        #expect(value("yashima_filesystem_bytes") == Double(filesystem["bytes"] as? Int ?? -1))
        #expect(value("yashima_free_space_floor_bytes") == Double(filesystem["floorBytes"] as? Int ?? -1))
        #expect(value("yashima_filesystem_free_bytes") != nil)
        #expect(value("yashima_pressure_trims_total") == Double(counters["pressureTrims"] as? Int ?? -1))
        let bad = try await yashima(["stats", "--format", "xml"] + fixture.dir)
        #expect(bad.status == 2 && bad.error.contains("--format must be"))
    }

    @Test func theManPageHasEveryCommandAndOption() async throws {
        let page = try await yashima(["help", "--man"])
        #expect(page.status == 0 && page.text.hasPrefix(".TH YASHIMA 1 "))
        for command in ["run", "rm", "stats", "ls", "verify", "trim", "clear", "get", "put", "watch", "config"] {
            let help = try await yashima([command, "--help"]).text
            #expect(page.text.contains(".SS \"yashima \(command)"), "\(command)")
            // Every option of the help is on the page (roff writes - as \-).
            for option in help.split(separator: "\n").compactMap({ $0.firstMatch(of: /^  (?:-\w, )?--([a-z-]+)/)?.1 }) {
                #expect(
                    page.text.contains("\\fB\\-\\-\(option.replacingOccurrences(of: "-", with: "\\-"))\\fR"),
                    "\(command) --\(option)")
            }
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/groff") else { return }
        let fixture = try CLIFixture()
        let file = try fixture.file("yashima.1", page.text)
        let checked = try await shell("groff -man -ww -z \"$F\"", environment: ["F": file])
        #expect(checked.status == 0 && checked.error.isEmpty, "groff: \(checked.error)")
    }

    @Test func bashCompletesSubcommandsAndOptions() async throws {
        let script = try await yashima(["help", "--completion", "bash"])
        let fixture = try CLIFixture()
        let file = try fixture.file("yashima.bash", script.text)
        let result = try await shell(
            #"""
            exec bash -c '. "$F"; complete -p yashima
            COMP_WORDS=(yashima r); COMP_CWORD=1; _yashima; echo "${COMPREPLY[*]}"
            COMP_WORDS=(yashima run --st); COMP_CWORD=2; _yashima; echo "${COMPREPLY[*]}"
            COMP_WORDS=(yashima --dir x stats --f); COMP_CWORD=4; _yashima; echo "${COMPREPLY[*]}"'
            """#, environment: ["F": file])
        #expect(result.status == 0, "\(result.error)")
        #expect(
            result.text == "complete -o default -F _yashima yashima\nrun rm\n--stdin --strict\n--format\n",
            "\(result.text)")
        for shell in ["zsh", "fish"] {
            let other = try await yashima(["help", "--completion", shell])
            #expect(
                other.status == 0 && other.text.contains("yashima")
                    && other.text.contains("--stdin") == (shell == "zsh"))
        }
        #expect(try await yashima(["help", "--completion", "tcsh"]).status == 2)
    }

    @Test func versionNamesTheBuild() async throws {
        let version = try await yashima(["--version"])
        #expect(version.status == 0)
        #expect(version.text.firstMatch(of: /^yashima \d+\.\d+\.\d+ \((built from source|commit [0-9a-f]+)/) != nil)
    }
}
