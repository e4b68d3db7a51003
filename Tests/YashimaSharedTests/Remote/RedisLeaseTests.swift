// RedisLeaseTests.swift: the lease protocol against a real redis-server: acquire with SET NX PX and a
// random token, the value or else the lease in one script call, renewal and release by script (never by anyone but the holder), EVALSHA with the EVAL
// fallback, waiters woken by the holder's PUBLISH (subscribed before their check), the timer re-check
// when a notification is lost, takeover after a holder dies, timeouts, cancellation, a killed
// subscriber connection, the renewal loop, and a lease evicted under maxmemory found lost on renewal.
// Ordering uses the waiter's `onWaiting` seam, never sleeps.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Redis leases", .redisServer)
struct RedisLeaseTests {
    /// A server; a store holding `name`'s lease; a waiter store that only a release message wakes.
    static func heldLease(_ name: String) async throws
        -> (RedisServer, RedisRemoteStore, waiter: RedisRemoteStore, EntryIdentity, RedisLease)
    {
        let server = try await RedisServer.start()
        let holder = try makeStore(server)
        let id = entryIdentity(name)
        let lease = try #require(await holder.acquireLease(id).lease)
        return (server, holder, try makeStore(server) { $0.waitRecheckInterval = .seconds(600) }, id, lease)
    }

    @Test("acquire, renew, release; a forged token releases nothing")
    func lifecycle() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let other = try makeStore(server)
        let id = entryIdentity("lease-lifecycle")
        let lease = try #require(await store.acquireLease(id).lease)
        #expect(lease.token.count == 32)
        #expect(try await server.rawGet(lease.keys.lease) == lease.token)
        #expect(await other.acquireLease(id) == .heldElsewhere)
        let forged = RedisLease(keys: lease.keys, token: Array("f".utf8), timeToLiveMilliseconds: 10_000)
        #expect(await other.release(forged) == false)
        #expect(await other.renew(forged) == .lost)
        #expect(try await server.exists(lease.keys.lease))
        // The lease (600 s, the fixture's) shortened to 300 s: only the renewal brings it back above.
        try await server.run(RESPCommand("PEXPIRE", lease.keys.lease, 300_000))
        #expect(await store.renew(lease) == .renewed)
        #expect(try await server.pttl(lease.keys.lease) > 400_000)
        #expect(await store.release(lease))
        #expect(!(try await server.exists(lease.keys.lease)))
        #expect(await store.renew(lease) == .lost)
        let again = try #require(await other.acquireLease(id).lease)
        #expect(again.token != lease.token)
        #expect(store.statistics.snapshot[.leasesAcquired] == 1)
        #expect(store.statistics.snapshot[.leasesLost] == 1)
        await server.stop()
    }

    @Test("script digests match SCRIPT LOAD; after SCRIPT FLUSH, EVAL runs them")
    func scripts() async throws {
        let server = try await RedisServer.start()
        for script in RedisScript.all {
            #expect(try await server.run(["SCRIPT", "LOAD", script.source]) == .bulkString(Array(script.sha1.utf8)))
        }
        try await server.run(["SCRIPT", "FLUSH"])
        let store = try makeStore(server)
        let lease = try #require(await store.acquireLease(entryIdentity("scripts")).lease)
        #expect(await store.renew(lease) == .renewed)  // NOSCRIPT, then EVAL
        #expect(try await server.run(["SCRIPT", "EXISTS", RedisScript.renew.sha1]) == .array([.integer(1)]))
        #expect(await store.release(lease))
        await server.stop()
    }

    @Test("acquiring finds a value stored meanwhile, and keeps no lease")
    func acquireFindsValue() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let id = entryIdentity("found")
        #expect(await store.store(id, payload: payload(100), createdAt: 1, expiresAt: 0) == .stored)
        guard case .found(let value) = await store.acquireLease(id) else {
            Issue.record("value not found")
            return
        }
        #expect(value.payload == payload(100))
        #expect(!(try await server.exists(store.keys(for: id).lease)))
        await server.stop()
    }

    @Test("lookup or lease in one call: a value is a hit with no lease; none: the lease; held: held elsewhere")
    func lookupOrAcquire() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let other = try makeStore(server)
        let stored = entryIdentity("combined-stored")
        #expect(await store.store(stored, payload: payload(100), createdAt: 1, expiresAt: 0) == .stored)
        #expect(
            await other.lookupOrAcquireLease(stored)
                == .found(RemoteValue(payload: payload(100), createdAt: 1, expiresAt: 0)))
        #expect(!(try await server.exists(store.keys(for: stored).lease)))
        let absent = entryIdentity("combined-absent")
        let lease = try #require(await store.lookupOrAcquireLease(absent).lease)
        #expect(try await server.rawGet(lease.keys.lease) == lease.token)
        #expect(await other.lookupOrAcquireLease(absent) == .heldElsewhere)
        #expect(await store.release(lease))
        // Counted as lookups: one hit, two misses; two leases taken in all.
        let counts = [store.statistics.snapshot, other.statistics.snapshot]
        #expect(counts.map { $0[.hits] }.reduce(0, +) == 1 && counts.map { $0[.misses] }.reduce(0, +) == 2)
        #expect(store.statistics.snapshot[.leasesAcquired] == 1 && other.statistics.snapshot[.leasesAcquired] == 0)
        await server.stop()
    }

    @Test("lookup or lease: a rejected value (planted, another type) is a miss whose lease is taken past it")
    func lookupOrAcquireRejected() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let planted = entryIdentity("combined-planted")
        try await server.run(RESPCommand("SET", store.keys(for: planted).value, Array("not an envelope".utf8)))
        let lease = try #require(await store.lookupOrAcquireLease(planted).lease)
        #expect(store.statistics.snapshot[.rejectedValues] == 1 && store.statistics.snapshot[.misses] == 1)
        #expect(await store.release(lease))
        let listed = entryIdentity("combined-list")
        try await server.run(RESPCommand("LPUSH", store.keys(for: listed).value, Array("x".utf8)))
        #expect(await store.lookupOrAcquireLease(listed).lease != nil)  // WRONGTYPE reads as none
        await server.stop()
    }

    @Test("a waiter subscribed and waiting is woken by storeAndRelease, and by a bare release")
    func notified() async throws {
        let server = try await RedisServer.start()
        let holder = try makeStore(server)
        let waiter = try makeStore(server) { $0.waitRecheckInterval = .seconds(600) }  // only a message wakes it
        for storing in [true, false] {
            let id = entryIdentity("notified-\(storing)")
            let lease = try #require(await holder.acquireLease(id).lease)
            let (waiting, _) = await waiter.waiting(for: id)
            if storing {
                #expect(
                    await holder.storeAndRelease(id, payload: payload(10), createdAt: 1, expiresAt: 0, lease: lease)
                        == .stored)
                #expect(await waiting.value == .found(RemoteValue(payload: payload(10), createdAt: 1, expiresAt: 0)))
            } else {
                #expect(await holder.release(lease))
                #expect(await waiting.value == .leaseFree(notified: true))
            }
        }
        #expect(waiter.statistics.snapshot[.leaseTakeovers] == 0)
        #expect(waiter.statistics.snapshot[.leaseWaits] == 2)
        await server.stop()
    }

    @Test("a lost notification costs one re-check; a dead holder's lease expires and is taken over")
    func timerFallback() async throws {
        let server = try await RedisServer.start()
        let holder = try makeStore(server)
        let dyingHolder = try makeStore(server) { $0.leaseTimeToLive = .milliseconds(300) }
        let waiter = try makeStore(server) { $0.waitRecheckInterval = .milliseconds(50) }
        // 1. The lease deleted without a PUBLISH (the message lost): noticed on the timer.
        let lostID = entryIdentity("lost-notification")
        let lease = try #require(await holder.acquireLease(lostID).lease)
        let (waiting, _) = await waiter.waiting(for: lostID)
        try await server.run(RESPCommand("DEL", lease.keys.lease))
        #expect(await waiting.value == .leaseFree(notified: false))
        // 2. A holder that never renews nor releases (killed): its lease expires, the waiter takes over.
        let deadID = entryIdentity("dead-holder")
        _ = try #require(await dyingHolder.acquireLease(deadID).lease)
        #expect(await waiter.waitForRelease(deadID, timeout: .seconds(30)) == .leaseFree(notified: false))
        _ = try #require(await waiter.acquireLease(deadID).lease)
        // Counted when the waiter saw the lease held and then gone without a message (the second wait
        // may find it already expired on a slow machine).
        #expect((1...2).contains(waiter.statistics.snapshot[.leaseTakeovers]))
        await server.stop()
    }

    @Test("a waiter times out while the lease is held; cancelling it wakes it at once")
    func timeoutAndCancellation() async throws {
        let (server, _, waiter, id, _) = try await Self.heldLease("held")
        #expect(await waiter.waitForRelease(id, timeout: .milliseconds(200)) == .timedOut)
        let (waiting, _) = await waiter.waiting(for: id, timeout: .seconds(600))
        waiting.cancel()
        let outcome = Task<RemoteWaitOutcome, any Error> { await waiting.value }
        let finished = try #require(await result(of: outcome, within: 30))
        #expect(try finished.get() == .cancelled)
        await server.stop()
    }

    @Test("a killed subscriber connection: the waiter subscribes again and is still notified")
    func subscriberKilled() async throws {
        let (server, holder, waiter, id, lease) = try await Self.heldLease("resubscribe")
        let (waiting, gates) = await waiter.waiting(for: id)
        #expect(try await server.run(["CLIENT", "KILL", "TYPE", "pubsub"]) == .integer(1))
        #expect(await gates.second.wait(within: 30))  // woke as lost, re-subscribed, checked, waits again
        #expect(await holder.release(lease))
        #expect(await waiting.value == .leaseFree(notified: true))
        await server.stop()
    }

    @Test("the renewal loop extends the lease, and stops")
    func renewalKeepsAlive() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server) { $0.leaseTimeToLive = .seconds(600) }
        let lease = try #require(await store.acquireLease(entryIdentity("kept")).lease)
        // Shorten the lease on the server: only a renewal brings its TTL back up.
        try await server.run(RESPCommand("PEXPIRE", lease.keys.lease, 300_000))
        let renewal = LeaseRenewal(
            timeToLive: .milliseconds(lease.timeToLiveMilliseconds), interval: .milliseconds(20),
            renew: { store.renewBlocking(lease) })
        #expect(try await eventually(within: 30) { try await server.pttl(lease.keys.lease) > 400_000 })
        #expect(await renewal.stop() == .stopped)
        #expect(try await server.rawGet(lease.keys.lease) == lease.token)
        #expect(await store.release(lease))
        // The configured loop renews at a third of the TTL.
        #expect(store.configuration.renewalInterval == .seconds(200))
        await server.stop()
    }

    @Test("maxmemory with allkeys-lru evicts a lease: the renewal finds it lost and reports it")
    func evictedLease() async throws {
        let server = try await RedisServer.start()
        let used = try await server.usedMemory()
        try await server.run(["CONFIG", "SET", "maxmemory", String(used + 2 << 20)])
        try await server.run(["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        let store = try makeStore(server) { $0.leaseTimeToLive = .seconds(60) }
        let lease = try #require(await store.acquireLease(entryIdentity("evicted")).lease)
        let filler = [UInt8](repeating: 0x5A, count: 100_000)
        var index = 0
        while try await server.exists(lease.keys.lease), index < 3000 {
            try await server.rawSet(Array("filler-\(index)".utf8), filler)
            index += 1
        }
        #expect(!(try await server.exists(lease.keys.lease)), "lease still there after \(index) writes")
        let lost = Gate()
        let renewal = LeaseRenewal(
            timeToLive: .milliseconds(lease.timeToLiveMilliseconds), interval: .milliseconds(20),
            renew: { store.renewBlocking(lease) }
        ) {
            lost.open()
        }
        #expect(await lost.wait(within: 60))
        #expect(renewal.isLost)
        #expect(await store.renew(lease) == .lost)
        await server.stop()
    }

    @Test("a production's early lookup: its answer taken before or after it came; a lease nobody took is released")
    func earlyLookup() async throws {
        let server = try await RedisServer.start()
        let store = try makeStore(server)
        let other = try makeStore(server)
        let stored = entryIdentity("early-stored")
        #expect(await store.store(stored, payload: payload(100), createdAt: 1, expiresAt: 0) == .stored)
        let found = RemoteValue(payload: payload(100), createdAt: 1, expiresAt: 0)
        // Taken after it came (the answer is in before the production asks), and while it was on its way.
        let answered = EarlyRemoteLookup()
        let delivered = Gate()
        store.startLookupOrLease(stored) {
            answered.deliver($0)
            delivered.open()
        }
        #expect(await delivered.wait(within: 60))
        #expect(foundValue(await answered.answer()) == found)
        let pending = EarlyRemoteLookup()
        let taken = Task { foundValue(await pending.answer()) }
        store.startLookupOrLease(stored) { pending.deliver($0) }
        #expect(await taken.value == found)
        // A lease the early lookup took that no production took: released when the lookup goes, so other
        // hosts need not wait for its expiry (the fixture's leases last 600 s).
        let absent = entryIdentity("early-absent")
        let tookLease = Gate()
        do {
            let unclaimed = EarlyRemoteLookup()
            store.startLookupOrLease(absent) {
                unclaimed.deliver($0)
                tookLease.open()
            }
            #expect(await tookLease.wait(within: 60))
        }
        let deadline = ContinuousClock.now + .seconds(60)
        var acquired = false
        while !acquired, ContinuousClock.now < deadline {
            if case .acquired(let lease) = await other.acquireLease(absent) {
                acquired = true
                #expect(await other.release(lease))
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(acquired, "the unclaimed lease was not released")
        await server.stop()
    }
}

/// The value an acquisition found, or nil.
private func foundValue(_ acquisition: consuming RemoteValueLeaseAcquisition) -> RemoteValue? {
    switch consume acquisition {
    case .found(let value): return value
    default: return nil
    }
}
