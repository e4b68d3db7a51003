// Where a lookup's work runs (issue 25): a hit of a small entry is served on the caller's executor (the
// main actor here: no hop to the pool and back), while a large entry's read, a miss's generator and a
// decompressing codec stay off it. Observed through a codec that records the thread its `decode` ran on.

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

// A hang guard, never a speed claim: each test takes milliseconds alone, but beside the whole parallel
// suite on a loaded 2-core machine it waits minutes for its turns on the cooperative pool (a 1-minute
// limit failed 20 tests there that had all begun at the run's start).
@Suite("YCache executors", .timeLimit(.minutes(10)))
struct YCacheExecutorTests {
    /// Bytes as they are, noting whether each decode ran on the main thread.
    struct ThreadNotingCodec: CacheCodec {
        let identifier = "thread-noting-v1"
        /// The thread the test's main-actor code runs on (set before each call).
        static let callerThread = CallerThread()
        let decodedOnMain = Notes()

        func encode(_ value: Data) throws -> Data { value }

        final class Notes: Sendable {
            private let values = Mutex<[Bool]>([])
            func withLock<T>(_ body: (inout [Bool]) -> T) -> T { values.withLock { body(&$0) } }
        }

        func decode(_ data: Data) throws -> Data {
            decodedOnMain.withLock { $0.append(pthread_equal(pthread_self(), Self.callerThread.load()) != 0) }
            return data
        }
    }

    /// A pthread_t shared with the codec.
    final class CallerThread: Sendable {
        private let value = Mutex<UInt>(0)
        func store(_ thread: pthread_t) { value.withLock { $0 = UInt(thread) } }
        func load() -> pthread_t { pthread_t(value.withLock { $0 }) }
    }

    /// A cache whose memory layer keeps nothing, so every lookup reads its entry file.
    static func storageOnlyCache(_ label: String) -> (TemporaryDirectory, YCache) {
        let dir = TemporaryDirectory(label)
        return (dir, YCache(storageDirectory: dir.url, memoryMaximumCost: 0))
    }

    @MainActor
    @Test("a small storage hit called from the main actor is read and decoded there, with no hop")
    func smallHitStaysOnTheMainActor() async throws {
        let (dir, cache) = Self.storageOnlyCache("executor-small")
        defer { withExtendedLifetime(dir) {} }
        let codec = ThreadNotingCodec()
        let key = CacheKey("small")
        _ = try await cache.value(for: key, codec: codec) { Data(count: 4096) }  // a miss: generated, stored
        ThreadNotingCodec.callerThread.store(pthread_self())
        let hit = try await cache.resolve(for: key, codec: codec) { Data() }
        #expect(hit.source == .storage)
        #expect(codec.decodedOnMain.withLock { $0 } == [true], "the hit's decode ran off the main actor")
        ThreadNotingCodec.callerThread.store(pthread_self())
        #expect(try await cache.valueIfCached(for: key, codec: codec)?.count == 4096)
        #expect(codec.decodedOnMain.withLock { $0 } == [true, true])
    }

    @MainActor
    @Test("a large entry, a miss's generator and a decompressing codec run off the main actor")
    func longWorkLeavesTheMainActor() async throws {
        let (dir, cache) = Self.storageOnlyCache("executor-large")
        defer { withExtendedLifetime(dir) {} }
        let codec = ThreadNotingCodec()
        let key = CacheKey("large")
        let generatedOnMain = try await cache.value(for: key, codec: codec) {
            Data(repeating: Thread.isMainThread ? 1 : 0, count: Policy.callerExecutorReadLimit + 1)
        }
        #expect(generatedOnMain.first == 0, "the generator ran on the main actor")
        ThreadNotingCodec.callerThread.store(pthread_self())
        let hit = try await cache.resolve(for: key, codec: codec) { Data() }
        #expect(hit.source == .storage)
        #expect(codec.decodedOnMain.withLock { $0 } == [false], "a large entry was read on the main actor")

        let compressed = CacheKey("compressed")
        _ = try await cache.value(for: compressed, codec: CompressedDataCodec()) { Data(count: 4096) }
        let onMain = Mutex(true)
        // The decompressing codec's hit happens on the pool; the call still returns to the main actor.
        let value = try await cache.value(for: compressed, codec: CompressedDataCodec()) {
            onMain.withLock { $0 = false }
            return Data()
        }
        #expect(value.count == 4096)
        #expect(onMain.withLock { $0 }, "the compressed entry was not a hit")
        MainActor.assertIsolated()
    }

    /// Where the generator of a miss called from a task on the pool ran, and what it saw of its caller.
    struct ProductionStart: Sendable {
        var onCallerThread: Bool
        var label: String?
        var priority: TaskPriority
    }

    @TaskLocal static var label: String?

    /// One miss (or a refresh) from a task of its own on the pool: its caller's thread, then the
    /// generator's, which does not suspend.
    @concurrent static func start(
        _ cache: YCache, _ key: CacheKey, options: YCache.Options = .default, refresh: Bool = false
    ) async throws -> ProductionStart {
        let caller = pthread_self()
        let seen = Mutex<ProductionStart?>(nil)
        let generate: @Sendable () async throws -> Data = {
            seen.withLock {
                $0 = ProductionStart(
                    onCallerThread: pthread_equal(pthread_self(), caller) != 0, label: Self.label,
                    priority: Task.currentPriority)
            }
            return Data(count: 64)
        }
        if refresh {
            _ = try await cache.refresh(for: key, codec: DataCodec(), options: options, generate)
        } else {
            _ = try await cache.value(for: key, codec: DataCodec(), options: options, generate)
        }
        return try #require(seen.withLock { $0 })
    }

    @Test("a miss's production starts on its caller's pool thread, with the caller's task-locals and priority")
    func productionStartsOnTheCallersThread() async throws {
        let (dir, cache) = Self.storageOnlyCache("executor-production")
        defer { withExtendedLifetime(dir) {} }
        // Each way a production starts: a lookup coordinated across processes (the default), one that is
        // not (no key lock), and a refresh.
        let ways: [(String, YCache.Options, Bool)] = [
            ("coordinated", .default, false), ("process-local", .init(crossProcess: .processLocal), false),
            ("refresh", .default, true),
        ]
        for (way, options, refresh) in ways {
            for round in 0..<8 {
                let key = CacheKey(namespace: "production", identity: "\(way)-\(round)")
                // A priority other than the test's own. Not .low: the pool serves higher priorities first,
                // and beside the rest of a parallel run under ASan and load, 24 misses at .low took over a
                // minute.
                let start = try await Task(priority: .high) {
                    try await Self.$label.withValue(way) {
                        try await Self.start(cache, key, options: options, refresh: refresh)
                    }
                }.value
                // Queued for the pool instead (Task.init), it ran on whichever pool thread took it: on a
                // loaded machine as often the other one.
                #expect(start.onCallerThread, "\(way), round \(round): the production started on another thread")
                #expect(start.label == way, "\(way): the generator did not see the caller's task-local")
                #expect(start.priority == .high, "\(way): the generator did not run at the caller's priority")
            }
        }
    }
}
