// S3FaultTests.swift: the S3 backend under faults a real server cannot stage (FaultyHTTPServer speaking for an
// S3 endpoint): 500 and 503 (server errors: bypassed for the cooldown), 403 (an authentication failure), and
// throttles (429, 503 SlowDown, with and without Retry-After, as seconds and as a date): both breakers open
// for exactly the Retry-After on every store sharing the machine's board, bounded by the longest cooldown,
// whatever the request (lookup, store, lease). And slow: SeaweedFS behind a DelayProxy, within the timeout
// (hits) and past it (unavailable by the deadline, then bypassed). Never a thrown error or a wrong value.

import Foundation
import Testing

@testable import YashimaShared

/// An S3 store whose endpoint is `server` (path-style, test credentials), on `clock`.
private func fakeS3Store(
    _ server: FaultyHTTPServer, clock: TestClock, board: MachineBoardLink? = nil,
    _ configure: (inout S3Configuration) -> Void = { _ in }
) throws -> S3RemoteStore {
    var configuration = try S3Configuration(
        url: "s3://bucket/prefix?endpoint=http://127.0.0.1:\(server.port)&region=us-east-1",
        environment: [S3Configuration.accessKeyVariable: "AKID", S3Configuration.secretKeyVariable: "secret"])
    configuration.policy.operationTimeout = .seconds(5)
    configuration.policy.connectTimeout = .seconds(1)
    configuration.policy.breakerCooldown = .milliseconds(100)
    configuration.policy.maximumBreakerCooldown = .seconds(60)
    configure(&configuration)
    let store = try S3RemoteStore(configuration: configuration, now: clock.function)
    if let board { store.statistics.board.attach(board.current!) }
    return store
}

/// S3's throttling answer: 503 with the `SlowDown` error document.
private let slowDown = """
    <?xml version="1.0" encoding="UTF-8"?>
    <Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>
    """

private func acquired(_ acquisition: consuming RemoteLeaseAcquisition) -> Bool {
    switch consume acquisition {
    case .acquired: return true
    default: return false
    }
}

private func unavailable(_ acquisition: consuming RemoteLeaseAcquisition) -> Bool {
    switch consume acquisition {
    case .unavailable: return true
    default: return false
    }
}

@Suite("S3 faults (a fake S3 endpoint)")
struct S3FaultTests {
    @Test("500 and a plain 503: server errors, bypassed for the cooldown, one probe; 403: authentication failed")
    func serverErrors() async throws {
        let clock = TestClock()
        let id = entryIdentity("s3-500")
        for status in [500, 503] {
            let server = try FaultyHTTPServer(.status(status))
            defer { server.stop() }
            let store = try fakeS3Store(server, clock: clock)
            #expect(await store.lookup(id) == .unavailable)
            #expect(await store.store(id, payload: payload(10), createdAt: 1, expiresAt: 0) == .unavailable)
            #expect(server.requestCount == 1, "the store after a failed lookup was bypassed")
            let counts = store.statistics.snapshot
            #expect(counts[.errors] == 1 && counts[.throttled] == 0 && counts[.bypassed] == 1)
            #expect(store.remoteGuard.breaker(scope: 0, access: .read).state == .open(until: clock.now + 100_000_000))
            #expect(store.remoteGuard.breaker(scope: 0, access: .write).state == .open(until: clock.now + 100_000_000))
            server.change(to: .status(404))
            clock.advance(milliseconds: 100)
            #expect(await store.lookup(id) == .miss(.absent))
            #expect(store.remoteGuard.breaker(scope: 0, access: .read).state == .closed)
        }
        let forbidden = try FaultyHTTPServer(.status(403))
        defer { forbidden.stop() }
        let denied = try fakeS3Store(forbidden, clock: clock)
        #expect(await denied.lookup(id) == .unavailable)
        #expect(denied.statistics.snapshot[.authenticationFailures] == 1)
        #expect(await denied.store(id, payload: payload(10), createdAt: 1, expiresAt: 0) == .unavailable)
        #expect(forbidden.requestCount == 1)
    }

    @Test("503 SlowDown with Retry-After: both breakers open for exactly that long, for every store on the board")
    func slowDownWithRetryAfter() async throws {
        let server = try FaultyHTTPServer(.answer(503, headers: ["Retry-After: 2"], body: slowDown))
        defer { server.stop() }
        let clock = TestClock()
        let board = MachineBoardLink()
        board.attach(MemoryBoard())
        // Two stores on one board: two processes of one machine, sharing the breaker slots (I17).
        let (first, second) = (
            try fakeS3Store(server, clock: clock, board: board), try fakeS3Store(server, clock: clock, board: board)
        )
        let id = entryIdentity("s3-slowdown")
        #expect(await first.lookup(id) == .unavailable)
        let counts = first.statistics.snapshot
        #expect(counts[.throttled] == 1 && counts[.errors] == 1)
        let until = clock.now + 2_000_000_000  // the Retry-After, not the 100 ms cooldown
        for store in [first, second] {
            #expect(store.remoteGuard.breaker(scope: 0, access: .read).state == .open(until: until))
            #expect(store.remoteGuard.breaker(scope: 0, access: .write).state == .open(until: until))
        }
        // The other "process" never reaches the server while it asked to be left alone.
        #expect(await second.lookup(id) == .unavailable)
        #expect(await second.store(id, payload: payload(10), createdAt: 1, expiresAt: 0) == .unavailable)
        #expect(unavailable(await second.lease(for: id)))
        #expect(second.statistics.snapshot[.bypassed] == 3)
        clock.advance(milliseconds: 1_990)
        #expect(await second.lookup(id) == .unavailable)
        #expect(server.requestCount == 1)
        // Past it, one probe; the server is back: closed for everyone.
        server.change(to: .status(404))
        clock.advance(milliseconds: 10)
        #expect(await second.lookup(id) == .miss(.absent))
        #expect(server.requestCount == 2)
        #expect(first.remoteGuard.breaker(scope: 0, access: .read).state == .closed)
        #expect(await first.lookup(id) == .miss(.absent))
    }

    @Test("429 and 503 SlowDown on every request kind; Retry-After as a date; a long one bounded by the maximum")
    func throttles() async throws {
        let clock = TestClock()
        let id = entryIdentity("s3-429")
        // 429 with a Retry-After of an hour: held open for the longest cooldown (60 s here), not longer.
        let busy = try FaultyHTTPServer(.answer(429, headers: ["Retry-After: 3600"], body: ""))
        defer { busy.stop() }
        let throttled = try fakeS3Store(busy, clock: clock)
        #expect(await throttled.lookup(id) == .unavailable)
        #expect(
            throttled.remoteGuard.breaker(scope: 0, access: .read).state == .open(until: clock.now + 60_000_000_000))
        #expect(throttled.statistics.snapshot[.throttled] == 1)
        // Retry-After as an HTTP date 30 s ahead (whole seconds: 29 to 30 s from now).
        let date = httpDate(Syscall.realtimeNanoseconds / 1_000_000_000 + 30)
        let dated = try FaultyHTTPServer(.answer(503, headers: ["Retry-After: \(date)"], body: ""))
        defer { dated.stop() }
        let datedStore = try fakeS3Store(dated, clock: clock)
        #expect(await datedStore.lookup(id) == .unavailable)
        guard case .open(let until) = datedStore.remoteGuard.breaker(scope: 0, access: .read).state else {
            Issue.record("not open")
            return
        }
        #expect((28_000_000_000...30_000_000_000).contains(until - clock.now), "\(until - clock.now)")
        // A throttled store (503 SlowDown, no Retry-After): both breakers, for the cooldown; a failed write.
        let slow = try FaultyHTTPServer(.answer(503, headers: [], body: slowDown))
        defer { slow.stop() }
        let writer = try fakeS3Store(slow, clock: clock)
        #expect(await writer.store(id, payload: payload(10), createdAt: 1, expiresAt: 0) == .unavailable)
        let counts = writer.statistics.snapshot
        #expect(counts[.throttled] == 1 && counts[.failedWrites] == 1)
        #expect(writer.remoteGuard.breaker(scope: 0, access: .read).state == .open(until: clock.now + 100_000_000))
        #expect(writer.remoteGuard.breaker(scope: 0, access: .write).state == .open(until: clock.now + 100_000_000))
        // A throttled lease and removal: unavailable (the caller generates), never "held elsewhere".
        let leases = try fakeS3Store(busy, clock: clock)
        #expect(unavailable(await leases.lease(for: id)))
        #expect(leases.statistics.snapshot[.throttled] == 1)
        let remover = try fakeS3Store(busy, clock: clock)
        #expect(await remover.remove(id) == .unavailable)
        #expect(remover.statistics.snapshot[.throttled] == 1)
        #expect(!acquired(await remover.lease(for: id)))
    }

    @Test("Retry-After values: seconds, IMF dates, the rest refused")
    func retryAfterSyntax() {
        #expect(HTTPRetryAfter("120") == .seconds(120))
        #expect(HTTPRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT") == .date(784_111_777))
        #expect(HTTPRetryAfter("Thu, 01 Jan 1970 00:00:00 GMT") == .date(0))
        #expect(HTTPRetryAfter("Tue, 29 Feb 2028 23:59:59 GMT") == .date(1_835_481_599))
        for bad in [
            "", "-1", "1.5", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "9999999999999999999",
        ] {
            #expect(HTTPRetryAfter(bad) == nil, "\(bad)")
        }
        #expect(HTTPRetryAfter.seconds(2).nanoseconds(fromRealtime: 5) == 2_000_000_000)
        #expect(HTTPRetryAfter.date(100).nanoseconds(fromRealtime: 200_000_000_000) == 0)
        #expect(HTTPRetryAfter.date(100).nanoseconds(fromRealtime: 90_500_000_000) == 10_000_000_000)
        // Which answers are throttles.
        #expect(
            RemoteError.throttle(status: 429, retryAfter: nil, body: []) == .throttled(status: 429, retryAfter: nil))
        #expect(RemoteError.throttle(status: 503, retryAfter: nil, body: []) == nil)
        #expect(RemoteError.throttle(status: 503, retryAfter: nil, body: Array(slowDown.utf8)) != nil)
        #expect(RemoteError.throttle(status: 503, retryAfter: .seconds(1), body: []) != nil)
        #expect(RemoteError.throttle(status: 500, retryAfter: .seconds(1), body: Array(slowDown.utf8)) == nil)
    }

    @Test("a breaker held open by a throttle: extended, never shortened; the probe's throttle ends the probe")
    func breakerBackOff() {
        let clock = TestClock()
        let breaker = RemoteCircuitBreaker(
            cooldown: .milliseconds(100), maximumCooldown: .seconds(10), now: clock.function)
        breaker.record(success: false, admission: breaker.admit(), failure: .throttled, backOff: 3_000_000_000)
        #expect(breaker.state == .open(until: clock.now + 3_000_000_000))
        // A shorter throttle or an ordinary failure meanwhile does not shorten it; a longer one extends it.
        breaker.record(success: false, admission: .proceed(isProbe: false), failure: .throttled, backOff: 1_000_000_000)
        breaker.record(success: false, admission: .proceed(isProbe: false), failure: .timeout)
        #expect(breaker.state == .open(until: clock.now + 3_000_000_000))
        breaker.record(success: false, admission: .proceed(isProbe: false), failure: .throttled, backOff: 5_000_000_000)
        #expect(breaker.state == .open(until: clock.now + 5_000_000_000))
        clock.advance(milliseconds: 5_000)
        let probe = breaker.admit()
        #expect(probe == .proceed(isProbe: true))
        #expect(breaker.admit() == .bypass)
        breaker.record(success: false, admission: probe, failure: .throttled, backOff: 60_000_000_000)
        #expect(breaker.state == .open(until: clock.now + 10_000_000_000))  // bounded by the maximum
        clock.advance(milliseconds: 10_000)
        let next = breaker.admit()
        #expect(next == .proceed(isProbe: true))
        breaker.record(success: true, admission: next)
        #expect(breaker.state == .closed)
    }
}

/// `seconds` since 1970 as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
private func httpDate(_ seconds: Int64) -> String {
    var time = time_t(seconds)
    var parts = tm()
    gmtime_r(&time, &parts)
    var buffer = [CChar](repeating: 0, count: 64)
    let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

@Suite("S3 slow (SeaweedFS behind a delay proxy)", .seaweedServer)
struct S3SlowTests {
    @Test("slow within the timeout: stores and hits; slower than it: unavailable by the deadline, then bypassed")
    func slowServer() async throws {
        let server = try await SeaweedServer.start()
        let proxy = try DelayProxy(upstream: "127.0.0.1", upstreamPort: server.port, delay: .milliseconds(50))
        defer { proxy.stop() }
        var configuration = try s3Configuration(server, prefix: "slow-\(UInt32.random(in: 0...UInt32.max))")
        configuration.endpoint = try HTTPEndpoint.parse("http://127.0.0.1:\(proxy.port)", environment: [:])
        configuration.policy.operationTimeout = .seconds(20)
        let patient = try S3RemoteStore(configuration: configuration)
        let id = entryIdentity("slow")
        #expect(await patient.store(id, payload: payload(5_000), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await patient.lookup(id) == .hit(RemoteValue(payload: payload(5_000), createdAt: 1, expiresAt: 0)))
        // Slower than the operation timeout (a new connection pays 3 one-way delays): ends by its deadline.
        configuration.policy.operationTimeout = .milliseconds(500)
        configuration.policy.breakerCooldown = .seconds(600)
        configuration.policy.maximumBreakerCooldown = .seconds(600)
        let hurried = try S3RemoteStore(configuration: configuration)
        proxy.delay = .seconds(2)
        let start = Syscall.monotonicNanoseconds
        #expect(await hurried.lookup(id) == .unavailable)
        let elapsed = Double(Syscall.monotonicNanoseconds - start) / 1e9
        #expect(elapsed < 30, "no wait beyond the timeout (\(elapsed) s)")
        #expect(await hurried.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .unavailable)
        let counts = hurried.statistics.snapshot
        #expect(counts[.timeouts] == 1 && counts[.bypassed] == 1)
        proxy.delay = .zero
        #expect(await patient.lookup(id) == .hit(RemoteValue(payload: payload(5_000), createdAt: 1, expiresAt: 0)))
        await server.stop()
    }
}
