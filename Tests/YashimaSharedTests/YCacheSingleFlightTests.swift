// Single-flight through the public API: every policy with cancellation, what is shared and what is
// never stored, and the Yashima quirks we must not copy. Generators are held open by gates; the test
// waits until every caller has joined (the waiterCount seam) before it lets a generator finish.

import Foundation
import Testing

@testable import YashimaShared

// A hang guard, never a speed claim: each test takes milliseconds alone, but beside the whole parallel
// suite on a loaded 2-core machine it waits minutes for its turns on the cooperative pool (a 1-minute
// limit failed 20 tests there that had all begun at the run's start).
@Suite("YCache single-flight", .timeLimit(.minutes(10)))
struct YCacheSingleFlightTests {
    /// A generator held open until `release`, which notes that it started and whether its task was
    /// cancelled, and then returns `value` whatever happened (it ignores cancellation).
    struct HeldGenerator: Sendable {
        let started = Gate()
        let release = Gate()
        let cancelled = Gate()
        let calls = Counter()

        func callAsFunction<T: Sendable>(_ value: T) async -> T {
            calls.increment()
            started.open()
            await withTaskCancellationHandler {
                await release.wait()
            } onCancel: {
                cancelled.open()
            }
            return value
        }
    }

    static func expectCancelled<T>(_ outcome: Result<T, any Error>?, sourceLocation: SourceLocation = #_sourceLocation)
    {
        guard let outcome else { return }  // already recorded as a timeout
        #expect(throws: CancellationError.self, sourceLocation: sourceLocation) { try outcome.get() }
    }

    /// One test's cache (`makeCache`), key, codec and held generator.
    struct Flight: Sendable {
        let dir: TemporaryDirectory
        let cache: YCache
        let key: CacheKey
        let codec = StringCodec()
        let held = HeldGenerator()

        init(_ name: String) {
            (dir, cache) = makeCache("sf-\(name)")
            key = CacheKey(name)
        }

        /// What another instance finds in storage.
        func stored() async throws -> String? { try await YashimaSharedTests.stored(in: dir, key, codec) }

        /// `value(for:)` in a task, with `generate`.
        func value(
            _ options: YCache.Options = .default, _ generate: @escaping @Sendable () async throws -> String
        ) -> Task<String, any Error> {
            let (cache, key, codec) = (cache, key, codec)
            return Task { try await cache.value(for: key, codec: codec, options: options, generate) }
        }

        /// `value(for:)` in a task, with the held generator returning `value`.
        func holding(_ value: String, _ options: YCache.Options = .default) -> Task<String, any Error> {
            let held = held
            return self.value(options) { await held(value) }
        }

        /// `value(for:)` in a task whose own generator counts its calls in `calls` and returns "own".
        func own(_ calls: Counter) -> Task<String, any Error> {
            value {
                calls.increment()
                return "own"
            }
        }

        /// Waits until `count` callers wait on the flight.
        func joined(_ count: Int, refresh: Bool = false) async -> Bool {
            await eventually { cache.waiters(key, codec, refresh: refresh) == count }
        }
    }

    // MARK: .share

    @Test("share: N concurrent callers run the generator once and all get its value")
    func shareRunsOnce() async throws {
        let f = Flight("burst")
        let tasks = (0..<8).map { _ in
            Task { try await f.cache.resolve(for: f.key, codec: f.codec) { await f.held("v") } }
        }
        #expect(await f.joined(8))
        f.held.release.open()
        var shared = 0
        for task in tasks {
            let resolution = try #require(await result(of: task)).get()
            #expect(resolution.value == "v")
            #expect(resolution.source == .generated)
            if resolution.wasSharedGeneration { shared += 1 }
        }
        #expect(f.held.calls.value == 1)
        #expect(shared == 7)
        #expect(f.cache.statistics.generations == 1)
        #expect(f.cache.statistics.sharedGenerations == 7)
    }

    @Test("share: a cancelled waiter leaves at once; the producer finishes, serves the others and stores")
    func shareCancelledWaiter() async throws {
        let f = Flight("share-cancel")
        let leaving = f.holding("kept")
        let staying = f.holding("kept")
        #expect(await f.joined(2))
        leaving.cancel()
        Self.expectCancelled(await result(of: leaving))  // while the generator is still held
        #expect(!f.held.release.isOpen)
        #expect(!f.held.cancelled.isOpen)
        f.held.release.open()
        #expect(try await result(of: staying)?.get() == "kept")
        #expect(f.held.calls.value == 1)
        #expect(!f.held.cancelled.isOpen)
        #expect(try await f.stored() == "kept")
    }

    @Test("share: when the only waiter is cancelled, the producer still finishes and stores")
    func shareSoleWaiterCancelled() async throws {
        let f = Flight("share-sole")
        let only = f.holding("finished")
        #expect(await f.held.started.wait(within: 30))
        only.cancel()
        Self.expectCancelled(await result(of: only))
        f.held.release.open()
        // The producer is still in flight (a new caller joins it) or has stored (a memory hit).
        let later = try await f.cache.resolve(for: f.key, codec: f.codec) { "regenerated" }
        #expect(later.value == "finished")
        #expect(later.source != .generated || later.wasSharedGeneration)
        #expect(f.held.calls.value == 1)
        #expect(!f.held.cancelled.isOpen)
        #expect(try await f.stored() == "finished")
    }

    // MARK: .cancelWhenNoWaiters

    static let cancelling = YCache.Options(singleFlightPolicy: .cancelWhenNoWaiters)

    @Test("cancelWhenNoWaiters: the producer is cancelled only when the last waiter leaves, and never stores")
    func cancelWhenNoWaiters() async throws {
        let f = Flight("cancel-all")
        let (first, second) = (f.holding("ignored", Self.cancelling), f.holding("ignored", Self.cancelling))
        #expect(await f.held.started.wait(within: 30))
        #expect(await f.joined(2))
        first.cancel()
        Self.expectCancelled(await result(of: first))
        #expect(!f.held.cancelled.isOpen, "cancelled while a waiter remained")
        second.cancel()
        Self.expectCancelled(await result(of: second))
        #expect(await f.held.cancelled.wait(within: 30), "the producer was not cancelled")
        // The generator ignores cancellation and returns a value anyway: it must not be stored.
        f.held.release.open()
        // A new caller's producer waits for the cancelled one's lock file (I5), so it looks in storage
        // only after the cancelled producer is done.
        let after = try await f.cache.resolve(for: f.key, codec: f.codec) { "fresh" }
        #expect(after.value == "fresh")
        #expect(after.source == .generated)
        #expect(try await f.cache.peek(for: f.key, codec: f.codec) == "fresh")
        #expect(try await f.stored() == "fresh")
        #expect(f.held.calls.value == 1)
    }

    @Test("cancelWhenNoWaiters: with nothing else in flight the cancelled result is in neither layer")
    func cancelledResultNotStored() async throws {
        let f = Flight("cancel-none")
        let only = f.holding("ignored", .uiLifecycle)
        #expect(await f.held.started.wait(within: 30))
        #expect(await f.joined(1))
        only.cancel()
        Self.expectCancelled(await result(of: only))
        #expect(await f.held.cancelled.wait(within: 30))
        f.held.release.open()
        // The lock file disappears when the producer returns (I6): after that, it can no longer store.
        let context = try f.cache.storageContext()
        let lock = f.dir.url.appendingPathComponent(
            context.directory.lockPath(forKeyDigest: f.key.stableDigest).relative)
        #expect(await eventually { !fileExists(lock) })
        #expect(try await f.cache.peek(for: f.key, codec: f.codec) == nil)
        #expect(entryFiles(in: f.dir.url).isEmpty)
        #expect(try await f.stored() == nil)
    }

    @Test("cancelWhenNoWaiters: a joiner leaving while the starter's generator runs without suspending cancels nothing")
    func starterWhoseGeneratorNeverSuspendedStillWaits() async throws {
        // The production starts on its starter's thread (Task.startingOnThisPoolThread), so a generator
        // that never suspends holds the starter there before it registers as a waiter: it is still one.
        // The starter runs on a thread of its own (a task executor), so that the generator's blocking
        // holds no thread of the cooperative pool, which the other tests need.
        let f = Flight("cancel-starter")
        let (started, release, calls) = (Gate(), Gate(), Counter())
        let (cache, key, codec) = (f.cache, f.key, f.codec)
        let starter = Task(executorPreference: DedicatedThreadExecutor()) {
            try await cache.value(for: key, codec: codec, options: Self.cancelling) {
                calls.increment()
                started.open()
                let deadline = Date().addingTimeInterval(60)
                while !release.isOpen, Date() < deadline { usleep(1000) }  // no await
                return "v"
            }
        }
        #expect(await started.wait(within: 30))
        let joiner = f.value(Self.cancelling) { "joiner's own" }
        #expect(await f.joined(2))
        joiner.cancel()
        Self.expectCancelled(await result(of: joiner))
        release.open()
        #expect(try await result(of: starter)?.get() == "v", "the starter's flight was abandoned")
        #expect(calls.value == 1)
        #expect(try await f.stored() == "v")
    }

    @Test("cancelWhenNoWaiters: a remaining waiter still gets the value, and it is stored")
    func cancelWhenNoWaitersWithRemainingWaiter() async throws {
        let f = Flight("cancel-one")
        let leaving = f.holding("v", Self.cancelling)
        let staying = f.holding("v", Self.cancelling)
        #expect(await f.joined(2))
        leaving.cancel()
        Self.expectCancelled(await result(of: leaving))
        f.held.release.open()
        #expect(try await result(of: staying)?.get() == "v")
        #expect(!f.held.cancelled.isOpen)
        #expect(try await f.stored() == "v")
    }

    // MARK: .disabled

    @Test("disabled: every caller runs its own generator, concurrently")
    func disabled() async throws {
        let f = Flight("solo")
        let running = Counter()
        let bothRunning = Gate()
        let release = Gate()
        let tasks = ["a", "b"].map { label in
            f.value(.init(singleFlightPolicy: .disabled)) {
                if running.increment() == 2 { bothRunning.open() }
                await release.wait()
                return label
            }
        }
        // Both generators are running at the same time: nobody waits for the other.
        #expect(await bothRunning.wait(within: 30))
        release.open()
        #expect(try await result(of: tasks[0])?.get() == "a")
        #expect(try await result(of: tasks[1])?.get() == "b")
        #expect(f.cache.statistics.generations == 2)
    }

    // MARK: What is shared but never stored

    @Test("nil from optionalValue is shared with current waiters and not stored")
    func optionalNilShared() async throws {
        let f = Flight("nothing")
        let tasks = (0..<3).map { _ in
            Task { try await f.cache.optionalValue(for: f.key, codec: f.codec) { await f.held(String?.none) } }
        }
        #expect(await f.joined(3))
        f.held.release.open()
        for task in tasks { #expect(try await result(of: task)?.get() == .some(nil)) }
        #expect(f.held.calls.value == 1)
        #expect(try await f.cache.peek(for: f.key, codec: f.codec) == nil)
        #expect(entryFiles(in: f.dir.url).isEmpty)
        // Not a negative entry: the next call generates.
        #expect(try await f.cache.optionalValue(for: f.key, codec: f.codec) { "now" } == "now")
        #expect(try await f.stored() == "now")
    }

    @Test("a generator's error is shared with current waiters and not stored")
    func errorShared() async throws {
        let f = Flight("failing")
        let tasks = (0..<2).map { _ in
            f.value { () async throws -> String in
                _ = await f.held("")
                throw GeneratorFailure(label: "shared")
            }
        }
        #expect(await f.joined(2))
        f.held.release.open()
        for task in tasks {
            let outcome = await result(of: task)
            #expect(throws: GeneratorFailure(label: "shared")) { try outcome?.get() }
        }
        #expect(f.held.calls.value == 1)
        #expect(try await f.cache.peek(for: f.key, codec: f.codec) == nil)
        #expect(entryFiles(in: f.dir.url).isEmpty)
        #expect(try await f.cache.value(for: f.key, codec: f.codec) { "recovered" } == "recovered")
    }

    // MARK: Yashima quirks we do not copy

    @Test("a concurrent valueIfCached or cache-only lookup never makes a normal call miss")
    func valueIfCachedDoesNotJoin() async throws {
        let f = Flight("if-cached")
        let producer = f.holding("v")
        #expect(await f.held.started.wait(within: 30))
        // Neither waits for the generation, nor disturbs it.
        #expect(try await f.cache.valueIfCached(for: f.key, codec: f.codec) == nil)
        await #expect(throws: YCache.Error.cacheMiss) {
            try await f.cache.value(for: f.key, codec: f.codec, options: .init(lookupPolicy: .cacheOnly)) { "never" }
        }
        let joinerCalls = Counter()
        let joiner = f.own(joinerCalls)
        #expect(await f.joined(2))
        #expect(try await f.cache.valueIfCached(for: f.key, codec: f.codec) == nil)
        f.held.release.open()
        #expect(try await result(of: producer)?.get() == "v")
        #expect(try await result(of: joiner)?.get() == "v")
        #expect(joinerCalls.value == 0)
        #expect(try await f.cache.valueIfCached(for: f.key, codec: f.codec) == "v")
    }

    @Test("a failing refresh keeps its error: a normal call that joined it generates its own value")
    func failingRefreshIsPrivate() async throws {
        let f = Flight("refresh-fail")
        let refreshing = Task {
            try await f.cache.refresh(for: f.key, codec: f.codec) {
                _ = await f.held("")
                throw GeneratorFailure(label: "refresh")
            }
        }
        #expect(await f.held.started.wait(within: 30))
        let ownCalls = Counter()
        let normal = f.own(ownCalls)
        // The normal call joined the refresh flight (it is not waiting on a flight of its own).
        #expect(await f.joined(2, refresh: true))
        #expect(ownCalls.value == 0)
        f.held.release.open()
        let refreshOutcome = await result(of: refreshing)
        #expect(throws: GeneratorFailure(label: "refresh")) { try refreshOutcome?.get() }
        #expect(try await result(of: normal)?.get() == "own")
        #expect(ownCalls.value == 1)
        #expect(try await f.stored() == "own")
    }

    @Test("a call that joins a flight of another value type under the same codec identifier: valueTypeMismatch")
    func joinedFlightOfAnotherType() async throws {
        let f = Flight("shared-identifier")
        let bytes = SameIdentifierDataCodec(identifier: f.codec.identifier)
        let producer = f.holding("text")
        #expect(await f.held.started.wait(within: 30))
        let joiner = Task { try await f.cache.value(for: f.key, codec: bytes) { Data("own".utf8) } }
        #expect(await f.joined(2))
        f.held.release.open()
        #expect(try await result(of: producer)?.get() == "text")
        let joined = await result(of: joiner)
        #expect(throws: YCache.Error.valueTypeMismatch) { try joined?.get() }
        #expect(f.held.calls.value == 1)
    }

    @Test("a refresh never joins a lookup in flight: it returns its own fresh value, which is what stays")
    func refreshDoesNotJoinLookup() async throws {
        let f = Flight("refresh-stale")
        let lookup = f.holding("older")
        #expect(await f.held.started.wait(within: 30))
        let refreshCalls = Counter()
        let refreshing = Task {
            try await f.cache.refresh(for: f.key, codec: f.codec) {
                refreshCalls.increment()
                return "fresh"
            }
        }
        #expect(await f.joined(1, refresh: true))
        f.held.release.open()
        #expect(try await result(of: lookup)?.get() == "older")
        #expect(try await result(of: refreshing)?.get() == "fresh")
        #expect(refreshCalls.value == 1)
        #expect(try await f.cache.peek(for: f.key, codec: f.codec) == "fresh")
        #expect(try await f.stored() == "fresh")
    }

    @Test("a normal call that joined an optional producer returning nil generates its own value")
    func normalJoiningOptionalNil() async throws {
        let f = Flight("optional-join")
        let optional = Task {
            try await f.cache.optionalValue(for: f.key, codec: f.codec) { await f.held(String?.none) }
        }
        #expect(await f.held.started.wait(within: 30))
        let ownCalls = Counter()
        let normal = f.own(ownCalls)
        #expect(await f.joined(2))
        f.held.release.open()
        #expect(try await result(of: optional)?.get() == .some(nil))
        #expect(try await result(of: normal)?.get() == "own")
        #expect(ownCalls.value == 1)
    }

    @Test("a caller cancelled before it starts gets CancellationError and runs nothing")
    func cancelledBeforeStart() async throws {
        let f = Flight("pre-cancelled")
        let go = Gate()
        let calls = Counter()
        let task = Task {
            await go.wait()
            return try await f.cache.value(for: f.key, codec: f.codec) {
                calls.increment()
                return "v"
            }
        }
        task.cancel()
        go.open()
        Self.expectCancelled(await result(of: task))
        #expect(calls.value == 0)
    }
}

/// Raw bytes under an identifier the test chooses (to share it with a codec of another value type).
private struct SameIdentifierDataCodec: CacheCodec {
    let identifier: String
    func encode(_ value: Data) throws -> Data { value }
    func decode(_ data: Data) throws -> Data { data }
}
