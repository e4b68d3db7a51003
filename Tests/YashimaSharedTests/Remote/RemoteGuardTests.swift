// RemoteGuardTests.swift: the circuit breaker on a test clock (closed, open, half-open single probe,
// doubling cooldown), the guard's classification of failures (server-wide, writes only, one key),
// read-only mode, the statistics, the configuration's validation, and the lease renewal loop against
// a scripted renew function. No server: these are the pieces shared with the HTTP backend.

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let time = Atomic<Int64>(1_000_000_000)
    var now: Int64 { time.load(ordering: .relaxed) }
    func advance(milliseconds: Int64) { time.add(milliseconds * 1_000_000, ordering: .relaxed) }
    var function: @Sendable () -> Int64 { { self.now } }
}

@Suite("Remote circuit breaker and guard")
struct RemoteGuardTests {
    @Test("one failure opens; after the cooldown exactly one probe; success closes")
    func breaker() {
        let clock = TestClock()
        let breaker = RemoteCircuitBreaker(
            cooldown: .milliseconds(100), maximumCooldown: .milliseconds(300), now: clock.function)
        let first = breaker.admit()
        #expect(first == .proceed(isProbe: false))
        let concurrent = breaker.admit()
        breaker.record(success: false, admission: first)
        #expect(breaker.state == .open(until: clock.now + 100_000_000))
        #expect(breaker.admit() == .bypass)
        breaker.record(success: true, admission: concurrent)  // old news: stays open
        #expect(breaker.admit() == .bypass)
        clock.advance(milliseconds: 100)
        let probe = breaker.admit()
        #expect(probe == .proceed(isProbe: true))
        #expect(breaker.state == .halfOpen)
        #expect(breaker.admit() == .bypass)
        breaker.record(success: false, admission: probe)  // cooldown doubles to 200 ms
        clock.advance(milliseconds: 150)
        #expect(breaker.admit() == .bypass)
        clock.advance(milliseconds: 50)
        let second = breaker.admit()
        #expect(second == .proceed(isProbe: true))
        breaker.record(success: false, admission: second)  // 400 ms, capped at 300
        clock.advance(milliseconds: 299)
        #expect(breaker.admit() == .bypass)
        clock.advance(milliseconds: 1)
        let third = breaker.admit()
        breaker.record(success: true, admission: third)
        #expect(breaker.state == .closed)
        let after = breaker.admit()
        breaker.record(success: false, admission: after)  // back to the initial cooldown
        clock.advance(milliseconds: 100)
        #expect(breaker.admit() == .proceed(isProbe: true))
    }

    private func makeGuard(readOnly: Bool = false, clock: TestClock = TestClock()) -> RemoteGuard {
        var policy = RemotePolicy()
        policy.readOnly = readOnly
        policy.breakerCooldown = .milliseconds(100)
        return RemoteGuard(policy: policy, scopes: 2, statistics: RemoteStatistics(), now: clock.function)
    }

    @Test("server failures bypass reads and writes of that scope only; timeouts are counted apart")
    func serverFailures() async {
        let guarded = makeGuard()
        let failed: RemoteAttempt<Int> = await guarded.perform(scope: 0, access: .read) {
            (_) throws(RemoteError) -> Int in
            throw .timedOut
        }
        guard case .unavailable = failed else {
            Issue.record("expected unavailable")
            return
        }
        let bypassedRead = guarded.performBlocking(scope: 0, access: .read) { (_) throws(RemoteError) -> Int in 1 }
        let bypassedWrite = guarded.performBlocking(scope: 0, access: .write) { (_) throws(RemoteError) -> Int in 1 }
        let otherScope = guarded.performBlocking(scope: 1, access: .write) { (_) throws(RemoteError) -> Int in 7 }
        guard case .unavailable = bypassedRead, case .unavailable = bypassedWrite, case .completed(7) = otherScope
        else {
            Issue.record("expected scope 0 bypassed, scope 1 working")
            return
        }
        let counts = guarded.statistics.snapshot
        #expect(counts[.timeouts] == 1 && counts[.errors] == 0 && counts[.bypassed] == 2)
        _ = guarded.performBlocking(scope: 1, access: .write) { (_) throws(RemoteError) -> Int in
            throw .redis(.server(RedisErrorReply(line: "NOAUTH Authentication required.")))
        }
        #expect(guarded.statistics.snapshot[.errors] == 1)
        #expect(guarded.breaker(scope: 1, access: .read).state != .closed)
    }

    @Test("OOM, READONLY and MISCONF bypass writes only; WRONGTYPE and oversized replies are key misses")
    func scopedFailures() {
        let guarded = makeGuard()
        for line in ["OOM command not allowed", "READONLY replica", "MISCONF no disk"] {
            let guarded = makeGuard()
            _ = guarded.performBlocking(scope: 0, access: .write) { (_) throws(RemoteError) -> Int in
                throw .redis(.server(RedisErrorReply(line: line)))
            }
            #expect(guarded.breaker(scope: 0, access: .write).state != .closed, "\(line)")
            #expect(guarded.breaker(scope: 0, access: .read).state == .closed, "\(line)")
            let read = guarded.performBlocking(scope: 0, access: .read) { (_) throws(RemoteError) -> Int in 3 }
            guard case .completed(3) = read else {
                Issue.record("read bypassed after \(line)")
                return
            }
        }
        for error in [RemoteError.redis(.server(RedisErrorReply(line: "WRONGTYPE x"))), .replyTooLarge] {
            let attempt = guarded.performBlocking(scope: 0, access: .read) { (_) throws(RemoteError) -> Int in
                throw error
            }
            guard case .keyFailure(error) = attempt else {
                Issue.record("expected key failure for \(error)")
                return
            }
        }
        #expect(guarded.breaker(scope: 0, access: .read).state == .closed)
        #expect(guarded.statistics.snapshot[.errors] == 0)
    }

    @Test("read-only mode never calls a write")
    func readOnly() {
        let guarded = makeGuard(readOnly: true)
        let called = Atomic<Bool>(false)
        let write = guarded.performBlocking(scope: 0, access: .write) { (_) throws(RemoteError) -> Int in
            called.store(true, ordering: .relaxed)
            return 1
        }
        guard case .unavailable = write else {
            Issue.record("write ran")
            return
        }
        let wasCalled = called.load(ordering: .relaxed)
        #expect(!wasCalled)
        let read = guarded.performBlocking(scope: 0, access: .read) { (_) throws(RemoteError) -> Int in 2 }
        guard case .completed(2) = read else {
            Issue.record("read bypassed")
            return
        }
    }

    @Test("the deadline given to an operation is at most the operation timeout")
    func deadlines() {
        let guarded = makeGuard()
        let far = RemoteDeadline.after(.seconds(3600))
        let attempt = guarded.performBlocking(scope: 0, access: .read, deadline: far) {
            (deadline) throws(RemoteError) -> Int64 in
            deadline.remainingNanoseconds
        }
        guard case .completed(let remaining) = attempt else {
            Issue.record("not run")
            return
        }
        #expect(remaining <= RemotePolicy().operationTimeout.remoteNanoseconds)
        #expect(RemoteDeadline.after(.milliseconds(-5)).hasPassed)
        #expect(RemoteDeadline.after(.zero).pollMilliseconds == nil)
        #expect(Duration.seconds(Int64.max).remoteNanoseconds == Int64.max / 2)
    }

    @Test("a timeout caused by the caller's own shorter deadline does not open the breaker")
    func callerDeadline() {
        let guarded = makeGuard()
        let short = RemoteDeadline.after(.milliseconds(1))
        let attempt = guarded.performBlocking(scope: 0, access: .read, deadline: short) {
            (_) throws(RemoteError) -> Int in
            throw .timedOut
        }
        guard case .unavailable = attempt else {
            Issue.record("expected unavailable")
            return
        }
        #expect(guarded.breaker(scope: 0, access: .read).state == .closed)
        let passed = guarded.performBlocking(scope: 0, access: .read, deadline: .after(.zero)) {
            (_) throws(RemoteError) -> Int in 1
        }
        guard case .unavailable = passed else {
            Issue.record("ran past the caller's deadline")
            return
        }
        let full = guarded.performBlocking(scope: 0, access: .read) { (_) throws(RemoteError) -> Int in throw .timedOut
        }
        guard case .unavailable = full else { return }
        #expect(guarded.breaker(scope: 0, access: .read).state != .closed)
    }

    @Test("a call no I/O thread takes by its deadline ends then, unmade, with no verdict on the breaker")
    func queuedCallEndsAtItsDeadline() async {
        // An I/O pool of one thread, held by the test (a pool of its own: the shared one serves the other
        // suites). The guarded call queued behind it must end at its 300 ms deadline, not when the thread
        // comes free: before, it waited for the thread (8 long transfers held every caller of a process).
        let io = RemoteIO(maximumThreads: 1)
        let (holding, release) = (Gate(), DispatchSemaphore(value: 0))
        io.submit {
            holding.open()
            release.wait()
        }
        defer { release.signal() }
        #expect(await holding.wait(within: 30))
        var policy = RemotePolicy()
        policy.operationTimeout = .milliseconds(300)
        let statistics = RemoteStatistics()
        let guarded = RemoteGuard(policy: policy, scopes: 1, statistics: statistics, io: io)
        let ran = Atomic<Bool>(false)
        let ended = Mutex<(at: Int64, attempt: RemoteAttempt<Int>)?>(nil)
        let called = Syscall.monotonicNanoseconds
        guarded.start(
            scope: 0, access: .read,
            { (_) throws(RemoteError) -> Int in
                ran.store(true, ordering: .relaxed)
                return 1
            },
            completion: { attempt in ended.withLock { $0 = (Syscall.monotonicNanoseconds, attempt) } })
        #expect(await eventually(within: 30) { ended.withLock { $0 != nil } }, "it waited for the busy thread")
        release.signal()
        guard let (at, attempt) = ended.withLock({ $0 }) else { return }
        guard case .unavailable = attempt else {
            Issue.record("\(attempt)")
            return
        }
        let made = ran.load(ordering: .relaxed)
        #expect(!made, "the call was made past its deadline")
        // Ended by the expiry thread (its own, not the cooperative pool): at the deadline, late only by
        // that thread's scheduling (a generous 10 s for a loaded machine).
        let seconds = Double(at - called) / 1e9
        #expect(seconds >= 0.3 && seconds < 0.3 + 10, "ended after \(seconds) s")
        #expect(statistics.snapshot[.timeouts] == 1)
        #expect(guarded.breaker(scope: 0, access: .read).state == .closed)  // the server was never asked
        // Once the thread is free, calls run as before.
        let later: RemoteAttempt<Int> = await guarded.perform(scope: 0, access: .read) {
            (_) throws(RemoteError) -> Int in 2
        }
        guard case .completed(2) = later else {
            Issue.record("\(later)")
            return
        }
    }

    @Test("configuration validation")
    func configuration() throws {
        var good = try RedisConfiguration(urls: ["redis://h:1"], environment: [:])
        try good.validate()
        #expect(good.secret == nil)
        #expect(
            try RedisConfiguration(urls: ["redis://h"], environment: [RemoteSecret.environmentVariable: "s"]).secret
                != nil)
        #expect(good.renewalInterval == .seconds(2) / 3)
        good.keyPrefix = "a{b"
        #expect(throws: RedisConfigurationError.invalidKeyPrefix) { try good.validate() }
        var ttl = try RedisConfiguration(urls: ["redis://h"], environment: [:])
        ttl.leaseTimeToLive = .milliseconds(10)
        #expect(throws: RedisConfigurationError.invalidTimeToLive) { try ttl.validate() }
        var cap = try RedisConfiguration(urls: ["redis://h"], environment: [:])
        cap.policy.maximumValueBytes = -1
        #expect(throws: RedisConfigurationError.invalidValueCap) { try cap.validate() }
        let cluster = try RedisConfiguration(urls: ["redis://h/2"], cluster: true, environment: [:])
        #expect(throws: RedisConfigurationError.clusterDatabaseNotZero) { try cluster.validate() }
        #expect(throws: RedisConfigurationError.invalidURL(.invalidPort)) {
            try RedisConfiguration(urls: ["redis://h:0"], environment: [:])
        }
        #expect(throws: RedisConfigurationError.invalidKeyPrefix) {
            var config = try RedisConfiguration(urls: ["redis://h"], environment: [:])
            config.keyPrefix = ""
            _ = try RedisRemoteStore(configuration: config)
        }
    }
}

@Suite("Lease renewal loop")
struct LeaseRenewalTests {
    let ttl = Duration.milliseconds(60)

    @Test("renews until stopped")
    func renewsUntilStopped() async {
        let renewals = Counter()
        let enough = Gate()
        let renewal = LeaseRenewal(timeToLive: ttl, interval: .milliseconds(5)) {
            if renewals.increment() == 3 { enough.open() }
            return .renewed
        }
        #expect(await enough.wait(within: 30))
        #expect(await renewal.stop() == .stopped)
        let count = renewals.value
        try? await Task.sleep(for: .milliseconds(30))
        #expect(renewals.value <= count + 1)
        #expect(!renewal.isLost)
    }

    @Test("renews on a thread of its own: no renewal runs in a task (on the cooperative pool), all on one thread")
    func notStarvedByBusyPool() async {
        // Seen from inside the renewals rather than by filling the pool with spinners: spinners on every
        // pool thread stalled every other suite of a parallel run for as long as they spun.
        let seen = Mutex<(inTask: Bool, threads: Set<UInt>)>((false, []))
        let (renewals, enough) = (Counter(), Gate())
        let renewal = LeaseRenewal(timeToLive: ttl, interval: .milliseconds(5)) {
            let inTask = withUnsafeCurrentTask { $0 != nil }
            seen.withLock {
                $0.inTask = $0.inTask || inTask
                $0.threads.insert(UInt(pthread_self()))
            }
            if renewals.increment() == 5 { enough.open() }
            return .renewed
        }
        #expect(await enough.wait(within: 30))
        await renewal.stop()
        let (inTask, threads) = seen.withLock { ($0.inTask, $0.threads) }
        #expect(!inTask, "a renewal ran in a task: on the cooperative pool")
        #expect(threads.count == 1, "the renewals ran on \(threads.count) threads")
    }

    @Test("reports a lost lease once, and stops")
    func reportsLoss() async {
        let lost = Gate()
        let reports = Counter()
        let renewal = LeaseRenewal(
            timeToLive: ttl, interval: .milliseconds(5), renew: { .lost },
            onLost: {
                reports.increment()
                lost.open()
            })
        #expect(await lost.wait(within: 30))
        #expect(renewal.isLost)
        #expect(await renewal.stop() == .lost)
        #expect(reports.value == 1)
    }

    @Test("an unreachable server for a whole TTL counts as a lost lease")
    func unreachable() async {
        let lost = Gate()
        let renewal = LeaseRenewal(
            timeToLive: ttl, interval: .milliseconds(5), renew: { .unavailable }, onLost: { lost.open() })
        #expect(await lost.wait(within: 30))
        #expect(renewal.current == .lost)
    }
}
