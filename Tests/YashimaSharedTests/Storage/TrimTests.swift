// Trimming through YCache and the Trimmer: LRU order (mtimes set explicitly), the budget (payload bytes,
// and the optional cap on allocated bytes) after every write and after an explicit trim, the exact fit,
// oversized values, staging and lock debris, reconciling both usage counters, and a state file whose
// payload counter was never counted (made by 0.1).

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

@Suite("Trim")
struct TrimTests {
    static let codec = StringCodec()
    static let block = 4096

    /// The payload of the entry `writeEntries` makes for `name`.
    static func payload(_ name: String) -> String { "value of \(name)" }

    /// Writes one small entry (charged one block) per name with an unbounded cache.
    static func writeEntries(_ names: [String], in dir: TemporaryDirectory) async throws -> [String: URL] {
        let writer = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        var urls: [String: URL] = [:]
        for name in names {
            _ = try await writer.value(for: CacheKey(name), codec: codec) { payload(name) }
            urls[name] = try writer.entryURL(CacheKey(name), codec)
        }
        return urls
    }

    /// Gives the entries mtimes one hour apart, the first name the oldest.
    static func age(_ oldestFirst: [String], _ urls: [String: URL]) throws {
        for (rank, name) in oldestFirst.enumerated() {
            try setModificationTime(urls[name]!, secondsAgo: Double(oldestFirst.count - rank) * 3600)
        }
    }

    static func present(_ urls: [String: URL]) -> Set<String> {
        Set(urls.filter { fileExists($0.value) }.keys)
    }

    // MARK: LRU order

    @Test("a write over budget trims least recently used entries first")
    func lruOrderOnWrite() async throws {
        let dir = TemporaryDirectory("trim-lru")
        let names = (0..<10).map { "entry-\($0)" }
        var urls = try await Self.writeEntries(names, in: dir)
        let oldestFirst = [3, 7, 1, 9, 0, 5, 2, 8, 4, 6].map { names[$0] }
        try Self.age(oldestFirst, urls)

        let each = Self.payload(names[0]).utf8.count  // every entry's payload has this size
        let budget = 10 * each
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: budget)
        _ = try await cache.value(for: CacheKey("newest"), codec: Self.codec) { "n" }
        urls["newest"] = try cache.entryURL(CacheKey("newest"), Self.codec)
        // Over budget by one byte: trimmed down to the low-water mark, oldest first.
        var total = budget + 1
        var removed = 0
        while total > Int(Double(budget) * Policy.trimLowWaterFraction) {
            total -= each
            removed += 1
        }
        #expect(removed == 2)
        #expect(Self.present(urls) == Set(urls.keys).subtracting(oldestFirst.prefix(removed)))
        #expect(try await cache.storageUsage().byteCount == total)
    }

    @Test("a storage hit counts as a use; metadata and contains do not")
    func hitsTouch() async throws {
        let dir = TemporaryDirectory("trim-touch")
        let urls = try await Self.writeEntries(["a", "b", "c", "d"], in: dir)
        try Self.age(["a", "b", "c", "d"], urls)
        let aBefore = try modificationTime(urls["a"]!)

        let reader = YCache(storageDirectory: dir.url)
        #expect(try await reader.metadata(for: CacheKey("a"), codec: Self.codec) != nil)
        #expect(try await reader.contains(for: CacheKey("a"), codec: Self.codec))
        #expect(try await reader.entries().count == 4)
        #expect(try modificationTime(urls["a"]!) == aBefore)
        #expect(try await reader.resolve(for: CacheKey("b"), codec: Self.codec) { "x" }.source == .storage)
        #expect(try modificationTime(urls["b"]!).timeIntervalSinceNow > -600)

        let trimmer = YCache(storageDirectory: dir.url, storageMaximumByteCount: 2 * Self.payload("a").utf8.count)
        try await trimmer.trimStorageIfNeeded()
        #expect(Self.present(urls) == ["b", "d"])
    }

    // MARK: Budget

    @Test("the budget (payload bytes) holds after every write")
    func budgetAfterEveryWrite() async throws {
        let dir = TemporaryDirectory("trim-every")
        let budget = 5 * Self.block
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: budget)
        for index in 0..<30 {
            let size = [10, 3000, 4500, 9000][index % 4]
            let value = try await cache.value(for: CacheKey("w\(index)"), codec: Self.codec) {
                String(repeating: "x", count: size)
            }
            #expect(value.utf8.count == size)
            let usage = try await cache.storageUsage()
            #expect(usage.byteCount <= budget, "after write \(index)")
            #expect(usage.entryCount > 0)
        }
    }

    @Test("a budget of a few bytes holds small values (payload bytes, not allocated blocks)")
    func tinyBudget() async throws {
        let dir = TemporaryDirectory("trim-tiny")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 7)
        try await cache.store("12345", for: CacheKey("first"), codec: Self.codec)
        #expect(try await cache.storageUsage().entryCount == 1)
        try await cache.store("abcde", for: CacheKey("second"), codec: Self.codec)
        let usage = try await cache.storageUsage()
        #expect(usage.entryCount == 1)
        #expect(usage.byteCount == 5)
        #expect(usage.allocatedByteCount == Int64(Self.block))
        #expect(
            try await stored(in: dir, CacheKey("second"), Self.codec)
                == "abcde")
    }

    @Test("the optional disk cap bounds allocated bytes too, alongside the payload budget")
    func allocatedCap() async throws {
        let dir = TemporaryDirectory("trim-disk-cap")
        let cache = YCache(
            configuration: .init(
                storageDirectory: dir.url, storageMaximumByteCount: 1 << 20,
                storageMaximumAllocatedByteCount: 4 * Self.block))
        for index in 0..<12 {
            try await cache.store("tiny \(index)", for: CacheKey("t\(index)"), codec: Self.codec)
            let usage = try await cache.storageUsage()
            #expect(usage.allocatedByteCount <= Int64(4 * Self.block), "after write \(index)")
            #expect(usage.maximumAllocatedByteCount == 4 * Self.block)
        }
        // Payload alone would keep all twelve (a few bytes each); the cap keeps at most four files.
        #expect(try await cache.storageUsage().entryCount <= 4)
        let big = String(repeating: "b", count: 4 * Self.block)  // its file takes five blocks: never stored
        try await cache.store(big, for: CacheKey("big"), codec: Self.codec)
        #expect(
            try await stored(in: dir, CacheKey("big"), Self.codec) == nil)
    }

    @Test("trimStorageIfNeeded brings a directory filled by others within this budget, oldest first")
    func explicitTrim() async throws {
        let dir = TemporaryDirectory("trim-explicit")
        let names = (0..<8).map { "e\($0)" }
        let urls = try await Self.writeEntries(names, in: dir)
        let oldestFirst = [5, 2, 7, 0, 4, 1, 6, 3].map { names[$0] }
        try Self.age(oldestFirst, urls)
        let budget = 3 * Self.payload(names[0]).utf8.count
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: budget)
        let trimmed = try await cache.trimStorageIfNeeded()
        #expect(Self.present(urls) == Set(oldestFirst.suffix(3)))
        #expect(trimmed.entryCount == 3)
        #expect(trimmed.byteCount == budget)  // down to the budget itself
        #expect(trimmed.maximumByteCount == budget)
        #expect(try await cache.storageUsage() == trimmed)
    }

    @Test("an entry whose payload equals the budget (or whose file equals the disk cap) is kept")
    func exactFit() async throws {
        let key = CacheKey("exact")
        let value = String(repeating: "e", count: 5000)
        let charged = EntryFile.chargedBytes(
            payloadByteCount: 5000, keyByteCount: key.canonicalBytes.count,
            codecByteCount: Self.codec.identifier.utf8.count)
        #expect(charged == 8192)
        let fits = [
            YCache.Configuration(storageDirectory: URL(fileURLWithPath: "/"), storageMaximumByteCount: 5000),
            .init(storageDirectory: URL(fileURLWithPath: "/"), storageMaximumAllocatedByteCount: Int(charged)),
        ]
        for configuration in fits {
            let dir = TemporaryDirectory("trim-exact")
            var configuration = configuration
            configuration.storageDirectory = dir.url
            let cache = YCache(configuration: configuration)
            _ = try await cache.value(for: key, codec: Self.codec) { value }
            let usage = try await cache.trimStorageIfNeeded()
            #expect(usage.byteCount == 5000)
            #expect(usage.allocatedByteCount == charged)
            let fresh = YCache(configuration: configuration)
            #expect(try await fresh.resolve(for: key, codec: Self.codec) { "" }.source == .storage)

            // One byte less and the same value no longer fits.
            let tight = TemporaryDirectory("trim-exact-minus")
            configuration.storageDirectory = tight.url
            configuration.storageMaximumByteCount = configuration.storageMaximumByteCount.map { $0 - 1 }
            configuration.storageMaximumAllocatedByteCount = configuration.storageMaximumAllocatedByteCount.map {
                $0 - 1
            }
            _ = try await YCache(configuration: configuration).value(for: key, codec: Self.codec) { value }
            #expect(entryFiles(in: tight.url).isEmpty)
        }
    }

    @Test("a value larger than the whole budget is returned and kept in memory, not stored, evicting nothing")
    func oversized() async throws {
        let dir = TemporaryDirectory("trim-oversized")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 2 * Self.block)
        _ = try await cache.value(for: CacheKey("small"), codec: Self.codec) { "small" }
        let big = String(repeating: "B", count: 2 * Self.block + 1)
        let resolution = try await cache.resolve(for: CacheKey("big"), codec: Self.codec) { big }
        #expect(resolution.value == big)
        #expect(resolution.source == .generated)
        #expect(try await cache.peek(for: CacheKey("big"), codec: Self.codec) == big)
        let fresh = YCache(storageDirectory: dir.url)
        #expect(try await fresh.valueIfCached(for: CacheKey("big"), codec: Self.codec) == nil)
        #expect(try await fresh.valueIfCached(for: CacheKey("small"), codec: Self.codec) == "small")
        #expect(entryFiles(in: dir.url).count == 1)
    }

    @Test(
        "replacing a stored value with one larger than the whole budget removes the old entry for every process",
        arguments: ["store", "refresh"])
    func oversizedReplacement(operation: String) async throws {
        let dir = TemporaryDirectory("trim-oversized-replace")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 2 * Self.block)
        let other = YCache(storageDirectory: dir.url, storageMaximumByteCount: 2 * Self.block)
        let key = CacheKey("replaced")
        try await cache.store("old", for: key, codec: Self.codec)
        #expect(try await other.valueIfCached(for: key, codec: Self.codec) == "old")  // now in other's memory
        let big = String(repeating: "B", count: 3 * Self.block)
        if operation == "store" {
            try await cache.store(big, for: key, codec: Self.codec)
        } else {
            #expect(try await cache.refresh(for: key, codec: Self.codec) { big } == big)
        }
        #expect(try await cache.peek(for: key, codec: Self.codec) == big)
        // Neither another process's memory nor storage may still give the replaced value.
        #expect(try await other.valueIfCached(for: key, codec: Self.codec) == nil)
        #expect(try await stored(in: dir, key, Self.codec) == nil)
        #expect(entryFiles(in: dir.url).isEmpty)
    }

    // MARK: Debris

    @Test(
        "trim removes staging files older than an hour and unheld lock files; keeps the rest",
        arguments: [Int?.none, 1 << 20])
    func debris(budget: Int?) async throws {
        let dir = TemporaryDirectory("trim-debris")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: budget)
        try cache.openStorage()
        let staging = dir.url.appendingPathComponent(Directory.stagingFolder)
        let old = staging.appendingPathComponent("old.staging")
        let young = staging.appendingPathComponent("young.staging")
        try writeFile(Data("partial".utf8), to: old)
        try writeFile(Data("partial".utf8), to: young)
        try setModificationTime(old, secondsAgo: 2 * 3600)
        try setModificationTime(young, secondsAgo: 50 * 60)

        let directory = try cache.storageContext().directory
        let abandoned = directory.lockPath(forKeyDigest: CacheKey("abandoned").stableDigest)
        let busy = directory.lockPath(forKeyDigest: CacheKey("busy").stableDigest)
        guard case .acquired(let abandonedLock) = try await Self.lock(abandoned, in: directory),
            case .acquired(let busyLock) = try await Self.lock(busy, in: directory)
        else {
            Issue.record("could not take the lock files")
            return
        }
        _ = consume abandonedLock  // a killed process leaves its (unlocked) lock file behind
        // Lock files are swept once nobody has held them for an hour (I6); a fresh one may be in use soon.
        let fresh = directory.lockPath(forKeyDigest: CacheKey("fresh").stableDigest)
        guard case .acquired(let freshLock) = try await Self.lock(fresh, in: directory) else {
            Issue.record("could not take the fresh lock file")
            busyLock.abandon()
            return
        }
        _ = consume freshLock
        try setModificationTime(dir.url.appendingPathComponent(abandoned.relative), secondsAgo: 2 * 3600)
        try setModificationTime(dir.url.appendingPathComponent(busy.relative), secondsAgo: 2 * 3600)

        _ = try await cache.value(for: CacheKey("kept"), codec: Self.codec) { "kept" }
        try await cache.trimStorageIfNeeded()
        #expect(!fileExists(old))
        #expect(fileExists(young))
        #expect(!fileExists(dir.url.appendingPathComponent(abandoned.relative)))
        #expect(fileExists(dir.url.appendingPathComponent(busy.relative)))
        #expect(fileExists(dir.url.appendingPathComponent(fresh.relative)))
        #expect(try await cache.valueIfCached(for: CacheKey("kept"), codec: Self.codec) == "kept")
        busyLock.abandon()
    }

    @Test("an entry taken aside is debris only once its ctime is an hour old too (it keeps the entry's mtime)")
    func debrisByChange() throws {
        let dir = TemporaryDirectory("trim-debris-change")
        let cache = YCache(storageDirectory: dir.url)
        try cache.openStorage()
        let context = try cache.storageContext()
        // An entry taken aside by a remover: its mtime is the entry's (hours old), its ctime the rename's.
        try writeFile(Data("entry".utf8), to: dir.url.appendingPathComponent("entries-old"))
        try setModificationTime(dir.url.appendingPathComponent("entries-old"), secondsAgo: 5 * 3600)
        let aside = dir.url.appendingPathComponent(Directory.stagingFolder).appendingPathComponent("left.aside")
        try FileManager.default.moveItem(at: dir.url.appendingPathComponent("entries-old"), to: aside)
        let hour: Int64 = 3600 * 1_000_000_000
        let now = Syscall.realtimeNanoseconds
        _ = context.trimmer.sweepStagingDebris(limit: 100, now: now)
        #expect(fileExists(aside), "a file changed moments ago is not debris, whatever its mtime")
        _ = context.trimmer.sweepStagingDebris(limit: 100, now: now + hour / 2)
        #expect(fileExists(aside))
        _ = context.trimmer.sweepStagingDebris(limit: 100, now: now + 2 * hour)
        #expect(!fileExists(aside), "both times an hour old: debris")
    }

    /// Takes a key's lock without waiting and without looking in storage.
    static func lock(_ path: LockPath, in directory: Directory) async throws -> KeyLock.Step<Never> {
        try KeyLock.step(path, in: directory, afterWait: false, lookAgain: nil)
    }

    // MARK: Sampled passes, failures, a replaced trim.lock (issue 24)

    @Test("a pass over more entries than one sample lists a sample and unlinks only its oldest share")
    func sampledPass() async throws {
        let dir = TemporaryDirectory("trim-sampled")
        let names = (0..<2000).map { "s\($0)" }
        let urls = try await Self.writeEntries(names, in: dir)
        let oldestFirst = names.shuffled()
        try Self.age(oldestFirst, urls)
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        let context = try cache.storageContext()
        let total = context.directory.state.payloadBytes
        // Over the budget, 12 % over its low-water mark: a full pass would unlink about 240 entries.
        let budget = StorageBudget(payloadBytes: Int64(Double(total) * 0.98))
        let trimmer = context.trimmer
        let pass = await BlockingWork.run { trimmer.trim(budget: budget, force: false, sampleEntries: 200) }
        let gone = Set(names).subtracting(Self.present(urls))
        #expect(pass.unlinked == gone.count)
        #expect(pass.unlinked > 0)
        // At most the sample's over-share (12 % of 200-odd), and only old entries: the oldest share of a
        // random sample is old in the whole directory.
        #expect(pass.unlinked <= 40, "a sampled pass unlinked \(pass.unlinked)")
        let rank = Dictionary(uniqueKeysWithValues: oldestFirst.enumerated().map { ($1, $0) })
        #expect(gone.allSatisfy { rank[$0]! < names.count * 4 / 10 }, "\(gone.map { rank[$0]! }.sorted())")
        let freed = gone.reduce(0) { $0 + Self.payload($1).utf8.count }
        #expect(context.directory.state.payloadBytes == total - Int64(freed))
    }

    @Test("a trim that fails after a write: the value is returned and stored, the failure counted")
    func trimFailureIsCountedNotThrown() async throws {
        let dir = TemporaryDirectory("trim-failure")
        _ = try await Self.writeEntries(["f1", "f2", "f3"], in: dir)
        let each = Self.payload("f1").utf8.count
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 3 * each)
        let directory = try cache.storageContext().directory
        let key = Maintenance.RootKey(directory)
        Maintenance.injectedFailures.withLock { $0[key] = SystemCallError(operation: "flock", errno: .ioError) }
        defer { _ = Maintenance.injectedFailures.withLock { $0.removeValue(forKey: key) } }
        var options = YCache.Options()
        options.writeFailurePolicy = .throwError
        let value = try await cache.value(for: CacheKey("f4"), codec: Self.codec, options: options) {
            Self.payload("f4")
        }
        #expect(value == Self.payload("f4"))
        #expect(cache.statistics.trimFailures == 1)
        #expect(cache.statistics.writeFailures == 0)
        #expect(directory.state.total(.trimFailures) == 1)
        #expect(
            try await YCache(storageDirectory: dir.url).valueIfCached(for: CacheKey("f4"), codec: Self.codec)
                == Self.payload("f4"))
    }

    @Test("a trimmer waiting for trim.lock while it is replaced again and again locks the last one")
    func trimLockReplacedWhileWaiting() async throws {
        let dir = TemporaryDirectory("trim-lock-replaced")
        let cache = YCache(storageDirectory: dir.url)
        let directory = try cache.storageContext().directory
        let path = dir.url.appendingPathComponent(Directory.trimLockFile).path
        func lockNew() throws -> Int32 {
            // A repair: a new file renamed over trim.lock (as TrimLock's own repair does), locked first.
            let staging = dir.url.appendingPathComponent("tmp/replacement").path
            let fd = open(staging, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0, flock(fd, LOCK_EX) == 0, rename(staging, path) == 0 else { throw CancellationError() }
            return fd
        }
        var held = try lockNew()
        // The acquisition blocks in flock: on a thread of its own, never the cooperative pool.
        let waiterThread = Mutex<String?>(nil)
        let waiting = Task {
            await BlockingWork.run { () -> Result<Void, SystemCallError> in
                waiterThread.withLock { $0 = Self.currentThreadFolder() }
                switch TrimLock.acquire(in: directory) {
                case .success(let lock):
                    lock.release()
                    return .success(())
                case .failure(let error): return .failure(error)
                }
            }
        }
        // Six replacements while it waits (it gave up after four before): each time it wakes on the old
        // file, finds the path names another, and waits on that one.
        for _ in 0..<6 {
            let inode = try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? UInt64 ?? 0
            // Its thread's own state says so; /proc/locks too, but a loaded parallel run's churn of other
            // locks may hide a line from a reader of that one list (a CI run under ASan missed it for 60 s
            // while the waiter went on to lock the last file).
            // Probed off the pool: /proc/locks has thousands of lines while other suites hold locks.
            #expect(
                await eventually(within: 60) {
                    let thread = waiterThread.withLock { $0 }
                    return await offPool {
                        thread.map { Self.isInFlock($0, inode: inode) } == true || Self.isBlockedOnFlock(inode: inode)
                    }
                })
            let next = try lockNew()
            flock(held, LOCK_UN)
            close(held)
            held = next
        }
        flock(held, LOCK_UN)
        close(held)
        let outcome = await result(of: Task { try await waiting.value.get() }, within: 60)
        #expect(throws: Never.self) { try outcome?.get() }
    }

    /// The calling thread's folder in /proc (`/proc/PID/task/TID`, what /proc/thread-self names).
    static func currentThreadFolder() -> String? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes {
            readlink("/proc/thread-self", $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1)
        }
        guard count > 0 else { return nil }
        return "/proc/" + String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Whether the thread whose /proc folder is `thread` is in flock(2) (its `syscall` file: the call's
    /// number, then its arguments) on a descriptor of the file with inode `inode`.
    static func isInFlock(_ thread: String, inode: UInt64) -> Bool {
        #if arch(x86_64)
            let flockCall = 73
        #else
            let flockCall = 32  // aarch64's generic table
        #endif
        guard let text = try? String(contentsOfFile: thread + "/syscall", encoding: .utf8) else { return false }
        let fields = text.split(separator: " ")
        guard fields.count > 1, Int(fields[0]) == flockCall, fields[1].hasPrefix("0x"),
            let descriptor = Int(fields[1].dropFirst(2), radix: 16)
        else { return false }
        var status = stat()
        return stat("/proc/self/fd/\(descriptor)", &status) == 0 && UInt64(status.st_ino) == inode
    }

    /// Whether some process is blocked in flock(2) on the file with inode `inode` (per /proc/locks).
    static func isBlockedOnFlock(inode: UInt64) -> Bool {
        // The census's reader: all of the file, merged over reads (ProcLocks).
        guard let locks = ProcLocks.read() else { return false }
        return locks.files.contains { $0.key.inode == inode && $0.value.waiters > 0 }
    }

    // MARK: Usage

    @Test("storageUsage recounts from the directory and reconciles both shared counters")
    func usageReconciles() async throws {
        let dir = TemporaryDirectory("trim-usage")
        let urls = try await Self.writeEntries(["u1", "u2", "u3"], in: dir)
        let cache = YCache(storageDirectory: dir.url)
        let state = try cache.storageContext().directory.state
        let each = Self.payload("u1").utf8.count
        #expect(state.usage == Int64(3 * Self.block))
        #expect(state.payloadBytes == Int64(3 * each))
        // Another party removes an entry behind our back, and leaves a file that is not an entry.
        try FileManager.default.removeItem(at: urls["u2"]!)
        try writeFile(Data("note".utf8), to: urls["u1"]!.deletingLastPathComponent().appendingPathComponent("README"))
        state.adjustUsage(by: 1_000_000)  // and the hints drifted
        state.adjustPayloadBytes(by: -1)
        let usage = try await cache.storageUsage()
        #expect(
            usage
                == YCache.StorageUsage(
                    byteCount: 2 * each, entryCount: 2, maximumByteCount: 128 << 20,
                    allocatedByteCount: Int64(2 * Self.block)))
        #expect(state.usage == usage.allocatedByteCount)
        #expect(state.payloadBytes == Int64(usage.byteCount))
    }

    @Test("a payload counter no scan has counted (a 0.1 state file) is counted by the first budgeted write")
    func uncountedPayloadCounter() async throws {
        let dir = TemporaryDirectory("trim-uncounted")
        _ = try await Self.writeEntries(["p1", "p2", "p3"], in: dir)
        let state = try YCache(storageDirectory: dir.url).storageContext().directory.state
        // What 0.1 leaves: no payload counter (the word is 0) and no flag saying it was counted.
        state.adjustPayloadBytes(by: -state.payloadBytes)
        state.clearAccountingFlagsForTesting()
        #expect(!state.isPayloadCounted)
        let each = Self.payload("p1").utf8.count
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 3 * each)
        try await cache.store(Self.payload("p4"), for: CacheKey("p4"), codec: Self.codec)
        #expect(state.isPayloadCounted)
        // Counted, the four entries were over the budget: the oldest went.
        #expect(state.payloadBytes <= Int64(3 * each))
        #expect(try await cache.storageUsage().entryCount == 2)
    }

    @Test("a scan lists only entry files in fan-out folders")
    func scanIgnoresStrangers() async throws {
        let dir = TemporaryDirectory("trim-scan")
        let urls = try await Self.writeEntries(["s1", "s2"], in: dir)
        let entries = dir.url.appendingPathComponent(Directory.entriesFolder)
        try FileManager.default.createDirectory(
            at: entries.appendingPathComponent("not-fan-out"), withIntermediateDirectories: true)
        try writeFile(Data(), to: entries.appendingPathComponent("not-fan-out/x.entry"))
        try writeFile(Data(), to: urls["s1"]!.deletingLastPathComponent().appendingPathComponent("x.staging"))
        try FileManager.default.createDirectory(
            at: urls["s1"]!.deletingLastPathComponent().appendingPathComponent("folder.entry"),
            withIntermediateDirectories: true)
        let scanned = try YCache(storageDirectory: dir.url).storageContext().files.scanEntries()
        #expect(
            Set(scanned.map { dir.url.appendingPathComponent($0.relative).path })
                == Set(urls.values.map(\.path)))
    }
}
