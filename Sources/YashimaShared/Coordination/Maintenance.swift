// Directory maintenance as the engine, the public API and the operator call it: a trim under `trim.lock`
// (Storage's Trimmer does the work, TrimLock makes it one process's at a time), and the debris sweep
// (Storage's staging debris, then lock files nobody holds). Blocking: callers run it off the pool.

import Synchronization

enum Maintenance {
    /// Tests: the roots (device, inode) whose trims fail with the given error, as a real failure to take
    /// `trim.lock` would (per root, so tests running at the same time are not affected).
    static let injectedFailures = Mutex<[RootKey: SystemCallError]>([:])

    struct RootKey: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64

        init(_ directory: Directory) {
            device = directory.rootIdentity.device
            inode = directory.rootIdentity.inode
        }
    }

    /// Brings usage within `budget` if it is over (I9): takes `trim.lock`, waiting for another trimmer so
    /// that the bound holds when this returns, trims, and sweeps debris when the pass did anything.
    /// Blocking. A failure is maintenance's own: a writer counts it and returns its value (Store).
    /// - Parameter force: Recount first and trim down to the budget itself with no per-pass limit (an
    ///   explicit `trimStorageIfNeeded()`).
    /// - Returns: With `force`, the usage left: the scan's count minus what the trim unlinked.
    @discardableResult
    static func trimIfNeeded(_ storage: StorageContext, budget: StorageBudget, force: Bool = false)
        -> Result<CountedUsage?, SystemCallError>
    {
        guard budget.isBounded, force || budget.isExceeded(by: storage.directory.state) else { return .success(nil) }
        if let injected = injectedFailures.withLock({ $0[RootKey(storage.directory)] }) { return .failure(injected) }
        let lock: TrimLock
        switch TrimLock.acquire(in: storage.directory) {
        case .success(let acquired): lock = acquired
        case .failure(let error): return .failure(error)
        }
        let pass = storage.trimmer.trim(budget: budget, force: force)
        if pass.rescanned || pass.unlinked > 0 { sweepDebris(storage) }
        lock.release()
        return .success(pass.left)
    }

    /// Removes debris of killed processes (I2, I6): staging files and empty staging folders older than
    /// `Policy.stagingDebrisAge`, then lock files nobody has held for as long; at most
    /// `Policy.sweepMaximumPerPass` in all. Younger ones may be work in progress and stay. Blocking.
    static func sweepDebris(_ storage: StorageContext) {
        let left = storage.trimmer.sweepStagingDebris(limit: Policy.sweepMaximumPerPass)
        StaleLockFiles.sweep(in: storage.directory, limit: left)
    }
}
