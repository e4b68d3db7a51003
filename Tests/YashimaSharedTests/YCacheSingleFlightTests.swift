// Single-flight through the public API: every policy with cancellation, what is shared and what is
// never stored, and the Yashima quirks we must not copy. Generators are held open by gates; the test
// waits until every caller has joined (the waiterCount seam) before it lets a generator finish.

import Foundation
import Testing

@testable import YashimaShared

@Suite("YCache single-flight", .timeLimit(.minutes(1)))
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

    // MARK: .share

    @Test("share: N concurrent callers run the generator once and all get its value")
    func shareRunsOnce() async throws {
        let dir = TemporaryDirectory("sf-share")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("burst")
        let codec = StringCodec()
        let held = HeldGenerator()
        let tasks = (0..<8).map { _ in
            Task { try await cache.resolve(for: key, codec: codec) { await held("v") } }
        }
        #expect(await eventually { cache.waiters(key, codec) == 8 })
        held.release.open()
        var shared = 0
        for task in tasks {
            let resolution = try #require(await result(of: task)).get()
            #expect(resolution.value == "v")
            #expect(resolution.source == .generated)
            if resolution.wasSharedGeneration { shared += 1 }
        }
        #expect(held.calls.value == 1)
        #expect(shared == 7)
        #expect(cache.statistics.generations == 1)
        #expect(cache.statistics.sharedGenerations == 7)
    }

    @Test("share: a cancelled waiter leaves at once; the producer finishes, serves the others and stores")
    func shareCancelledWaiter() async throws {
        let dir = TemporaryDirectory("sf-share-cancel")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("share-cancel")
        let codec = StringCodec()
        let held = HeldGenerator()
        let leaving = Task { try await cache.value(for: key, codec: codec) { await held("kept") } }
        let staying = Task { try await cache.value(for: key, codec: codec) { await held("kept") } }
        #expect(await eventually { cache.waiters(key, codec) == 2 })
        leaving.cancel()
        Self.expectCancelled(await result(of: leaving))  // while the generator is still held
        #expect(!held.release.isOpen)
        #expect(!held.cancelled.isOpen)
        held.release.open()
        #expect(try await result(of: staying)?.get() == "kept")
        #expect(held.calls.value == 1)
        #expect(!held.cancelled.isOpen)
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "kept")
    }

    @Test("share: when the only waiter is cancelled, the producer still finishes and stores")
    func shareSoleWaiterCancelled() async throws {
        let dir = TemporaryDirectory("sf-share-sole")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("share-sole")
        let codec = StringCodec()
        let held = HeldGenerator()
        let only = Task { try await cache.value(for: key, codec: codec) { await held("finished") } }
        #expect(await held.started.wait(within: 30))
        only.cancel()
        Self.expectCancelled(await result(of: only))
        held.release.open()
        // The producer is still in flight (a new caller joins it) or has stored (a memory hit).
        let later = try await cache.resolve(for: key, codec: codec) { "regenerated" }
        #expect(later.value == "finished")
        #expect(later.source != .generated || later.wasSharedGeneration)
        #expect(held.calls.value == 1)
        #expect(!held.cancelled.isOpen)
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "finished")
    }

    // MARK: .cancelWhenNoWaiters

    @Test("cancelWhenNoWaiters: the producer is cancelled only when the last waiter leaves, and never stores")
    func cancelWhenNoWaiters() async throws {
        let dir = TemporaryDirectory("sf-cancel")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("cancel-all")
        let codec = StringCodec()
        let options = YCache.Options(singleFlightPolicy: .cancelWhenNoWaiters)
        let held = HeldGenerator()
        let first = Task { try await cache.value(for: key, codec: codec, options: options) { await held("ignored") } }
        let second = Task { try await cache.value(for: key, codec: codec, options: options) { await held("ignored") } }
        #expect(await held.started.wait(within: 30))
        #expect(await eventually { cache.waiters(key, codec) == 2 })
        first.cancel()
        Self.expectCancelled(await result(of: first))
        #expect(!held.cancelled.isOpen, "cancelled while a waiter remained")
        second.cancel()
        Self.expectCancelled(await result(of: second))
        #expect(await held.cancelled.wait(within: 30), "the producer was not cancelled")
        // The generator ignores cancellation and returns a value anyway: it must not be stored.
        held.release.open()
        // A new caller's producer waits for the cancelled one's lock file (I5), so it looks in storage
        // only after the cancelled producer is done.
        let after = try await cache.resolve(for: key, codec: codec) { "fresh" }
        #expect(after.value == "fresh")
        #expect(after.source == .generated)
        #expect(try await cache.peek(for: key, codec: codec) == "fresh")
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "fresh")
        #expect(held.calls.value == 1)
    }

    @Test("cancelWhenNoWaiters: with nothing else in flight the cancelled result is in neither layer")
    func cancelledResultNotStored() async throws {
        let dir = TemporaryDirectory("sf-cancel-none")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("cancel-none")
        let codec = StringCodec()
        let held = HeldGenerator()
        let only = Task {
            try await cache.value(for: key, codec: codec, options: .uiLifecycle) { await held("ignored") }
        }
        #expect(await held.started.wait(within: 30))
        #expect(await eventually { cache.waiters(key, codec) == 1 })
        only.cancel()
        Self.expectCancelled(await result(of: only))
        #expect(await held.cancelled.wait(within: 30))
        held.release.open()
        // The lock file disappears when the producer returns (I6): after that, it can no longer store.
        let context = try cache.storageContext()
        let lock = dir.url.appendingPathComponent(context.directory.lockPath(forKeyDigest: key.stableDigest).relative)
        #expect(await eventually { !fileExists(lock) })
        #expect(try await cache.peek(for: key, codec: codec) == nil)
        #expect(entryFiles(in: dir.url).isEmpty)
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == nil)
    }

    @Test("cancelWhenNoWaiters: a remaining waiter still gets the value, and it is stored")
    func cancelWhenNoWaitersWithRemainingWaiter() async throws {
        let dir = TemporaryDirectory("sf-cancel-one")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("cancel-one")
        let codec = StringCodec()
        let options = YCache.Options(singleFlightPolicy: .cancelWhenNoWaiters)
        let held = HeldGenerator()
        let leaving = Task { try await cache.value(for: key, codec: codec, options: options) { await held("v") } }
        let staying = Task { try await cache.value(for: key, codec: codec, options: options) { await held("v") } }
        #expect(await eventually { cache.waiters(key, codec) == 2 })
        leaving.cancel()
        Self.expectCancelled(await result(of: leaving))
        held.release.open()
        #expect(try await result(of: staying)?.get() == "v")
        #expect(!held.cancelled.isOpen)
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "v")
    }

    // MARK: .disabled

    @Test("disabled: every caller runs its own generator, concurrently")
    func disabled() async throws {
        let dir = TemporaryDirectory("sf-disabled")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("solo")
        let codec = StringCodec()
        let options = YCache.Options(singleFlightPolicy: .disabled)
        let running = Counter()
        let bothRunning = Gate()
        let release = Gate()
        let tasks = ["a", "b"].map { label in
            Task {
                try await cache.value(for: key, codec: codec, options: options) {
                    if running.increment() == 2 { bothRunning.open() }
                    await release.wait()
                    return label
                }
            }
        }
        // Both generators are running at the same time: nobody waits for the other.
        #expect(await bothRunning.wait(within: 30))
        release.open()
        #expect(try await result(of: tasks[0])?.get() == "a")
        #expect(try await result(of: tasks[1])?.get() == "b")
        #expect(cache.statistics.generations == 2)
    }

    // MARK: What is shared but never stored

    @Test("nil from optionalValue is shared with current waiters and not stored")
    func optionalNilShared() async throws {
        let dir = TemporaryDirectory("sf-nil")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("nothing")
        let codec = StringCodec()
        let held = HeldGenerator()
        let tasks = (0..<3).map { _ in
            Task { try await cache.optionalValue(for: key, codec: codec) { await held(String?.none) } }
        }
        #expect(await eventually { cache.waiters(key, codec) == 3 })
        held.release.open()
        for task in tasks { #expect(try await result(of: task)?.get() == .some(nil)) }
        #expect(held.calls.value == 1)
        #expect(try await cache.peek(for: key, codec: codec) == nil)
        #expect(entryFiles(in: dir.url).isEmpty)
        // Not a negative entry: the next call generates.
        #expect(try await cache.optionalValue(for: key, codec: codec) { "now" } == "now")
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "now")
    }

    @Test("a generator's error is shared with current waiters and not stored")
    func errorShared() async throws {
        let dir = TemporaryDirectory("sf-error")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("failing")
        let codec = StringCodec()
        let held = HeldGenerator()
        let tasks = (0..<2).map { _ in
            Task {
                try await cache.value(for: key, codec: codec) { () async throws -> String in
                    _ = await held("")
                    throw GeneratorFailure(label: "shared")
                }
            }
        }
        #expect(await eventually { cache.waiters(key, codec) == 2 })
        held.release.open()
        for task in tasks {
            let outcome = await result(of: task)
            #expect(throws: GeneratorFailure(label: "shared")) { try outcome?.get() }
        }
        #expect(held.calls.value == 1)
        #expect(try await cache.peek(for: key, codec: codec) == nil)
        #expect(entryFiles(in: dir.url).isEmpty)
        #expect(try await cache.value(for: key, codec: codec) { "recovered" } == "recovered")
    }

    // MARK: Yashima quirks we do not copy

    @Test("a concurrent valueIfCached or cache-only lookup never makes a normal call miss")
    func valueIfCachedDoesNotJoin() async throws {
        let dir = TemporaryDirectory("sf-ifcached")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("if-cached")
        let codec = StringCodec()
        let held = HeldGenerator()
        let producer = Task { try await cache.value(for: key, codec: codec) { await held("v") } }
        #expect(await held.started.wait(within: 30))
        // Neither waits for the generation, nor disturbs it.
        #expect(try await cache.valueIfCached(for: key, codec: codec) == nil)
        await #expect(throws: YCache.Error.cacheMiss) {
            try await cache.value(for: key, codec: codec, options: .init(lookupPolicy: .cacheOnly)) { "never" }
        }
        let joinerCalls = Counter()
        let joiner = Task {
            try await cache.value(for: key, codec: codec) {
                joinerCalls.increment()
                return "other"
            }
        }
        #expect(await eventually { cache.waiters(key, codec) == 2 })
        #expect(try await cache.valueIfCached(for: key, codec: codec) == nil)
        held.release.open()
        #expect(try await result(of: producer)?.get() == "v")
        #expect(try await result(of: joiner)?.get() == "v")
        #expect(joinerCalls.value == 0)
        #expect(try await cache.valueIfCached(for: key, codec: codec) == "v")
    }

    @Test("a failing refresh keeps its error: a normal call that joined it generates its own value")
    func failingRefreshIsPrivate() async throws {
        let dir = TemporaryDirectory("sf-refresh-fail")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("refresh-fail")
        let codec = StringCodec()
        let held = HeldGenerator()
        let refreshing = Task {
            try await cache.refresh(for: key, codec: codec) {
                _ = await held("")
                throw GeneratorFailure(label: "refresh")
            }
        }
        #expect(await held.started.wait(within: 30))
        let ownCalls = Counter()
        let normal = Task {
            try await cache.value(for: key, codec: codec) {
                ownCalls.increment()
                return "own"
            }
        }
        // The normal call joined the refresh flight (it is not waiting on a flight of its own).
        #expect(await eventually { cache.waiters(key, codec, refresh: true) == 2 })
        #expect(ownCalls.value == 0)
        held.release.open()
        let refreshOutcome = await result(of: refreshing)
        #expect(throws: GeneratorFailure(label: "refresh")) { try refreshOutcome?.get() }
        #expect(try await result(of: normal)?.get() == "own")
        #expect(ownCalls.value == 1)
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "own")
    }

    @Test("a call that joins a flight of another value type under the same codec identifier: valueTypeMismatch")
    func joinedFlightOfAnotherType() async throws {
        let dir = TemporaryDirectory("sf-type-mismatch")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("shared-identifier")
        let text = StringCodec()
        let bytes = SameIdentifierDataCodec(identifier: text.identifier)
        let held = HeldGenerator()
        let producer = Task { try await cache.value(for: key, codec: text) { await held("text") } }
        #expect(await held.started.wait(within: 30))
        let joiner = Task { try await cache.value(for: key, codec: bytes) { Data("own".utf8) } }
        #expect(await eventually { cache.waiters(key, text) == 2 })
        held.release.open()
        #expect(try await result(of: producer)?.get() == "text")
        let joined = await result(of: joiner)
        #expect(throws: YCache.Error.valueTypeMismatch) { try joined?.get() }
        #expect(held.calls.value == 1)
    }

    @Test("a refresh never joins a lookup in flight: it returns its own fresh value, which is what stays")
    func refreshDoesNotJoinLookup() async throws {
        let dir = TemporaryDirectory("sf-refresh-stale")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("refresh-stale")
        let codec = StringCodec()
        let held = HeldGenerator()
        let lookup = Task { try await cache.value(for: key, codec: codec) { await held("older") } }
        #expect(await held.started.wait(within: 30))
        let refreshCalls = Counter()
        let refreshing = Task {
            try await cache.refresh(for: key, codec: codec) {
                refreshCalls.increment()
                return "fresh"
            }
        }
        #expect(await eventually { cache.waiters(key, codec, refresh: true) == 1 })
        held.release.open()
        #expect(try await result(of: lookup)?.get() == "older")
        #expect(try await result(of: refreshing)?.get() == "fresh")
        #expect(refreshCalls.value == 1)
        #expect(try await cache.peek(for: key, codec: codec) == "fresh")
        #expect(try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec) == "fresh")
    }

    @Test("a normal call that joined an optional producer returning nil generates its own value")
    func normalJoiningOptionalNil() async throws {
        let dir = TemporaryDirectory("sf-optional-join")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("optional-join")
        let codec = StringCodec()
        let held = HeldGenerator()
        let optional = Task { try await cache.optionalValue(for: key, codec: codec) { await held(String?.none) } }
        #expect(await held.started.wait(within: 30))
        let ownCalls = Counter()
        let normal = Task {
            try await cache.value(for: key, codec: codec) {
                ownCalls.increment()
                return "own"
            }
        }
        #expect(await eventually { cache.waiters(key, codec) == 2 })
        held.release.open()
        #expect(try await result(of: optional)?.get() == .some(nil))
        #expect(try await result(of: normal)?.get() == "own")
        #expect(ownCalls.value == 1)
    }

    @Test("a caller cancelled before it starts gets CancellationError and runs nothing")
    func cancelledBeforeStart() async throws {
        let dir = TemporaryDirectory("sf-precancel")
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("pre-cancelled")
        let go = Gate()
        let calls = Counter()
        let task = Task {
            await go.wait()
            return try await cache.value(for: key, codec: StringCodec()) {
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
