// Keeps the README's code samples and the compiled example programs the same text. Each sample sits in
// Sources/yashima-examples or Sources/yashima-quickstart between `// sample: NAME` and `// end sample`;
// the README shows it in a ```swift block right after `<!-- sample: NAME -->`. The only other Swift block
// allowed is the walkthrough's Package.swift, which Scripts/readme-walkthrough.sh builds.
// After editing a sample, `YASHIMA_UPDATE_README=1 swift test --filter ReadmeSamplesTests` copies it in.

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

    /// The README's lines and its marked blocks; a Swift block without a marker is reported as marker "".
    static func readme() throws -> (lines: [String], blocks: [MarkedBlock]) {
        let text = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
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
        for block in try Self.readme().blocks where block.language == "swift" {
            #expect(
                block.marker.hasPrefix("sample: ") || block.marker == "walkthrough: Package.swift",
                "README line \(block.lines.lowerBound): a Swift block with no sample marker")
        }
    }

    @Test func everySampleIsInTheReadmeOnce() throws {
        let markers = try Self.readme().blocks.map(\.marker).filter { $0.hasPrefix("sample: ") }
        #expect(Set(markers).count == markers.count, "a sample shown twice")
        let samples = try Self.samples()
        #expect(Set(markers.map { String($0.dropFirst("sample: ".count)) }) == Set(samples.keys))
    }

    @Test func readmeSamplesAreTheCompiledText() throws {
        var (lines, blocks) = try Self.readme()
        blocks.reverse()  // from the end, so that replacing one block does not move the ones still to do
        let samples = try Self.samples()
        let update = ProcessInfo.processInfo.environment["YASHIMA_UPDATE_README"] == "1"
        for block in blocks where block.marker.hasPrefix("sample: ") {
            let name = String(block.marker.dropFirst("sample: ".count))
            guard let sample = samples[name] else { continue }  // reported by everySampleIsInTheReadmeOnce
            if update {
                lines.replaceSubrange(block.lines, with: sample)
            } else {
                #expect(
                    Array(lines[block.lines]) == sample,
                    "README sample \(name) differs from its source; run YASHIMA_UPDATE_README=1 swift test --filter ReadmeSamplesTests"
                )
            }
        }
        if update {
            try lines.joined(separator: "\n").write(
                to: Self.root.appendingPathComponent("README.md"), atomically: true, encoding: .utf8)
        }
    }
}
