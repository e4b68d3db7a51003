// Waiting for another process's generation of a key (I5) without a thread per key: every wait of the
// process is served by one thread (LockWatch.swift) and probed without blocking. A probe opens the key's
// lock file read-only and tries a shared lock without waiting: the file gone or the lock free means its
// holder finished (or died), and the waiting task resumes to look in storage and compete again (KeyLock);
// the lock held means wait on. What makes the thread probe is in LockWatch.swift. The waiting task is
// resumed at once when it is cancelled or its deadline passes (I8). The wait never creates the lock file.

import Synchronization

/// Waits for a key's lock holder without blocking the cooperative pool or holding a thread per key.
enum LockWait {
    enum Outcome: Sendable {
        /// The holder released the lock (or was already gone): look in storage, then try again.
        case released
        case timedOut
    }

    /// Called once a wait has begun (the first probe found the lock held, and the holder's release will
    /// be noticed from then on), with the lock file's path, on the waiting task's thread: a test seam that
    /// lets a test (or a test's child process, see `CrossProcessWaitObservation`) know a lookup is waiting
    /// for another process, instead of guessing with a sleep. A task-local of the task whose lookup waits
    /// (flights inherit it from the caller that started them).
    @TaskLocal static var observer: (@Sendable (LockPath) -> Void)?
    /// The same seam for waits on another host's remote lease (RemoteTier), called before each block.
    @TaskLocal static var leaseObserver: (@Sendable () -> Void)?
    /// Tests: another interval than `Policy.LockWaiting.recheckInterval` for waits begun inside (a long
    /// one proves that a wake came from an event, not from the recheck).
    @TaskLocal static var recheckInterval: Duration?

    /// Waits until `path`'s holder releases it; returns `.timedOut` after `timeout`; throws
    /// `CancellationError` at once when the task is cancelled, or the error of a probe that failed. (A
    /// production's waits are not a task's: they are its flight's, FlightCoordination.wait; this one
    /// serves a task that waits in place: the tests of the lock-wait thread.)
    static func wait(for path: LockPath, in directory: Directory, timeout: Duration?) async throws -> Outcome {
        let watch: LockWatch
        switch LockWatch.current() {
        case .success(let current): watch = current
        case .failure(let error): throw error
        }
        let deadline = timeout.map { Syscall.monotonicNanoseconds + max(0, $0.nanoseconds) }
        let identifier = watch.newIdentifier()
        let observer = LockWait.observer
        let recheck = LockWait.recheckInterval?.nanoseconds
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome, any Error>) in
                watch.register(
                    identifier, path: path, in: directory, deadline: deadline, recheck: recheck,
                    resume: { continuation.resume(with: $0) }, announcing: observer)
            }
        } onCancel: {
            watch.finish(identifier, with: .failure(CancellationError()))
        }
    }

    /// What one probe of a lock file found.
    enum Probe {
        /// The file is gone (published or abandoned) or nobody holds it exclusively.
        case released
        /// Someone holds it exclusively.
        case busy
        case failed(SystemCallError)
    }

    /// Looks once, without waiting, whether `path`'s holder is still there: opens it read-only (never
    /// creating it, never blocking on a FIFO planted there), tries a shared lock without waiting and gives
    /// it back at once (LOCK_UN, then close; I7). A few syscalls: safe on the cooperative pool.
    static func probe(_ path: LockPath, in directory: Directory) -> Probe {
        let fd: Int32
        switch Syscall.open(path.relative, in: directory.descriptor, flags: [.readOnly, .nonBlocking]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .released
        case .failure(let error): return .failed(error)
        }
        switch FileLock.attempt(.shared, on: fd, path: path.relative, ownerProcessID: directory.ownerProcessID) {
        case .locked(let lock):
            lock.release()
            return .released
        case .busy:
            Syscall.close(fd)
            return .busy
        case .failed(let error):
            Syscall.close(fd)
            return .failed(error)
        }
    }
}

/// A test seam for child processes (`yashima-stress worker get --announce-wait`): calls `observer` each
/// time a lookup made inside `body` starts waiting for another process's generation of its key (or, with
/// a remote tier, for another host's lease), once that wait has begun.
@_spi(Testing)
public enum CrossProcessWaitObservation {
    /// Runs `body`, calling `observer` whenever a lookup made inside it starts waiting for another process.
    ///
    /// - Parameters:
    ///   - observer: Called once a wait has begun: a release by the holder from then on ends the wait.
    ///   - body: The lookups to observe.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public static func observing<T: Sendable>(
        _ observer: @escaping @Sendable () -> Void, _ body: () async throws -> T
    ) async rethrows -> T {
        try await LockWait.$observer.withValue({ _ in observer() }) {
            try await LockWait.$leaseObserver.withValue(observer, operation: body)
        }
    }
}
