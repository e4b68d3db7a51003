// Real shell pools around `yashima run`: `xargs -P 8` and `make -j8` run the same commands many times
// at once; each distinct command must run exactly once (its generator appends its pid to a ledger), and
// every standard output and output file must be byte-identical to running the command directly.

import Foundation
import Glibc
import Testing

@Suite(.serialized) struct CLIPoolTests {
    /// A generator: appends "INPUT PID" to $LEDGER, takes a moment (so callers overlap), prints a dump
    /// of its input and writes a transformed copy to its second argument, when given.
    static let generator = """
        #!/bin/sh
        echo "$1 $$" >> "$LEDGER"
        sleep 0.2
        od -An -tx1 "$1" | head -c 4000
        wc -c < "$1"
        if [ -n "$2" ]; then tr 'a-m' 'n-z' < "$1" > "$2"; fi
        """

    private func prepare(_ fixture: CLIFixture, inputs: [String]) throws -> String {
        for (index, name) in inputs.enumerated() {
            try sampleBytes(50_000 + index * 1000, seed: UInt64(index + 1)).write(
                to: URL(fileURLWithPath: fixture.path("in/\(name)")).creatingFolder())
        }
        try FileManager.default.createDirectory(atPath: fixture.path("out"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: fixture.path("res"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: fixture.path("direct"), withIntermediateDirectories: true)
        return try fixture.file("gen.sh", CLIPoolTests.generator, executable: true)
    }

    @Test func xargsPoolRunsEachCommandOnce() async throws {
        let fixture = try CLIFixture()
        let inputs = ["a", "b", "c", "d"]
        let generator = try prepare(fixture, inputs: inputs)
        let repeats = 6
        let jobs = inputs.flatMap { input in (1...repeats).map { "\(input) \($0)" } }.shuffled()
        let environment = [
            "Y": yashimaExecutable.path, "D": fixture.storage, "R": fixture.root.path, "GEN": generator,
            "LEDGER": fixture.path("ledger"), "JOBS": jobs.joined(separator: "\n"),
        ]
        let pool = try await shell(
            #"""
            printf '%s\n' "$JOBS" | xargs -P 8 -n 2 sh -c '
                exec "$Y" run --dir "$D" --input "$R/in/$0" --output "$R/out/$0" -- "$GEN" "$R/in/$0" "$R/out/$0" \
                    > "$R/res/$0-$1"'
            """#, environment: environment)
        #expect(pool.status == 0, "xargs: \(pool.error)")
        // Each distinct command ran exactly once.
        let ledger = fixture.lines("ledger").map { String($0.split(separator: " ")[0]) }
        #expect(ledger.sorted() == inputs.map { fixture.path("in/\($0)") }.sorted(), "\(ledger)")
        // Byte-identical to running each command directly.
        for input in inputs {
            let direct = try await shell(
                #""$GEN" "$R/in/$I" "$R/direct/$I""#,
                environment: ["GEN": generator, "R": fixture.root.path, "I": input, "LEDGER": "/dev/null"])
            #expect(direct.status == 0)
            for copy in 1...repeats {
                let result = try Data(contentsOf: URL(fileURLWithPath: fixture.path("res/\(input)-\(copy)")))
                #expect(result == direct.output, "standard output of \(input) #\(copy)")
            }
            let output = try Data(contentsOf: URL(fileURLWithPath: fixture.path("out/\(input)")))
            #expect(output == (try Data(contentsOf: URL(fileURLWithPath: fixture.path("direct/\(input)")))))
        }
        // The counters every process shares saw the same: 4 generations; every other call read storage.
        let counters = try await yashima(["stats", "--json"] + fixture.dir).json["counters"] as? [String: Any]
        let generations = counters?["generations"] as? Int
        let storageHits = counters?["storageHits"] as? Int
        #expect(generations == inputs.count)
        #expect((storageHits ?? 0) + (generations ?? 0) == inputs.count * repeats, "\(counters ?? [:])")
        #expect(
            counters?["misses"] as? Int == (generations ?? 0) + (counters?["sharedGenerations"] as? Int ?? 0),
            "\(counters ?? [:])")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/make"), "needs make"))
    func makePoolRunsEachRecipeOnce() async throws {
        let fixture = try CLIFixture()
        let inputs = ["a", "b", "c", "d"]
        _ = try prepare(fixture, inputs: inputs)
        var makefile = "all:"
        let targets = inputs.flatMap { input in (1...4).map { "res/\(input)-\($0)" } }
        makefile += " " + targets.joined(separator: " ") + "\n"
        for target in targets {
            let input = target.dropFirst(4).prefix(1)
            makefile += "\(target):\n\t\"$(Y)\" run --dir \"$(D)\" --input in/\(input) -- ./gen.sh in/\(input) > $@\n"
        }
        try fixture.file("Makefile", makefile)
        let build = try await shell(
            #"cd "$R" && make -s -j8"#,
            environment: [
                "Y": yashimaExecutable.path, "D": fixture.storage, "R": fixture.root.path,
                "LEDGER": fixture.path("ledger"),
            ])
        #expect(build.status == 0, "make: \(build.error)")
        let ledger = fixture.lines("ledger").map { String($0.split(separator: " ")[0]) }
        #expect(ledger.sorted() == inputs.map { "in/\($0)" }, "\(ledger)")
        for input in inputs {
            let direct = try await shell(
                #"cd "$R" && ./gen.sh in/$I"#, environment: ["R": fixture.root.path, "I": input, "LEDGER": "/dev/null"])
            for copy in 1...4 {
                let result = try Data(contentsOf: URL(fileURLWithPath: fixture.path("res/\(input)-\(copy)")))
                #expect(result == direct.output, "\(input) #\(copy)")
            }
        }
        // A second build with everything removed but the cache runs nothing.
        try FileManager.default.removeItem(atPath: fixture.path("res"))
        try FileManager.default.createDirectory(atPath: fixture.path("res"), withIntermediateDirectories: true)
        let again = try await shell(
            #"cd "$R" && make -s -j8"#,
            environment: [
                "Y": yashimaExecutable.path, "D": fixture.storage, "R": fixture.root.path,
                "LEDGER": fixture.path("ledger"),
            ])
        #expect(again.status == 0)
        #expect(fixture.lines("ledger").count == inputs.count)
    }
}

extension URL {
    /// This URL, after creating its folder.
    func creatingFolder() throws -> URL {
        try FileManager.default.createDirectory(at: deletingLastPathComponent(), withIntermediateDirectories: true)
        return self
    }
}
