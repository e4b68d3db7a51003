// Space pressure (I9): a publish that fails with ENOSPC or EDQUOT, or a write that would leave less than the
// free-space floor, makes the writer trim the directory's least recently used entries (Trimmer.makeRoom,
// one pass under `trim.lock`, each victim re-checked) and, after a failure, write once more. The free space
// is read (fstatvfs) at most once per `Policy.freeSpaceCheckInterval` per cache, estimated in between.

import Synchronization

/// One cache's floor and its last reading of the filesystem's free space.
///
/// How often it reads: at most once per `Policy.freeSpaceCheckInterval`, plus the fresh reads of each trim
/// that makes room. Between reads the free space is the last reading minus what the shared usage counter
/// grew by since: every process's publishes and removals move that counter, so the cache's own writes
/// (the only ones it could push past the floor at a writer's pace) are seen at once, and only other data
/// is seen up to one interval late. That is enough: the floor is a bound on how far the cache fills the
/// filesystem, not a reservation, and a disk that fills anyway is caught by ENOSPC (`RoomForWrite`).
///
/// Where it reads: `fstatvfs` on a local filesystem copies counters the kernel keeps in memory (ext4,
/// xfs, btrfs, tmpfs: no I/O, no lock another process can hold for long), so it runs on the caller's
/// thread, pool or not, about once a second. On an allowed network filesystem, where it is a round trip
/// to a server, the floor is not kept (that space is shared with other hosts anyway); ENOSPC still is.
final class FreeSpaceWatch: Sendable {
    let floor: YCache.FreeSpaceFloor?
    private let last = Mutex<Reading?>(nil)

    private struct Reading {
        /// The directory read (a reopened root is read again).
        let directory: ObjectIdentifier
        let space: FilesystemSpace
        /// The usage counter when read.
        let usage: Int64
        /// CLOCK_MONOTONIC of the read.
        let at: Int64
        /// Until when (monotonic) no floor trim is tried: the last one could not restore the floor.
        var quietUntil: Int64 = 0
    }

    init(floor: YCache.FreeSpaceFloor?) {
        self.floor = floor
    }

    /// The bytes to free before writing `charged` bytes so that the floor stays free; 0 when none (no
    /// floor, enough room, a network filesystem, or a floor trim that could not restore it less than an
    /// interval ago). Reads the filesystem when the last reading is older than the interval.
    func shortfall(writing charged: Int64, in storage: StorageContext) -> Int64 {
        guard let floor, storage.isLocalFilesystem else { return 0 }
        let directory = storage.directory
        let usage = directory.state.usage
        let now = Syscall.monotonicNanoseconds
        let known = last.withLock { $0 }
        var reading: Reading
        if let known, known.directory == ObjectIdentifier(directory), now - known.at < freeSpaceCheckInterval {
            reading = known
        } else {
            guard case .success(let space) = Syscall.filesystemSpace(directory.descriptor) else { return 0 }
            reading = Reading(directory: ObjectIdentifier(directory), space: space, usage: usage, at: now)
            if let known, known.directory == reading.directory { reading.quietUntil = known.quietUntil }
            last.withLock { $0 = reading }
        }
        guard now >= reading.quietUntil else { return 0 }
        let free = reading.space.availableBytes - (usage - reading.usage)
        return max(0, floor.bytes(ofFilesystemBytes: reading.space.totalBytes) + charged - free)
    }

    /// The floor's bytes on the filesystem `space` describes (0 without a floor).
    func floorBytes(_ space: FilesystemSpace) -> Int64 {
        floor?.bytes(ofFilesystemBytes: space.totalBytes) ?? 0
    }

    /// Records a fresh reading taken after a trim that made room; `quiet`: the floor could not be
    /// restored, so no floor trim is tried for an interval.
    func record(_ space: FilesystemSpace, usage: Int64, of directory: Directory, quiet: Bool) {
        let now = Syscall.monotonicNanoseconds
        let reading = Reading(
            directory: ObjectIdentifier(directory), space: space, usage: usage, at: now,
            quietUntil: quiet ? now + freeSpaceCheckInterval : 0)
        last.withLock { $0 = reading }
    }
}

/// What a write needs to make room for itself: its storage, its size on disk, the cache's floor.
struct RoomForWrite: Sendable {
    let storage: StorageContext
    /// The allocated bytes the entry will take (EntryFile.chargedBytes).
    let charged: Int64
    let watch: FreeSpaceWatch
    /// Called once for each trim that unlinked entries to make room (the engine counts it).
    let onTrim: @Sendable () -> Void

    /// Before a write: when it would leave less than the floor free, trims first (off the pool).
    func keepFloor() async {
        guard watch.shortfall(writing: charged, in: storage) > 0 else { return }
        _ = await makeRoom(outOfSpace: false)
    }

    /// Runs `attempt` (a publish); when it fails for lack of space (ENOSPC, EDQUOT), makes room off the pool
    /// and runs it once more, unless nothing could be evicted. A held lock file a failed publish emptied
    /// stays its holder's (EntryPublish), so `attempt` writes into it again.
    func retrying(_ attempt: () async -> Result<PublishOutcome, SystemCallError>) async
        -> Result<PublishOutcome, SystemCallError>
    {
        let first = await attempt()
        guard case .failure(let error) = first, error.errno.isSpacePressure else { return first }
        guard await makeRoom(outOfSpace: true) else { return first }
        return await attempt()
    }

    /// Whether a write is worth trying (again): room was made, or another trimmer is making it.
    private func makeRoom(outOfSpace: Bool) async -> Bool {
        let (storage, charged, watch) = (storage, charged, watch)
        let made = await BlockingWork.run {
            SpacePressure.makeRoom(for: charged, outOfSpace: outOfSpace, in: storage, watch: watch)
        }
        if made.unlinked > 0 { onTrim() }
        return made.worthTrying
    }
}

/// The trim that makes room (blocking).
enum SpacePressure {
    struct Made: Sendable {
        var unlinked = 0
        var worthTrying = false
    }

    /// Takes `trim.lock` (after ENOSPC waiting for another trimmer at most `Policy.pressureTrimLockWait`;
    /// below the floor not at all: that trimmer's pass will do), reads the free space, and unlinks least
    /// recently used entries (one pass, each victim re-checked, I9) until what `charged` bytes need above
    /// the floor is free, plus `Policy.pressureMarginFraction` of the usage. Nothing is unlinked when
    /// another trimmer made the room meanwhile, or when even an empty directory could not hold the write.
    /// Blocking: the writer's extra wait is at most the lock wait, one pass (`Policy.trimSampleEntries`
    /// listed, `Policy.trimMaximumUnlinksPerPass` unlinked) and a debris sweep.
    /// - Parameter outOfSpace: The write failed with ENOSPC or EDQUOT (else: below the floor).
    static func makeRoom(for charged: Int64, outOfSpace: Bool, in storage: StorageContext, watch: FreeSpaceWatch)
        -> Made
    {
        let directory = storage.directory
        let lock: TrimLock
        var waited = false
        switch TrimLock.acquire(in: directory, waitingAtMost: .zero) {
        case .success(let acquired?):
            lock = acquired
        case .success(nil):
            // Another trimmer is at work. Below the floor, its pass is enough (skip, as R7's try-lock); after
            // ENOSPC, wait for it (bounded), then count on the room it made, or make it.
            guard outOfSpace else { return Made() }
            waited = true
            switch TrimLock.acquire(in: directory, waitingAtMost: Policy.pressureTrimLockWait) {
            case .success(let acquired?): lock = acquired
            case .success(nil): return Made(unlinked: 0, worthTrying: true)  // held all along: retry anyway
            case .failure: return Made()
            }
        case .failure:
            return Made()
        }
        guard case .success(let space) = Syscall.filesystemSpace(directory.descriptor) else {
            lock.release()
            return Made()
        }
        let state = directory.state
        let usage = state.usage
        var need = watch.floorBytes(space) + charged - space.availableBytes
        // The disk said full: at least the write's own size, whatever fstatvfs says (root's reserve, a
        // quota, inodes), unless another trimmer ran while this one waited and left room for it.
        if outOfSpace && !(waited && need <= 0) { need = max(need, charged) }
        var made = Made(unlinked: 0, worthTrying: outOfSpace && need <= 0)
        // Larger than the filesystem could hold with every entry gone: trimming would only empty the cache.
        if need > 0 && charged <= space.availableBytes + usage {
            let margin = Int64(Double(usage) * Policy.pressureMarginFraction)
            let pass = storage.trimmer.makeRoom(bytes: need + margin)
            if pass.unlinked > 0 || pass.rescanned { Maintenance.sweepDebris(storage) }
            made.unlinked = pass.unlinked
            made.worthTrying = outOfSpace && pass.unlinked > 0
        }
        if case .success(let after) = Syscall.filesystemSpace(directory.descriptor) {
            watch.record(
                after, usage: state.usage, of: directory,
                quiet: !outOfSpace && after.availableBytes - charged < watch.floorBytes(after))
        }
        lock.release()
        return made
    }
}

/// `Policy.freeSpaceCheckInterval` in nanoseconds, read once.
private let freeSpaceCheckInterval = Policy.freeSpaceCheckInterval.nanoseconds
