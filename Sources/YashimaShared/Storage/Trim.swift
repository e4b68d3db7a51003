// Trimming (I9): keeping usage (payload bytes, which the storage budget counts, as Yashima counts it, and
// optionally allocated bytes, a disk cap) under the budget by unlinking least-recently-used entries (LRU by
// mtime, I11) down to a low-water mark. Usage is a hint: every publish and unlink adjusts the state file's
// two counters (the payload's length; the file size rounded up to 4 KiB, or `st_blocks × 512` for an
// unlink), so where the allocated measures differ (another block size, inline or compressed files) the
// allocated counter drifts until the next scan, which recounts both from every entry's fixed header. A
// counter no scan has counted yet (a state file made by 0.1, or by a repair) is recounted by the first
// budgeted write before it is trusted. Each victim's mtime and size are re-checked right before its unlink
// (one used or replaced since the scan stays). Staging debris of killed processes is swept here too (I2),
// never a staging file younger than `Policy.stagingDebrisAge`. A trim runs in one process at a time: its
// caller holds `trim.lock` (Coordination/Maintenance.swift takes it, waiting for another trimmer, so a
// writer over budget finds the bound holding when its write returns). Blocking: callers run all of this
// off the cooperative pool (BlockingWork).

import Synchronization

/// What trim keeps usage under (I9): the payload bytes of all entries (the storage budget, as Yashima
/// counts it) and, optionally, their allocated bytes (a disk cap). Nil bounds nothing.
struct StorageBudget: Sendable, Equatable {
    var payloadBytes: Int64?
    var allocatedBytes: Int64?

    var isBounded: Bool { payloadBytes != nil || allocatedBytes != nil }

    /// Whether `state`'s counters are over this budget, or cannot be trusted yet (counters no scan has
    /// counted, in a state file made by 0.1 or by a repair, I14).
    func isExceeded(by state: SharedState) -> Bool {
        guard isBounded else { return false }
        if !state.isPayloadCounted { return true }
        if let payloadBytes, state.payloadBytes > payloadBytes { return true }
        if let allocatedBytes, state.usage > allocatedBytes { return true }
        return false
    }
}

/// What one trim pass did.
struct TrimPass: Sendable {
    /// With `force`, the usage left: the scan's count minus what the pass unlinked; nil otherwise.
    var left: CountedUsage?
    /// Whether the pass scanned the directory (then its caller sweeps debris, as the scan found it).
    var rescanned: Bool
}

/// Budget enforcement for one storage root.
final class Trimmer: Sendable {
    let directory: Directory

    /// Victims from the last scan, oldest first, consumed from the front. Re-checked before each unlink,
    /// so a stale index costs a skipped victim, never a wrong unlink. Rebuilt when exhausted: a write
    /// pays for a full scan only once per index's worth of evictions (O(1) amortised).
    private let index = Mutex<(victims: [ScannedEntry], next: Int)>(([], 0))

    init(directory: Directory) {
        self.directory = directory
    }

    private var files: EntryFile { EntryFile(directory: directory) }

    // MARK: Trim (I9)

    /// Brings usage within `budget` if it is over: unlinks least-recently-used entries down to the low
    /// water mark of each bound. A payload counter no scan has counted yet is counted first. Call only
    /// while holding `trim.lock`, so that one process trims at a time. Blocking.
    /// - Parameter force: Recount first and trim down to the budget itself with no per-pass limit (an
    ///   explicit `trimStorageIfNeeded()`).
    func trim(budget: StorageBudget, force: Bool) -> TrimPass {
        let state = directory.state
        // Another process may have trimmed (or counted) while this one waited for the lock.
        guard budget.isBounded, force || budget.isExceeded(by: state) else { return TrimPass(rescanned: false) }
        var rescanned = false
        var left: CountedUsage?
        if force || !state.isPayloadCounted {
            // An explicit trim, or counters never counted (0.1, a repair: I14), recounts first (I9).
            left = rebuildIndex()
            rescanned = true
            // Counted, the directory may be within the budget after all: then the low-water mark is not due.
            if !force && !budget.isExceeded(by: state) { return TrimPass(rescanned: true) }
        }
        func target(_ bound: Int64?) -> Int64? {
            bound.map { force ? $0 : Int64(Double($0) * Policy.trimLowWaterFraction) }
        }
        let payloadTarget = target(budget.payloadBytes)
        let allocatedTarget = target(budget.allocatedBytes)
        func isOver() -> Bool {
            (payloadTarget.map { state.payloadBytes > $0 } ?? false)
                || (allocatedTarget.map { state.usage > $0 } ?? false)
        }
        var unlinked = 0
        while isOver() {
            guard let victim = nextVictim(rescanIfEmpty: !rescanned, rescanned: &rescanned) else { break }
            // Re-check right before unlinking: an entry used since the scan has a newer mtime, a replaced one
            // a newer mtime or another size (I9).
            guard case .success(let status) = Syscall.status(of: victim.relative, in: directory.descriptor),
                status.isRegularFile, status.modifiedNanoseconds == victim.modified, status.size == victim.size
            else { continue }
            if case .success(true) = files.remove(victim.relative, payload: .known(victim.payloadBytes)) {
                unlinked += 1
                left?.payloadBytes -= victim.payloadBytes
                left?.allocatedBytes -= victim.allocatedBytes
                left?.entries -= 1
            }
            if unlinked >= Policy.trimMaximumUnlinksPerPass && !force { break }
        }
        return TrimPass(left: force ? left : nil, rescanned: rescanned)
    }

    private func nextVictim(rescanIfEmpty: Bool, rescanned: inout Bool) -> ScannedEntry? {
        if let victim = popIndex() { return victim }
        guard rescanIfEmpty else { return nil }
        rescanned = true
        rebuildIndex()
        return popIndex()
    }

    /// Scans (reading payload sizes), reconciles both counters and replaces the victim index; returns the count.
    @discardableResult
    private func rebuildIndex() -> CountedUsage {
        let state = directory.state
        let (allocatedBefore, payloadBefore) = (state.usage, state.payloadBytes)
        let entries = files.scanEntries(readingPayloads: true).sorted { $0.modified < $1.modified }
        let counted = CountedUsage(counting: entries)
        // Reconcile both counters with the scan (I9); concurrent publishes during the scan keep their delta.
        state.adjustUsage(by: counted.allocatedBytes - allocatedBefore)
        state.adjustPayloadBytes(by: counted.payloadBytes - payloadBefore)
        state.markPayloadCounted()
        index.withLock { $0 = (entries, 0) }
        return counted
    }

    private func popIndex() -> ScannedEntry? {
        index.withLock { index in
            guard index.next < index.victims.count else { return nil }
            defer { index.next += 1 }
            return index.victims[index.next]
        }
    }

    /// Recounts usage from a scan (reading every entry's fixed header) and stores it in both counters (I9).
    /// Blocking.
    func reconcileUsage() -> CountedUsage {
        let state = directory.state
        let (allocatedBefore, payloadBefore) = (state.usage, state.payloadBytes)
        let counted = CountedUsage(counting: files.scanEntries(readingPayloads: true))
        state.adjustUsage(by: counted.allocatedBytes - allocatedBefore)
        state.adjustPayloadBytes(by: counted.payloadBytes - payloadBefore)
        state.markPayloadCounted()
        return counted
    }

    // MARK: Staging debris (I2)

    /// Unlinks staging files older than `Policy.stagingDebrisAge` and empty staging folders of that age left
    /// in the root by a process killed while making a folder, at most `limit` of them. Returns how many
    /// more the caller's sweep may remove (lock files, Coordination/StaleLockFiles). Blocking.
    func sweepStagingDebris(limit: Int) -> Int {
        let root = directory.descriptor
        let now = Syscall.realtimeNanoseconds
        var budget = limit
        if case .success(let names) = Syscall.listDirectoryWithStatus(".", in: root) {
            for name in names where name.name.hasPrefix(Directory.folderStagingPrefix) && budget > 0 {
                guard let status = name.status, status.isDirectory,
                    now - status.modifiedNanoseconds >= stagingDebrisAge
                else { continue }
                _ = Syscall.unlink(name.name, in: root, isDirectory: true)  // rmdir: never one with contents
                budget -= 1
            }
        }
        if case .success(let names) = Syscall.listDirectoryWithStatus(Directory.stagingFolder, in: root) {
            for name in names where budget > 0 {
                let relative = Directory.stagingFolder + "/" + name.name
                guard let status = name.status, status.isRegularFile,
                    now - status.modifiedNanoseconds >= stagingDebrisAge
                else { continue }
                _ = Syscall.unlink(relative, in: root)
                budget -= 1
            }
        }
        return budget
    }
}

/// `Policy.stagingDebrisAge` in nanoseconds, read once.
let stagingDebrisAge = Policy.stagingDebrisAge.nanoseconds
