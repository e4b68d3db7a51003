// The samples of the README and of the guides (the DocC catalog's articles), run as they say: the quick
// start in two processes at once, the worker pool from its launcher, test runners sharing a fixture, the
// app waiting for its helper's previews as two users of one group, and every other guide, each checked
// against what its guide says it prints.

import Foundation
import Glibc
import Testing

@Suite(.serialized) struct ExamplesTests {
    /// Starts `program` (a built product's name, or a path) with `arguments`, after `prefix` if any (a
    /// command such as `setpriv` that runs the program).
    private func start(
        _ program: String, _ arguments: [String], environment: [String: String] = [:], prefix: [String] = []
    ) throws -> ChildProcess {
        let executable = program.hasPrefix("/") ? program : productsDirectory().appendingPathComponent(program).path
        return try ChildProcess(
            executable: URL(fileURLWithPath: prefix.first ?? executable),
            prefix.isEmpty ? arguments : Array(prefix.dropFirst()) + [executable] + arguments,
            environment: environment)
    }

    /// Waits for `child` and returns its output lines; records an issue unless it exited with status 0.
    private func lines(of child: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        let text = String(decoding: await child.output(), as: UTF8.self)
        let status = await child.exitStatus()
        #expect(status == 0, "exit status \(String(describing: status)): \(text)", sourceLocation: sourceLocation)
        return text.split(separator: "\n").map(String.init)
    }

    private func run(_ program: String, _ arguments: String...) async throws -> [String] {
        await lines(of: try start(program, arguments))
    }

    @Test func quickStartInTwoProcessesGeneratesOnce() async throws {
        let dir = TemporaryDirectory("quickstart")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let environment = ["TMPDIR": dir.path]  // the quick start keeps its cache in the temporary folder
        let first = try start("yashima-quickstart", [], environment: environment)
        let second = try start("yashima-quickstart", [], environment: environment)
        let lines = await self.lines(of: first) + self.lines(of: second)
        // One generated; the other either waited for it (shared) or started late enough to read it.
        #expect(lines.filter { $0.hasPrefix("generated false 32") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.hasPrefix("storage") }.count == 1, "\(lines)")
        let third = try start("yashima-quickstart", [], environment: environment)
        #expect(await self.lines(of: third) == ["storage false 32"])
        #expect(FileManager.default.fileExists(atPath: dir.path + "/thumbnails/layout"))
    }

    @Test func workerPoolRendersEachPageOnceInTheWholePool() async throws {
        let dir = TemporaryDirectory("pool")
        let lines = try await run("yashima-examples", "pool", dir.path, "4")
        #expect(lines.count == 4, "\(lines)")
        let rendered = lines.compactMap { line -> Int? in
            let words = line.split(separator: " ")
            return words.count == 7 && words[2] == "rendered" ? Int(words[3]) : nil
        }
        #expect(rendered.count == 4 && rendered.reduce(0, +) == 12, "\(lines)")
    }

    @Test func parallelTestRunnersBuildTheFixtureOnce() async throws {
        let dir = TemporaryDirectory("fixtures")
        let runners = try (0..<4).map { _ in try start("yashima-examples", ["fixture", dir.path]) }
        var lines: [String] = []
        for runner in runners { lines += await self.lines(of: runner) }
        #expect(lines.filter { $0 == "building the seeded database" }.count == 1, "\(lines)")
        let fixtures = lines.filter { $0.hasPrefix("fixture ") }
        #expect(fixtures.count == 4 && Set(fixtures).count == 1, "\(lines)")
        // A later run reuses it.
        #expect(try await run("yashima-examples", "fixture", dir.path) == [fixtures[0]])
    }

    /// As root (CI), the helper and the app run as two different users of one group, as the guide
    /// describes; otherwise both run as this user, which still checks the group-shared modes.
    @Test func appAndHelperShareAGroupDirectory() async throws {
        let asTwoUsers = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        let (group, helperUser, appUser): (gid_t, uid_t, uid_t) =
            asTwoUsers ? (40000, 40001, 40002) : (getgid(), getuid(), getuid())
        // Under /tmp so that other users can reach it (the test's own TMPDIR may be private).
        var template = Array("/tmp/yashima-app-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        try #require(created)
        let base = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { try? FileManager.default.removeItem(atPath: base) }
        chmod(base, 0o755)
        // The administrator's step from the guide: a setgid folder of the shared group.
        let cache = base + "/cache"
        #expect(mkdir(cache, 0o700) == 0)
        #expect(chown(cache, appUser, group) == 0)
        #expect(chmod(cache, 0o2770) == 0)
        var program = "yashima-examples"
        var prefixes: [[String]] = [[], []]
        if asTwoUsers {
            // The build folder may be private to root: the users run a copy.
            try FileManager.default.copyItem(
                at: productsDirectory().appendingPathComponent(program), to: URL(fileURLWithPath: base + "/examples"))
            program = base + "/examples"
            prefixes = [helperUser, appUser].map {
                ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\(group)", "--groups=\(group)"]
            }
        }
        // The app starts first and waits; the helper, started once the app observes, renders both.
        let app = try start(
            program, ["app", cache, "doc-1", "doc-2"], environment: ["HOME": base], prefix: prefixes[1])
        #expect(await app.line(timeout: 60) == "app waits for doc-1")
        let helper = try start(
            program, ["helper", cache, "doc-1", "doc-2"], environment: ["HOME": base], prefix: prefixes[0])
        #expect(await lines(of: helper) == ["helper rendered 2 previews"])
        #expect(
            await lines(of: app) == [
                "app shows preview of doc-1", "app waits for doc-2", "app shows preview of doc-2",
            ])
        var owners: Set<uid_t> = []
        for name in try FileManager.default.subpathsOfDirectory(atPath: cache) {
            var info = stat()
            #expect(lstat(cache + "/" + name, &info) == 0)
            #expect(info.st_gid == group, "\(name) belongs to the shared group")
            let isFolder = info.st_mode & S_IFMT == S_IFDIR
            #expect(info.st_mode & 0o7777 == (isFolder ? 0o2770 : 0o660), "\(name)")
            if name.hasSuffix(".entry") { owners.insert(info.st_uid) }
        }
        #expect(owners == [helperUser])  // the app only read what the helper made
    }

    @Test func guidesPrintWhatTheGuidesSay() async throws {
        let dir = TemporaryDirectory("guides")
        let keys = try await run("yashima-examples", "keys", dir.path + "/keys")
        #expect(keys.dropFirst() == ["same key in any order: true", "other data, other key: true"])
        #expect(try await run("yashima-examples", "codecs", dir.path + "/codecs") == ["hello 12 100000 2 1"])
        #expect(try await run("yashima-examples", "options", dir.path + "/options") == ["1 1 11 true"])
        let lifecycle = try await run("yashima-examples", "lifecycle", dir.path + "/lifecycle")
        #expect(lifecycle.first?.hasPrefix("stored 1 entries in 20 bytes (") == true, "\(lifecycle)")
        #expect(lifecycle.dropFirst() == ["removed 0 expired entries; removed today's: true"])
        let observed = try await run("yashima-examples", "observe", dir.path + "/observe")
        #expect(observed.count == 6, "\(observed)")
        #expect(observed.first?.hasPrefix("generated here at ") == true)
        #expect(observed[1].hasPrefix("video-7 4 bytes, "))
        #expect(observed[3] == "from this process's memory")
        #expect(observed[5].hasPrefix("hits: 1 memory, 0 storage; generations: 1, shared: 0;"))
    }

    /// The remote samples of "Sharing across machines" configure their caches (URLs, options, chains)
    /// without a server: AWS's credentials and region come from the environment, as the guide says.
    @Test func remoteSamplesConfigureTheirCaches() async throws {
        let dir = TemporaryDirectory("remote-samples")
        let environment = [
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret", "AWS_REGION": "us-east-1",
        ]
        let child = try start("yashima-examples", ["remote", dir.path], environment: environment)
        #expect(await lines(of: child) == ["configured 6 caches with a remote tier"])
    }
}
