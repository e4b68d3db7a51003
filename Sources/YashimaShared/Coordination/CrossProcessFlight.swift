// Steps 2–3 of the cross-process protocol (I5, I6, I8): take the key's lock file, or wait for its holder
// off the cooperative pool (shared lock: all waiters wake together), and look in storage again before
// generating. The caller generates, publishes (renaming the lock file into place), then releases it (I6).

enum CrossProcessFlight {
    enum Outcome<Found: Sendable>: Sendable {
        /// Another process published while we waited (or just before we locked).
        case found(Found)
        /// We hold the key's lock and storage has no entry: generate, publish, then release.
        case acquired(HeldLock)
        /// The wait passed the caller's timeout: generate without the lock (I8).
        case timedOut
        /// The lock file could not be used (an I/O error): generate without the lock.
        case unavailable(SystemCallError)
    }

    /// Locks `path` (waiting if another process holds it), checking storage with `lookup` whenever the
    /// previous holder may have published. Throws `CancellationError` promptly when the task is cancelled,
    /// and whatever `lookup` throws.
    static func acquire<Found: Sendable>(
        _ path: LockPath, in directory: Directory, timeout: Duration?,
        lookup: () throws -> Found?
    ) async throws -> Outcome<Found> {
        let deadline = timeout.map { ContinuousClock.now.advanced(by: $0) }
        while true {
            try Task.checkCancellation()
            var attempt: LockAttempt
            switch LockFile.tryAcquire(path, in: directory) {
            case .success(let value): attempt = value
            case .failure(let error): return .unavailable(error)
            }
            if case .busy = attempt {
                var remaining: Duration?
                if let deadline {
                    remaining = ContinuousClock.now.duration(to: deadline)
                    if remaining! <= .zero { return .timedOut }
                }
                switch try await LockWait.wait(for: path, in: directory, timeout: remaining) {
                case .timedOut: return .timedOut
                case .released: attempt = .stale  // the holder finished: look in storage, then try again
                }
            }
            switch attempt {
            case .acquired(let held):
                // Step 3: another process may have published while we waited.
                let found: Found?
                do { found = try lookup() } catch {
                    held.release(unlinkingIfStillNamed: true)
                    throw error
                }
                if let found {
                    held.release(unlinkingIfStillNamed: true)  // nothing to publish: the lock file goes (I6)
                    return .found(found)
                }
                return .acquired(held)
            case .stale:
                // The holder released (most likely after publishing), or the lock file was renamed or
                // unlinked under us (I6): look in storage before competing for the lock again.
                if let found = try lookup() { return .found(found) }
            case .busy:
                continue
            }
        }
    }
}
