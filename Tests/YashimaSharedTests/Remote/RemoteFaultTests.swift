// RemoteFaultTests.swift: the tier's promise under faults, against real processes: Redis SIGKILLed
// mid-run and restarted empty; SIGSTOPped (a hang) longer than the timeout; a server that closes
// connections mid-reply, answers garbage or never answers; AUTH refused; maxmemory with noeviction
// (OOM) and a read-only replica (writes bypassed, reads go on). In every case: no wrong value, no
// error thrown, no wait beyond the timeouts (checked with a generous "does not hang" bound of 180 s: a
// missing deadline would hang forever; never a speed claim; under ASan with every suite at once a
// 300 ms deadline's continuation waited 39 s for one of the two pool threads), and the breaker
// bypasses the tier until a probe finds it back.

import Foundation
import Testing

@testable import YashimaShared

/// Runs `body` and returns its value with the elapsed seconds.
private func timed<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
    let start = Syscall.monotonicNanoseconds
    let value = try await body()
    return (value, Double(Syscall.monotonicNanoseconds - start) / 1e9)
}

@Suite("Remote faults", .redisServer)
struct RemoteFaultTests {
    @Test("SIGKILL mid-run: unavailable, then bypassed; restarted empty: misses, then works again")
    func killedAndRestarted() async throws {
        let server = try await RedisServer.start()
        let clock = TestClock()  // the breaker's clock: the cooldown passes only when the test says so
        let store = try makeStore(server, clock: clock)
        let id = entryIdentity("killed")
        #expect(await store.store(id, payload: payload(100), createdAt: 1, expiresAt: 0) == .stored)
        await server.kill()
        #expect(await store.lookup(id) == .unavailable)
        #expect(store.statistics.snapshot[.errors] == 1)
        #expect(await store.lookup(id) == .unavailable)
        #expect(await store.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .unavailable)
        #expect(await store.acquireLease(id) == .unavailable)
        #expect(await store.waitForRelease(id, timeout: .seconds(5)) == .unavailable)
        #expect(store.statistics.snapshot[.bypassed] == 4)
        #expect(store.statistics.snapshot[.errors] == 1)  // one call paid for the failure
        try await server.restart()
        #expect(await store.lookup(id) == .unavailable)  // still bypassed: the cooldown has not passed
        clock.advance(milliseconds: 100)
        #expect(await store.lookup(id) == .miss(.absent))  // the probe: restarted empty
        #expect(await store.store(id, payload: payload(100), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(100), createdAt: 1, expiresAt: 0)))
        await server.stop()
    }

    @Test("SIGSTOP longer than the timeout: calls fail by the deadline, then are bypassed at no cost")
    func hung() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server) {
            $0.policy.operationTimeout = .milliseconds(300)
            $0.policy.breakerCooldown = .seconds(600)  // stays open for the rest of the test
            $0.policy.maximumBreakerCooldown = .seconds(600)
        }
        let id = entryIdentity("hung")
        #expect(await store.store(id, payload: payload(100), createdAt: 1, expiresAt: 0) == .stored)
        await server.pause()
        let (outcomes, elapsed) = await timed {
            await withTaskGroup(of: RemoteLookup.self) { group in
                for _ in 0..<4 { group.addTask { await store.lookup(id) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        #expect(outcomes == Array(repeating: .unavailable, count: 4))
        #expect(elapsed < 180, "no hang beyond the timeout (\(elapsed) s)")
        #expect(store.statistics.snapshot[.timeouts] >= 1)
        let bypassedBefore = store.statistics.snapshot[.bypassed]
        #expect(await store.lookup(id) == .unavailable)
        #expect(await store.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .unavailable)
        #expect(await store.acquireLease(id) == .unavailable)
        #expect(store.statistics.snapshot[.bypassed] == bypassedBefore + 3)
        server.resume()
        let fresh = try makeStore(server)  // a new tier (its own breakers) sees the server back
        #expect(await fresh.lookup(id) == .hit(RemoteValue(payload: payload(100), createdAt: 1, expiresAt: 0)))
        await server.stop()
    }

    @Test("a waiter whose server hangs returns by its timeouts")
    func hungWaiter() async throws {
        let server = try await RedisServer.start()
        let holder = try makeStore(server)
        let waiter = try makeStore(server) {
            $0.policy.operationTimeout = .milliseconds(300)
            $0.waitRecheckInterval = .milliseconds(50)
        }
        let id = entryIdentity("hung-waiter")
        _ = try #require(await holder.acquireLease(id).lease)
        let gates = CallGates()
        let waiting = Task { await waiter.waitForRelease(id, timeout: .seconds(600), onWaiting: gates.called) }
        #expect(await gates.first.wait(within: 30))
        await server.pause()
        let (outcome, elapsed) = await timed { await waiting.value }
        #expect(outcome == .unavailable)
        #expect(elapsed < 180, "\(elapsed) s")
        server.resume()
        await server.stop()
    }

    @Test("a server that closes mid-reply, answers garbage or never answers: unavailable, never thrown")
    func misbehaving() async throws {
        for behaviour in [MisbehavingServer.Behaviour.closeMidReply, .garbage, .neverAnswer] {
            let server = try MisbehavingServer(behaviour)
            defer { server.stop() }
            let clock = TestClock()
            let store = try makeStore([server.url], clock: clock) { $0.policy.operationTimeout = .milliseconds(300) }
            let id = entryIdentity("misbehaving")
            let (outcome, elapsed) = await timed { await store.lookup(id) }
            #expect(outcome == .unavailable)
            #expect(elapsed < 180, "\(elapsed) s")
            clock.advance(milliseconds: 100)  // past the cooldown: each call below is a probe that fails
            #expect(await store.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .unavailable)
            #expect(await store.waitForRelease(id, timeout: .seconds(2)) == .unavailable)
            #expect(store.statistics.snapshot[.errors] + store.statistics.snapshot[.timeouts] >= 1)
        }
    }

    @Test("AUTH refused (no password, wrong password): unavailable; the right one works")
    func authentication() async throws {
        let server = try await RedisServer.start(password: "right-pw")
        let none = try makeStore([server.url])
        let wrong = try makeStore([server.url], environment: [RedisEndpoint.passwordVariable: "wrong-pw"])
        let right = try makeStore(server)
        let id = entryIdentity("auth")
        #expect(await right.store(id, payload: payload(5), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await none.lookup(id) == .unavailable)
        #expect(await wrong.lookup(id) == .unavailable)
        #expect(none.statistics.snapshot[.errors] == 1 && wrong.statistics.snapshot[.errors] == 1)
        #expect(await right.lookup(id) == .hit(RemoteValue(payload: payload(5), createdAt: 1, expiresAt: 0)))
        await server.stop()
    }

    @Test("maxmemory with noeviction (OOM): writes are bypassed, lookups go on")
    func outOfMemory() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server) { $0.policy.breakerCooldown = .seconds(600) }
        let first = entryIdentity("oom-first")
        #expect(await store.store(first, payload: payload(1000), createdAt: 1, expiresAt: 0) == .stored)
        let used = try await server.usedMemory()
        try await server.run(["CONFIG", "SET", "maxmemory", String(used + 1 << 20)])
        try await server.run(["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        var refused = false
        for index in 0..<100 where !refused {
            refused =
                await store.store(entryIdentity("fill-\(index)"), payload: payload(100_000), createdAt: 1, expiresAt: 0)
                == .unavailable
        }
        #expect(refused)
        #expect(store.remoteGuard.breaker(scope: 0, access: .write).state != .closed)
        #expect(await store.lookup(first) == .hit(RemoteValue(payload: payload(1000), createdAt: 1, expiresAt: 0)))
        #expect(await store.acquireLease(entryIdentity("oom-lease")) == .unavailable)
        await server.stop()
    }

    @Test("a read-only replica: writes are bypassed, lookups are served")
    func readOnlyReplica() async throws {
        // Redis 7 waits 5 s by default before a diskless full sync, for more replicas to join.
        let primary = try await RedisServer.start(tcp: true, extraArguments: ["--repl-diskless-sync-delay", "0"])
        let replica = try await RedisServer.start(
            tcp: true, extraArguments: ["--replicaof", "127.0.0.1", String(primary.port)])
        let writer = try makeStore(primary)
        let store = try makeStore(replica)
        let id = entryIdentity("replicated")
        #expect(await writer.store(id, payload: payload(77), createdAt: 1, expiresAt: 0) == .stored)
        #expect(await eventually(within: 20) { await store.lookup(id) != .miss(.absent) })
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(77), createdAt: 1, expiresAt: 0)))
        #expect(await store.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .unavailable)
        #expect(store.remoteGuard.breaker(scope: 0, access: .write).state != .closed)
        #expect(store.remoteGuard.breaker(scope: 0, access: .read).state == .closed)
        #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(77), createdAt: 1, expiresAt: 0)))
        await replica.stop()
        await primary.stop()
    }
}
