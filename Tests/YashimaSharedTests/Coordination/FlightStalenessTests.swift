// A caller that joins an in-process flight must not be handed what the flight read from storage before a
// removal that finished before the caller began (I10). Two instances in one process stand in for two
// processes (each holds its own lock-file descriptors, and flock excludes descriptors, not processes); a
// codec whose decode waits for the test holds the flight open between its storage read and its result.

import Foundation
import Synchronization
import Testing

@testable import YashimaShared

/// A string codec whose next decode (or, with `holdsCost`, next memory-cost estimate, which a writer asks
/// for after its publish), once armed, announces itself and waits until released. The wait blocks its
/// thread (both calls are synchronous): the held caller runs on a thread of its own (`holding`), and the
/// test, which releases it, on another (`driving`), so neither waits for the cooperative pool, which the
/// rest of a parallel run keeps busy (and a hold that lands on a pool thread is as short as the driving
/// thread's few steps). Bounded at 90 s so a broken test fails instead of hanging; each test releases it
/// when it ends, however it ends.
struct HeldCodec: CacheCodec {
    final class Control: Sendable {
        let armed = Atomic<Bool>(false)
        let entered = Atomic<Bool>(false)
        let released = Atomic<Bool>(false)

        var hasEntered: Bool { entered.load(ordering: .acquiring) }
        func release() { released.store(true, ordering: .releasing) }

        func holdIfArmed() {
            guard armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
            entered.store(true, ordering: .releasing)
            let deadline = ContinuousClock.now.advanced(by: .seconds(90))
            while !released.load(ordering: .acquiring), ContinuousClock.now < deadline { usleep(500) }
        }
    }

    let control: Control
    var holdsCost = false
    let identifier = "held-v1"

    func encode(_ value: String) throws -> Data { Data(value.utf8) }

    func decode(_ data: Data) throws -> String {
        if !holdsCost { control.holdIfArmed() }
        return String(decoding: data, as: UTF8.self)
    }

    func memoryCost(of value: String, encodedByteCount: Int?) -> Int {
        if holdsCost { control.holdIfArmed() }
        return max(1, value.utf8.count)
    }
}

@Suite("Flights and removals (I10)", .serialized)
struct FlightStalenessTests {
    /// The thread the held caller runs on, and the one the test's own steps run on (see HeldCodec).
    static let (holding, driving) = (DedicatedThreadExecutor(), DedicatedThreadExecutor())

    @Test("a caller joining a flight after a removal finished is not given the entry the flight read before it")
    func joinerAfterRemovalGetsNoStaleEntry() async throws {
        try await withTaskExecutorPreference(Self.driving) { try await joinerAfterRemoval() }
    }

    private func joinerAfterRemoval() async throws {
        let dir = TemporaryDirectory("flight-stale")
        let control = HeldCodec.Control()
        defer { control.release() }
        let codec = HeldCodec(control: control)
        let mine = YCache(storageDirectory: dir.url)
        let theirs = YCache(storageDirectory: dir.url)  // "another process"
        let key = CacheKey("report", namespace: "stale")
        try mine.openStorage()
        try theirs.openStorage()

        // Another process generates the key and holds its lock until we let it publish.
        let theirGenerator = Gate()
        let theirsGenerating = Gate()
        let producer = Task(executorPreference: Self.driving) {
            try await theirs.value(for: key, codec: codec) {
                theirsGenerating.open()
                await theirGenerator.wait()
                return "old"
            }
        }
        #expect(await theirsGenerating.wait(within: 30))

        // Our first caller misses and starts a flight; once it has, the other process publishes. The
        // flight reads the published entry from storage, and its decode is held.
        control.armed.store(true, ordering: .releasing)
        let first = Task(executorPreference: Self.holding) {
            try await mine.resolve(for: key, codec: codec) { "first caller generated" }
        }
        #expect(await eventually { mine.waiters(key, codec) == 1 })
        theirGenerator.open()
        #expect(try await result(of: producer)?.get() == "old")
        #expect(await eventually { control.hasEntered })

        // The entry is removed, completely, before our second caller begins.
        try await theirs.remove(for: key, codec: codec)
        #expect(try await theirs.contains(for: key, codec: codec) == false)

        let second = Task(executorPreference: Self.driving) { try await mine.resolve(for: key, codec: codec) { "new" } }
        // Let the flight finish once the second caller has joined it.
        #expect(await eventually { mine.waiters(key, codec) == 2 })
        control.release()

        let firstResult = try #require(try await result(of: first)?.get())
        #expect(firstResult.value == "old")  // it began before the removal: the old entry is fine
        let secondResult = try #require(try await result(of: second)?.get())
        #expect(secondResult.value == "new", "a call that began after the removal returned the removed entry")
        #expect(secondResult.source == .generated)
    }

    @Test("a caller joining a refresh after a removal finished refreshes for itself: the entry exists afterwards")
    func refreshJoinerAfterRemovalRefreshesItself() async throws {
        try await withTaskExecutorPreference(Self.driving) { try await refreshJoinerAfterRemoval() }
    }

    private func refreshJoinerAfterRemoval() async throws {
        let dir = TemporaryDirectory("flight-stale-refresh")
        let control = HeldCodec.Control()
        defer { control.release() }
        let codec = HeldCodec(control: control, holdsCost: true)
        let mine = YCache(storageDirectory: dir.url)
        let theirs = YCache(storageDirectory: dir.url)  // "another process"
        let key = CacheKey("report", namespace: "stale-refresh")
        try mine.openStorage()
        try theirs.openStorage()

        // Our first refresh publishes, then is held (its memory-cost estimate) before its flight ends.
        control.armed.store(true, ordering: .releasing)
        let first = Task(executorPreference: Self.holding) {
            try await mine.refresh(for: key, codec: codec) { "first" }
        }
        #expect(await eventually { control.hasEntered })
        #expect(try await theirs.valueIfCached(for: key, codec: codec) == "first")

        // Another process removes the entry, completely, before our second refresh begins.
        try await theirs.remove(for: key, codec: codec)
        #expect(try await theirs.contains(for: key, codec: codec) == false)

        let second = Task(executorPreference: Self.driving) {
            try await mine.refresh(for: key, codec: codec) { "second" }
        }
        #expect(await eventually { mine.waiters(key, codec, refresh: true) == 2 })
        control.release()

        #expect(try await result(of: first)?.get() == "first")
        #expect(try await result(of: second)?.get() == "second")
        // The refresh that began after the removal left an entry behind, for every process.
        #expect(try await theirs.valueIfCached(for: key, codec: codec) == "second")
    }
}
