// `yashima watch`: a real watcher process on a directory, changed by other `yashima` processes (put, run,
// clear, trim), with its JSON and text lines read from its pipe as they come. Readiness is explicit: the
// first JSON line is the "watching" event (in text mode, the first --current line), printed once every
// later change will be reported; then each change is made and its line awaited. Nothing is ordered by
// sleeps. Also --namespace, --current, the end on SIGINT/SIGTERM/SIGHUP (status 0), on the reader going
// away (status 0) and on the directory being removed (status 1).

import Foundation
import Glibc
import Testing

@Suite(.serialized) struct CLIWatchTests {
    /// Starts `yashima watch ARGUMENTS --dir …`.
    private func watch(_ arguments: [String], _ fixture: CLIFixture) throws -> ChildProcess {
        try ChildProcess(
            executable: yashimaExecutable, ["watch"] + arguments + fixture.dir, capturingStandardError: true)
    }

    /// The watcher's next line, parsed as JSON (empty when there is none or it is not JSON).
    private func next(_ watcher: ChildProcess) async -> [String: Any] {
        guard let line = await watcher.line(timeout: 60) else {
            Issue.record("the watcher printed no line")
            return [:]
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        #expect(object != nil, "not one JSON object: \(line)")
        return object ?? [:]
    }

    /// Waits for the "watching" event, which must be the first line.
    @discardableResult
    private func ready(_ watcher: ChildProcess) async -> [String: Any] {
        let first = await next(watcher)
        #expect(first["event"] as? String == "watching", "the first line is the watching event: \(first)")
        return first
    }

    private func put(
        _ fixture: CLIFixture, _ namespace: String, _ identity: String, _ options: [String] = [],
        _ value: String = "value"
    ) async throws {
        let result = try await yashima(
            ["put", "--namespace", namespace, "--identity", identity] + options + fixture.dir, input: Data(value.utf8))
        #expect(result.status == 0, "\(result.error)")
    }

    private func succeeds(_ arguments: [String], _ fixture: CLIFixture) async throws {
        let result = try await yashima(arguments + fixture.dir)
        #expect(result.status == 0, "\(arguments): \(result.error)")
    }

    /// Stops the watcher with SIGINT: status 0, and nothing printed that was not read.
    private func stop(_ watcher: ChildProcess, signal: Int32 = SIGINT) async {
        watcher.kill(signal)
        #expect(await watcher.exitStatus(timeout: 20) == 0)
        let rest = await watcher.output(timeout: 20)
        #expect(rest.isEmpty, "unexpected lines: \(String(decoding: rest, as: UTF8.self))")
    }

    @Test func jsonLineForEveryChangeFromOtherProcesses() async throws {
        let fixture = try CLIFixture()
        let watcher = try watch(["--json"], fixture)
        let watching = await ready(watcher)
        #expect(watching["directory"] as? String == fixture.storage)
        #expect(watching["namespace"] is NSNull && watching["current"] as? Bool == false)
        // The directory did not exist: the watcher created it, as put would have.
        #expect(watching["created"] as? Bool == true)
        #expect(access(fixture.storage + "/layout", F_OK) == 0)

        try await put(
            fixture, "docs", "report", ["--variant", "lang=en", "--version", "r=2", "--expire", "2h"], "report")
        let published = await next(watcher)
        #expect(published["event"] as? String == "published")
        #expect(published["namespace"] as? String == "docs" && published["identity"] as? String == "report")
        #expect((published["variants"] as? [[String: String]]) == [["name": "lang", "value": "en"]])
        #expect((published["versions"] as? [[String: String]]) == [["name": "r", "value": "2"]])
        #expect(published["codec"] as? String == "data-v1" && published["size"] as? Int == 6)
        #expect(published["created"] is String && published["expires"] is String && published["time"] is String)
        let entry = published["entry"] as? String ?? ""
        #expect(entry.count == 64 && entry.allSatisfy(\.isHexDigit))
        #expect((published["stableIdentifier"] as? String)?.count == 64)

        // Replacing it is a new publish, with the new metadata.
        try await put(fixture, "docs", "report", ["--variant", "lang=en", "--version", "r=2"], "a longer report")
        let replaced = await next(watcher)
        #expect(replaced["event"] as? String == "published" && replaced["entry"] as? String == entry)
        #expect(replaced["size"] as? Int == 15 && replaced["expires"] is NSNull)

        // A memoized command, stored by `yashima run`.
        #expect(try await yashima(["run"] + fixture.dir + ["--", "echo", "hello world"]).text == "hello world\n")
        let run = await next(watcher)
        #expect(run["event"] as? String == "published" && run["namespace"] as? String == "run")
        #expect(run["codec"] as? String == "yashima-run-v2" && run["argv"] as? [String] == ["echo", "hello world"])

        // Clearing a namespace is one line, not one per entry.
        try await succeeds(["clear", "--namespace", "docs"], fixture)
        let cleared = await next(watcher)
        #expect(cleared["event"] as? String == "removedAll" && cleared["namespace"] as? String == "docs")

        // A trim unlinks the run entry: removed, with the key this watcher saw published.
        try await succeeds(["trim", "--max-size", "1"], fixture)
        let removed = await next(watcher)
        #expect(removed["event"] as? String == "removed" && removed["entry"] as? String == run["entry"] as? String)
        #expect(removed["namespace"] as? String == "run" && removed["codec"] as? String == "yashima-run-v2")
        #expect(removed["argv"] as? [String] == ["echo", "hello world"])

        // Clearing everything.
        try await put(fixture, "web", "page")
        #expect(await next(watcher)["identity"] as? String == "page")
        try await succeeds(["clear"], fixture)
        let all = await next(watcher)
        #expect(all["event"] as? String == "removedAll" && all["namespace"] is NSNull)

        await stop(watcher)
        #expect(await watcher.standardErrorText().isEmpty, "--json prints nothing on standard error")
    }

    @Test func oneNamespace() async throws {
        let fixture = try CLIFixture()
        let watcher = try watch(["--namespace", "docs", "--json"], fixture)
        #expect(await ready(watcher)["namespace"] as? String == "docs")
        // Each change of another namespace comes before one of docs: had it been printed, it would be the
        // line read instead.
        try await put(fixture, "web", "page")
        try await put(fixture, "docs", "a")
        #expect(await next(watcher)["identity"] as? String == "a")
        try await succeeds(["clear", "--namespace", "web"], fixture)
        try await succeeds(["clear", "--namespace", "docs"], fixture)
        let cleared = await next(watcher)
        #expect(cleared["event"] as? String == "removedAll" && cleared["namespace"] as? String == "docs")
        // Clearing the whole directory clears docs too.
        try await put(fixture, "docs", "b")
        #expect(await next(watcher)["identity"] as? String == "b")
        try await succeeds(["clear"], fixture)
        let all = await next(watcher)
        #expect(all["event"] as? String == "removedAll" && all["namespace"] is NSNull)
        await stop(watcher)
    }

    @Test func currentFirstPrintsWhatIsStored() async throws {
        let fixture = try CLIFixture()
        for (namespace, identity) in [("docs", "a"), ("docs", "b"), ("web", "c")] {
            try await put(fixture, namespace, identity)
        }
        let watcher = try watch(["--current", "--json"], fixture)
        let watching = await ready(watcher)
        #expect(watching["current"] as? Bool == true && watching["created"] as? Bool == false)
        var stored: Set<String> = []
        for _ in 0..<3 {
            let line = await next(watcher)
            #expect(line["event"] as? String == "published")
            stored.insert("\(line["namespace"] ?? "")/\(line["identity"] ?? "")")
        }
        #expect(stored == ["docs/a", "docs/b", "web/c"])
        // Then the changes. (An entry published while the stored ones are listed may be printed twice.)
        try await put(fixture, "web", "d")
        #expect(await next(watcher)["identity"] as? String == "d")
        watcher.kill(SIGINT)
        #expect(await watcher.exitStatus(timeout: 20) == 0)

        // With --namespace, only that namespace's entries.
        let docs = try watch(["--current", "--namespace", "docs", "--json"], fixture)
        await ready(docs)
        let first = await next(docs)
        let second = await next(docs)
        #expect(Set([first["identity"] as? String, second["identity"] as? String]) == ["a", "b"])
        await stop(docs)
    }

    @Test func textLines() async throws {
        let fixture = try CLIFixture()
        try await put(fixture, "docs", "report", ["--variant", "lang=en"], "report")
        // --current: the stored entry's line is the first, so the watch is in place once it is read.
        let watcher = try watch(["--current"], fixture)
        let stored = await watcher.line() ?? ""
        #expect(stored.contains("  published  docs: report [lang=en]  (data-v1, 6 B, created "), "\(stored)")
        #expect(stored.hasSuffix(", never expires)"), "\(stored)")
        #expect(try await yashima(["run"] + fixture.dir + ["--", "echo", "hello world"]).status == 0)
        let run = await watcher.line() ?? ""
        #expect(
            run.contains("  published  run: echo 'hello world' [version yashima-run=2]  (yashima-run-v2, "), "\(run)")
        try await succeeds(["clear", "--namespace", "docs"], fixture)
        #expect((await watcher.line() ?? "").hasSuffix("  removed    every entry of namespace docs"))
        try await succeeds(["trim", "--max-size", "1"], fixture)
        #expect(
            (await watcher.line() ?? "").hasSuffix(
                "  removed    run: echo 'hello world' [version yashima-run=2]  (yashima-run-v2)"))
        try await succeeds(["clear"], fixture)
        #expect((await watcher.line() ?? "").hasSuffix("  removed    every entry (the whole directory was cleared)"))
        await stop(watcher, signal: SIGTERM)
        let error = await watcher.standardErrorText()
        #expect(error == "yashima: watching \(fixture.storage), every namespace; Ctrl-C stops\n", "\(error)")
    }

    @Test(arguments: [SIGINT, SIGTERM, SIGHUP])
    func aSignalEndsItAtOnceWithStatusZero(_ signal: Int32) async throws {
        let fixture = try CLIFixture()
        let watcher = try watch(["--json"], fixture)
        await ready(watcher)
        await stop(watcher, signal: signal)
        #expect(await watcher.standardErrorText().isEmpty)
    }

    @Test func theReaderGoingAwayEndsItWithNoFurtherChange() async throws {
        let fixture = try CLIFixture()
        // head exits after the watching line; the watcher must end then, with nothing else happening.
        // (A watcher that does not is killed after 30 s, and its status, 137, fails the test.)
        let result = try await shell(
            #"( timeout -s KILL 30 "$Y" watch --json --dir "$D" 2>"$E"; echo $? > "$S" ) | head -n 1"#,
            environment: [
                "Y": yashimaExecutable.path, "D": fixture.storage, "S": fixture.path("status"),
                "E": fixture.path("errors"),
            ])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.text.hasPrefix(#"{"created":true"#), "\(result.text)")
        #expect(fixture.lines("status") == ["0"])
        #expect(fixture.lines("errors").isEmpty)
    }

    @Test func removingTheDirectoryEndsItWithStatusOne() async throws {
        let fixture = try CLIFixture()
        try await put(fixture, "docs", "a")
        let watcher = try watch(["--json"], fixture)
        await ready(watcher)
        try FileManager.default.removeItem(atPath: fixture.storage)
        #expect(await watcher.exitStatus(timeout: 30) == 1)
        let error = await watcher.standardErrorText()
        #expect(error.hasPrefix("yashima: cannot observe storage directory \(fixture.storage)"), "\(error)")
        #expect(error.contains("removed, moved or replaced"), "\(error)")
    }
}
