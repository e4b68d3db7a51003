// The one lock primitive: a per-key lock file locked with flock (I5–I7). Non-blocking attempts run
// inline; a blocking wait runs on a dedicated thread (never the cooperative pool) and hands the result to
// the waiting task through a continuation. Used by CrossProcessFlight and by Trim's lock sweep.

import Foundation
import Synchronization

/// A lock file this process holds (`flock(LOCK_EX)` on `descriptor`).
struct HeldLock: Sendable {
    let descriptor: Int32
    let path: LockPath
    let directory: Directory
    /// The lock file's size when locked: non-zero only for one left by a killed holder mid-write.
    var sizeWhenLocked: Int64 = 0

    /// Releases the lock. With `unlinking`, first unlinks the lock file, which is safe because we hold it
    /// (I6): every other locker re-checks the inode. Then `LOCK_UN` before `close` (I7).
    func release(unlinking: Bool) {
        if Syscall.processID != directory.ownerProcessID {
            // A forked child inherited this description: unlocking would release the parent's lock (I7).
            Syscall.close(descriptor)
            return
        }
        if unlinking { _ = Syscall.unlink(path.relative, in: directory.descriptor) }
        Syscall.unlock(descriptor)
        Syscall.close(descriptor)
    }

    /// Releases the lock, first unlinking the lock file if the path still names the inode we hold (it
    /// does not after a publish renamed it into place, I6).
    func release(unlinkingIfStillNamed: Bool) {
        var unlinking = false
        if unlinkingIfStillNamed, case .success(let mine) = Syscall.status(of: descriptor), mine.linkCount > 0,
            case .success(let current) = Syscall.status(of: path.relative, in: directory.descriptor),
            current.isSameFile(as: mine)
        {
            unlinking = true
        }
        release(unlinking: unlinking)
    }
}

/// Outcome of one attempt to lock a key's lock file.
enum LockAttempt: Sendable {
    /// We hold the lock on the file the path names.
    case acquired(HeldLock)
    /// Someone else holds it (non-blocking attempt only).
    case busy
    /// We locked an inode the path no longer names (its holder unlinked it, I6). Check storage, then retry.
    case stale
}

enum LockFile {
    /// Unlinks a key's lock file if nobody holds it (I6: only a holder unlinks). Never creates one.
    static func removeIfUnused(_ path: LockPath, in directory: Directory) {
        guard case .success(let fd) = Syscall.open(path.relative, in: directory.descriptor, flags: [.readWrite]) else {
            return  // no lock file: nothing to do
        }
        guard case .success = Syscall.lock(fd, exclusive: true, wait: false) else {
            Syscall.close(fd)  // busy: a generator holds it and needs it
            return
        }
        if case .success(let mine) = Syscall.status(of: fd), mine.linkCount > 0,
            case .success(let current) = Syscall.status(of: path.relative, in: directory.descriptor),
            current.isSameFile(as: mine)
        {
            _ = Syscall.unlink(path.relative, in: directory.descriptor)
        }
        HeldLock(descriptor: fd, path: path, directory: directory).release(unlinking: false)
    }

    /// One non-blocking attempt.
    static func tryAcquire(_ path: LockPath, in directory: Directory) -> Result<LockAttempt, SystemCallError> {
        attempt(path, in: directory, wait: false)
    }

    /// Waits until the current holder of `path` releases it, then returns without holding anything.
    ///
    /// Waits with a shared lock (`flock(LOCK_SH)`), so when a generator releases, every waiting process
    /// wakes at once instead of one exclusive hand-off after another; each then looks in storage and
    /// only on a miss competes for the exclusive lock again (I5). Never creates the lock file: if it is
    /// gone, the holder has finished. Blocking: call off the pool.
    static func waitForRelease(_ path: LockPath, in directory: Directory) -> Result<Void, SystemCallError> {
        let fd: Int32
        switch Syscall.open(path.relative, in: directory.descriptor, flags: [.readOnly]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .success(())
        case .failure(let error): return .failure(error)
        }
        let locked = Syscall.lock(fd, exclusive: false, wait: true)
        Syscall.unlock(fd)  // I7: LOCK_UN before close
        Syscall.close(fd)
        return locked
    }

    private static func attempt(_ path: LockPath, in directory: Directory, wait: Bool)
        -> Result<LockAttempt, SystemCallError>
    {
        let root = directory.descriptor
        var opened = directory.openLockFile(path.relative)
        if case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced {
            // The fan-out folder is missing or replaced, or a symlink sits at the lock path (never followed):
            // repair, then retry once. A symlink is no lock anyone can hold, so removing it keeps I6.
            if case .failure(let mkdirError) = directory.ensureFanOut(path.fanOut) { return .failure(mkdirError) }
            directory.removeSymbolicLink(path.relative)
            opened = directory.openLockFile(path.relative)
        }
        let fd: Int32
        switch opened {
        case .success(let value): fd = value
        case .failure(let error): return .failure(error)
        }
        switch Syscall.lock(fd, exclusive: true, wait: wait) {
        case .success: break
        case .failure(let error) where error.errno == .wouldBlock:
            Syscall.close(fd)  // we hold nothing on it
            return .success(.busy)
        case .failure(let error):
            Syscall.close(fd)
            return .failure(error)
        }
        // I6: the path must still name the inode we locked.
        let locked = Syscall.status(of: fd)
        let named = Syscall.status(of: path.relative, in: root)
        guard case .success(let mine) = locked, mine.linkCount > 0, case .success(let current) = named,
            current.isSameFile(as: mine)
        else {
            Syscall.unlock(fd)
            Syscall.close(fd)
            return .success(.stale)
        }
        // The generator fills its lock file and renames it into place (I6), so it must be a file we own with
        // no other name: a planted hard link of someone else's file is unlinked (the name only; the file
        // is never written, truncated or chmod'ed) and the attempt starts over on a fresh file.
        guard mine.isOurs else {
            _ = Syscall.unlink(path.relative, in: root)
            Syscall.unlock(fd)
            Syscall.close(fd)
            return .success(.stale)
        }
        if mine.permissionBits != directory.fileMode { _ = Syscall.setMode(fd, directory.fileMode) }
        return .success(
            .acquired(HeldLock(descriptor: fd, path: path, directory: directory, sizeWhenLocked: mine.size)))
    }
}

/// Waits for a key's lock holder on a dedicated thread, so the cooperative pool never blocks in `flock`.
///
/// The waiting task can leave early (cancellation, or the caller's deadline): it is resumed at once and
/// the thread, still blocked in `flock(LOCK_SH)`, returns the moment the holder releases. So no thread
/// or descriptor stays blocked longer than the holder keeps the lock.
final class LockWait: Sendable {
    enum Outcome: Sendable {
        /// The holder released the lock (or was already gone): look in storage, then try again.
        case released
        case timedOut
    }

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
                    let result = LockFile.waitForRelease(path, in: directory)
                    _ = wait.finish(with: result.map { Outcome.released }.mapError { $0 as any Error })
                }
                thread.stackSize = 128 * 1024
                thread.start()
                if let timeout {
                    let nanoseconds = max(
                        0,
                        timeout.components.seconds * 1_000_000_000
                            + timeout.components.attoseconds / 1_000_000_000)
                    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
                        _ = wait.finish(with: .success(.timedOut))
                    }
                }
            }
        } onCancel: {
            _ = wait.finish(with: .failure(CancellationError()))
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
