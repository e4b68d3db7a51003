// Keeps the code samples of the README and of the guides (the articles of the DocC catalog,
// Sources/YashimaShared/YashimaShared.docc) and the compiled example programs the same text. Each sample
// sits in Sources/yashima-examples or Sources/yashima-quickstart between `// sample: NAME` and
// `// end sample`; a document shows it in a ```swift block right after `<!-- sample: NAME -->`, at most once
// per document, and every sample is shown somewhere. The only other Swift block allowed is the README
// walkthrough's Package.swift, which Scripts/readme-walkthrough.sh builds. After editing a sample,
// `YASHIMA_UPDATE_README=1 swift test --filter ReadmeSamplesTests` copies it into every document.

import Foundation
import Testing

@Suite struct ReadmeSamplesTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// One fenced block of the README that follows a marker comment.
    struct MarkedBlock {
        let marker: String
        let language: String
        /// The block's lines, without the fences.
        let lines: Range<Int>
    }

    /// The guides: every Markdown file of the documentation catalog, as paths from the package root.
    static func guides() throws -> [String] {
        let catalog = "Sources/YashimaShared/YashimaShared.docc"
        let files = try FileManager.default.subpathsOfDirectory(atPath: root.appendingPathComponent(catalog).path)
        return files.filter { $0.hasSuffix(".md") }.sorted().map { catalog + "/" + $0 }
    }

    /// The README and the guides, as paths from the package root.
    static func documents() throws -> [String] { try ["README.md"] + guides() }

    /// A document's lines and its marked blocks; a Swift block without a marker is reported as marker "".
    static func document(_ path: String) throws -> (lines: [String], blocks: [MarkedBlock]) {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        var blocks: [MarkedBlock] = []
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("```") else {
                index += 1
                continue
            }
            let language = String(lines[index].dropFirst(3))
            var end = index + 1
            while end < lines.count, lines[end] != "```" { end += 1 }
            let previous = index > 0 ? lines[index - 1] : ""
            let marker =
                previous.hasPrefix("<!-- ") && previous.hasSuffix(" -->")
                ? String(previous.dropFirst(5).dropLast(4)) : ""
            blocks.append(MarkedBlock(marker: marker, language: language, lines: (index + 1)..<end))
            index = end + 1
        }
        return (lines, blocks)
    }

    /// Every `// sample: NAME` … `// end sample` region of the example programs, by name.
    static func samples() throws -> [String: [String]] {
        var samples: [String: [String]] = [:]
        let folders = ["Sources/yashima-examples", "Sources/yashima-quickstart"]
        for folder in folders {
            let url = root.appendingPathComponent(folder)
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path) where name.hasSuffix(".swift") {
                let lines = try String(contentsOf: url.appendingPathComponent(name), encoding: .utf8)
                    .components(separatedBy: "\n")
                var current: (name: String, lines: [String])?
                for line in lines {
                    if line.hasPrefix("// sample: ") {
                        current = (String(line.dropFirst("// sample: ".count)), [])
                    } else if line == "// end sample", let sample = current {
                        #expect(samples[sample.name] == nil, "sample \(sample.name) defined twice")
                        samples[sample.name] = sample.lines
                        current = nil
                    } else {
                        current?.lines.append(line)
                    }
                }
                #expect(current == nil, "\(name): sample \(current?.name ?? "") has no `// end sample`")
            }
        }
        return samples
    }

    @Test func everySwiftBlockIsACompiledSampleOrTheWalkthroughManifest() throws {
        for path in try Self.documents() {
            for block in try Self.document(path).blocks where block.language == "swift" {
                let manifest = path == "README.md" && block.marker == "walkthrough: Package.swift"
                #expect(
                    block.marker.hasPrefix("sample: ") || manifest,
                    "\(path) line \(block.lines.lowerBound): a Swift block with no sample marker")
            }
        }
    }

    @Test func everySampleIsShownAndNoneTwiceInOneDocument() throws {
        let samples = try Self.samples()
        var shown: Set<String> = []
        for path in try Self.documents() {
            let names = try Self.document(path).blocks.map(\.marker).filter { $0.hasPrefix("sample: ") }
                .map { String($0.dropFirst("sample: ".count)) }
            #expect(Set(names).count == names.count, "\(path): a sample shown twice")
            for name in names { #expect(samples[name] != nil, "\(path): no sample named \(name)") }
            shown.formUnion(names)
        }
        #expect(shown == Set(samples.keys), "samples shown in no document: \(Set(samples.keys).subtracting(shown))")
    }

    @Test func theGuidesShowTheGuidesSamples() throws {
        // Each guide's samples, by the article that explains them (the README shows the quick start).
        let expected: [String: Set<String>] = [
            "GettingStarted.md": ["quick-start", "options", "lifecycle"],
            "KeysAndCodecs.md": ["keys", "codecs"],
            "SharingAcrossProcesses.md": ["worker-pool", "app-and-helper", "test-fixtures", "observing"],
            "SharingAcrossMachines.md": ["remote-redis", "remote-http", "remote-s3", "remote-chain"],
        ]
        for path in try Self.guides() {
            guard let names = expected[URL(fileURLWithPath: path).lastPathComponent] else { continue }
            let shown = try Self.document(path).blocks.map(\.marker).filter { $0.hasPrefix("sample: ") }
                .map { String($0.dropFirst("sample: ".count)) }
            #expect(Set(shown) == names, "\(path)")
        }
        #expect(try Set(Self.guides().map { URL(fileURLWithPath: $0).lastPathComponent }).isSuperset(of: expected.keys))
    }

    @Test func samplesAreTheCompiledText() throws {
        let samples = try Self.samples()
        let update = ProcessInfo.processInfo.environment["YASHIMA_UPDATE_README"] == "1"
        for path in try Self.documents() {
            var (lines, blocks) = try Self.document(path)
            blocks.reverse()  // from the end, so that replacing one block does not move the ones still to do
            var changed = false
            for block in blocks where block.marker.hasPrefix("sample: ") {
                let name = String(block.marker.dropFirst("sample: ".count))
                guard let sample = samples[name] else { continue }  // reported by everySampleIsShown…
                if Array(lines[block.lines]) == sample { continue }
                if update {
                    lines.replaceSubrange(block.lines, with: sample)
                    changed = true
                } else {
                    Issue.record(
                        "\(path): sample \(name) differs from its source; run YASHIMA_UPDATE_README=1 swift test --filter ReadmeSamplesTests"
                    )
                }
            }
            if changed {
                try lines.joined(separator: "\n").write(
                    to: Self.root.appendingPathComponent(path), atomically: true, encoding: .utf8)
            }
        }
    }
}
