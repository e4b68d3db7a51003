// Observation inside the test process, where the watcher's thread and descriptors can be inspected
// (/proc/self/task, /proc/self/fdinfo): cancellation leaves nothing behind, watches are shared and
// released by reference count, `.currentState` paces itself to the reader, publications during a removal
// are reported after it, and an abandoned removal becomes `.missedEvents`. Part of ObservationTests so
// that it runs serialized with the other suites' observers (one watcher per process).

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension ObservationTests {
    /// Threads of this process named like the watcher (a thread already dead, state Z or X, is gone).
    static func watcherThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
            guard comm?.trimmingCharacters(in: .whitespacesAndNewlines) == "yashima-observe",
                let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).prefix(1)
            return state != "Z" && state != "X"
        }.count
    }

    /// Waits for every watcher thread to have ended and been joined, then for the kernel to finish its
    /// exit (a joined thread leaves /proc a moment later; bounded at 10 s); returns the threads left.
    static func watcherThreadsAfterStop() async -> Int {
        await ObservationHub.shared.waitUntilNoWatcherThread()
        // Each count reads two files per thread of this process (over a hundred in a parallel run):
        // off the pool.
        var bound = HangGuard(seconds: 10, firstStep: 0.01, longestStep: 0.01)
        while await offPool({ watcherThreads() }) > 0, await bound.sleep() {}
        return await offPool { watcherThreads() }
    }

    /// This process's inotify descriptors and the watches each holds (from /proc/self/fdinfo).
    static func inotifyWatches() -> [Int] {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        // The process's lock-wait watch (Coordination/LockWatch) is another inotify instance: not counted.
        let lockWaits = LockWatch.startedInotifyDescriptor.map { String($0) }
        return descriptors.compactMap { fd -> Int? in
            guard fd != lockWaits,
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
                target == "anon_inode:inotify",
                let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)
            else { return nil }
            return info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
    }

    static func published(_ change: YCache.Change?) -> String? {
        guard case .published(let entry) = change else { return nil }
        return entry.key.namespace + "/" + entry.key.identity
    }

    @Test("cancelling the observing task ends the sequence and leaves no thread, descriptor or watch")
    func cancellationLeavesNothingBehind() async throws {
        #expect(await Self.watcherThreadsAfterStop() == 0)
        let dir = TemporaryDirectory("observe-cancel")
        let cache = YCache(storageDirectory: dir.url)
        try await cache.store(Data("a".utf8), for: CacheKey(namespace: "c", identity: "a"), codec: DataCodec())
        let changes = try await cache.observe(in: "c")
        #expect(await offPool { Self.watcherThreads() } == 1)
        let watches = Self.inotifyWatches()
        #expect(watches.count == 1 && watches[0] >= 4, "\(watches): root, entries, signals and a fan-out folder")
        let received = Gate()
        let task = Task { () async throws -> Int in
            var count = 0
            for try await _ in changes {
                count += 1
                received.open()
            }
            return count
        }
        try await cache.store(Data("b".utf8), for: CacheKey(namespace: "c", identity: "b"), codec: DataCodec())
        await received.wait()
        task.cancel()
        #expect(try await task.value == 1)  // the sequence ended: the loop returned
        #expect(await Self.watcherThreadsAfterStop() == 0)
        #expect(Self.inotifyWatches().isEmpty)
        // The same sequence iterated again ends at once.
        var iterator = changes.makeAsyncIterator()
        #expect(try await iterator.next() == nil)
    }

    @Test("a sequence dropped without being iterated releases its watches and the thread")
    func droppingReleases() async throws {
        #expect(await Self.watcherThreadsAfterStop() == 0)
        let dir = TemporaryDirectory("observe-drop")
        let cache = YCache(storageDirectory: dir.url)
        do {
            let changes = try await cache.observe(for: CacheKey("k"), codec: DataCodec())
            #expect(await offPool { Self.watcherThreads() } == 1)
            _ = changes
        }
        #expect(await Self.watcherThreadsAfterStop() == 0)
        #expect(Self.inotifyWatches().isEmpty)
    }

    @Test("observers share one thread and one inotify instance; watches are added and released by need")
    func watchesAreSharedAndCounted() async throws {
        #expect(await Self.watcherThreadsAfterStop() == 0)
        let (dir, cache) = makeCache("observe-shared")
        let keyA = CacheKey(namespace: "a", identity: "one")
        let keyB = CacheKey(namespace: "b", identity: "two")
        for key in [keyA, keyB, CacheKey(namespace: "a", identity: "three")] {
            try await cache.store(Data(key.identity.utf8), for: key, codec: DataCodec())
        }
        let fanOuts = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/entries").count
        // A key observer: the root, entries/ and its own fan-out folder.
        var held: [String: YCache.Changes] = [:]
        held["key"] = try await cache.observe(for: keyB, codec: DataCodec())
        #expect(await ObservationHub.shared.settledWatchCount() == 3)
        // A namespace observer adds signals/ and every fan-out folder; another instance on the same
        // directory shares them all.
        held["namespace"] = try await cache.observe(in: "a")
        held["other"] = try await YCache(storageDirectory: dir.url).observe(in: "a")
        #expect(await ObservationHub.shared.settledWatchCount() == 3 + fanOuts)
        #expect(await offPool { Self.watcherThreads() } == 1 && Self.inotifyWatches().count == 1)
        held["namespace"] = nil
        #expect(await ObservationHub.shared.settledWatchCount() == 3 + fanOuts)
        held["other"] = nil
        #expect(await ObservationHub.shared.settledWatchCount() == 3)
        // The key observer still gets its changes.
        try await cache.store(Data("new".utf8), for: keyB, codec: DataCodec())
        do {
            var iterator = held["key"]!.makeAsyncIterator()
            #expect(Self.published(try await iterator.next()) == "b/two")
        }
        held["key"] = nil
        #expect(await Self.watcherThreadsAfterStop() == 0)
        #expect(Self.inotifyWatches().isEmpty)
    }

    @Test("currentState: every stored entry first, paced to the reader (no overflow), then the changes")
    func currentStateIsPaced() async throws {
        let dir = TemporaryDirectory("observe-current")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        try await cache.storeEntries(50, namespace: "n", prefix: "e") { Data([UInt8($0)]) }
        try await cache.store(Data(), for: CacheKey(namespace: "other", identity: "x"), codec: DataCodec())
        let changes = try await cache.observe(in: "n", startingWith: .currentState, bufferLimit: 8)
        var iterator = changes.makeAsyncIterator()
        var seen: Set<String> = []
        while seen.count < 50 {
            let change = try await iterator.next()
            guard let name = Self.published(change) else {
                Issue.record("expected the stored entries, got \(String(describing: change))")
                return
            }
            seen.insert(name)
        }
        #expect(seen == Set((0..<50).map { "n/e\($0)" }))
        #expect(changes.handle.observer.channel.overflowCount == 0)
        try await cache.store(Data(), for: CacheKey(namespace: "n", identity: "later"), codec: DataCodec())
        #expect(Self.published(try await iterator.next()) == "n/later")
        // A key observer starting with the current state gets its entry at once.
        var keyIterator = try await cache.observe(
            for: CacheKey(namespace: "n", identity: "e7"), codec: DataCodec(), startingWith: .currentState
        ).makeAsyncIterator()
        #expect(Self.published(try await keyIterator.next()) == "n/e7")
    }

    @Test("publications during a removal come after its removedAll, unless it removed them; others pass")
    func publicationsDuringARemoval() async throws {
        let dir = TemporaryDirectory("observe-window")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        var everything = try await cache.observe().makeAsyncIterator()
        var namespace = try await cache.observe(in: "ns").makeAsyncIterator()
        let directory = try cache.engine.storageTier.context().get().directory
        // A removal of "ns" runs (held by this process, as CacheEngine.removeAll holds it).
        guard let signal = RemovalSignal.begin(namespace: "ns", in: directory) else {
            Issue.record("the removal signal could not begin")
            return
        }
        try await cache.store(Data("x".utf8), for: CacheKey(namespace: "ns", identity: "x"), codec: DataCodec())
        try await cache.store(Data("y".utf8), for: CacheKey(namespace: "ns", identity: "y"), codec: DataCodec())
        try await cache.remove(for: CacheKey(namespace: "ns", identity: "y"), codec: DataCodec())
        try await cache.store(Data("z".utf8), for: CacheKey(namespace: "other", identity: "z"), codec: DataCodec())
        signal.end()
        #expect(Self.published(try await everything.next()) == "other/z")
        #expect(try await everything.next() == .removedAll(namespace: "ns"))
        #expect(Self.published(try await everything.next()) == "ns/x")
        #expect(try await namespace.next() == .removedAll(namespace: "ns"))
        #expect(Self.published(try await namespace.next()) == "ns/x")
    }

    @Test("a removal whose process died (marker left, unlocked) becomes missedEvents; sweeping it is silent")
    func abandonedRemoval() async throws {
        let dir = TemporaryDirectory("observe-abandoned")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        var changes = try await cache.observe(in: "ns").makeAsyncIterator()
        let directory = try cache.engine.storageTier.context().get().directory
        // What a remover killed after announcing leaves: its marker in signals/, held by nobody.
        let marker =
            RemovalSignal.folder + "/" + RemovalSignal.markerName(.init(namespace: "ns"), unique: "0123456789abcdef")
        let staging = directory.newStagingPath()
        let fd = try Syscall.open(staging, in: directory.descriptor, flags: [.writeOnly, .create, .exclusive]).get()
        _ = RemovalSignal.record(namespace: "ns").withUnsafeBytes { Syscall.write(fd, $0) }
        Syscall.close(fd)
        try Syscall.rename(staging, in: directory.descriptor, to: marker, in: directory.descriptor).get()
        // The watcher's probe (about once a second while a removal is open) finds nobody holding it.
        #expect(try await changes.next() == .missedEvents)
        // The next remover sweeps it (renamed to .dead, unlinked): no further change for it.
        RemovalSignal.sweepAbandonedMarkers(in: directory, except: "")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/" + RemovalSignal.folder) == [])
        try await cache.store(Data(), for: CacheKey(namespace: "ns", identity: "after"), codec: DataCodec())
        #expect(Self.published(try await changes.next()) == "ns/after")
    }

    @Test("an entry replaced by a file no reader accepts is reported removed once, not again at its unlink")
    func unreadableReplacement() async throws {
        let dir = TemporaryDirectory("observe-unreadable")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        let key = CacheKey(namespace: "ns", identity: "k")
        try await cache.store(Data("good".utf8), for: key, codec: DataCodec())
        var keyChanges = try await cache.observe(for: key, codec: DataCodec()).makeAsyncIterator()
        var namespaceChanges = try await cache.observe(in: "ns").makeAsyncIterator()
        // What a torn write or a foreign writer leaves: garbage renamed over the entry.
        let directory = try cache.engine.storageTier.context().get().directory
        let entry =
            dir.path + "/" + directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: "data-v1")).relative
        try Data("not an entry".utf8).write(to: URL(fileURLWithPath: dir.path + "/tmp/garbage"))
        #expect(rename(dir.path + "/tmp/garbage", entry) == 0)
        let identifier = EntryIdentity(key: key, codecIdentifier: "data-v1").hex
        let removed = YCache.Change.removed(
            YCache.RemovedEntry(entryIdentifier: identifier, key: key, codecIdentifier: "data-v1"))
        #expect(try await keyChanges.next() == removed)
        #expect(try await namespaceChanges.next() == removed)
        // Another instance's lookup finds it corrupt, unlinks it (no second removal) and generates again.
        let reader = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        #expect(try await reader.data(for: key) { Data("again".utf8) } == Data("again".utf8))
        #expect(Self.published(try await keyChanges.next()) == "ns/k")
        #expect(Self.published(try await namespaceChanges.next()) == "ns/k")
    }

    @Test("replacing an entry is one publication (its swap's move-out is no removal); a removal still is one")
    func replacementIsOnePublication() async throws {
        let dir = TemporaryDirectory("observe-replace")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        let key = CacheKey(namespace: "ns", identity: "k")
        try await cache.store(Data("v0".utf8), for: key, codec: DataCodec())
        var keyChanges = try await cache.observe(for: key, codec: DataCodec()).makeAsyncIterator()
        var namespaceChanges = try await cache.observe(in: "ns").makeAsyncIterator()
        let identifier = EntryIdentity(key: key, codecIdentifier: "data-v1").hex
        let removed = YCache.Change.removed(
            YCache.RemovedEntry(entryIdentifier: identifier, key: key, codecIdentifier: "data-v1"))
        for round in 1...3 {
            try await cache.store(Data("v\(round)".utf8), for: key, codec: DataCodec())
            #expect(Self.published(try await keyChanges.next()) == "ns/k")
            #expect(Self.published(try await namespaceChanges.next()) == "ns/k")
        }
        #expect(try await cache.remove(for: key, codec: DataCodec()))
        #expect(try await keyChanges.next() == removed)
        #expect(try await namespaceChanges.next() == removed)
        try await cache.store(Data("v4".utf8), for: key, codec: DataCodec())
        #expect(Self.published(try await keyChanges.next()) == "ns/k")
        #expect(Self.published(try await namespaceChanges.next()) == "ns/k")
    }

    @Test("observing a directory that is then removed ends with observationUnavailable; observing again works")
    func removedDirectoryEndsObservation() async throws {
        let (dir, cache) = makeCache("observe-removed")
        try cache.openStorage()
        var changes = try await cache.observe(in: "n").makeAsyncIterator()
        try FileManager.default.removeItem(at: dir.url)
        do {
            while try await changes.next() != nil {}
            Issue.record("the sequence ended without an error")
        } catch {
            guard case .observationUnavailable(_, let reason) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(reason.contains("removed"))
        }
        // The cache makes the directory again; a new observation follows it.
        var again = try await cache.observe(in: "n").makeAsyncIterator()
        try await cache.store(Data(), for: CacheKey(namespace: "n", identity: "back"), codec: DataCodec())
        #expect(Self.published(try await again.next()) == "n/back")
    }
}
