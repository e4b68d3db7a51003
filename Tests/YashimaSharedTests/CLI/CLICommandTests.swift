// Every `yashima` subcommand on a prepared directory: text and `--json` output (parsed and checked),
// exit statuses, what `run` puts in its key, failing and missing commands, and the bad inputs of
// Docs/BadInput.md's command-line table (each a clear message and exit status 2, never a crash).

import Foundation
import Glibc
import Testing
import YashimaShared

@Suite struct CLICommandTests {
    // MARK: run

    @Test func runStoresStandardOutputAndOutputFiles() async throws {
        let fixture = try CLIFixture()
        let output = fixture.path("out/result.bin")
        try FileManager.default.createDirectory(atPath: fixture.path("out"), withIntermediateDirectories: true)
        let script =
            #"echo run >> "$LEDGER"; printf 'binary\000out'; head -c 70000 /dev/zero | tr '\0' 'x' > "$1"; chmod 750 "$1""#
        let run = ["run"] + fixture.dir + ["--output", output, "--", "sh", "-c", script, "sh", output]
        let environment = ["LEDGER": fixture.path("ledger")]
        let first = try await yashima(run, environment: environment)
        #expect(first.status == 0, "\(first.error)")
        #expect(first.output == Data("binary\0out".utf8))
        #expect(first.error.isEmpty, "prints nothing of its own: \(first.error)")
        let expected = try Data(contentsOf: URL(fileURLWithPath: output))
        #expect(expected.count == 70_000)
        // A hit writes the same bytes and mode, from storage, and runs nothing.
        unlink(output)
        let second = try await yashima(run + [], environment: environment)
        #expect(second.status == 0)
        #expect(second.output == first.output)
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == expected)
        var status = stat()
        stat(output, &status)
        #expect(status.st_mode & 0o777 == 0o750)
        #expect(fixture.lines("ledger").count == 1)
        // No staging file is left beside the output.
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.path("out")) == ["result.bin"])
        // --verbose: one line on standard error.
        let verbose = try await yashima(
            ["run", "--verbose"] + fixture.dir + ["--output", output, "--", "sh", "-c", script, "sh", output],
            environment: environment)
        #expect(verbose.error.hasPrefix("yashima: hit: "), "\(verbose.error)")
        #expect(verbose.error.contains("saved"))
        #expect(verbose.error.split(separator: "\n").count == 1)
    }

    @Test func failingCommandIsNotStored() async throws {
        let fixture = try CLIFixture()
        let command =
            ["run"] + fixture.dir + ["--", "sh", "-c", #"echo run >> "$LEDGER"; echo out; echo err >&2; exit 3"#]
        let environment = ["LEDGER": fixture.path("ledger")]
        for attempt in 1...2 {
            let result = try await yashima(command, environment: environment)
            #expect(result.status == 3)
            #expect(result.text == "out\n")
            #expect(result.error == "err\n")
            #expect(fixture.lines("ledger").count == attempt, "the next caller runs it again")
        }
        let missing = try await yashima(["run"] + fixture.dir + ["--", "no-such-command-here"])
        #expect(missing.status == 127)
        #expect(missing.error.contains("command not found"))
        let output = fixture.path("never-written")
        let noOutput = try await yashima(["run"] + fixture.dir + ["--output", output, "--", "true"])
        #expect(noOutput.status == 1)
        #expect(noOutput.error.contains("did not write --output"))
        let listing = try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [Any]
        #expect(listing?.isEmpty == true, "nothing was stored")
    }

    @Test func keyHoldsInputsKeysEnvironmentAndOptionallyTheWorkingDirectory() async throws {
        let fixture = try CLIFixture()
        let input = try fixture.file("input.txt", "one")
        let folderA = fixture.path("a")
        let folderB = fixture.path("b")
        for folder in [folderA, folderB] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        let ledger = fixture.path("ledger")
        func run(_ options: [String], env: [String: String] = [:], in folder: String? = nil) async throws -> Int {
            let command =
                ["run"] + fixture.dir + options + ["--", "sh", "-c", #"echo x >> "$LEDGER"; cat "$0""#, input]
            let script = "cd \"$F\" && exec \"$Y\" \"$@\""
            let result = try await shell(
                script + " "
                    + command.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " "),
                environment: env.merging(["LEDGER": ledger, "F": folder ?? folderA, "Y": yashimaExecutable.path]) { $1 }
            )
            #expect(result.status == 0, "\(result.error)")
            return fixture.lines("ledger").count
        }
        #expect(try await run(["--input", input]) == 1)
        #expect(try await run(["--input", input]) == 1)  // a hit
        try Data("two".utf8).write(to: URL(fileURLWithPath: input))
        #expect(try await run(["--input", input]) == 2)  // the input changed
        #expect(try await run([]) == 3)  // without --input, another key
        #expect(try await run(["--key", "v1"]) == 4)
        #expect(try await run(["--key", "v1"]) == 4)
        #expect(try await run(["--key", "v2"]) == 5)
        #expect(try await run(["--env", "TOOL_MODE"], env: ["TOOL_MODE": "fast"]) == 6)
        #expect(try await run(["--env", "TOOL_MODE"], env: ["TOOL_MODE": "fast"]) == 6)
        #expect(try await run(["--env", "TOOL_MODE"], env: ["TOOL_MODE": "slow"]) == 7)
        #expect(try await run(["--env", "TOOL_MODE"]) == 8)  // unset is a value of its own
        #expect(try await run([], in: folderB) == 8)  // the working directory is not in the key...
        #expect(try await run(["--cwd"], in: folderA) == 9)  // ...unless --cwd
        #expect(try await run(["--cwd"], in: folderB) == 10)
        #expect(try await run(["--cwd"], in: folderA) == 10)
        #expect(try await run(["--namespace", "other"]) == 11)
    }

    // MARK: Operating a prepared directory

    @Test func subcommandsOnAPreparedDirectory() async throws {
        let fixture = try CLIFixture()
        let dir = fixture.dir
        // Two namespaces of values put by "scripts", one memoized command, one with a budget.
        let value = sampleBytes(10_000, seed: 7)
        #expect(
            try await yashima(["put", "--identity", "doc-1", "--namespace", "docs"] + dir, input: value).status == 0)
        #expect(
            try await yashima(
                [
                    "put", "--identity", "doc-2", "--namespace", "docs", "--variant", "size=small", "--version", "r=2",
                    "--max-size", "64M",
                ] + dir, input: Data("small".utf8)
            ).status == 0)
        #expect(
            try await yashima(
                ["put", "--identity", "page", "--namespace", "web", "--codec", "zlib-data-v1", "--expire", "2h"] + dir,
                input: Data(repeating: 0x41, count: 50_000)
            ).status == 0)
        #expect(try await yashima(["run"] + dir + ["--", "echo", "hello world"]).text == "hello world\n")

        // get: the bytes back; a miss is status 1 with nothing written.
        let got = try await yashima(["get", "--identity", "doc-1", "--namespace", "docs"] + dir)
        #expect(got.status == 0 && got.output == value)
        let small = try await yashima(
            ["get", "--identity", "doc-2", "--namespace", "docs", "--variant", "size=small", "--version", "r=2"] + dir)
        #expect(small.output == Data("small".utf8))
        let page = try await yashima(
            ["get", "--identity", "page", "--namespace", "web", "--codec", "zlib-data-v1"] + dir)
        #expect(page.output == Data(repeating: 0x41, count: 50_000))
        let miss = try await yashima(["get", "--identity", "doc-2", "--namespace", "docs"] + dir)
        #expect(miss.status == 1 && miss.output.isEmpty)

        // stats --json: entries, bytes, budget, in flight, debris, counters; with --namespaces the census of
        // every header: namespaces, uses.
        let quick = try await yashima(["stats", "--json"] + dir).json
        #expect(quick["entries"] as? Int == 4)
        #expect((quick["bytes"] as? Int ?? 0) >= 4 * 4096)
        #expect(quick["namespaces"] == nil && quick["oldestUse"] == nil)
        let stats = try await yashima(["stats", "--namespaces", "--json"] + dir).json
        #expect(stats["entries"] as? Int == 4)
        #expect((stats["bytes"] as? Int ?? 0) >= 4 * 4096)
        #expect(stats["budget"] as? Int == 64 << 20)
        #expect(stats["budgetSource"] as? String == "recorded")
        let namespaces = stats["namespaces"] as? [String: [String: Int]]
        #expect(namespaces?["docs"]?["entries"] == 2)
        #expect(namespaces?["web"]?["entries"] == 1)
        #expect(namespaces?["run"]?["entries"] == 1)
        #expect(stats["oldestUse"] is String && stats["newestUse"] is String)
        #expect(stats["lockFiles"] as? Int == 0 && stats["lockFilesHeld"] as? Int == 0)
        #expect((stats["debris"] as? [String: Int])?["total"] == 0)
        let counters = stats["counters"] as? [String: Any]
        #expect(counters?["storageHits"] as? Int == 3)  // the three gets that hit
        #expect(counters?["generations"] as? Int == 1)  // the run
        #expect(counters?["since"] is NSNull)
        let text = try await yashima(["stats", "--namespaces"] + dir)
        #expect(text.status == 0)
        #expect(text.text.contains("4 entries"))
        #expect(text.text.contains("docs: 2 entries"))

        // ls --json: identity, variants, versions, codec, size, times; the run entry's argv. Streamed in
        // storage order: sorted here by namespace, then identity.
        let entries = (try await yashima(["ls", "--json"] + dir).json["entries"] as? [[String: Any]] ?? []).sorted {
            ($0["namespace"] as? String ?? "", $0["identity"] as? String ?? "")
                < ($1["namespace"] as? String ?? "", $1["identity"] as? String ?? "")
        }
        #expect(entries.map { $0["namespace"] as? String ?? "" } == ["docs", "docs", "run", "web"])
        let doc2 = entries[1]
        #expect(doc2["identity"] as? String == "doc-2")
        #expect((doc2["variants"] as? [[String: String]])?.first == ["name": "size", "value": "small"])
        #expect((doc2["versions"] as? [[String: String]])?.first == ["name": "r", "value": "2"])
        #expect(doc2["codec"] as? String == "data-v1" && doc2["size"] as? Int == 5)
        #expect(entries[2]["argv"] as? [String] == ["echo", "hello world"])
        #expect(entries[2]["codec"] as? String == "yashima-run-v2")
        #expect(entries[3]["codec"] as? String == "zlib-data-v1" && entries[3]["expires"] is String)
        let onlyDocs = try await yashima(["ls", "--namespace", "docs", "--json"] + dir).json["entries"] as? [Any]
        #expect(onlyDocs?.count == 2)
        let long = try await yashima(["ls", "--long"] + dir).text
        #expect(long.contains("echo 'hello world'"))
        #expect(long.contains("size=small"))
        #expect(long.contains("zlib-data-v1"))

        // verify on a healthy directory.
        let verify = try await yashima(["verify", "--json"] + dir)
        #expect(verify.status == 0)
        #expect(verify.json["checked"] as? Int == 4)
        #expect((verify.json["damaged"] as? [Any])?.isEmpty == true)

        // clear one namespace, for everyone.
        let clear = try await yashima(["clear", "--namespace", "docs", "--json"] + dir)
        #expect(clear.json["removed"] as? Int == 2)
        #expect(try await yashima(["get", "--identity", "doc-1", "--namespace", "docs"] + dir).status == 1)

        // trim to a size smaller than everything left.
        let trim = try await yashima(["trim", "--max-size", "4K", "--json"] + dir)
        #expect(trim.status == 0, "\(trim.error)")
        #expect((trim.json["before"] as? [String: Int])?["entries"] == 2)
        #expect((trim.json["after"] as? [String: Int])?["bytes"] ?? .max <= 4096)

        // stats --zero: the counters restart for every process, with the time recorded.
        #expect(try await yashima(["stats", "--zero"] + dir).status == 0)
        let zeroed = try await yashima(["stats", "--json"] + dir).json["counters"] as? [String: Any]
        #expect(zeroed?["storageHits"] as? Int == 0 && zeroed?["misses"] as? Int == 0)
        #expect(zeroed?["since"] is String)

        // clear everything.
        #expect(try await yashima(["clear"] + dir).status == 0)
        #expect(try await yashima(["stats", "--json"] + dir).json["entries"] as? Int == 0)
    }

    @Test("ls --json writes every character a key may hold as JSON would, and the listing parses")
    func listingEscapesKeyText() async throws {
        let fixture = try CLIFixture()
        let cache = YCache(storageDirectory: URL(fileURLWithPath: fixture.storage))
        let identities = ["quote \" back \\ slash /", "line\nbreak\ttab\r\u{8}\u{C}", "nul\0and\u{1}", "ünï 🗝"]
        for identity in identities {
            let key = CacheKey(
                namespace: "esc\"aped", identity: identity, variants: [CacheKeyComponent(name: "v\n", value: "w\\")])
            _ = try await cache.data(for: key) { Data(identity.utf8) }
        }
        let listing = try await yashima(["ls", "--json"] + fixture.dir)
        #expect(listing.status == 0)
        let entries = listing.json["entries"] as? [[String: Any]] ?? []
        #expect(Set(entries.compactMap { $0["identity"] as? String }) == Set(identities))
        #expect(entries.allSatisfy { $0["namespace"] as? String == "esc\"aped" })
        #expect(
            entries.allSatisfy { ($0["variants"] as? [[String: String]])?.first == ["name": "v\n", "value": "w\\"] })
        #expect(entries.allSatisfy { ($0["created"] as? String)?.hasSuffix("Z") == true })
    }

    @Test func aDirectoryThatDoesNotExistIsEmptyAndNotCreated() async throws {
        let fixture = try CLIFixture()
        let dir = ["--dir", fixture.path("absent")]
        #expect(try await yashima(["stats", "--json"] + dir).json["exists"] as? Bool == false)
        #expect(try await yashima(["ls"] + dir).status == 0)
        #expect(try await yashima(["verify"] + dir).status == 0)
        #expect(try await yashima(["trim"] + dir).status == 0)
        #expect(try await yashima(["clear"] + dir).status == 0)
        #expect(try await yashima(["get", "--identity", "x"] + dir).status == 1)
        #expect(access(fixture.path("absent"), F_OK) != 0)
    }

    @Test func everySubcommandHasHelp() async throws {
        for name in ["run", "rm", "stats", "ls", "verify", "trim", "clear", "get", "put", "watch", "config"] {
            let help = try await yashima([name, "--help"])
            #expect(help.status == 0)
            #expect(help.text.hasPrefix("Usage: yashima \(name)"), "\(help.text)")
            #expect(help.text.contains("--dir DIR"))
        }
        let top = try await yashima(["--help"])
        #expect(top.status == 0 && top.text.contains("verify"))
        #expect(try await yashima([]).status == 2)
        #expect(try await yashima(["help", "run"]).text.contains("--no-wait"))
    }

    // MARK: Bad input: a clear message and status 2

    @Test(arguments: [
        (["run", "--"], "missing command after --"),
        (["run", "--input", "/nonexistent/input", "--", "true"], "--input /nonexistent/input does not exist"),
        (["run", "--input", "/", "--", "true"], "is not a regular file"),
        (["run", "--output", "/nonexistent-folder/out", "--", "true"], "is in a folder that does not exist"),
        (["run", "--env", "A=B", "--", "true"], "--env takes the name of an environment variable, not A=B"),
        (["run", "--stdin", "--no-stdin", "--", "true"], "contradict"),
        (["run", "--namespace", "", "--", "true"], "cannot be empty"),
        (["config", "max-sise"], "did you mean max-size?"),
        (["config", "max-size", "lots"], "must be a size"),
        (["config", "remote", ""], "--remote needs a URL"),
        (["config", "remote", " \t"], "--remote needs a URL"),
        (["run", "--inptu", "x", "--", "true"], "did you mean --input?"),
        (["run", "--max-size", "10Q", "--", "true"], "must be a size"),
        (["run", "--max-size", "0", "--", "true"], "at least 1 byte"),
        (["run", "--expire", "5y", "--", "true"], "must be a duration"),
        (["run", "--expire", "0s", "--", "true"], "longer than zero"),
        (["run", "--remote", "ftp://cache:6379", "--", "true"], "unsupported scheme ftp://"),
        (["run", "--remote", "redis://cache:99999", "--", "true"], "--remote redis://cache:99999: "),
        (["get", "--identity", "x", "--remote", "redis+unix://"], "--remote redis+unix://: "),
        (["run", "--verbose=yes", "--", "true"], "takes no value"),
        (["run", "--namespace"], "needs a value"),
        (["stast"], "did you mean stats?"),
        (["stats", "--zreo"], "did you mean --zero?"),
        (["stats", "extra"], "unexpected argument extra"),
        (["get", "--namespace", "x"], "--identity is required"),
        (["put", "--identity", "x", "--variant", "novalue"], "NAME=VALUE"),
        (["trim", "--max-size", "lots"], "must be a size"),
        (["watch", "--namespace"], "needs a value"),
        (["watch", "--curent"], "did you mean --current?"),
        (["watch", "--json=yes"], "takes no value"),
        (["watch", "docs"], "unexpected argument docs"),
    ])
    func badUsage(_ arguments: [String], _ message: String) async throws {
        let fixture = try CLIFixture()
        let result = try await yashima(Array(arguments.prefix(1)) + fixture.dir + arguments.dropFirst())
        #expect(result.status == 2, "\(arguments): \(result.error)")
        #expect(result.error.hasPrefix("yashima: "), "\(result.error)")
        #expect(result.error.contains(message), "\(arguments): \(result.error)")
        #expect(result.output.isEmpty)
    }

    @Test func aDirectoryThatIsAFileOrForeign() async throws {
        let fixture = try CLIFixture()
        let file = try fixture.file("plain-file", "not a directory")
        for command in [
            ["run", "--strict", "--dir", file, "--", "true"], ["stats", "--dir", file],
            ["ls", "--dir", file + "/below"],
            ["watch", "--dir", file],
        ] {
            let result = try await yashima(command)
            #expect(result.status == 2, "\(command)")
            #expect(result.error.contains("is a file") || result.error.contains("below a file"), "\(result.error)")
        }
        // A folder of someone else's files is not taken over as a storage directory.
        try fixture.file("home/notes.txt", "mine")
        for command in ["clear", "watch"] {
            let foreign = try await yashima([command, "--dir", fixture.path("home")])
            #expect(foreign.status == 2)
            #expect(foreign.error.contains("is not a yashima storage directory"))
            #expect(foreign.output.isEmpty)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.path("home")) == ["notes.txt"])
        // The cache's own names are not someone else's, `signals/` (the removal markers' folder, made by
        // the first observer) included: a directory left with them and no layout file is taken up again.
        try FileManager.default.createDirectory(atPath: fixture.path("left/signals"), withIntermediateDirectories: true)
        let left = try await yashima(["stats", "--dir", fixture.path("left")])
        #expect(left.status == 0, "\(left.error)")
    }

    @Test func anUnreadableDirectory() async throws {
        // Root reads anything: as root, the check runs as another user, with a copy of the executable
        // and a storage directory of root's (mode 0) in a folder that user can reach.
        let asOtherUser = getuid() == 0
        if asOtherUser && !FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") { return }
        let fixture = try CLIFixture()
        let folder = asOtherUser ? try makeSharedFolder() : fixture.root.path
        defer { if asOtherUser { try? FileManager.default.removeItem(atPath: folder) } }
        let executable = asOtherUser ? folder + "/yashima" : yashimaExecutable.path
        if asOtherUser { try FileManager.default.copyItem(atPath: yashimaExecutable.path, toPath: executable) }
        let storage = folder + "/storage"
        #expect(try await yashima(["run", "--dir", storage, "--", "true"]).status == 0)
        chmod(storage, 0o000)
        defer { chmod(storage, 0o700) }
        let prefix = asOtherUser ? "exec /usr/bin/setpriv --reuid=40001 --regid=40000 --clear-groups " : "exec "
        let result = try await shell(
            prefix + "\"$Y\" stats --dir \"$D\"", environment: ["Y": executable, "D": storage])
        #expect(result.status == 2, "\(result.error)")
        #expect(
            result.error.contains(
                asOtherUser ? "belongs to root (uid 0), not to you" : "is not readable and writable by you"),
            "\(result.error)")
        if asOtherUser { #expect(result.error.contains("sudo -u root yashima")) }
    }

    /// A fresh folder under /tmp that every user can enter.
    private func makeSharedFolder() throws -> String {
        var template = Array("/tmp/yashima-cli-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CocoaError(.fileWriteUnknown)
        }
        let path = String(cString: made)
        chmod(path, 0o755)
        return path
    }
}
