// Replays the entry-decoder fuzz corpus (Fuzz/corpus) and every crash the fuzzer found (Fuzz/crashes)
// through the fuzz target's own checks (EntryDecoderFuzzBody.swift, symlinked from Fuzz/), so a decoder
// regression fails `swift test` without libFuzzer. A crashing input traps here just as under the fuzzer.

import Foundation
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: fuzz corpus replay")
    struct FuzzCorpusReplay {
        /// The package root, found from this file's path (Tests/YashimaSharedTests/Hardening/<file>).
        static let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()

        static func inputs(_ folder: String) -> [URL] {
            let url = packageRoot.appendingPathComponent("Fuzz").appendingPathComponent(folder)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { url.appendingPathComponent($0) }
        }

        @Test("every corpus input and every recorded crash decodes without a crash or a broken invariant")
        func replay() throws {
            let corpus = Self.inputs("corpus")
            #expect(corpus.count >= 20, "the seed corpus is there")
            for url in corpus + Self.inputs("crashes") {
                let bytes = try Data(contentsOf: url)
                bytes.withUnsafeBytes { EntryDecoderFuzz.run($0) }
            }
        }

        @Test("the hand-made seeds decode as their names say")
        func seedsAreWhatTheySay() throws {
            for url in Self.inputs("corpus") where url.lastPathComponent.hasPrefix("seed-") {
                let name = url.lastPathComponent
                let bytes = try Data(contentsOf: url)
                bytes.withUnsafeBytes { raw in
                    if name.hasPrefix("seed-key-") {
                        #expect(CacheKey(canonicalBytes: raw) != nil, "\(name)")
                        return
                    }
                    let header = EntryFormat.parseFixedHeader(raw, fileSize: Int64(raw.count))
                    let checksum = header.flatMap { EntryFormat.validateHeaderChecksum($0, bytes: raw) }
                    if name.hasPrefix("seed-entry-") || name == "seed-bad-payload-checksum"
                        || name == "seed-wrong-identity"
                    {
                        #expect(throws: Never.self, "\(name)") { try checksum.get() }
                    } else {
                        #expect(throws: EntryFormat.Corruption.self, "\(name)") { try checksum.get() }
                    }
                }
            }
        }
    }
}
