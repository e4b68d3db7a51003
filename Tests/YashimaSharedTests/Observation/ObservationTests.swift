// Observation across processes, with real child processes (`yashima-stress worker observe`, which prints
// one JSON line per change), real files and, as root, two real users. Every ordering is explicit: an
// observer prints READY once its watches are in place, writers report on their pipes and exit, and the
// end of a run of changes is a sentinel entry published last (inotify reports one process's changes in
// the order they happened). No sleeps.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Observation across processes", .serialized)
struct ObservationTests {
    typealias Line = [String: Any]

    /// `worker observe` on `root`, returned once it printed READY (its observation is registered).
    static func observer(
        _ root: String, _ arguments: [String], environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ChildProcess {
        let child = try ChildProcess(["worker", "observe", "--directory", root] + arguments, environment: environment)
        try #require(
            await child.line(where: { $0 == "READY" }) != nil, "the observer did not start",
            sourceLocation: sourceLocation)
        return child
    }

    /// Runs `worker <command>` on `root` to its end; records an issue unless it exited with status 0.
    static func run(
        _ command: String, _ root: String, _ arguments: [String], environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let child = try ChildProcess(["worker", command, "--directory", root] + arguments, environment: environment)
        // Hang guards, not bounds: 1,500 lookups of a debug build beside a loaded parallel run took over the
        // 60 s these were (the child was killed at 120 s, still working).
        let output = await child.output(timeout: 600)
        let status = await child.exitStatus(timeout: 600)
        let exit = status.map(String.init) ?? "none: killed after 600 s"
        let end = String(decoding: output.suffix(600), as: UTF8.self)
        #expect(status == 0, "worker \(command) failed (exit \(exit)): \(end)", sourceLocation: sourceLocation)
    }

    /// The observer's change lines up to and including the first that `last` accepts.
    static func changes(of child: ChildProcess, through last: (Line) -> Bool) async -> [Line] {
        var lines: [Line] = []
        while let line = await child.json(timeout: 60) {
            lines.append(line)
            if last(line) || line["error"] != nil { break }
        }
        return lines
    }

    /// Ends an observer (STOP cancels its task) and checks that it ended cleanly.
    static func stop(_ child: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) async {
        child.send("STOP")
        let ended = await child.line(timeout: 60) { $0.hasPrefix("{\"ended\"") }
        #expect(ended != nil, "the observer did not end", sourceLocation: sourceLocation)
        // Cancelling its only observation left no watcher thread in that process.
        #expect(ended?.contains("\"watcherThreadGone\":true") == true, "\(ended ?? "")", sourceLocation: sourceLocation)
        #expect(await child.exitStatus() == 0, sourceLocation: sourceLocation)
    }

    /// Publishes `namespace/identity` from this process: the last change a run of changes waits for.
    static func publishSentinel(_ root: String, _ namespace: String, _ identity: String = "sentinel") async throws {
        let cache = YCache(storageDirectory: URL(fileURLWithPath: root), storageMaximumByteCount: nil)
        try await cache.store(
            Data(identity.utf8), for: CacheKey(namespace: namespace, identity: identity), codec: DataCodec())
    }

    static func isPublished(_ line: Line, _ namespace: String, _ identity: String) -> Bool {
        line["event"] as? String == "published" && line["namespace"] as? String == namespace
            && line["identity"] as? String == identity
    }

    /// `event namespace/identity` of each line, for readable comparisons.
    static func summary(_ lines: [Line]) -> [String] {
        lines.map { line in
            let event = line["event"] as? String ?? "?"
            if event == "removedAll" { return "removedAll \(line["namespace"] as? String ?? "*")" }
            if event == "missed" { return "missed" }
            let key =
                line["keyKnown"] as? Bool == false ? "?" : "\(line["namespace"] ?? "?")/\(line["identity"] ?? "?")"
            return "\(event) \(key)"
        }
    }

    // MARK: An app and its helper

    @Test("an app observing a key sees the helper's value the moment the helper publishes it")
    func appSeesTheHelpersValue() async throws {
        let dir = TemporaryDirectory("observe-app")
        let app = try await Self.observer(
            dir.path, ["--namespace", "previews", "--key", "doc-1", "--read", "--seed", "7", "--size", "8192"])
        let helper = try ChildProcess(
            [
                "worker", "get", "--directory", dir.path, "--namespace", "previews", "--key", "doc-1", "--seed", "7",
                "--size", "8192", "--generate-ms", "100",
            ])
        #expect(await helper.json()?["source"] as? String == "generated")
        #expect(await helper.exitStatus() == 0)
        let event = await app.json()
        #expect(event?["event"] as? String == "published", "\(String(describing: event))")
        #expect(event?["identity"] as? String == "doc-1")
        #expect(event?["payloadByteCount"] as? Int == 8192)
        // The app read it from storage, and it is exactly what the helper (seed 7) generated.
        #expect(event?["found"] as? Bool == true)
        #expect(event?["correct"] as? Bool == true)
        await Self.stop(app)
    }

    // MARK: Namespaces

    @Test("a namespace observer sees four processes publish and remove: each key once each way, nothing else")
    func namespaceObserverWithFourProcesses() async throws {
        let dir = TemporaryDirectory("observe-four")
        // Every fan-out folder made first, so no publish races a folder's creation (tested on its own below).
        let cache = YCache(storageDirectory: dir.url)
        let context = try cache.engine.storageTier.context().get()
        for byte in 0...255 {
            _ = context.directory.ensureFanOut("entries/" + ObservedName.fanOutName(UInt8(byte)))
        }
        let observer = try await Self.observer(dir.path, ["--namespace", "shared"])
        let cyclers = try (0..<4).map { index in
            try ChildProcess(
                [
                    "worker", "cycle", "--directory", dir.path, "--namespace", "shared", "--prefix", "p\(index)",
                    "--count", "10", "--go", "--pause",
                ])
        }
        let other = try ChildProcess(
            ["worker", "get", "--directory", dir.path, "--namespace", "other", "--key", "o", "--count", "10", "--go"])
        #expect(await startTogether(cyclers + [other]))
        // The four publish together; once the observer has reported all 40, they remove together (an entry
        // unlinked before the watcher read its header could not be reported at all).
        for cycler in cyclers { #expect(await cycler.line(where: { $0 == "STORED" }) != nil) }
        var lines = await Self.changes(of: observer) { _ in true }
        while lines.filter({ $0["event"] as? String == "published" }).count < 40, let line = await observer.json() {
            lines.append(line)
        }
        for cycler in cyclers { cycler.send("GO") }
        for child in cyclers + [other] {
            _ = await child.output()
            #expect(await child.exitStatus() == 0)
        }
        try await Self.publishSentinel(dir.path, "shared")
        lines += await Self.changes(of: observer) { Self.isPublished($0, "shared", "sentinel") }
        #expect(lines.allSatisfy { $0["namespace"] as? String == "shared" }, "\(Self.summary(lines))")
        var perKey: [String: [String]] = [:]
        for line in lines {
            perKey[line["identity"] as? String ?? "?", default: []].append(line["event"] as? String ?? "?")
        }
        for index in 0..<4 {
            for item in 0..<10 {
                #expect(
                    perKey["p\(index)-\(item)"] == ["published", "removed"], "p\(index)-\(item): \(Self.summary(lines))"
                )
            }
        }
        #expect(perKey.count == 41, "\(perKey.keys.sorted())")
        #expect(lines.allSatisfy { $0["keyKnown"] as? Bool == true })
        await Self.stop(observer)
    }

    @Test("removal by trim in another process: namespace and key observers see exactly what left storage")
    func removalByTrim() async throws {
        let dir = TemporaryDirectory("observe-trim")
        try YCache(storageDirectory: dir.url).openStorage()
        let namespaceObserver = try await Self.observer(dir.path, ["--namespace", "trim"])
        let keyObserver = try await Self.observer(dir.path, ["--namespace", "trim", "--key", "k-0"])
        // Twelve 3,000-byte values over a 16 KiB budget: the writer trims the oldest as it goes.
        try await Self.run(
            "get", dir.path,
            ["--namespace", "trim", "--key", "k", "--count", "12", "--size", "3000", "--budget", "16384"])
        try await Self.publishSentinel(dir.path, "trim")
        let lines = await Self.changes(of: namespaceObserver) { Self.isPublished($0, "trim", "sentinel") }
        let published = Set(
            lines.filter { $0["event"] as? String == "published" }.compactMap { $0["identity"] as? String })
        let removed = lines.filter { $0["event"] as? String == "removed" }
        #expect(removed.allSatisfy { $0["keyKnown"] as? Bool == true }, "\(Self.summary(lines))")
        let removedKeys = Set(removed.compactMap { $0["identity"] as? String })
        #expect(!removedKeys.isEmpty && removedKeys.count == removed.count)
        let stored = Set(
            try await YCache(storageDirectory: dir.url, storageMaximumByteCount: nil).entries(in: "trim").map(
                \.key.identity))
        // Every key is reported published, except one trimmed before the observer could read its header
        // (the documented gap: its name alone does not say its key). Such a key is neither stored nor
        // reported removed, so an observer's view still equals what storage holds.
        let written = Set((0..<12).map { "k-\($0)" } + ["sentinel"])
        let missed = written.subtracting(published)
        #expect(published.isSubset(of: written) && published.contains("sentinel"), "\(Self.summary(lines))")
        #expect(missed.isDisjoint(with: stored) && missed.isDisjoint(with: removedKeys), "\(Self.summary(lines))")
        #expect(stored == published.subtracting(removedKeys), "stored \(stored.sorted()), \(Self.summary(lines))")
        // The key observer of the oldest key: published (unless trimmed before it could read it), removed if
        // trim took it, then published again by this process (its sentinel, 3 bytes long).
        try await Self.publishSentinel(dir.path, "trim", "k-0")
        var keyEvents: [String] = []
        while let line = await keyObserver.json(timeout: 60) {
            if Self.isPublished(line, "trim", "k-0"), line["payloadByteCount"] as? Int == 3 { break }
            keyEvents += Self.summary([line])
        }
        let allowed: [[String]] =
            stored.contains("k-0")
            ? [["published trim/k-0"]]
            : [["published trim/k-0", "removed trim/k-0"], []]
        #expect(allowed.contains(keyEvents), "\(keyEvents)")
        await Self.stop(namespaceObserver)
        await Self.stop(keyObserver)
    }

    @Test("removeAll(in:) and removeAll() in another process: one removedAll each, not one change per entry")
    func removeAllIsOneChange() async throws {
        let dir = TemporaryDirectory("observe-remove-all")
        let filler = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        try await filler.storeEntries(30, namespace: "wipe", prefix: "w-")
        try await filler.storeEntries(10, namespace: "keep", prefix: "k-")
        let wipe = try await Self.observer(dir.path, ["--namespace", "wipe"])
        let keep = try await Self.observer(dir.path, ["--namespace", "keep"])
        let everything = try await Self.observer(dir.path, ["--all"])
        let key = try await Self.observer(dir.path, ["--namespace", "wipe", "--key", "w-3"])

        try await Self.run("remove", dir.path, ["--namespace", "wipe"])
        try await Self.publishSentinel(dir.path, "wipe")
        try await Self.publishSentinel(dir.path, "keep")
        #expect(
            Self.summary(await Self.changes(of: wipe) { Self.isPublished($0, "wipe", "sentinel") }) == [
                "removedAll wipe", "published wipe/sentinel",
            ])
        #expect(
            Self.summary(await Self.changes(of: keep) { Self.isPublished($0, "keep", "sentinel") }) == [
                "published keep/sentinel"
            ])
        #expect(
            Self.summary(await Self.changes(of: everything) { Self.isPublished($0, "keep", "sentinel") }) == [
                "removedAll wipe", "published wipe/sentinel", "published keep/sentinel",
            ])
        // A key observer is told about its own entry's unlink, whatever removed it.
        #expect(Self.summary(await Self.changes(of: key) { _ in true }) == ["removed wipe/w-3"])
        #expect(try await filler.entries(in: "wipe").map(\.key.identity) == ["sentinel"])

        try await Self.run("remove", dir.path, ["--all"])
        try await Self.publishSentinel(dir.path, "wipe", "again")
        try await Self.publishSentinel(dir.path, "keep", "again")
        #expect(
            Self.summary(await Self.changes(of: wipe) { Self.isPublished($0, "wipe", "again") }) == [
                "removedAll *", "published wipe/again",
            ])
        #expect(
            Self.summary(await Self.changes(of: keep) { Self.isPublished($0, "keep", "again") }) == [
                "removedAll *", "published keep/again",
            ])
        #expect(
            Self.summary(await Self.changes(of: everything) { Self.isPublished($0, "keep", "again") }) == [
                "removedAll *", "published wipe/again", "published keep/again",
            ])
        // Every marker was unlinked by its remover.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/signals") == [])
        for child in [wipe, keep, everything, key] { await Self.stop(child) }
    }

    @Test("a removeAll in a directory nobody observes creates no marker (and no signals folder)")
    func unobservedRemovalMakesNothing() async throws {
        let (dir, cache) = makeCache("observe-none")
        try await cache.store(Data("x".utf8), for: CacheKey(namespace: "n", identity: "x"), codec: DataCodec())
        let signals = dir.path + "/" + RemovalSignal.folder
        try await cache.removeAll(in: "n")
        #expect(!FileManager.default.fileExists(atPath: signals))
        // Observed once, then not any more: the folder stays, but a removal leaves nothing in it.
        _ = try await cache.observe(in: "n")
        await ObservationHub.shared.waitUntilNoWatcherThread()
        let context = try cache.engine.storageTier.context().get()
        #expect(!RemovalSignal.isObserved(context.directory))
        if let signal = RemovalSignal.begin(namespace: "n", in: context.directory) {
            signal.end()
            Issue.record("a removal marker was made though nobody observes")
        }
        try await cache.removeAll()
        #expect(try FileManager.default.contentsOfDirectory(atPath: signals) == [])
    }

    // MARK: Folders made later

    @Test(
        "fan-out folders created after observation began are watched at once; each entry reported once",
        arguments: [false, true])
    func folderCreatedAfterObservationBegan(withoutRenameNoReplace: Bool) async throws {
        let dir = TemporaryDirectory("observe-late")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        var environment: [String: String] = [:]
        if withoutRenameNoReplace {
            // Folders then appear by mkdir in place (IN_CREATE), not by a rename (IN_MOVED_TO).
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/cc") else { return }
            let shim = try await ObservationShims.build(FolderCreationTests.noRenameat2Shim, in: dir.path, name: "nr")
            environment = ["LD_PRELOAD": shim, "NO_RENAMEAT2_REFUSALS": dir.path + "/refusals"]
        }
        let root = dir.path + "/cache"
        try YCache(storageDirectory: URL(fileURLWithPath: root)).openStorage()
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/entries") == [])
        let namespaceObserver = try await Self.observer(root, ["--namespace", "late"])
        let keyObserver = try await Self.observer(root, ["--namespace", "late", "--key", "x-3", "--read"])
        try await Self.run(
            "get", root, ["--namespace", "late", "--key", "x", "--count", "8"], environment: environment)
        try await Self.publishSentinel(root, "late")
        let lines = await Self.changes(of: namespaceObserver) { Self.isPublished($0, "late", "sentinel") }
        #expect(
            Self.summary(lines).sorted()
                == ((0..<8).map { "published late/x-\($0)" } + ["published late/sentinel"]).sorted())
        let keyLine = await keyObserver.json()
        #expect(Self.summary([keyLine ?? [:]]) == ["published late/x-3"])
        #expect(keyLine?["correct"] as? Bool == true)
        if withoutRenameNoReplace {
            #expect(FileManager.default.fileExists(atPath: dir.path + "/refusals"), "the shim never refused")
        }
        await Self.stop(namespaceObserver)
        await Self.stop(keyObserver)
    }

    // MARK: An observer that never reads

    @Test("an observer that does not read keeps at most its buffer limit, then learns it missed changes")
    func observerThatNeverReads() async throws {
        let dir = TemporaryDirectory("observe-flood")
        let observer = try await Self.observer(dir.path, ["--namespace", "flood", "--buffer-limit", "64", "--pause"])
        try await Self.run("get", dir.path, ["--namespace", "flood", "--key", "f", "--count", "1500", "--size", "64"])
        try await Self.publishSentinel(dir.path, "flood")
        observer.send("DRAIN")
        let lines = await Self.changes(of: observer) { Self.isPublished($0, "flood", "sentinel") }
        #expect(lines.first?["event"] as? String == "missed", "\(Self.summary(Array(lines.prefix(3))))")
        #expect(lines.count <= 64, "\(lines.count) changes were kept for an observer with a limit of 64")
        #expect(lines.last.map { Self.isPublished($0, "flood", "sentinel") } == true)
        await Self.stop(observer)
    }

    // MARK: Limits

    @Test(
        "inotify limits give a clear error naming the limit, at observe and for a folder made later",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")))
    func inotifyLimitsAreClearErrors() async throws {
        let dir = TemporaryDirectory("observe-limits")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let shim = try await ObservationShims.build(ObservationShims.inotifyLimits, in: dir.path, name: "limits")
        let root = dir.path + "/cache"
        try YCache(storageDirectory: URL(fileURLWithPath: root)).openStorage()

        // No inotify instance left (EMFILE from inotify_init1).
        let instance = try ChildProcess(
            ["worker", "observe", "--directory", root, "--all"],
            environment: ["LD_PRELOAD": shim, "FAKE_INOTIFY_INIT_ERRNO": "24"])
        let instanceError = await instance.json()
        #expect(instanceError?["error"] as? String == "observationUnavailable")
        #expect((instanceError?["description"] as? String)?.contains("max_user_instances") == true)
        #expect(await instance.exitStatus() == 3)

        // No watch left when observation begins (ENOSPC from inotify_add_watch).
        let watches = try ChildProcess(
            ["worker", "observe", "--directory", root, "--all"],
            environment: ["LD_PRELOAD": shim, "FAKE_INOTIFY_WATCHES": "2"])
        let watchError = await watches.json()
        #expect(watchError?["error"] as? String == "observationUnavailable")
        #expect((watchError?["description"] as? String)?.contains("max_user_watches") == true)
        #expect(await watches.exitStatus() == 3)

        // Enough watches to begin (the root and entries/), none for the key's folder when it appears: the
        // sequence ends with the error instead of going silent.
        let later = try await Self.observer(
            root, ["--namespace", "n", "--key", "k"], environment: ["LD_PRELOAD": shim, "FAKE_INOTIFY_WATCHES": "2"])
        try await Self.run("get", root, ["--namespace", "n", "--key", "k"])
        let laterError = await later.json()
        #expect(laterError?["error"] as? String == "observationUnavailable", "\(String(describing: laterError))")
        #expect((laterError?["description"] as? String)?.contains("max_user_watches") == true)
        #expect(await later.exitStatus() == 3)
    }

    @Test(
        "as a user with every inotify instance taken, observe fails naming max_user_instances (the real limit)",
        .enabled(if: SharedUsers.available))
    func realInstanceLimit() async throws {
        let users = try SharedUsers()
        let child = try users.worker(
            as: SharedUsers.loner, ["observe", "--namespace", "n", "--exhaust-inotify-instances"],
            directory: users.base + "/loner", sharing: "private")
        let exhausted = await child.json()
        #expect((exhausted?["exhausted"] as? Int ?? 0) > 0, "\(String(describing: exhausted))")
        let error = await child.json()
        #expect(error?["error"] as? String == "observationUnavailable", "\(String(describing: error))")
        #expect((error?["description"] as? String)?.contains("max_user_instances") == true)
        #expect(await child.exitStatus() == 3)
    }

    // MARK: Two users

    @Test(
        "group-shared: one user observes what another user publishes and removes",
        .enabled(if: SharedUsers.available))
    func twoUsers() async throws {
        let users = try SharedUsers()
        let observer = try users.worker(
            as: SharedUsers.first, ["observe", "--namespace", "shared", "--read", "--seed", "3"])
        #expect(await observer.line(where: { $0 == "READY" }) != nil)
        for arguments in [
            ["get", "--namespace", "shared", "--key", "s", "--count", "3", "--seed", "3"],
            ["remove", "--namespace", "shared"],
            ["get", "--namespace", "shared", "--key", "sentinel", "--seed", "3"],
        ] {
            let child = try users.worker(as: SharedUsers.second, arguments)
            _ = await child.output()
            #expect(await child.exitStatus() == 0, "\(arguments)")
        }
        let lines = await Self.changes(of: observer) { Self.isPublished($0, "shared", "sentinel") }
        #expect(
            Self.summary(lines) == [
                "published shared/s-0", "published shared/s-1", "published shared/s-2", "removedAll shared",
                "published shared/sentinel",
            ])
        // Read as the first user: the second user's values, byte for byte.
        #expect(lines.filter { $0["event"] as? String == "published" }.allSatisfy { $0["correct"] as? Bool == true })
        await Self.stop(observer)
    }
}

/// Small LD_PRELOAD shims built with the system C compiler, for failures no machine here produces.
enum ObservationShims {
    /// Compiles `source` into `<folder>/<name>.so`; returns its path.
    static func build(_ source: String, in folder: String, name: String) async throws -> String {
        let shim = folder + "/" + name + ".so"
        try Data(source.utf8).write(to: URL(fileURLWithPath: folder + "/" + name + ".c"))
        let compiler = try ChildProcess(
            executable: URL(fileURLWithPath: "/usr/bin/cc"),
            ["-shared", "-fPIC", "-O2", "-o", shim, folder + "/" + name + ".c", "-ldl"])
        try #require(await compiler.exitStatus() == 0, "the shim did not compile")
        return shim
    }

    /// `inotify_init1` fails with $FAKE_INOTIFY_INIT_ERRNO; `inotify_add_watch` fails with ENOSPC (the
    /// watch limit) after $FAKE_INOTIFY_WATCHES successful calls.
    static let inotifyLimits = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <errno.h>
        #include <stdint.h>
        #include <stdlib.h>

        int inotify_init1(int flags) {
            const char *fake = getenv("FAKE_INOTIFY_INIT_ERRNO");
            if (fake) { errno = atoi(fake); return -1; }
            static int (*next)(int);
            if (!next) next = (int (*)(int))dlsym(RTLD_NEXT, "inotify_init1");
            return next(flags);
        }

        int inotify_add_watch(int fd, const char *path, uint32_t mask) {
            static int added;
            const char *limit = getenv("FAKE_INOTIFY_WATCHES");
            if (limit && added >= atoi(limit)) { errno = ENOSPC; return -1; }
            static int (*next)(int, const char *, uint32_t);
            if (!next) next = (int (*)(int, const char *, uint32_t))dlsym(RTLD_NEXT, "inotify_add_watch");
            int wd = next(fd, path, mask);
            if (wd >= 0) added++;
            return wd;
        }
        """
}
