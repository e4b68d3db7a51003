// Trimming (I9): usage under the budget by unlinking the least recently used entries (I11) of a random
// sample of fan-out folders, each victim re-checked before its unlink; debris swept (I2). Bounded time and
// memory whatever the directory holds; the counters and recounts: Docs/Internals.md (Storage/Trim.swift).

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
    /// Whether the pass recounted the directory (a full scan).
    var rescanned: Bool
    /// Entries unlinked.
    var unlinked = 0
}

/// Budget enforcement for one storage root.
final class Trimmer: Sendable {
    let directory: Directory

    init(directory: Directory) {
        self.directory = directory
    }

    private var files: EntryFile { EntryFile(directory: directory) }

    // MARK: Trim (I9)

    /// Brings usage within `budget` if it is over: unlinks least-recently-used entries down to the low
    /// water mark of each bound. A payload counter no scan has counted yet is counted first. Call only
    /// while holding `trim.lock`, so that one process trims at a time. Blocking.
    ///
    /// A pass lists a sample of the fan-out folders (at least `Policy.trimSampleEntries` entries, or all
    /// of them), from a random one on, and unlinks the oldest entries of that sample: no more than the
    /// share of the sample that usage is over the target (entries that old in a random sample are that
    /// old in the directory), at most `Policy.trimMaximumUnlinksPerPass`. So its time and memory are
    /// bounded by the sample, whatever the directory holds; a directory within one sample is trimmed in
    /// exact LRU order. Nothing is kept between passes.
    /// - Parameters:
    ///   - force: Recount first and trim down to the budget itself with no per-pass limit (an explicit
    ///     `trimStorageIfNeeded()`): sampled passes until usage is within it.
    ///   - sampleEntries: The sample's size (tests set a small one).
    func trim(budget: StorageBudget, force: Bool, sampleEntries: Int = Policy.trimSampleEntries) -> TrimPass {
        let state = directory.state
        // Another process may have trimmed (or counted) while this one waited for the lock.
        guard budget.isBounded, force || budget.isExceeded(by: state) else { return TrimPass(rescanned: false) }
        var left: CountedUsage?
        if force || !state.isPayloadCounted {
            // An explicit trim, or counters never counted (0.1, a repair: I14), recounts first (I9).
            left = reconcileUsage()
            // Counted, the directory may be within the budget after all: then the low-water mark is not due.
            if !force && !budget.isExceeded(by: state) { return TrimPass(left: nil, rescanned: true) }
        }
        func target(_ bound: Int64?) -> Int64? {
            bound.map { force ? $0 : Int64(Double($0) * Policy.trimLowWaterFraction) }
        }
        let targets = TrimTargets(payload: target(budget.payloadBytes), allocated: target(budget.allocatedBytes))
        var pass = TrimPass(rescanned: left != nil)
        repeat {
            let sampled = trimSample(
                targets, limit: force ? nil : Policy.trimMaximumUnlinksPerPass, sampleEntries: sampleEntries)
            pass.unlinked += sampled.unlinked
            left?.payloadBytes -= sampled.payloadBytes
            left?.allocatedBytes -= sampled.allocatedBytes
            left?.entries -= sampled.unlinked
            if sampled.unlinked == 0 { break }
        } while force && targets.isOver(state)
        pass.left = force ? left : nil
        return pass
    }

    /// Makes room for a write on a full filesystem (Coordination/SpacePressure.swift): one sampled pass, as
    /// `trim`'s, that unlinks least recently used entries until the usage counter has dropped by `bytes`
    /// (or the pass's limit is reached), each victim re-checked (I9). Budget or not. Call only while
    /// holding `trim.lock`. Blocking.
    /// - Returns: The pass; `unlinked` 0 when nothing could be evicted.
    func makeRoom(bytes: Int64, sampleEntries: Int = Policy.trimSampleEntries) -> TrimPass {
        guard bytes > 0 else { return TrimPass(rescanned: false) }
        // Counters no scan has counted (0.1, a repair: I14) may say nothing is there: counted first, as `trim`.
        let rescanned = !directory.state.isPayloadCounted
        if rescanned { reconcileUsage() }
        let usage = directory.state.usage
        guard usage > 0 else { return TrimPass(rescanned: rescanned) }
        let targets = TrimTargets(payload: nil, allocated: max(0, usage - bytes))
        let sampled = trimSample(targets, limit: Policy.trimMaximumUnlinksPerPass, sampleEntries: sampleEntries)
        return TrimPass(rescanned: rescanned, unlinked: sampled.unlinked)
    }

    /// One sampled pass (see `trim`): the sample, its oldest share unlinked while usage is over `targets`.
    private func trimSample(_ targets: TrimTargets, limit: Int?, sampleEntries: Int) -> (
        unlinked: Int, payloadBytes: Int64, allocatedBytes: Int64
    ) {
        let state = directory.state
        let over = targets.overFraction(state)
        guard over > 0 else { return (0, 0, 0) }
        let folders = files.entryFolders()
        guard !folders.isEmpty else { return (0, 0, 0) }
        var sample: [ScannedEntry] = []
        var listed = 0
        let first = Int.random(in: 0..<folders.count)
        while listed < folders.count && sample.count < sampleEntries {
            files.forEachEntry(inFolder: folders[(first + listed) % folders.count]) { sample.append($0) }
            listed += 1
        }
        let complete = listed == folders.count
        if !complete {
            checkCounters(against: sample, share: Double(listed) / Double(folders.count), sampleEntries: sampleEntries)
        }
        sample.sort { $0.modified < $1.modified }
        // The whole directory: unlink in order until within the target. A sample: only its oldest share.
        var quota = complete ? sample.count : Int((Double(sample.count) * over).rounded(.up))
        if let limit { quota = min(quota, limit) }
        var unlinked = 0
        var payloadBytes: Int64 = 0
        var allocatedBytes: Int64 = 0
        for victim in sample.prefix(quota) {
            guard targets.isOver(state) else { break }
            // Re-check right before unlinking: an entry used since the scan has a newer mtime, a replaced one
            // a newer mtime or another size (I9); and only that file goes, never one published or used
            // between this look and the take-aside (`JudgedFile`).
            guard case .success(let status) = Syscall.status(of: victim.relative, in: directory.descriptor),
                status.isRegularFile, status.modifiedNanoseconds == victim.modified, status.size == victim.size
            else { continue }
            let judged = JudgedFile(status: status, unlessTouched: true, slots: files.slots(ofEntryAt: victim.relative))
            if case .success(let removed?) = files.remove(victim.relative, payload: .readHeader, judged: judged) {
                unlinked += 1
                payloadBytes += removed.payloadBytes
                allocatedBytes += removed.allocatedBytes
            }
        }
        return (unlinked, payloadBytes, allocatedBytes)
    }

    /// Drift (I9): the allocated bytes of a random `share` of the folders, scaled up, against the counter.
    /// When they differ more than twofold (a writer killed between its rename and its count, entries removed
    /// by hand), the counters are marked uncounted, so the next budgeted write recounts them.
    private func checkCounters(against sample: [ScannedEntry], share: Double, sampleEntries: Int) {
        guard sample.count >= sampleEntries / 4, share > 0 else { return }
        let estimate = Double(sample.reduce(Int64(0)) { $0 + $1.allocatedBytes }) / share
        let counted = Double(directory.state.usage)
        if counted > 2 * estimate || counted < estimate / 2 { directory.state.markPayloadUncounted() }
    }

    /// Recounts usage from a scan (reading every entry's fixed header, one folder at a time: memory does
    /// not grow with the directory) and stores it in both counters (I9). Concurrent publishes during the
    /// scan keep their delta. Blocking.
    @discardableResult
    func reconcileUsage() -> CountedUsage {
        let state = directory.state
        let (allocatedBefore, payloadBefore) = (state.usage, state.payloadBytes)
        var counted = CountedUsage(payloadBytes: 0, allocatedBytes: 0, entries: 0)
        files.forEachEntry(readingPayloads: true) { counted.add($0) }
        state.adjustUsage(by: counted.allocatedBytes - allocatedBefore)
        state.adjustPayloadBytes(by: counted.payloadBytes - payloadBefore)
        state.markPayloadCounted()
        return counted
    }

    // MARK: Staging debris (I2)

    /// Unlinks staging files not written for `Policy.stagingDebrisAge` (at `now`, the realtime clock; tests
    /// move it) and entries taken aside and left there as long (by ctime too), and empty
    /// staging folders of that age left in the root by a process killed while making a folder, at most
    /// `limit` of them. Returns how many more the caller's sweep may remove (lock files,
    /// Coordination/StaleLockFiles). Blocking.
    func sweepStagingDebris(limit: Int, now: Int64 = Syscall.realtimeNanoseconds) -> Int {
        let root = directory.descriptor
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
                // A file taken aside by a remover (`.aside`) keeps its entry's old mtime, but the rename into
                // `tmp/` set its ctime (EntryRemove.takeAside): by ctime too, so it is never swept before its
                // remover charges it off (I9). A staging file's mtime is its last write.
                guard let status = name.status, status.isRegularFile else { continue }
                let lastChange =
                    name.name.hasSuffix(Directory.asideSuffix)
                    ? max(status.modifiedNanoseconds, status.changedNanoseconds) : status.modifiedNanoseconds
                guard now - lastChange >= stagingDebrisAge else { continue }
                _ = Syscall.unlink(relative, in: root)
                budget -= 1
            }
        }
        return budget
    }
}

/// The usage a trim brings each bound down to.
private struct TrimTargets {
    let payload: Int64?
    let allocated: Int64?

    func isOver(_ state: SharedState) -> Bool {
        (payload.map { state.payloadBytes > $0 } ?? false) || (allocated.map { state.usage > $0 } ?? false)
    }

    /// The largest share of usage above its target (0 when within both).
    func overFraction(_ state: SharedState) -> Double {
        func share(_ used: Int64, _ target: Int64?) -> Double {
            guard let target, used > target, used > 0 else { return 0 }
            return Double(used - target) / Double(used)
        }
        return min(1, max(share(state.payloadBytes, payload), share(state.usage, allocated)))
    }
}

/// `Policy.stagingDebrisAge` in nanoseconds, read once.
let stagingDebrisAge = Policy.stagingDebrisAge.nanoseconds
