// The operator surface (`@_spi(Operator)`) and the shared counters in the state file: what every cache on
// a directory adds (all instances, all processes: the CLI pool tests check 8 processes), zeroing, the
// recorded budget, a fresh (or older) state file reading zeros, and the census of held and waited-on lock
// files read from /proc/locks.

import Foundation
import Glibc
import Testing

@_spi(Operator) @testable import YashimaShared

@Suite struct OperatorTests {
    @Test func countersSumEveryCacheOnTheDirectoryAndZero() async throws {
        let dir = TemporaryDirectory("counters")
        let first = YCache(storageDirectory: dir.url)
        let second = YCache(storageDirectory: dir.url)
        let storage = try first.storageOperator()
        // A fresh state file (as one written before the counters existed) reads zeros.
        #expect(
            storage.counters()
                == SharedCounters(
                    memoryHits: 0, storageHits: 0, misses: 0, generations: 0, sharedGenerations: 0, corruptEntries: 0,
                    writeFailures: 0, crossProcessTimeouts: 0, crossProcessLockFailures: 0, trimFailures: 0,
                    pressureTrims: 0,
                    savedNanoseconds: 0,
                    zeroedAt: nil))
        #expect(storage.recordedBudget == nil)

        let key = CacheKey(namespace: "counted", identity: "one")
        _ = try await first.data(for: key) { Data("value".utf8) }  // a miss, a generation
        _ = try await first.data(for: key) { Data("never".utf8) }  // a memory hit
        _ = try await second.data(for: key) { Data("never".utf8) }  // a storage hit, in another instance
        #expect(try await second.valueIfCached(for: CacheKey("absent"), codec: DataCodec()) == nil)
        storage.addSavedTime(nanoseconds: 1_500)
        var counters = storage.counters()
        #expect(counters.misses == 1)
        #expect(counters.generations == 1)
        #expect(counters.memoryHits == 1)
        #expect(counters.storageHits == 1)
        #expect(counters.savedNanoseconds == 1_500)
        // The same numbers as the instances' own statistics, summed.
        let sum = first.statistics.generations + second.statistics.generations
        #expect(counters.generations == UInt64(sum))

        let before = Date()
        storage.zeroCounters()
        counters = storage.counters()
        #expect(counters.generations == 0 && counters.memoryHits == 0 && counters.storageHits == 0)
        #expect(counters.misses == 0 && counters.savedNanoseconds == 0)
        #expect((counters.zeroedAt ?? .distantPast) >= before.addingTimeInterval(-1))
        // A new cache on the directory sees the zeroing; counting goes on from zero.
        let third = YCache(storageDirectory: dir.url)
        _ = try await third.data(for: key) { Data("never".utf8) }
        #expect(try third.storageOperator().counters().storageHits == 1)
    }

    @Test func countersAreWhereTheSpecSaysAndZeroingRecordsTheTime() async throws {
        let (dir, cache) = makeCache("counters-spec")
        _ = try await cache.data(for: CacheKey("spec")) { Data("v".utf8) }  // one miss, one generation
        let stateURL = dir.url.appendingPathComponent("state")
        func word(_ offset: Int) throws -> UInt64 {
            let state = try Data(contentsOf: stateURL)
            return state[offset..<(offset + 8)].withUnsafeBytes {
                UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self))
            }
        }
        // Docs/Format.md §1.2: stripe pid mod 32 at 41,088 + 128 × stripe, counter c at + 8 × c.
        let stripe = 41_088 + 128 * Int(getpid() % 32)
        #expect(try word(stripe + 8 * 2) == 1, "misses")
        #expect(try word(stripe + 8 * 3) == 1, "generations")
        #expect(try word(stripe + 8 * 1) == 0, "storage hits")
        #expect(try word(41_024) == 0, "never zeroed")
        try cache.storageOperator().zeroCounters()
        #expect(try word(stripe + 8 * 3) == 0)
        #expect(try word(41_024) > 1_700_000_000 * 1_000_000_000)
        try cache.storageOperator().recordBudget(123_456)
        #expect(try word(41_032) == 123_456)
    }

    @Test func theRecordedBudgetIsSharedByEveryCache() throws {
        let dir = TemporaryDirectory("budget")
        try YCache(storageDirectory: dir.url).storageOperator().recordBudget(10 << 30)
        #expect(try YCache(storageDirectory: dir.url).storageOperator().recordedBudget == 10 << 30)
        try YCache(storageDirectory: dir.url).storageOperator().recordBudget(Int64.max)
        #expect(try YCache(storageDirectory: dir.url).storageOperator().recordedBudget == Int64.max)
    }

    @Test func censusSeesHeldAndWaitedOnLockFiles() async throws {
        let dir = TemporaryDirectory("census")
        let cache = YCache(storageDirectory: dir.url)
        let storage = try cache.storageOperator()
        let directory = storage.directory
        // The census reads /proc/locks three times (thousands of lines while other suites hold locks):
        // off the pool, as its header says.
        #expect(await offPool { storage.census() }.lockFiles == 0)
        let path = directory.lockPath(forKeyDigest: CacheKey("in flight").stableDigest)
        guard
            case .acquired(let held) = try KeyLock.step(path, in: directory, afterWait: false, lookAgain: nil)
                as KeyLock.Step<Never>
        else {
            Issue.record("could not take the lock")
            return
        }
        var census = await offPool { storage.census() }
        #expect(census.lockFiles == 1)
        #expect(census.lockFilesHeld == 1)
        #expect(census.staleLockFiles == 0)
        // A lookup waiting for the lock (this process: its watch on the lock's folder) shows as one waiting
        // process.
        let begun = Gate()
        let waiter = Task {
            try await LockWait.$observer.withValue({ _ in begun.open() }) {
                try await LockWait.wait(for: path, in: directory, timeout: nil)
            }
        }
        #expect(await begun.wait(within: 60))
        #expect(await offPool { storage.census() }.waitingProcesses == 1)
        held.abandon()
        #expect(try await result(of: waiter, within: 60)?.get() == .released)
        #expect(await eventually(within: 30) { await offPool { storage.census() }.waitingProcesses == 0 })
        census = await offPool { storage.census() }
        #expect(census.lockFiles == 0 && census.lockFilesHeld == 0)
    }

    @Test("the census counts a lock any of its reads of /proc/locks shows (a read can skip a line)")
    func censusMergesItsReads() throws {
        // Three reads while locks come and go: the first skipped the held lock's line, the second the
        // line of one process waiting on another file, the third both of that file's lines.
        let held = "1: FLOCK  ADVISORY  WRITE 100 fd:01:5001 0 EOF"
        let other = "2: FLOCK  ADVISORY  WRITE 101 fd:01:5002 0 EOF"
        let firstWaiter = "2: -> FLOCK  ADVISORY  WRITE 102 fd:01:5002 0 EOF"
        let secondWaiter = "2: -> FLOCK  ADVISORY  WRITE 103 fd:01:5002 0 EOF"
        let shared = "3: FLOCK  ADVISORY  READ 104 fd:01:5003 0 EOF"
        let reads = [
            [other, firstWaiter, secondWaiter, shared], [held, other, secondWaiter, shared], [held, shared],
        ]
        .map { $0.joined(separator: "\n") }
        let file = { (inode: UInt64) in ProcLocks.File(major: 0xfd, minor: 1, inode: inode) }
        let one = ProcLocks(parsing: reads[0])
        #expect(one.files[file(5001)] == nil)  // what a single read can miss
        let merged = ProcLocks(merging: reads)
        #expect(merged.files[file(5001)]?.exclusive == true)
        #expect(merged.files[file(5002)]?.exclusive == true)
        #expect(merged.files[file(5002)]?.waitingProcesses == [102, 103])
        #expect(merged.files[file(5003)]?.shared == true && merged.files[file(5003)]?.exclusive == false)
        #expect(ProcLocks.reads >= 2)
        // And the census reads the real file: a lock this process holds is seen.
        let dir = TemporaryDirectory("census-reads")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let ours = open(dir.url.appendingPathComponent("held.lock").path, O_RDWR | O_CREAT, 0o600)
        defer { close(ours) }
        try #require(ours >= 0 && flock(ours, LOCK_EX) == 0)
        guard case .success(let status) = Syscall.status(of: ours) else { throw CancellationError() }
        #expect(ProcLocks.read()?.use(of: status).exclusive == true)
    }

    @Test("listing streams every entry from its header; the census and the name count agree with it")
    func streamingListingAndCensus() async throws {
        let dir = TemporaryDirectory("listing")
        let cache = YCache(storageDirectory: dir.url)
        for index in 0..<300 {
            let key = CacheKey(namespace: index % 3 == 0 ? "a" : "b", identity: "k\(index)")
            _ = try await cache.data(for: key) { Data(count: index) }
        }
        let storage = try cache.storageOperator()
        var seen: [OperatorEntry] = []
        var folders = 0
        let unreadable = storage.forEachEntry(inNamespace: nil, progress: { folders = $0.foldersDone }) {
            seen.append($0)
            return true
        }
        #expect(unreadable == 0 && seen.count == 300 && folders > 0)
        #expect(seen.allSatisfy { $0.stableIdentifier == $0.key.stableIdentifier })
        #expect(Set(seen.map(\.key.identity)).count == 300)
        #expect(seen.first { $0.key.identity == "k7" }?.payloadByteCount == 7)
        var stoppedAfter = 0
        storage.forEachEntry(inNamespace: "a") { _ in
            stoppedAfter += 1
            return stoppedAfter < 5
        }
        #expect(stoppedAfter == 5)
        #expect(storage.countEntryFiles() == (300, true))
        // With no time to list more than the first folder, the count is an estimate from it.
        let estimate = storage.countEntryFiles(within: .zero)
        #expect(!estimate.exact && estimate.count >= 0)
        let census = storage.entryCensus()
        #expect(census.entries == 300 && census.unreadableEntries == 0)
        #expect(census.namespaces["a"]?.entries == 100 && census.namespaces["b"]?.entries == 200)
        #expect(census.bytes == seen.reduce(0) { $0 + $1.allocatedByteCount })
        // A damaged header counts as unreadable in both.
        let victim = dir.url.appendingPathComponent(seen[0].relativePath)
        let handle = try FileHandle(forWritingTo: victim)
        try handle.seek(toOffset: 20)
        try handle.write(contentsOf: Data([0xFF, 0xFF]))
        try handle.close()
        #expect(storage.entryCensus().unreadableEntries == 1)
        #expect(storage.entries(inNamespace: nil).unreadableCount == 1)
    }

    @Test func procLocksParsing() {
        let text = """
            1: POSIX  ADVISORY  WRITE 8026 fe:00:5357700 1073741824 1073742335
            2: FLOCK  ADVISORY  WRITE 9505 fe:00:16269984 0 EOF
            2: -> FLOCK  ADVISORY  READ 9520 fe:00:16269984 0 EOF
            2: -> FLOCK  ADVISORY  READ 9521 fe:00:16269984 0 EOF
            3: FLOCK  ADVISORY  READ 9600 103:1a:42 0 EOF
            """
        let locks = ProcLocks(parsing: text)
        let held = locks.files[ProcLocks.File(major: 0xfe, minor: 0, inode: 16_269_984)]
        #expect(held?.exclusive == true && held?.waiters == 2)
        let shared = locks.files[ProcLocks.File(major: 0x103, minor: 0x1a, inode: 42)]
        #expect(shared?.shared == true && shared?.exclusive == false)
        #expect(locks.files[ProcLocks.File(major: 0xfe, minor: 0, inode: 5_357_700)] == nil, "POSIX locks are not ours")
    }
}
