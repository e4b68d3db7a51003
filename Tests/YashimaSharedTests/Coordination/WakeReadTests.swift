// A flight woken by another process's release reads the entry on the lock-wait thread (FlightCoordination,
// issue 25; I3's validation, I5): the published value is returned without a generation; a corrupt entry
// is removed and the flight takes the lock and generates, or throws under `.throwError`; an entry past the
// thread's read limit is read by the waiting caller as before. The holder is this process on a directory
// of its own (flock conflicts between two descriptors of one process).

import Foundation
import Testing

@testable import YashimaShared

// A hang guard, never a speed claim: each test takes milliseconds alone, but beside the whole parallel
// suite on a loaded 2-core machine it waits minutes for its turns on the cooperative pool (a 1-minute
// limit failed 20 tests there that had all begun at the run's start).
@Suite("Flights read the entry on their wake", .timeLimit(.minutes(10)))
struct WakeReadTests {
    /// One test's cache, key, and a holder of the key's lock on another `Directory` (another process).
    struct Setup {
        let dir: TemporaryDirectory
        let cache: YCache
        let key: CacheKey
        let other: Directory
        let expectation: EntryExpectation

        init(_ name: String) throws {
            (dir, cache) = makeCache("wake-\(name)")
            key = CacheKey(name)
            other = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            expectation = EntryExpectation(key: key, codecIdentifier: StringCodec().identifier)
        }

        /// Takes the key's lock as another process would.
        func hold() async throws -> KeyLock {
            let path = other.lockPath(forKeyDigest: key.stableDigest)
            guard
                case .acquired(let lock) = try KeyLock.step(path, in: other, afterWait: false, lookAgain: nil)
                    as KeyLock.Step<Never>
            else { throw CancellationError() }
            return lock
        }

        /// `value(for:)` in a task whose generator counts its calls and returns "own"; returns once the
        /// lookup waits for the holder.
        func waitingLookup(_ calls: Counter, options: YCache.Options = .default) async -> Task<String, any Error> {
            let begun = Gate()
            let (cache, key) = (cache, key)
            let task = Task {
                try await LockWait.$observer.withValue({ _ in begun.open() }) {
                    try await cache.value(for: key, codec: StringCodec(), options: options) {
                        calls.increment()
                        return "own"
                    }
                }
            }
            #expect(await begun.wait(within: 60))
            return task
        }

        /// The holder's publish of `value` (the lock file renamed over the entry, I6).
        func publish(_ value: String, through lock: consuming KeyLock) async throws {
            let content = EntryContent(
                payload: Data(value.utf8), expectation: expectation, codecIdentifier: StringCodec().identifier,
                createdAt: Syscall.realtimeNanoseconds, expiresAt: 0)
            _ = try await lock.publish(content, to: expectation.path, mode: .adding).get()
        }

        /// A damaged file at the entry path (a header that does not parse), then the lock abandoned.
        func abandonOverDamagedEntry(_ lock: consuming KeyLock) throws {
            _ = other.ensureFanOut(expectation.path.fanOut)
            try Data(repeating: 0x42, count: 200).write(to: dir.url.appendingPathComponent(expectation.path.relative))
            lock.abandon()
        }
    }

    @Test("a waiting lookup returns the value another process published, without generating")
    func publishedValueIsReturned() async throws {
        let setup = try Setup("published")
        let lock = try await setup.hold()
        let calls = Counter()
        let lookup = await setup.waitingLookup(calls)
        try await setup.publish("theirs", through: lock)
        #expect(try await result(of: lookup, within: 60)?.get() == "theirs")
        #expect(calls.value == 0)
        #expect(setup.cache.statistics.sharedGenerations == 1)
        #expect(try await setup.cache.peek(for: setup.key, codec: StringCodec()) == "theirs", "remembered in memory")
    }

    @Test("a value larger than the wake's read limit is read by the waiting caller, as before")
    func largeValueIsReturned() async throws {
        let setup = try Setup("large")
        let lock = try await setup.hold()
        let calls = Counter()
        let lookup = await setup.waitingLookup(calls)
        let large = String(repeating: "x", count: Policy.LockWaiting.wakeReadLimit + 1)
        try await setup.publish(large, through: lock)
        #expect(try await result(of: lookup, within: 60)?.get() == large)
        #expect(calls.value == 0)
    }

    @Test("a damaged entry found on the wake is removed; the lookup takes the lock and generates its own")
    func damagedEntryFallsBack() async throws {
        let setup = try Setup("damaged")
        let lock = try await setup.hold()
        let calls = Counter()
        let lookup = await setup.waitingLookup(calls)
        try setup.abandonOverDamagedEntry(lock)
        #expect(try await result(of: lookup, within: 60)?.get() == "own")
        #expect(calls.value == 1)
        #expect(setup.cache.statistics.corruptEntries == 1)
        #expect(try await stored(in: setup.dir, setup.key, StringCodec()) == "own", "the damaged entry was replaced")
    }

    @Test("under .throwError a damaged entry found on the wake throws corruptEntry, and nothing is generated")
    func damagedEntryThrowsWhenStrict() async throws {
        let setup = try Setup("damaged-strict")
        let lock = try await setup.hold()
        let calls = Counter()
        var options = YCache.Options()
        options.readFailurePolicy = .throwError
        let lookup = await setup.waitingLookup(calls, options: options)
        try setup.abandonOverDamagedEntry(lock)
        let outcome = await result(of: lookup, within: 60)
        #expect(throws: YCache.Error.self) { try outcome?.get() }
        #expect(calls.value == 0)
        #expect(setup.cache.statistics.corruptEntries == 1)
    }
}
