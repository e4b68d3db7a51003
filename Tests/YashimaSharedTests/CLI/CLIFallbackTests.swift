// A cache problem never breaks a build: `yashima run` over a directory it cannot use runs the command
// uncached with one warning that says what to do (the shell guide's Makefile under `make -j8` included), and
// `--strict` refuses. Also what a ccache user reaches for: YASHIMA_DISABLE, --recache, rm, config and the
// variables, folder outputs, global options before the subcommand, and no password ever printed.

import Foundation
import Glibc
import Testing

@Suite struct CLIFallbackTests {
    static let counted = ["sh", "-c", #"echo run >> "$LEDGER"; echo result"#]

    @Test func anUnusableDirectoryRunsTheCommandUncached() async throws {
        let fixture = try CLIFixture()
        let storage = fixture.path("shared")
        mkdir(storage, 0o700)
        chmod(storage, 0o777)  // writable by everyone: anyone could plant results
        let environment = ["LEDGER": fixture.path("ledger")]
        for _ in 0..<2 {
            let result = try await yashima(["run", "--dir", storage, "--"] + Self.counted, environment: environment)
            #expect(result.status == 0 && result.text == "result\n")
            #expect(result.error.split(separator: "\n").count == 1, "one warning: \(result.error)")
            #expect(result.error.contains("writable by other users") && result.error.contains("chmod o-w"))
            #expect(result.error.contains("running the command uncached"))
        }
        #expect(fixture.lines("ledger").count == 2, "nothing was stored")
        for strict in [["--strict"], []] {
            let refused = try await yashima(
                ["run"] + strict + ["--dir", storage, "--"] + Self.counted,
                environment: environment.merging(strict.isEmpty ? ["YASHIMA_STRICT": "1"] : [:]) { $1 })
            #expect(refused.status == 2 && refused.output.isEmpty, "\(refused.error)")
        }
        #expect(fixture.lines("ledger").count == 2, "strict runs nothing")
        // A failing command's status still passes through.
        let failing = try await yashima(["run", "--dir", storage, "--", "sh", "-c", "exit 7"])
        #expect(failing.status == 7)
    }

    /// The shell guide's Makefile (MemoizingCommands.md in the documentation catalog), verbatim, with a
    /// `convert` that records each run.
    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/make"), "needs root and make"))
    func theShellGuidesMakefileBuildsOverSomeoneElsesDirectory() async throws {
        let fixture = try CLIFixture()
        let guide = try String(
            contentsOf: packageRoot().appendingPathComponent(
                "Sources/YashimaShared/YashimaShared.docc/MemoizingCommands.md"), encoding: .utf8)
        let block = try #require(
            guide.components(separatedBy: "```make\n").dropFirst().first?.components(separatedBy: "```").first)
        try fixture.file("Makefile", block)
        try fixture.file(
            "bin/convert",
            """
            #!/bin/sh
            if [ "$1" = -version ]; then echo "Version: ImageMagick 0.0 (a test's)"; exit 0; fi
            echo "$1" >> "$LEDGER"
            { echo "thumbnail of"; cat "$1"; } > "$4"
            """, executable: true)
        symlink(yashimaExecutable.path, fixture.path("bin/yashima"))
        let photos = ["a", "b", "c", "d", "e"]
        for photo in photos { try fixture.file("photos/\(photo).jpg", "photo \(photo)") }
        let storage = fixture.path("theirs")
        mkdir(storage, 0o700)
        chown(storage, 40001, 40000)
        let environment = [
            "PATH": fixture.path("bin") + ":/usr/bin:/bin", "YASHIMA_DIR": storage, "LEDGER": fixture.path("ledger"),
            "R": fixture.root.path,
        ]
        let build = try await shell(#"cd "$R" && make -s -j8"#, environment: environment)
        #expect(build.status == 0, "\(build.error)")
        for photo in photos {
            #expect(
                try String(contentsOfFile: fixture.path("thumbs/\(photo).png"), encoding: .utf8)
                    == "thumbnail of\nphoto \(photo)")
        }
        let warnings = build.error.split(separator: "\n").filter { $0.hasPrefix("yashima: warning: ") }
        #expect(warnings.count == photos.count, "one warning per command: \(build.error)")
        #expect(warnings.allSatisfy { $0.contains("belongs to uid 40001") && $0.contains("sudo -u") })
        // Strict: the build fails as it did before, and nothing runs.
        _ = try await shell(#"cd "$R" && make -s clean"#, environment: environment)
        let strict = try await shell(
            #"cd "$R" && make -s -j8"#, environment: environment.merging(["YASHIMA_STRICT": "1"]) { $1 })
        #expect(strict.status != 0)
        #expect(fixture.lines("ledger").count == photos.count)
        // Root inspecting that directory is told how.
        let stats = try await yashima(["stats", "--dir", storage])
        #expect(stats.status == 2 && stats.error.contains("sudo -u"), "\(stats.error)")
    }

    @Test func disableRecacheAndRemove() async throws {
        let fixture = try CLIFixture()
        // WORD is not in the key: what the command prints shows which run a result came from.
        var environment = ["LEDGER": fixture.path("ledger"), "WORD": "first"]
        let command =
            ["run"] + fixture.dir + ["--key", "v1", "--", "sh", "-c", #"echo run >> "$LEDGER"; echo "$WORD""#]
        _ = try await yashima(command, environment: environment)
        environment["WORD"] = "second"
        #expect(try await yashima(command, environment: environment).text == "first\n")
        #expect(fixture.lines("ledger").count == 1)
        // YASHIMA_DISABLE: runs, touches nothing, says nothing.
        let disabled = try await yashima(command, environment: environment.merging(["YASHIMA_DISABLE": "1"]) { $1 })
        #expect(disabled.text == "second\n" && disabled.error.isEmpty && fixture.lines("ledger").count == 2)
        #expect(try await yashima(command, environment: environment).text == "first\n", "still the stored one")
        // --recache and YASHIMA_RECACHE: run on a hit, and replace the stored result.
        let recache = ["run", "--recache"] + command.dropFirst()
        #expect(try await yashima(Array(recache), environment: environment).text == "second\n")
        #expect(try await yashima(command, environment: environment).text == "second\n", "the replaced result")
        environment["WORD"] = "third"
        #expect(
            try await yashima(command, environment: environment.merging(["YASHIMA_RECACHE": "1"]) { $1 }).text
                == "third\n")
        #expect(try await yashima(command, environment: environment).text == "third\n")
        #expect(fixture.lines("ledger").count == 4)
        // rm: keyed exactly as run.
        let other = try await yashima(["rm"] + fixture.dir + ["--key", "v2"] + command.drop { $0 != "--" })
        #expect(other.status == 1 && other.text.hasPrefix("no stored result"), "\(other.text)\(other.error)")
        let removed = try await yashima(["rm"] + fixture.dir + ["--key", "v1"] + command.drop { $0 != "--" })
        #expect(removed.status == 0 && removed.text.hasPrefix("removed"), "\(removed.text)\(removed.error)")
        _ = try await yashima(command, environment: environment)
        #expect(fixture.lines("ledger").count == 5, "the command runs again after rm")
    }

    @Test func configAndVariables() async throws {
        let fixture = try CLIFixture()
        let user = fixture.path("xdg")
        let environment = ["XDG_CONFIG_HOME": user, "LEDGER": fixture.path("ledger")]
        // Unset everywhere: defaults.
        let defaults = try await yashima(["config", "--json"] + fixture.dir, environment: environment).json
        #expect((defaults["namespace"] as? [String: Any])?["source"] as? String == "default")
        // The user's file, then the directory, then the environment, then the command line.
        #expect(
            try await yashima(["config", "--user", "namespace", "mine"] + fixture.dir, environment: environment).status
                == 0)
        #expect(try await yashima(["config", "namespace"] + fixture.dir, environment: environment).text == "mine\n")
        #expect(try await yashima(["config", "namespace", "here"] + fixture.dir, environment: environment).status == 0)
        #expect(try await yashima(["config", "namespace"] + fixture.dir, environment: environment).text == "here\n")
        _ = try await yashima(["run"] + fixture.dir + ["--"] + Self.counted, environment: environment)
        let namespaces = (try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [[String: Any]])?
            .compactMap { $0["namespace"] as? String }
        #expect(namespaces == ["here"])
        let fromVariable = try await yashima(
            ["config", "namespace"] + fixture.dir, environment: environment.merging(["YASHIMA_NAMESPACE": "env"]) { $1 }
        )
        #expect(fromVariable.text == "env\n")
        // max-size without running anything, as ccache -M.
        #expect(try await yashima(["config", "max-size", "10G"] + fixture.dir, environment: environment).status == 0)
        let stats = try await yashima(["stats", "--json"] + fixture.dir).json
        #expect(stats["budget"] as? Int == 10 << 30 && stats["budgetSource"] as? String == "recorded")
        let listing = try await yashima(["config"] + fixture.dir, environment: environment)
        #expect(listing.text.contains("max-size   10 GiB") || listing.text.contains("10 GiB"), "\(listing.text)")
        #expect(listing.text.contains("namespace  here"), "\(listing.text)")
        // min-free: a share of the filesystem (or a size), which stats shows with the free space.
        #expect(try await yashima(["config", "min-free", "10%"] + fixture.dir, environment: environment).status == 0)
        let filesystem =
            try await yashima(["stats", "--json"] + fixture.dir, environment: environment)
            .json["filesystem"] as? [String: Any]
        #expect(filesystem?["minFree"] as? String == "10%")
        #expect(filesystem?["floorBytes"] as? Int == (filesystem?["bytes"] as? Int).map { $0 / 10 })
        #expect(try await yashima(["config", "min-free", "lots"] + fixture.dir, environment: environment).status == 2)
        // Global options before the subcommand.
        #expect(try await yashima(["--dir", fixture.storage, "stats", "--json"]).json["entries"] as? Int == 1)
        // A directory over its budget says why.
        _ = try await yashima(["config", "max-size", "1"] + fixture.dir, environment: environment)
        let over = try await yashima(["stats"] + fixture.dir)
        #expect(over.text.contains("% used (over budget: the next write trims it"), "\(over.text)")
    }

    @Test func folderOutputsAreStoredAndAppearAtOnce() async throws {
        let fixture = try CLIFixture()
        let out = fixture.path("site")
        let script = #"""
            echo run >> "$LEDGER"; mkdir -p "$1/css" "$1/empty"; echo "<h1>$2</h1>" > "$1/index.html"
            echo "body{}" > "$1/css/a.css"; chmod 640 "$1/css/a.css"; chmod 750 "$1/css"; echo built
            """#
        let command = ["run"] + fixture.dir + ["--output", out, "--", "sh", "-c", script, "sh", out, "one"]
        let environment = ["LEDGER": fixture.path("ledger")]
        let first = try await yashima(command, environment: environment)
        #expect(first.status == 0 && first.text == "built\n", "\(first.error)")
        try FileManager.default.removeItem(atPath: out)
        let hit = try await yashima(command, environment: environment)
        #expect(hit.status == 0 && hit.text == "built\n")
        #expect(fixture.lines("ledger").count == 1)
        #expect(try String(contentsOfFile: out + "/index.html", encoding: .utf8) == "<h1>one</h1>\n")
        #expect(try String(contentsOfFile: out + "/css/a.css", encoding: .utf8) == "body{}\n")
        var status = stat()
        stat(out + "/css/a.css", &status)
        #expect(status.st_mode & 0o777 == 0o640)
        stat(out + "/css", &status)
        #expect(status.st_mode & 0o777 == 0o750)
        #expect(FileManager.default.fileExists(atPath: out + "/empty"))
        // Over an existing folder: swapped in whole (what was there goes), nothing left beside it.
        try fixture.file("site/stale.txt", "old")
        _ = try await yashima(command, environment: environment)
        #expect(!FileManager.default.fileExists(atPath: out + "/stale.txt"))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: fixture.root.path).filter { $0.hasPrefix(".site") }
                .isEmpty)
        // A symbolic link inside: the command's result stands, nothing is stored, one warning.
        let linked =
            ["run"] + fixture.dir + [
                "--output", fixture.path("linked"), "--", "sh", "-c",
                #"mkdir -p "$1"; ln -sf /etc/passwd "$1/p"; echo ok"#,
                "sh", fixture.path("linked"),
            ]
        let refused = try await yashima(linked)
        #expect(refused.status == 0 && refused.text == "ok\n")
        #expect(
            refused.error.contains("holds a symbolic link") && refused.error.contains("nothing stored"),
            "\(refused.error)")
        let entries = try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [Any]
        #expect(entries?.count == 1)
    }

    @Test func noPasswordIsEverPrinted() async throws {
        let fixture = try CLIFixture()
        let canary = "Canary-Pa55w0rd"
        let environment = ["XDG_CONFIG_HOME": fixture.path("xdg")]
        var outputs: [CLIResult] = []
        let urls = [
            "redis://user:\(canary)@cache:99999", "redis://:\(canary)@", "ftp://user:\(canary)@host/",
            "user:\(canary)@host", "redis://user:\(canary)%zz@host", "redis+cluster://user:\(canary)@",
            "redis://user:\(canary)@127.0.0.1:1", "http://user:\(canary)@127.0.0.1:1/cache",
            "redis://user:pa/\(canary)@127.0.0.1:1", "https://user:\(canary)@[::1/x",
        ]
        for url in urls {
            outputs.append(try await yashima(["run", "-v", "--remote", url] + fixture.dir + ["--", "echo", "x"]))
            outputs.append(try await yashima(["get", "--remote", url, "--identity", "k"] + fixture.dir))
            outputs.append(
                try await yashima(["put", "--remote", url, "--identity", "k"] + fixture.dir, input: Data("v".utf8)))
            outputs.append(try await yashima(["rm", "--json", "--remote", url] + fixture.dir + ["--", "echo", "x"]))
            outputs.append(
                try await yashima(
                    ["run", "--", "echo", "x"] + [],
                    environment: ["YASHIMA_REMOTE": url, "YASHIMA_DIR": fixture.storage]))
        }
        outputs.append(
            try await yashima(
                ["config", "remote", "redis://u:\(canary)@127.0.0.1:1"] + fixture.dir, environment: environment))
        outputs.append(
            try await yashima(
                ["config", "--user", "remote", "redis://u:\(canary)@127.0.0.1:2"] + fixture.dir,
                environment: environment))
        outputs.append(try await yashima(["config"] + fixture.dir, environment: environment))
        outputs.append(try await yashima(["config", "--json"] + fixture.dir, environment: environment))
        outputs.append(try await yashima(["config", "remote"] + fixture.dir, environment: environment))
        outputs.append(try await yashima(["run", "-v"] + fixture.dir + ["--", "echo", "y"], environment: environment))
        for result in outputs {
            #expect(!result.text.contains(canary) && !result.error.contains(canary), "\(result.text)\(result.error)")
        }
        #expect(outputs.contains { $0.error.contains("***@") || $0.text.contains("***@") }, "redacted forms are shown")
    }
}

/// The package's root folder (this file is Tests/YashimaSharedTests/CLI/…).
func packageRoot() -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
}
