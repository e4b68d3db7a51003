// `yashima run` never answers one input with another's result: arguments, options, paths and the working
// directory that are not UTF-8 (each reproduction of the issue, with real processes), text options that
// must be text refused rather than guessed, and the standard-input rule (a pipe makes the run uncached,
// --stdin keys on it, an idle pipe never delays a command that does not read it).

import Foundation
import Glibc
import Testing

@Suite struct CLIExactInputTests {
    /// `sh -c` that appends to the ledger, then prints `same`.
    static let counted = ["sh", "-c", #"echo run >> "$LEDGER"; echo same"#]

    @Test func keysThatAreNotUTF8DoNotCollide() async throws {
        let fixture = try CLIFixture()
        let environment = ["LEDGER": fixture.path("ledger")]
        func run(_ key: [UInt8]) async throws -> CLIResult {
            try await yashima(
                bytes: [word("run"), word("-v")] + fixture.dir.map { word($0) } + [word("--key"), key, word("--")]
                    + CLIExactInputTests.counted.map { word($0) }, environment: environment)
        }
        let first = try await run(word("", 0xFF))
        let second = try await run(word("", 0xFE))
        let replacement = try await run(word("\u{FFFD}"))
        #expect(first.error.contains("miss") && second.error.contains("miss") && replacement.error.contains("miss"))
        #expect(fixture.lines("ledger").count == 3)
        let again = try await run(word("", 0xFF))
        #expect(again.error.hasPrefix("yashima: hit"), "\(again.error)")
        #expect(again.text == "same\n")
    }

    @Test func textOptionsRefuseBytesThatAreNotUTF8() async throws {
        let fixture = try CLIFixture()
        let dir = fixture.dir.map { word($0) }
        for arguments in [
            [word("run")] + dir + [word("--namespace"), word("n", 0xFF), word("--"), word("true")],
            [word("put")] + dir + [word("--identity"), word("", 0xFF)],
            [word("put")] + dir + [word("--identity"), word("x"), word("--variant"), word("size=", 0xFE)],
            [word("get")] + dir + [word("--identity"), word("", 0xFF)],
        ] {
            let result = try await yashima(bytes: arguments)
            #expect(result.status == 2, "\(result.error)")
            #expect(result.error.contains("must be UTF-8 text, not $'"), "\(result.error)")
        }
        // Nothing was stored under a guessed key.
        let listing = try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [Any]
        #expect(listing?.isEmpty ?? true)
    }

    @Test func workingDirectoriesThatAreNotUTF8AreTwoKeys() async throws {
        let fixture = try CLIFixture()
        let folders = [word(fixture.path("d"), 0xFF), word(fixture.path("d"), 0xFE)]
        for folder in folders { mkdir(cPath(folder), 0o700) }
        var outputs: [Data] = []
        for folder in folders + [folders[0]] {
            let result = try await run(
                "/bin/sh",
                bytes: [
                    word("-c"), word(#"cd "$1" && exec "$0" run --dir "$2" --cwd -- pwd"#),
                    word(yashimaExecutable.path),
                    folder, word(fixture.storage),
                ])
            #expect(result.status == 0, "\(result.error)")
            outputs.append(result.output)
        }
        #expect(outputs[0] == Data(folders[0] + [0x0A]))
        #expect(outputs[1] == Data(folders[1] + [0x0A]), "the second folder got its own pwd")
        #expect(outputs[2] == outputs[0])
    }

    @Test func inputOutputAndDirectoryPathsThatAreNotUTF8() async throws {
        let fixture = try CLIFixture()
        let input = word(fixture.path("in"), 0xFF) + word(".txt")
        let other = word(fixture.path("in"), 0xFE) + word(".txt")
        try Data("first".utf8).write(to: URL(fileURLWithPath: fixture.path("plain")))
        for (path, contents) in [(input, "first"), (other, "second")] {
            let fd = open(cPath(path), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            _ = contents.withCString { write(fd, $0, strlen($0)) }
            close(fd)
        }
        let output = word(fixture.path("out"), 0xFF) + word(".bin")
        func run(_ input: [UInt8]) async throws -> CLIResult {
            try await yashima(
                bytes: [
                    word("run"), word("--dir"), word(fixture.storage), word("--input"), input, word("--output"), output,
                    word("--"), word("sh"), word("-c"), word(#"cat "$1" > "$2"; echo run >> "$LEDGER""#), word("sh"),
                    input, output,
                ],
                environment: ["LEDGER": fixture.path("ledger")])
        }
        for path in [input, other, input] {
            let result = try await run(path)
            #expect(result.status == 0, "\(result.error)")
            let fd = open(cPath(output), O_RDONLY)
            var buffer = [UInt8](repeating: 0, count: 16)
            let count = read(fd, &buffer, 16)
            close(fd)
            #expect(Array(buffer[0..<max(0, count)]) == Array((path == input ? "first" : "second").utf8))
        }
        #expect(fixture.lines("ledger").count == 2, "the third run was a hit, written to the exact output path")

        // A directory path that is not UTF-8 is not silently another folder: the command runs uncached.
        let directory = word(fixture.path("cache"), 0xFF)
        let result = try await yashima(
            bytes: [word("run"), word("--dir"), directory, word("--"), word("echo"), word("ran")])
        #expect(result.status == 0 && result.text == "ran\n")
        #expect(result.error.contains("is not UTF-8") && result.error.contains("uncached"), "\(result.error)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: fixture.root.path).allSatisfy { !$0.hasPrefix("cache") }
        )
        let strict = try await yashima(
            bytes: [word("run"), word("--strict"), word("--dir"), directory, word("--"), word("echo"), word("ran")])
        #expect(strict.status == 2 && strict.output.isEmpty)
    }

    @Test func listedCommandLinesRunTheSameArgvWhenPasted() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/bin/bash") else { return }
        let fixture = try CLIFixture()
        let argv = [
            word("printf"), word("%s|"), word("a b"), word("it's"), word("tab\there"), word("x", 0xFF, 0x80), word(""),
            word("é"), word("$HOME"),
        ]
        _ = try await yashima(bytes: [word("run"), word("--dir"), word(fixture.storage), word("--")] + argv)
        let listing = try await yashima(["ls", "--json"] + fixture.dir)
        let entries = listing.json["entries"] as? [[String: Any]] ?? []
        let command = try #require(entries.first?["command"] as? String)
        let text = try await yashima(["ls"] + fixture.dir)
        #expect(text.text.contains(command), "ls shows the same line: \(text.text)")
        let pasted = try await run("/bin/bash", bytes: [word("-c"), word(command)])
        let direct = try await run("/usr/bin/printf", bytes: Array(argv.dropFirst()))
        #expect(pasted.output == direct.output && !direct.output.isEmpty, "\(command)")
    }

    // MARK: Standard input

    @Test func aPipeOnStandardInputRunsUncachedWithOneWarning() async throws {
        let fixture = try CLIFixture()
        let first = try await yashima(["run"] + fixture.dir + ["--", "sort"], input: Data("c\nb\na\n".utf8))
        let second = try await yashima(["run"] + fixture.dir + ["--", "sort"], input: Data("z\ny\n".utf8))
        #expect(first.text == "a\nb\nc\n" && second.text == "y\nz\n")
        for result in [first, second] {
            #expect(result.error.split(separator: "\n").count == 1, "\(result.error)")
            #expect(result.error.contains("standard input is a pipe") && result.error.contains("--stdin"))
        }
        #expect((try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [Any])?.isEmpty == true)
    }

    @Test func stdinPutsTheInputInTheKey() async throws {
        let fixture = try CLIFixture()
        let command = ["run", "--stdin"] + fixture.dir + ["--", "sh", "-c", #"echo run >> "$LEDGER"; sort"#]
        let environment = ["LEDGER": fixture.path("ledger")]
        let one = try await yashima(command, input: Data("c\nb\na\n".utf8), environment: environment)
        let again = try await yashima(command, input: Data("c\nb\na\n".utf8), environment: environment)
        let other = try await yashima(command, input: Data("z\ny\n".utf8), environment: environment)
        #expect(one.text == "a\nb\nc\n" && again.text == one.text && other.text == "y\nz\n")
        #expect(one.error.isEmpty && again.error.isEmpty)
        #expect(fixture.lines("ledger").count == 2, "the same piped input twice is one run")
    }

    @Test func anIdlePipeNeverDelaysACommandThatDoesNotReadIt() async throws {
        let fixture = try CLIFixture()
        // Standard input stays an open pipe nobody writes to (an ssh session, a CI runner).
        let child = try ChildProcess(
            executable: yashimaExecutable, ["run"] + fixture.dir + ["--", "echo", "done"], capturingStandardError: true)
        #expect(await child.exitStatus(timeout: 60) == 0, "it finished without its input being closed")
        #expect(await child.output() == Data("done\n".utf8))
        child.closeInput()
        // --no-stdin caches it (the command gets /dev/null).
        for _ in 0..<2 {
            let cached = try ChildProcess(
                executable: yashimaExecutable, ["run", "-v", "--no-stdin"] + fixture.dir + ["--", "echo", "done"],
                capturingStandardError: true)
            #expect(await cached.exitStatus(timeout: 60) == 0)
            #expect(await cached.output() == Data("done\n".utf8))
            cached.closeInput()
        }
        let listing = try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [Any]
        #expect(listing?.count == 1)
    }
}
