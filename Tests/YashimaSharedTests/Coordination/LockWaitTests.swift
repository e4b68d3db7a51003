// Waiting for a lock holder without a thread per key (LockWait, LockWatch; I5, I8): every way a holder
// ends (a publish renames its file away, an abandon unlinks it, a plain release closes it) wakes the wait;
// a release no event reports is caught by the periodic recheck; deadlines and cancellation resume at once;
// waits on thousands of keys share one thread and at most one watch per fan-out folder. The holder is this
// process on a descriptor of its own (flock conflicts between two descriptors of one process).

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

@Suite struct LockWaitTests {
    /// The thread timed waits run on (see `unreportedReleaseIsRechecked`).
    static let timing = DedicatedThreadExecutor()

    private func directory(_ label: String) throws -> (TemporaryDirectory, Directory) {
        let dir = TemporaryDirectory(label)
        let directory = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        return (dir, directory)
    }

    /// Takes `key`'s lock file exclusively on a descriptor of its own (it plays another process).
    private func hold(_ key: String, in directory: Directory) async throws -> KeyLock {
        let path = directory.lockPath(forKeyDigest: CacheKey(key).stableDigest)
        guard
            case .acquired(let lock) = try KeyLock.step(path, in: directory, afterWait: false, lookAgain: nil)
                as KeyLock.Step<Never>
        else { throw CancellationError() }
        return lock
    }

    /// A holder on a raw descriptor: locked exclusively; `abandon` unlinks, unlocks and closes.
    private final class RawHolder: Sendable {
        let fd: Int32
        let path: String

        init(_ path: LockPath, in directory: Directory) throws {
            _ = directory.ensureFanOut(path.fanOut)
            self.path = directory.path + "/" + path.relative
            fd = open(self.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else { throw CancellationError() }
        }

        func abandon() {
            unlink(path)
            flock(fd, LOCK_UN)
            close(fd)
        }
    }

    private func path(_ key: String, in directory: Directory) -> LockPath {
        directory.lockPath(forKeyDigest: CacheKey(key).stableDigest)
    }

    /// Starts a wait and returns once it has begun (the observer ran: the holder's release is seen from then
    /// on). Its recheck interval is 600 s unless given: a wake within the test's bound came from an event.
    private func startWait(
        _ path: LockPath, in directory: Directory, timeout: Duration? = nil, recheck: Duration = .seconds(600)
    ) async -> Task<LockWait.Outcome, any Error> {
        let begun = Gate()
        let task = Task {
            try await LockWait.$recheckInterval.withValue(recheck) {
                try await LockWait.$observer.withValue({ _ in begun.open() }) {
                    try await LockWait.wait(for: path, in: directory, timeout: timeout)
                }
            }
        }
        _ = await begun.wait(within: 60)
        return task
    }

    @Test("waiting for a holder never creates its lock file, and returns at once when there is none")
    func missingLockFile() async throws {
        let (dir, directory) = try self.directory("lock-wait-missing")
        defer { withExtendedLifetime(dir) {} }
        let path = path("nobody", in: directory)
        let outcome = try await LockWait.wait(for: path, in: directory, timeout: nil)
        #expect(outcome == .released)
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent(path.relative).path))
        if case .released = LockWait.probe(path, in: directory) {} else { Issue.record("probe of a missing file") }
    }

    @Test("an abandon (unlink) ends the wait")
    func abandonWakes() async throws {
        let (dir, directory) = try self.directory("lock-wait-abandon")
        defer { withExtendedLifetime(dir) {} }
        let holder = try RawHolder(path("k", in: directory), in: directory)
        let waiting = await startWait(path("k", in: directory), in: directory)
        holder.abandon()
        #expect(try await result(of: waiting, within: 60)?.get() == .released)
    }

    @Test("a plain release (LOCK_UN and close, the file stays) ends the wait")
    func releaseWakes() async throws {
        let (dir, directory) = try self.directory("lock-wait-release")
        defer { withExtendedLifetime(dir) {} }
        let path = path("k", in: directory)
        _ = directory.ensureFanOut(path.fanOut)
        let fd = try Syscall.open(path.relative, in: directory.descriptor, flags: [.readWrite, .create]).get()
        guard case .locked(let lock) = FileLock.attempt(.exclusive, on: fd) else {
            Issue.record("could not lock")
            return
        }
        let waiting = await startWait(path, in: directory)
        lock.release()
        #expect(try await result(of: waiting, within: 60)?.get() == .released)
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent(path.relative).path))
    }

    @Test("a publish (the lock file renamed over the entry) ends the wait")
    func publishWakes() async throws {
        let (dir, directory) = try self.directory("lock-wait-publish")
        defer { withExtendedLifetime(dir) {} }
        let lock = try await hold("k", in: directory)
        let waiting = await startWait(path("k", in: directory), in: directory)
        let expectation = EntryExpectation(key: CacheKey("k"), codecIdentifier: DataCodec().identifier)
        let content = EntryContent(
            payload: Data("value".utf8), expectation: expectation, codecIdentifier: DataCodec().identifier,
            createdAt: Syscall.realtimeNanoseconds, expiresAt: 0)
        _ = try await lock.publish(content, to: expectation.path, mode: .adding).get()
        #expect(try await result(of: waiting, within: 60)?.get() == .released)
    }

    @Test("a release no event reports (another descriptor keeps the file open) is seen by the recheck")
    func unreportedReleaseIsRechecked() async throws {
        let (dir, directory) = try self.directory("lock-wait-recheck")
        defer { withExtendedLifetime(dir) {} }
        let path = path("k", in: directory)
        _ = directory.ensureFanOut(path.fanOut)
        let fd = try Syscall.open(path.relative, in: directory.descriptor, flags: [.readWrite, .create]).get()
        guard case .locked(let lock) = FileLock.attempt(.exclusive, on: fd) else {
            Issue.record("could not lock")
            return
        }
        // A second descriptor of the same open file (as a forked child's): the close that releases the
        // lock is not the last one, so inotify reports nothing.
        let duplicate = dup(fd)
        defer { close(duplicate) }
        // The wait runs on a thread of its own and notes when it returned: what is timed is the wait,
        // not how long the cooperative pool (busy with the rest of a parallel run) took to resume a task.
        let begun = Gate()
        let waiting = Task(executorPreference: Self.timing) {
            () async throws -> (LockWait.Outcome, ContinuousClock.Instant) in
            let outcome = try await LockWait.$recheckInterval.withValue(Policy.LockWaiting.recheckInterval) {
                try await LockWait.$observer.withValue({ _ in begun.open() }) {
                    try await LockWait.wait(for: path, in: directory, timeout: nil)
                }
            }
            return (outcome, .now)
        }
        #expect(await begun.wait(within: 60))
        let released = ContinuousClock.now
        lock.release()
        let (outcome, returned) = try #require(try await result(of: waiting, within: 60)?.get())
        #expect(outcome == .released)
        // The recheck interval bounds it (1 s), with room for a loaded machine.
        #expect(released.duration(to: returned) < Policy.LockWaiting.recheckInterval * 30)
    }

    @Test("a deadline resumes the wait with timedOut; the holder keeps its lock")
    func deadline() async throws {
        let (dir, directory) = try self.directory("lock-wait-deadline")
        defer { withExtendedLifetime(dir) {} }
        let holder = try RawHolder(path("k", in: directory), in: directory)
        let started = ContinuousClock.now
        let outcome = try await LockWait.wait(for: path("k", in: directory), in: directory, timeout: .milliseconds(50))
        #expect(outcome == .timedOut)
        #expect(started.duration(to: .now) >= .milliseconds(50))
        holder.abandon()
    }

    @Test("cancellation resumes the wait at once with CancellationError")
    func cancellation() async throws {
        let (dir, directory) = try self.directory("lock-wait-cancel")
        defer { withExtendedLifetime(dir) {} }
        let holder = try RawHolder(path("k", in: directory), in: directory)
        let waiting = await startWait(path("k", in: directory), in: directory)
        waiting.cancel()
        let outcome = await result(of: waiting, within: 60)
        #expect(throws: CancellationError.self) { try outcome?.get() }
        holder.abandon()
        // A wait that starts cancelled ends at once too.
        let holder2 = try RawHolder(path("k2", in: directory), in: directory)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await LockWait.wait(for: path("k2", in: directory), in: directory, timeout: nil)
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        holder2.abandon()
    }

    @Test("several waits of one lock file: one cancelled leaves, a release wakes every other")
    func severalWaitsOfOneFile() async throws {
        let (dir, directory) = try self.directory("lock-wait-several")
        defer { withExtendedLifetime(dir) {} }
        let holder = try RawHolder(path("k", in: directory), in: directory)
        var waits: [Task<LockWait.Outcome, any Error>] = []
        for _ in 0..<3 { waits.append(await startWait(path("k", in: directory), in: directory)) }
        waits[1].cancel()
        let cancelled = await result(of: waits[1], within: 60)
        #expect(throws: CancellationError.self) { try cancelled?.get() }
        waits.append(await startWait(path("k", in: directory), in: directory))
        holder.abandon()
        for index in [0, 2, 3] {
            let outcome = await result(of: waits[index], within: 60)
            #expect(try outcome?.get() == .released, "wait \(index)")
        }
    }

    @Test("2,000 keys waited on at once: every wait wakes when its holder goes")
    func manyKeys() async throws {
        let (dir, directory) = try self.directory("lock-wait-many")
        defer { withExtendedLifetime(dir) {} }
        let count = 2000
        let holders = try (0..<count).map { try RawHolder(path("k\($0)", in: directory), in: directory) }
        let begun = Counter()
        let paths = (0..<count).map { path("k\($0)", in: directory) }
        let waits = Task {
            try await LockWait.$recheckInterval.withValue(.seconds(600)) {
                try await LockWait.$observer.withValue({ _ in begun.increment() }) {
                    try await withThrowingTaskGroup(of: LockWait.Outcome.self) { group in
                        for path in paths {
                            group.addTask { try await LockWait.wait(for: path, in: directory, timeout: nil) }
                        }
                        return try await group.reduce(into: 0) { released, outcome in
                            if outcome == .released { released += 1 }
                        }
                    }
                }
            }
        }
        #expect(await eventually(within: 120) { begun.value == count })
        for holder in holders { holder.abandon() }
        #expect(await result(of: waits, within: 120).flatMap { try? $0.get() } == count)
    }
}
