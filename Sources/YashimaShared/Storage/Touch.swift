// Touching an entry (I11): a hit sets its mtime (trim's LRU signal) only when something was published since
// its last use, past that publish, otherwise at most once per touchInterval; the touch mark tells a touch's
// ctime from a write's (VerifiedInodes). Docs/Internals.md.

extension EntryFile {
    /// `nanoseconds`, or the next value after it that carries the touch mark (`Policy.touchMark`).
    static func marked(_ nanoseconds: Int64) -> Int64 {
        let modulus = Policy.touchMark.modulus
        let marked = nanoseconds - nanoseconds % modulus + Policy.touchMark.remainder
        return marked >= nanoseconds ? marked : marked + modulus
    }

    /// Whether an mtime was set by a cache touch (its nanoseconds carry the touch mark).
    static func isTouchMark(_ nanoseconds: Int64) -> Bool {
        nanoseconds % Policy.touchMark.modulus == Policy.touchMark.remainder
    }

    /// Whether a hit on an entry last used at `lastUse` touches it (I11): when anything was published
    /// after that use (or trim would take it for older than what was published since), when the use is
    /// at least the touch interval old, or when it lies that far in the future (a clock that jumped back).
    /// Otherwise nothing is written: a read-only workload does not write.
    static func shouldTouch(lastUse: Int64, now: Int64, lastPublish: Int64) -> Bool {
        lastPublish > lastUse || now - lastUse >= touchIntervalNanoseconds || lastUse - now >= touchIntervalNanoseconds
    }

    /// Marks an entry used (I11) if `shouldTouch` says so, and returns its new last use (nil when it was
    /// not touched). The mtime becomes now, and at least one nanosecond after the last publish, so the
    /// entry is newer than everything published before the hit; a file of another user (group-shared
    /// mode) only allows the kernel's now, exact to within a clock tick.
    @discardableResult
    func touchIfStale(_ path: EntryPath, lastUse: Int64, now: Int64) -> Int64? {
        guard let target = touchTarget(lastUse: lastUse, now: now) else { return nil }
        return touched(
            Syscall.setTimes(path.relative, in: directory.descriptor, nanoseconds: target), target, path, now: now)
    }

    /// `touchIfStale(_:lastUse:now:)` for the entry open as `fd` (a read's, EntryFile.read): the file read,
    /// touched with one `futimens`, whatever its path names now. `path` is only for the kernel's-now
    /// fallback of a file of another user.
    func touchIfStale(_ fd: Int32, _ path: EntryPath, lastUse: Int64, now: Int64) -> Int64? {
        guard let target = touchTarget(lastUse: lastUse, now: now) else { return nil }
        return touched(Syscall.setTimes(fd, nanoseconds: target), target, path, now: now)
    }

    /// The last use a touch that set `target` left (`result`). Best effort: a failed touch only makes LRU
    /// order a little less exact; a file of another user (EPERM for explicit times) takes the kernel's now.
    private func touched(_ result: Result<Void, SystemCallError>, _ target: Int64, _ path: EntryPath, now: Int64)
        -> Int64?
    {
        switch result {
        case .success:
            return target
        case .failure(let error) where error.errno == .operationNotPermitted:
            _ = Syscall.touch(path.relative, in: directory.descriptor)
            return now
        case .failure:
            return nil
        }
    }

    /// The mtime a hit on an entry last used at `lastUse` sets (the touch rule, `shouldTouch`), or nil when
    /// it touches nothing: now, and at least one nanosecond after the last publish, with the touch mark.
    private func touchTarget(lastUse: Int64, now: Int64) -> Int64? {
        // A last publish far ahead of now was left by a clock that jumped back: it says nothing about order.
        let recorded = directory.state.lastPublishNanoseconds
        let lastPublish = recorded - now >= touchIntervalNanoseconds ? 0 : recorded
        guard Self.shouldTouch(lastUse: lastUse, now: now, lastPublish: lastPublish) else { return nil }
        return Self.marked(max(now, lastPublish &+ 1))
    }
}

/// `Policy.touchInterval` in nanoseconds, read once (every hit compares against it).
let touchIntervalNanoseconds = Policy.touchInterval.nanoseconds
