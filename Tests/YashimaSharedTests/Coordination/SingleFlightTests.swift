// Flight and FlightTable on their own: registration, departure before and after registering, the
// commit gate, and which flights a lookup or a refresh may join. No storage involved.

import Foundation
import Testing

@testable import YashimaShared

// A hang guard, never a speed claim: each test takes milliseconds alone, but beside the whole parallel
// suite on a loaded 2-core machine it waits minutes for its turns on the cooperative pool (a 1-minute
// limit failed 20 tests there that had all begun at the run's start).
@Suite("SingleFlight", .timeLimit(.minutes(10)))
struct SingleFlightTests {
    static let entry = EntryKey(key: CacheKey("flight"), codecIdentifier: "data-v1")

    /// A producer task that runs until `release` opens.
    static func producer(_ release: Gate) -> Task<Void, Never> {
        Task { await release.wait() }
    }

    /// A flight whose producer runs until the returned gate opens.
    static func flight(cancelsWhenNoWaiters: Bool) -> (Flight, Task<Void, Never>, Gate) {
        let release = Gate()
        let flight = Flight(kind: .lookup, cancelsWhenNoWaiters: cancelsWhenNoWaiters, entry: Self.entry, table: nil)
        let producer = producer(release)
        flight.setProducer(producer)
        return (flight, producer, release)
    }

    /// A new waiter of `flight`, registered and counted.
    static func waiter(of flight: Flight, expecting count: Int = 1) async -> (Int, Task<FlightResult, any Error>) {
        let id = flight.newWaiterID()
        let waiting = Task { try await register(flight, id) }
        #expect(await eventually { flight.waiterCount == count })
        return (id, waiting)
    }

    static func register(_ flight: Flight, _ id: Int) async throws -> FlightResult {
        let event = try await withCheckedThrowingContinuation { continuation in
            if !flight.register(id, continuation) { continuation.resume(returning: .result(.noValue)) }
        }
        guard case .result(let result) = event else { return .failure(LeadUnexpected()) }
        return result
    }

    struct LeadUnexpected: Error {}

    // MARK: Flight

    @Test("a waiter registering after completion gets the result at once")
    func lateRegistration() async throws {
        let flight = Flight(kind: .lookup, cancelsWhenNoWaiters: false, entry: Self.entry, table: nil)
        let id = flight.newWaiterID()
        flight.complete(.noValue)
        guard case .noValue = try await Self.register(flight, id) else {
            Issue.record("expected the stored result")
            return
        }
    }

    @Test("cancelWhenNoWaiters: the last registered waiter leaving cancels the producer and closes the commit gate")
    func lastWaiterCancels() async throws {
        let (flight, producer, release) = Self.flight(cancelsWhenNoWaiters: true)
        let first = flight.newWaiterID()
        let second = flight.newWaiterID()
        let waiting = [first, second].map { id in Task { try await Self.register(flight, id) } }
        #expect(await eventually { flight.waiterCount == 2 })
        #expect(!flight.depart(first))
        #expect(!producer.isCancelled)
        #expect(flight.depart(second))
        #expect(producer.isCancelled)
        #expect(flight.isCancelled)
        #expect(!flight.commit())
        for task in waiting {
            let outcome = await result(of: task)
            #expect(throws: CancellationError.self) { try outcome?.get() }
        }
        release.open()
    }

    @Test("cancelWhenNoWaiters: a waiter cancelled before it registered also counts as leaving")
    func departBeforeRegistering() async throws {
        let (flight, producer, release) = Self.flight(cancelsWhenNoWaiters: true)
        // The caller took a waiter id, then was cancelled before its continuation registered (the
        // cancellation handler runs first when the task is already cancelled).
        let id = flight.newWaiterID()
        #expect(flight.depart(id))
        #expect(producer.isCancelled, "nobody waits any more, yet the producer keeps running")
        #expect(!flight.commit(), "the result of a producer nobody waits for would be stored")
        // Registering afterwards reports the cancellation.
        let outcome = await result(of: Task { try await Self.register(flight, id) })
        #expect(throws: CancellationError.self) { try outcome?.get() }
        release.open()
    }

    @Test("share: waiters leaving never cancel the producer, and it may commit")
    func shareNeverCancels() async throws {
        let (flight, producer, release) = Self.flight(cancelsWhenNoWaiters: false)
        let early = flight.newWaiterID()
        #expect(!flight.depart(early))
        let (id, waiting) = await Self.waiter(of: flight)
        #expect(!flight.depart(id))
        #expect(!producer.isCancelled)
        #expect(flight.commit())
        let outcome = await result(of: waiting)
        #expect(throws: CancellationError.self) { try outcome?.get() }
        release.open()
    }

    @Test("after the commit gate, leaving no longer cancels the producer")
    func committedIsNotCancelled() async throws {
        let (flight, producer, release) = Self.flight(cancelsWhenNoWaiters: true)
        let (id, waiting) = await Self.waiter(of: flight)
        #expect(flight.commit())
        #expect(!flight.depart(id))
        #expect(!producer.isCancelled)
        _ = await result(of: waiting)
        release.open()
    }

    @Test("a producer set after the flight was cancelled is cancelled at once")
    func lateProducerCancelled() async {
        let release = Gate()
        let flight = Flight(kind: .lookup, cancelsWhenNoWaiters: true, entry: Self.entry, table: nil)
        let (id, waiting) = await Self.waiter(of: flight)
        _ = flight.depart(id)
        let producer = Self.producer(release)
        flight.setProducer(producer)
        #expect(producer.isCancelled)
        _ = await result(of: waiting)
        release.open()
    }

    @Test("a due step goes to the waiter that registered first, whoever left; the others get the result")
    func stepGoesToTheOldestWaiter() async throws {
        let flight = Flight(kind: .lookup, cancelsWhenNoWaiters: false, entry: Self.entry, table: nil)
        var tasks: [Int: Task<FlightEvent, any Error>] = [:]
        for count in 1...3 {
            let id = flight.newWaiterID()
            tasks[id] = Task { try await flight.next(id) }
            #expect(await eventually { flight.waiterCount == count })
        }
        let (first, second, third) = (0, 1, 2)
        // The first (kept inline) leaves; a fourth registers after the others.
        _ = flight.depart(first)
        let outcome = await result(of: tasks[first]!)
        #expect(throws: CancellationError.self) { try outcome?.get() }
        let fourth = flight.newWaiterID()
        tasks[fourth] = Task { try await flight.next(fourth) }
        #expect(await eventually { flight.waiterCount == 3 })
        flight.lead(.released)
        guard case .lead(.released) = try await tasks[second]!.value else {
            Issue.record("the step went elsewhere than to the oldest waiter left")
            return
        }
        // The leader registers again (its step taken); the result reaches every waiter.
        tasks[second] = Task { try await flight.next(second) }
        #expect(await eventually { flight.waiterCount == 3 })
        flight.complete(.noValue)
        for id in [second, third, fourth] {
            guard case .result(.noValue) = try await tasks[id]!.value else {
                Issue.record("waiter \(id) did not get the result")
                continue
            }
        }
    }

    @Test("a caller registering after its flight was cancelled is told to start anew")
    func registeringInACancelledFlight() async throws {
        let (flight, producer, release) = Self.flight(cancelsWhenNoWaiters: true)
        let (id, waiting) = await Self.waiter(of: flight)
        let late = flight.newWaiterID()  // joined, not registered yet
        #expect(flight.depart(id))
        #expect(producer.isCancelled)
        _ = await result(of: waiting)
        guard case .gone = try await flight.next(late) else {
            Issue.record("a caller of a cancelled flight must join (or start) another")
            return
        }
        release.open()
    }

    @Test(
        "cancelWhenNoWaiters: a step due before any waiter registered goes to the first that registers",
        .timeLimit(.minutes(10)))
    func stepBeforeRegistration() async throws {
        // The starter of a flight begins its lock wait, then registers; on a loaded machine the wait can
        // end in between. The step must wait for it, not be dropped (every later waiter then hung).
        let flight = Flight(kind: .lookup, cancelsWhenNoWaiters: true, entry: Self.entry, table: nil)
        flight.setStepper { _ in }
        let id = flight.newWaiterID()
        flight.lead(.released)
        guard case .lead(.released) = try await flight.next(id) else {
            Issue.record("the waiter did not get the step")
            return
        }
        #expect(!flight.isCancelled)
    }

    @Test(
        "a leader cancelled while a step is pending hands the step to the next waiter",
        arguments: [true, false])
    func cancelledLeaderHandsOn(cancelsWhenNoWaiters: Bool) async throws {
        let flight = Flight(kind: .lookup, cancelsWhenNoWaiters: cancelsWhenNoWaiters, entry: Self.entry, table: nil)
        flight.setStepper { _ in }
        let (leaderID, otherID) = (flight.newWaiterID(), flight.newWaiterID())
        let proceed = Gate()
        let leader = Task {
            let first = try await flight.next(leaderID)
            guard case .lead = first else { return "not led: \(String(describing: first))" }
            await proceed.wait()
            _ = try await flight.next(leaderID)  // cancelled: throws
            return "registered again although cancelled"
        }
        #expect(await eventually { flight.waiterCount == 1 })
        let other = Task { try await flight.next(otherID) }
        #expect(await eventually { flight.waiterCount == 2 })
        flight.lead(.released)  // to the leader (the lowest id)
        #expect(await eventually { flight.waiterCount == 2 && !flight.isCancelled })
        flight.lead(.timedOut)  // due while the leader is busy: pending
        leader.cancel()
        proceed.open()
        let leaderEnd = await leader.result
        #expect(throws: CancellationError.self) { try leaderEnd.get() }
        guard case .lead(.timedOut) = try await other.value else {
            Issue.record("the pending step was not handed on")
            return
        }
        #expect(!flight.isCancelled)
    }

    // MARK: FlightTable

    @Test("a lookup joins a refresh of the same entry; a refresh never joins a lookup")
    func joiningRules() async throws {
        let table = FlightTable()
        let release = Gate()
        let lookupKey = FlightKey(entry: Self.entry, kind: .lookup)
        let refreshKey = FlightKey(entry: Self.entry, kind: .refresh)
        let produced = Counter()
        let refresh = Task {
            try await table.run(refreshKey, cancelsWhenNoWaiters: false) { _ in
                produced.increment()
                await release.wait()
                return .noValue
            }
        }
        #expect(await eventually { table.waiterCount(refreshKey) == 1 })
        let lookup = Task {
            try await table.run(lookupKey, cancelsWhenNoWaiters: false) { _ in
                produced.increment()
                return .noValue
            }
        }
        #expect(await eventually { table.waiterCount(refreshKey) == 2 })
        #expect(table.waiterCount(lookupKey) == 0)
        release.open()
        let joined = try #require(await result(of: lookup)).get()
        #expect(joined.joined)
        #expect(joined.kind == .refresh)
        #expect(try #require(await result(of: refresh)).get().joined == false)
        #expect(produced.value == 1)

        // Now the other way round: a lookup in flight, then a refresh starts its own flight.
        let held = Gate()
        let lookup2 = Task {
            try await table.run(lookupKey, cancelsWhenNoWaiters: false) { _ in
                await held.wait()
                return .noValue
            }
        }
        #expect(await eventually { table.waiterCount(lookupKey) == 1 })
        let refresh2 = try await table.run(refreshKey, cancelsWhenNoWaiters: false) { _ in .noValue }
        #expect(refresh2.joined == false)
        held.open()
        _ = await result(of: lookup2)
    }

    @Test("a finished flight leaves the table; the next call starts a new one")
    func finishedFlightLeaves() async throws {
        let table = FlightTable()
        let key = FlightKey(entry: Self.entry, kind: .lookup)
        let produced = Counter()
        for _ in 0..<3 {
            let outcome = try await table.run(key, cancelsWhenNoWaiters: false) { _ in
                produced.increment()
                return .noValue
            }
            #expect(!outcome.joined)
        }
        #expect(produced.value == 3)
        #expect(table.waiterCount(key) == 0)
    }
}

extension FlightTable {
    /// `run(_:cancelsWhenNoWaiters:start:)` for a production that is a task from the start: `produce`
    /// runs on a new task and its result is the flight's (these tests' productions; the library's start
    /// with a coordination step, `Production.start`).
    func run(
        _ key: FlightKey, cancelsWhenNoWaiters: Bool,
        produce: @escaping @Sendable (Flight) async -> FlightResult
    ) async throws -> (result: FlightResult, joined: Bool, kind: FlightKind) {
        try await run(key, cancelsWhenNoWaiters: cancelsWhenNoWaiters) { flight in
            flight.setProducer(Task.startingOnThisPoolThread { flight.complete(await produce(flight)) })
        }
    }
}
