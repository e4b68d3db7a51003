// RemoteBoundTests.swift: the bounds of issue 22 below the CLI. A holder whose store-and-release fails still
// releases its lease (a separate call, past the breaker) and the waiter is woken at once, not at the lease's
// expiry; breakers with the same label on one board are one breaker (open for all, one probe for all, a
// time from before a reboot taken as passed); two caches on one directory share a hung server's breaker.

import Foundation
import Synchronization
import Testing

@_spi(Operator) @testable import YashimaShared

/// A board in this process's memory: what the state file's slots are to processes, to breakers here.
final class MemoryBoard: MachineBoard {
    private let slots = Mutex<[UInt64: ProcessBreakerWords]>([:])
    let counted = Mutex<[RemoteStatistics.Counter: Int]>([:])

    func withBreakerWords<T>(id: UInt64, label: String, _ body: (UnsafeMutablePointer<Int64>) -> T) -> T? {
        let words = slots.withLock { slots in
            if let words = slots[id] { return words }
            let words = ProcessBreakerWords()
            slots[id] = words
            return words
        }
        return body(words.words)
    }

    func count(_ counter: RemoteStatistics.Counter, _ amount: Int) {
        counted.withLock { $0[counter, default: 0] += amount }
    }
}

@Suite("Remote bounds: one breaker per machine, the release after a failed store")
struct RemoteBreakerSharingTests {
    private func breaker(_ label: String, _ board: MachineBoardLink, _ clock: TestClock) -> RemoteCircuitBreaker {
        RemoteCircuitBreaker(
            cooldown: .milliseconds(100), maximumCooldown: .milliseconds(400), probeWindow: .milliseconds(50),
            label: label, board: board, now: clock.function)
    }

    @Test("breakers with one label on one board are one breaker: open for all, one probe for all")
    func sharedWords() {
        let clock = TestClock()
        let link = MachineBoardLink()
        link.attach(MemoryBoard())
        let (first, second) = (breaker("redis a:1/0 reads", link, clock), breaker("redis a:1/0 reads", link, clock))
        let other = breaker("redis b:1/0 reads", link, clock)
        let admitted = first.admit()
        first.record(success: false, admission: admitted, failure: .timeout)
        #expect(second.admit() == .bypass)  // the second "process" never calls the hung server
        #expect(second.state == .open(until: clock.now + 100_000_000))
        #expect(other.admit() == .proceed(isProbe: false))  // another server: its own breaker
        clock.advance(milliseconds: 100)
        let probe = second.admit()
        #expect(probe == .proceed(isProbe: true))
        #expect(first.admit() == .bypass)  // one probe for all
        #expect(first.state == .halfOpen)
        second.record(success: true, admission: probe)
        #expect(first.state == .closed && first.admit() == .proceed(isProbe: false))
        // A probe whose caller died: after the probe window, another caller probes.
        let again = first.admit()
        first.record(success: false, admission: again)
        clock.advance(milliseconds: 100)
        #expect(first.admit() == .proceed(isProbe: true))
        #expect(second.admit() == .bypass)
        clock.advance(milliseconds: 50)
        #expect(second.admit() == .proceed(isProbe: true))
    }

    @Test("a time further ahead than the longest cooldown (a state file from before a reboot) is taken as passed")
    func staleTimes() {
        let clock = TestClock()
        let link = MachineBoardLink()
        let board = MemoryBoard()
        link.attach(board)
        let shared = breaker("redis c:1/0 writes", link, clock)
        _ = board.withBreakerWords(id: shared.identity, label: shared.label) { words in
            words[RemoteCircuitBreaker.Word.openUntil] = clock.now + 3_600_000_000_000
            words[RemoteCircuitBreaker.Word.probeUntil] = clock.now + 3_600_000_000_000
        }
        #expect(shared.admit() == .proceed(isProbe: true))
    }

    @Test("without a board, or before one is attached, each breaker keeps its own words")
    func processWords() {
        let clock = TestClock()
        let link = MachineBoardLink()
        let (first, second) = (breaker("redis d:1/0 reads", link, clock), breaker("redis d:1/0 reads", link, clock))
        first.record(success: false, admission: first.admit())
        #expect(second.admit() == .proceed(isProbe: false))
        link.attach(MemoryBoard())
        #expect(first.admit() == .proceed(isProbe: false))  // the board's words start closed
    }

    @Test("a store's counters reach the machine's board")
    func countsReachTheBoard() {
        let board = MemoryBoard()
        let statistics = RemoteStatistics()
        statistics.add(.hits)
        statistics.board.attach(board)
        statistics.add(.hits, 2)
        statistics.addRejection(.unsigned)
        let counted = board.counted.withLock { $0 }
        #expect(counted[.hits] == 2 && counted[.rejectedUnsigned] == 1 && counted[.rejectedValues] == 1)
        #expect(statistics.snapshot[.hits] == 3)
    }
}

@Suite("Remote bounds against Redis", .redisServer, .serialized)
struct RemoteBoundTests {
    /// The thread the release test's own steps run on: it must lift the pause while the holder's release
    /// (one operation timeout) still runs, and on the cooperative pool, which the rest of a parallel run
    /// keeps busy, its next step came too late.
    static let driving = DedicatedThreadExecutor()

    /// The holder's store-and-release times out (writes paused, operation timeout 8 s): its lease is
    /// released by a separate call, which gets through as soon as writes resume (the test resumes them once
    /// the holder is releasing), and the waiter is woken by it — not by the lease's expiry (120 s here),
    /// which is what it waited for before. Ordered by what the holder did, not by the clock.
    @Test("a failed store-and-release still releases the lease: the waiter is woken at once")
    func releaseAfterFailedStore() async throws {
        try await withTaskExecutorPreference(Self.driving) { try await releaseAfterFailedStoreSteps() }
    }

    private func releaseAfterFailedStoreSteps() async throws {
        let server = try await RedisServer.start()
        let configure = { (configuration: inout RedisConfiguration) in
            configuration.policy.operationTimeout = .seconds(8)
            configuration.leaseTimeToLive = .seconds(120)
            configuration.waitRecheckInterval = .seconds(100)
        }
        let holder = try makeStore(server, configure)
        let waiter = try makeStore(server, configure)
        let id = entryIdentity("paused-store")
        let lease = try #require(await holder.acquireLease(id).lease)
        let (waiting, _) = await waiter.waiting(for: id, timeout: .seconds(110))
        #expect(try await server.run(["CLIENT", "PAUSE", "100000", "WRITE"]).isOK)
        let storing = Task(executorPreference: Self.driving) {
            await holder.storeAndRelease(id, payload: payload(100), createdAt: 1, expiresAt: 0, lease: lease)
        }
        // The store timed out: the holder now releases its lease by a separate call, blocked by the pause.
        #expect(await eventually(within: 60) { holder.statistics.snapshot[.releasesAfterFailedStore] == 1 })
        #expect(try await server.run(["CLIENT", "UNPAUSE"]).isOK)
        let resumed = ContinuousClock.now
        #expect(await storing.value == .unavailable)
        let outcome = await waiting.value
        let woken = resumed.duration(to: .now)
        print("store-and-release under CLIENT PAUSE WRITE: the waiter woken \(woken) after writes resumed")
        #expect(outcome == .leaseFree(notified: true), "\(outcome)")
        #expect(woken < .seconds(30), "the waiter was woken after \(woken), not by the release")
        #expect(try await server.exists(holder.keys(for: id).lease) == false)
        await server.stop()
    }

    /// Two caches on one storage directory (two processes, as the state file sees them) and a hung
    /// Redis: the first pays the operation timeout and marks the server down for the directory; the second
    /// skips it at no cost. After the cooldown one probe by the second closes the breaker for the first too.
    @Test("two caches on one directory share a hung server's breaker; one probe closes it for both")
    func sharedThroughTheStateFile() async throws {
        let server = try await RedisServer.start()
        let directory = TemporaryDirectory("shared-breaker")
        // A cooldown longer than a loaded machine can delay the second call (then it would be a probe).
        let remote = try testRemote(server) {
            $0.operationTimeout = .milliseconds(500)
            $0.breakerCooldown = .seconds(8)
        }
        let (first, second) = (
            YCache(storageDirectory: directory.url, remote: remote),
            YCache(storageDirectory: directory.url, remote: remote)
        )
        let codec = DataCodec()
        await server.pause()
        let started = ContinuousClock.now
        _ = try await first.value(for: CacheKey("hung-1"), codec: codec) { payload(10) }
        let firstTook = started.duration(to: .now)
        let secondStarted = ContinuousClock.now
        _ = try await second.value(for: CacheKey("hung-2"), codec: codec) { payload(11) }
        let secondTook = secondStarted.duration(to: .now)
        print("hung Redis: the first cache's call took \(firstTook), the second's \(secondTook)")
        #expect(first.statistics.remoteTimeouts == 1)
        // The second never waited on the hung server: no timeout of its own, its calls bypassed.
        #expect(second.statistics.remoteTimeouts == 0 && second.statistics.remoteBypassedCalls >= 1)
        let guardOfFirst = try #require(first.remoteValues).remoteGuard
        server.resume()
        // The second cache's probes (a lookup probes reads, a store writes) close the breakers the first
        // cache reads too. Under load a lookup can come just before the cooldown's end and its store just
        // after: then the read side closes on a later call; so ask until both are closed.
        #expect(
            try await eventually(within: 60) {
                _ = try await second.value(for: CacheKey("probe-\(UUID())"), codec: codec) { payload(12) }
                return guardOfFirst.breaker(scope: 0, access: .read).state == .closed
                    && guardOfFirst.breaker(scope: 0, access: .write).state == .closed
            })
        #expect(second.statistics.remotePuts > 0)
        let counters = try first.storageOperator().remoteCounters()
        #expect(counters.timeouts == 1 && counters.bypassed >= 1 && counters.stores >= 1, "\(counters)")
        await server.stop()
    }
}
