// Waiting for another process's generation of a key (I5): a thread of its own (never the cooperative
// pool) blocks on a shared lock of the key's lock file until its holder releases it, so every waiting
// process wakes at once instead of one exclusive hand-off after another; the waiting task is resumed
// through a continuation, at once when it is cancelled or its deadline passes (I8). The wait never creates
// the lock file: when it is gone, its holder has finished.

import Foundation
import Synchronization

/// Waits for a key's lock holder on a dedicated thread, so the cooperative pool never blocks on a lock.
///
/// The waiting task can leave early (cancellation, or the caller's deadline): it is resumed at once and
/// the thread, still blocked on the lock, returns the moment the holder releases. So no thread or
/// descriptor stays blocked longer than the holder keeps the lock.
final class LockWait: Sendable {
    enum Outcome: Sendable {
        /// The holder released the lock (or was already gone): look in storage, then try again.
        case released
        case timedOut
    }

    /// Called on the waiting thread right before it blocks, with the lock file's path: a test seam that
    /// lets a test (or a test's child process, see `CrossProcessWaitObservation`) know a lookup is
    /// waiting for another process, instead of guessing with a sleep. A task-local of the task whose
    /// lookup waits (flights inherit it from the caller that started them).
    @TaskLocal static var observer: (@Sendable (LockPath) -> Void)?
    /// The same seam for waits on another host's remote lease (RemoteTier), called before each block.
    @TaskLocal static var leaseObserver: (@Sendable () -> Void)?

    private enum State {
        case waiting(CheckedContinuation<Outcome, any Error>)
        case notStarted
        case finished
    }

    private let state = Mutex<State>(.notStarted)

    /// Waits until `path`'s holder releases it; returns `.timedOut` after `timeout`; throws
    /// `CancellationError` promptly when the task is cancelled.
    static func wait(for path: LockPath, in directory: Directory, timeout: Duration?) async throws -> Outcome {
        let wait = LockWait()
        let observer = LockWait.observer
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome, any Error>) in
                let proceed = wait.state.withLock { state -> Bool in
                    if case .finished = state { return false }  // cancelled before we started
                    state = .waiting(continuation)
                    return true
                }
                guard proceed else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let thread = Thread {
                    let result = waitForRelease(path, in: directory, announcing: observer)
                    _ = wait.finish(with: result.map { Outcome.released }.mapError { $0 as any Error })
                }
                thread.stackSize = Policy.lockWaitThreadStackSize
                thread.start()
                if let timeout {
                    let nanoseconds = max(0, timeout.nanoseconds)
                    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
                        _ = wait.finish(with: .success(.timedOut))
                    }
                }
            }
        } onCancel: {
            _ = wait.finish(with: .failure(CancellationError()))
        }
    }

    /// Waits until the current holder of `path` releases it, then returns without holding anything. Never
    /// creates the lock file: if it is gone, the holder has finished. Blocking: call off the pool.
    static func waitForRelease(
        _ path: LockPath, in directory: Directory, announcing observer: (@Sendable (LockPath) -> Void)? = nil
    ) -> Result<Void, SystemCallError> {
        let fd: Int32
        switch Syscall.open(path.relative, in: directory.descriptor, flags: [.readOnly]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .success(())
        case .failure(let error): return .failure(error)
        }
        observer?(path)
        switch FileLock.wait(for: .shared, on: fd, path: path.relative, ownerProcessID: directory.ownerProcessID) {
        case .success(let lock):
            lock.release()  // I7: LOCK_UN before close
            return .success(())
        case .failure(let error):
            Syscall.close(fd)
            return .failure(error)
        }
    }

    /// Resumes the waiting task once; returns false when it was already resumed.
    private func finish(with result: Result<Outcome, any Error>) -> Bool {
        let continuation = state.withLock { state -> CheckedContinuation<Outcome, any Error>? in
            switch state {
            case .waiting(let continuation):
                state = .finished
                return continuation
            case .notStarted:
                state = .finished
                return nil
            case .finished:
                return nil
            }
        }
        guard let continuation else { return false }
        continuation.resume(with: result)
        return true
    }
}

/// A test seam for child processes (`yashima-stress worker get --announce-wait`): calls `observer` each
/// time a lookup made inside `body` starts waiting for another process's generation of its key (or, with
/// a remote tier, for another host's lease), on the waiting thread, just before it blocks.
@_spi(Testing)
public enum CrossProcessWaitObservation {
    /// Runs `body`, calling `observer` whenever a lookup made inside it starts waiting for another process.
    ///
    /// - Parameters:
    ///   - observer: Called on the waiting thread right before it blocks.
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
