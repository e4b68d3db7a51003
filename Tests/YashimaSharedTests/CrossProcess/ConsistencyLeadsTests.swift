// The leads of the consistency issue that a byte check cannot see, each with its test: a remover that judged
// one file removes that file only (a value published since stays); a joiner's own crossProcessWaitTimeout
// holds while the flight it joined waits with none (I8 is a promise to each caller); a refresh never leaves
// the entry path empty; a production that waited long publishes into the root the path names now (I13).

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

@Suite("Consistency leads", .serialized)
struct ConsistencyLeadsTests {
    let codec = StringCodec()

    @Test("a removal that judged one file leaves a value another process published at the path since")
    func judgedRemovalLeavesANewerEntry() async throws {
        let dir = TemporaryDirectory("judged-removal")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "stress", identity: "judged")
        let data = DataCodec()  // the worker's codec
        try await cache.store(Data("old".utf8), for: key, codec: data)
        let context = try cache.storageContext()
        let path = context.directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: data.identifier))
        let slots = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
        let judged = try Syscall.status(of: path.relative, in: context.directory.descriptor).get()
        // Another process replaces the entry after the remover looked at the old one (a trim's victim, an
        // expired entry, a corrupt read).
        let writer = try ChildProcess(["worker", "get", "--directory", dir.path, "--key", "judged", "--refresh"])
        #expect(await writer.exitStatus() == 0)
        let replaced = try Syscall.status(of: path.relative, in: context.directory.descriptor).get()
        #expect(!replaced.isSameFile(as: judged))
        let removed = context.files.remove(
            path.relative, payload: .readHeader, judged: JudgedFile(status: judged, unlessTouched: false, slots: slots))
        #expect(try removed.get() == nil, "the file at the path is not the one judged")
        let now = try Syscall.status(of: path.relative, in: context.directory.descriptor).get()
        #expect(now.isSameFile(as: replaced), "the newer entry is where it was")
        // The remover's own judged file, still there, goes.
        let own = try Syscall.status(of: path.relative, in: context.directory.descriptor).get()
        #expect(
            try context.files.remove(
                path.relative, payload: .readHeader, judged: JudgedFile(status: own, unlessTouched: false, slots: slots)
            ).get() != nil)
    }

    @Test("a removal in the gap of a judged remover's take-aside is not undone by its move back")
    func removalInTheMoveBackGap() async throws {
        // A newer entry, then a remover (trim, expiry, a corrupt read) that judged the old one takes the
        // newer aside; while the path is empty another process removes the key (finding nothing to unlink).
        let gap = try await JudgedGap.make("judged-gap")
        let (dir, path) = (gap.dir, gap.path)
        let remover = RemovalInGap(directory: dir.path, key: "judged-gap")
        EntryFile.beforeMoveBack.withLock { $0[path.relative] = remover.run }
        defer { _ = EntryFile.beforeMoveBack.withLock { $0.removeValue(forKey: path.relative) } }
        await gap.removeJudged()
        #expect(remover.exitStatus == 0)
        // The removal finished before the move back: the newer entry must not come back.
        try await gap.expectGone()
    }

    /// The soak's "removed value seen again" (issue 32, trim mode, seed 771208): a remote value's publish
    /// passed its check (no write of the key since its fetch), and before its rename a removal ran whole in
    /// another process (deleting the value everywhere, finding the path empty, returning). The rename then
    /// put the removed value back until the production's later clean-up; a lookup in between read it.
    /// Failed before the commit point looked again after the rename (the publish placed it, the file stayed).
    @Test("a remote value's publish that a removal overtook between its check and its rename leaves nothing")
    func removalBetweenARemotePublishsCheckAndItsRename() async throws {
        let dir = TemporaryDirectory("remote-gap")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "stress", identity: "remote-gap")
        let data = DataCodec()  // the worker's codec
        let context = try cache.storageContext()
        let expectation = EntryExpectation(key: key, codecIdentifier: data.identifier)
        let path = expectation.path
        let fetchedUnder = context.directory.state.stamp(expectation.slots)  // the fetch's epochs
        let usage = context.directory.state.usage
        let remover = RemovalInGap(directory: dir.path, key: "remote-gap")
        EntryFile.beforeRemotePlacement.withLock { $0[path.relative] = remover.run }
        defer { _ = EntryFile.beforeRemotePlacement.withLock { $0.removeValue(forKey: path.relative) } }
        let now = Syscall.realtimeNanoseconds
        let content = EntryContent(
            payload: Data("fetched before the removal".utf8), expectation: expectation,
            codecIdentifier: data.identifier, createdAt: now - 1_000_000_000, expiresAt: 0)
        // Off the pool: the hook waits for the removing child there.
        let files = context.files
        let outcome = try await offPool {
            try files.publish(content, to: path, mode: .addingUnlessWrittenSince(fetchedUnder)).get()
        }
        #expect(remover.exitStatus == 0)
        #expect(!outcome.placed, "the removal came after the fetch: the value is refused")
        let left = Syscall.status(of: path.relative, in: context.directory.descriptor)
        #expect((try? left.get()) == nil, "the removed value is back at its path")
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: data) == nil)
        #expect(context.directory.state.usage == usage, "the usage counters are as before")
    }

    /// The 16-process trim history's last anomaly (seeds 903 and 1024: "removed value seen again" after a
    /// `removeAll(in:)`): the removal's scan began before a trimmer's window opened, and passed the entry's
    /// path while the trimmer held the file aside; the move back found the namespace word as it was when its
    /// window opened. The removal's window on the namespace word, open for its whole scan, refuses it.
    @Test("a removeAll whose scan began before a judged remover's take-aside is not undone by its move back")
    func removeAllScanningDuringTheTakeAside() async throws {
        let gap = try await JudgedGap.make("judged-scan")
        let (context, path) = (gap.context, gap.path)
        // A removal of the namespace begins (its window opens) before the remover's window does; its scan
        // passes the path while the remover holds the newer entry aside (nothing there to unlink).
        let state = context.directory.state
        let removal = try state.openRemovalWindow(namespaceSlot: gap.slots.namespace)
        let passedWhileAside = Mutex(false)
        let directory = context.directory
        EntryFile.beforeMoveBack.withLock {
            $0[path.relative] = {
                let empty = (try? Syscall.status(of: path.relative, in: directory.descriptor).get()) == nil
                passedWhileAside.withLock { $0 = empty }
            }
        }
        defer { _ = EntryFile.beforeMoveBack.withLock { $0.removeValue(forKey: path.relative) } }
        await gap.removeJudged()
        try removal.close()
        #expect(passedWhileAside.withLock { $0 }, "the path was empty while the remover held the file aside")
        // The removal is over, and its scan found nothing: the newer entry must not be back.
        try await gap.expectGone()
    }

    @Test("a joiner's own crossProcessWaitTimeout holds while the flight it joined waits with none")
    func joinerTimeout() async throws {
        let dir = TemporaryDirectory("joiner-timeout")
        let holder = try ChildProcess([
            "worker", "get", "--directory", dir.path, "--key", "held", "--generate-ms", "600000", "--announce",
        ])
        #expect(await holder.line(timeout: 60, where: { $0.hasPrefix("GENERATING") }) != nil)
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "stress", identity: "held")
        let data = DataCodec()
        // The first caller waits for the holder as long as it holds.
        let patient = Task { try await cache.value(for: key, codec: data) { Data("patient".utf8) } }
        #expect(await eventually(within: 60) { cache.waiters(key, data) >= 1 })
        // The second joins its flight with a timeout of its own: past it, it generates itself (I8).
        var options = YCache.Options()
        options.crossProcessWaitTimeout = .milliseconds(300)
        let hurried = Task {
            try await cache.value(for: key, codec: data, options: options) { Data("hurried".utf8) }
        }
        #expect(try await result(of: hurried, within: 120)?.get() == Data("hurried".utf8))
        #expect(cache.statistics.crossProcessTimeouts >= 1)
        #expect(holder.isRunning, "the holder still holds: the timeout, not a release, ended the wait")
        holder.kill()
        await holder.exitStatus()
        _ = try await result(of: patient, within: 120)?.get()
    }

    @Test("a refresh never leaves the entry path empty: a reader looping on it never misses")
    func refreshKeepsThePathNamed() async throws {
        let dir = TemporaryDirectory("refresh-window")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "n", identity: "refreshed")
        try await cache.store("v0", for: key, codec: codec)
        let context = try cache.storageContext()
        let expectation = EntryExpectation(key: key, codecIdentifier: codec.identifier)
        let stop = Atomic<Bool>(false)
        let files = context.files
        // A reader of the path on a thread of its own (never the pool): every read must find an entry.
        let reader = Task {
            await offPool { () -> (reads: Int, misses: Int) in
                var (reads, misses) = (0, 0)
                while !stop.load(ordering: .relaxed) {
                    var opened: FileStatus?
                    if case .failure(.missing) = files.read(
                        expectation.path, expecting: expectation, now: Syscall.realtimeNanoseconds, opened: &opened)
                    {
                        misses += 1
                    }
                    reads += 1
                }
                return (reads, misses)
            }
        }
        for round in 0..<300 {
            _ = try await cache.refresh(for: key, codec: codec) { "v\(round + 1)" }
        }
        stop.store(true, ordering: .relaxed)
        let counts = await reader.value
        #expect(counts.reads > 0)
        #expect(counts.misses == 0, "\(counts.misses) of \(counts.reads) reads found the path empty")
    }

    @Test("a production that generated long publishes into the root the path names now, not one renamed away")
    func publishFollowsTheRoot() async throws {
        let parent = TemporaryDirectory("moved-root")
        let root = parent.url.appendingPathComponent("cache")
        let cache = YCache(storageDirectory: root)
        try cache.openStorage()
        let key = CacheKey(namespace: "n", identity: "moved")
        let (generating, release) = (Gate(), Gate())
        let lookup = Task {
            try await cache.value(for: key, codec: codec) {
                generating.open()
                await release.wait()
                // Long, by the library's measure (`Policy.publishRootRecheckAge`): at least this, never less.
                try await Task.sleep(for: .milliseconds(5))
                return "late"
            }
        }
        #expect(await generating.wait(within: 60))
        let moved = parent.url.appendingPathComponent("moved")
        #expect(rename(root.path, moved.path) == 0)
        release.open()
        #expect(try await result(of: lookup, within: 60)?.get() == "late")
        let path = Directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: codec.identifier)).relative
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path))
        #expect(!FileManager.default.fileExists(atPath: moved.appendingPathComponent(path).path))
    }
}

/// An entry stored ("old"), its file's status judged, then replaced by another process's refresh: what a
/// judged remover (trim, expiry, a corrupt read) that decided on the old file finds at the path.
private struct JudgedGap {
    let dir: TemporaryDirectory
    let key: CacheKey
    let context: StorageContext
    let path: EntryPath
    let slots: SharedState.Slots
    let judged: FileStatus

    static func make(_ identity: String) async throws -> JudgedGap {
        let dir = TemporaryDirectory(identity)
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "stress", identity: identity)
        let data = DataCodec()
        try await cache.store(Data("old".utf8), for: key, codec: data)
        let context = try cache.storageContext()
        let path = context.directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: data.identifier))
        let judged = try Syscall.status(of: path.relative, in: context.directory.descriptor).get()
        let writer = try ChildProcess(["worker", "get", "--directory", dir.path, "--key", identity, "--refresh"])
        #expect(await writer.exitStatus() == 0)
        return JudgedGap(
            dir: dir, key: key, context: context, path: path,
            slots: SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest), judged: judged)
    }

    /// The judged remover's removal of the old file (it takes the newer aside, and may move it back).
    func removeJudged() async {
        let (files, relative) = (context.files, path.relative)
        let judgedFile = JudgedFile(status: judged, unlessTouched: false, slots: slots)
        _ = await offPool { files.remove(relative, payload: .readHeader, judged: judgedFile) }
    }

    /// Nothing at the path, and a fresh cache finds nothing.
    func expectGone() async throws {
        #expect((try? Syscall.status(of: path.relative, in: context.directory.descriptor).get()) == nil)
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.valueIfCached(for: key, codec: DataCodec()) == nil, "a fresh cache finds nothing")
    }
}

/// Another process's removal of a `worker` key, for a test hook to run in the gap between two steps of a
/// remover or a publish (`EntryFile.beforeMoveBack`, `EntryFile.beforeRemotePlacement`): a real
/// `worker remove` child, waited for on the hook's thread.
private final class RemovalInGap: Sendable {
    let directory: String
    let key: String
    private let exit = Mutex<Int32?>(nil)

    init(directory: String, key: String) {
        self.directory = directory
        self.key = key
    }

    /// The child's exit status once the hook ran (-1 when it could not be started).
    var exitStatus: Int32? { exit.withLock { $0 } }

    /// The hook: starts the removal and waits for it.
    func run() {
        let status = Result { () throws -> Int32 in
            let remover = try ChildProcess(["worker", "remove", "--directory", directory, "--key", key])
            return remover.waitForExit(timeout: nil)?.status ?? -1
        }
        exit.withLock { $0 = (try? status.get()) ?? -1 }
    }
}
