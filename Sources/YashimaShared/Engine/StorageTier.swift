// The storage tier: the one way to the storage directory's context (opened on first use, again after a
// failure, a fork (I7) or a renamed root (I13)); reading the key's entry file (I3: no lock, full validation),
// decoding it, remembering it in memory under the epochs read before the read (I10), touching it (I11). A
// corrupt or expired entry, or one the codec refuses, is removed and a miss (thrown under `.throwError`).
// Removal: I10's two bumps.

import Synchronization

/// What a storage access is for.
enum StoragePurpose: Sendable {
    /// A lookup: the root path is re-checked at most once per `Policy.rootCheckInterval` (I13).
    case read
    /// A write (publish, remove, trim, a production's lock file): the root path is checked now (I13).
    case write
}

/// The shared storage directory (L2) as a tier: its context, its hits, epochs and discards. A production
/// looks here again under the key's lock (KeyLock, I5) through `hit(_:in:shared:now:limit:)`, the same read.
final class StorageTier: CacheTier {
    /// The storage directory's path, as configured.
    let path: String
    private let sharing: StorageSharingMode
    private let allowNetworkFilesystem: Bool
    /// Where a hit is remembered (I10).
    private let memory: MemoryTier
    /// The cache's counters (storage hits, corrupt entries, repairs).
    private let counters: CacheCounters

    private enum Opening {
        case notYet
        case open(StorageContext)
        case failed(YCache.Error, at: Int64)
    }

    private let opening = Mutex<Opening>(.notYet)

    init(
        path: String, sharing: StorageSharingMode, allowNetworkFilesystem: Bool, memory: MemoryTier,
        counters: CacheCounters
    ) {
        self.path = path
        self.sharing = sharing
        self.allowNetworkFilesystem = allowNetworkFilesystem
        self.memory = memory
        self.counters = counters
    }

    var place: TierPlace { .beforeFlight }

    /// A miss when storage cannot be opened, unless `.throwError`. (Pre-specialised: the generic entry only
    /// dispatches to the specialisation; the body is `lookupHit`, so no generic metadata is made on the way.)
    @_specialize(where Codec == DataCodec)
    @_specialize(where Codec == StringCodec)
    func lookup<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?
    {
        try lookupHit(lookup, engine: engine)
    }

    @inline(never)
    private func lookupHit<Codec: CacheCodec>(_ lookup: TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?
    {
        // A decompressing codec may turn a small payload into a large value: decoded on the pool.
        if lookup.readLimit != nil, Codec.self == CompressedDataCodec.self { throw LeavesCallerExecutor() }
        let request = engine.request(lookup.entryKey, codec: lookup.codec, options: lookup.options) { nil }
        let storage = try lookup.opened.orMiss(under: request.options.readFailurePolicy)
        return try hit(request, in: storage, shared: false, now: lookup.now, limit: lookup.readLimit)?.resolution
    }

    /// Unlinks the entry between two bumps of its epochs (I10). A storage directory that cannot be opened
    /// is reported, because its entry would come back once the directory is usable again.
    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool {
        let context = try context(for: .write).get()
        let headerSize = EntryFormat.fixedHeaderSize + key.key.canonicalByteCount + key.codecIdentifier.utf8.count
        let (_, unlinked) = try engine.unlinkStoredEntry(
            at: context.directory.entryPath(for: key.identity), headerSize: headerSize, namespace: key.key.namespace,
            keyDigest: key.key.stableDigest, in: context)
        return unlinked
    }
}

/// A storage hit and the epochs it was read under.
struct StorageHit<Value: Sendable>: Sendable {
    let resolution: YCache.Resolved<Value>
    let epochs: EpochSnapshot?
}

extension StorageTier {
    // MARK: The context

    /// The storage context, opening the directory on first use, and again: after a failure (at most once
    /// per `Policy.storageReopenInterval`), after a fork (I7), and when the root path no longer names the
    /// open root (I13), which a write checks now and a read at most once per `Policy.rootCheckInterval`.
    /// The one way every part of the engine gets at storage.
    func context(for purpose: StoragePurpose = .read) -> Result<StorageContext, YCache.Error> {
        openedStorage(for: purpose)
    }

    /// `context(for: .read)` for a caller that opens storage ahead of its work (`YCache.openStorage()`),
    /// with the process's first lookup rehearsed once the directory is open (`rehearseFirstLookup`): its
    /// types made now, while the process has time, rather than in its first lookup. Only here: measured
    /// whole-process, the rehearsal costs 1.06 M instructions and saves 0.68 M of the first hit (the call
    /// sites of the first lookup still make their own names' types), a loss for a process whose first
    /// lookup opens the directory, and a gain only where the lookup waits for something else (the fresh
    /// stampede's workers; Benchmarks/results/2026-12-07-what-is-left.md).
    func contextPreparingFirstLookup() -> Result<StorageContext, YCache.Error> {
        let result = openedStorage(for: .read)
        if case .success = result, !firstLookupRehearsed.exchange(true, ordering: .relaxed) {
            CacheEngine.rehearseFirstLookup(in: result)
        }
        return result
    }

    /// `context(for:)`'s work under the `opening` lock.
    private func openedStorage(for purpose: StoragePurpose) -> Result<StorageContext, YCache.Error> {
        opening.withLock { opening in
            let now = Syscall.monotonicNanoseconds
            switch opening {
            case .open(let context) where context.directory.isUsable(verifyingRoot: purpose == .write, now: now):
                return .success(context)
            case .failed(let error, let at) where now - at < storageReopenInterval:
                return .failure(error)
            default:
                do throws(YCache.Error) {
                    let directory = try Directory(
                        path: path, sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem,
                        // Called with `opening` or the state's own lock held (a repair while opening or
                        // switching files): only the local counter, never `count`, whose shared-counter
                        // mirror takes both locks again.
                        onRepair: { [counters] in counters.countLocally { $0.auxiliaryFileRepairs += 1 } })
                    let context = StorageContext(directory: directory)
                    opening = .open(context)
                    return .success(context)
                } catch {
                    opening = .failed(error, at: now)
                    return .failure(error)
                }
            }
        }
    }

    /// `context(for:)` when the directory is open and usable as it is; nil when getting it would open
    /// (or reopen) the directory, which a lookup on its caller's executor leaves to the pool.
    func contextIfOpen(for purpose: StoragePurpose) -> Result<StorageContext, YCache.Error>? {
        usableContext(for: purpose).map { .success($0) }
    }

    /// `contextIfOpen(for:)` as an optional (what a memory hit needs). The root check's interval is timed
    /// by the coarse monotonic clock: it only spaces the checks out (I13), and a lookup reads it for a
    /// fifth of the exact clock's cost.
    func usableContext(for purpose: StoragePurpose) -> StorageContext? {
        opening.withLock { opening -> StorageContext? in
            guard case .open(let context) = opening,
                context.directory.isUsable(
                    verifyingRoot: purpose == .write, now: Syscall.coarseMonotonicNanoseconds)
            else { return nil }
            return context
        }
    }

    /// The open directory's state file, without opening the directory (nil until it is open): where the
    /// statistics are mirrored, which must never be what opens storage.
    var stateIfOpen: SharedState? {
        opening.withLock { opening in
            if case .open(let context) = opening { return context.directory.state }
            return nil
        }
    }

    // MARK: Hits

    /// Looks in storage; a hit is decoded, put in memory, and its file touched (I11). A corrupt or expired
    /// entry, or one the codec cannot decode, is removed and is a miss, or throws under `.throwError`: a
    /// `YCache.Error`, or the codec's own error as it threw it.
    /// - Parameters:
    ///   - shared: Whether a hit is another process's generation this lookup waited for.
    ///   - now: The lookup's realtime clock when it has one (nil: read it now).
    ///   - limit: The largest entry file to read; a larger one throws `LeavesCallerExecutor` (nil: any).
    func hit<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, in storage: StorageContext?, shared: Bool, now: Int64? = nil,
        limit: Int? = nil
    ) throws -> StorageHit<Codec.Value>? {
        guard let storage else { return nil }
        let epochs = epochs(of: request, in: storage)
        let path = request.expectation.path
        let now = now ?? Syscall.realtimeNanoseconds
        var opened: FileStatus?
        let read = storage.files.read(path, expecting: request.expectation, now: now, limit: limit, opened: &opened)
        // What a discard below removes: the file read, and no other published since (`JudgedFile`).
        let judged = opened.map { JudgedFile(status: $0, unlessTouched: false, slots: request.expectation.slots) }
        let strict = request.options.readFailurePolicy == .throwError
        switch read {
        case .success(let entry):
            let value: Codec.Value
            do {
                value = try request.codec.decode(entry.payload)
            } catch {
                count { $0.corruptEntries += 1 }
                discard(path, headerSize: request.expectation.headerSize, judged: judged, in: storage)
                if strict { throw error }  // the codec's own error, unwrapped (as Yashima)
                return nil
            }
            let lastUse = entry.lastUse  // touched by the read (I11)
            let cost =
                request.options.cost?.charged
                ?? request.codec.memoryCost(of: value, encodedByteCount: entry.payload.count)
            let metadata = request.key.metadata(
                header: entry.header, codecIdentifier: request.codec.identifier, cost: cost, lastAccessedAt: now)
            // A memory that cannot keep this value (L1 disabled, or the value larger than its budget) is
            // not asked: `insert` would refuse it after the item was built and copied.
            if request.options.writePolicy != .disabled, memory.store.mightKeep(cost: cost) {
                memory.remember(
                    MemoryItem(
                        value: value, cost: cost, metadata: metadata, slots: epochs?.slots, stamp: epochs?.stamp,
                        entryPath: path, entryVersion: EntryVersion(entry.header)),
                    for: request.entryKey, lastUse: lastUse)
            }
            counters.count(state: storage.directory.state) { $0.storageHits += 1 }
            return StorageHit(
                resolution: YCache.Resolved(
                    value: value, source: .storage, metadata: metadata, wasSharedGeneration: shared),
                epochs: epochs)
        case .failure(.missing):
            return nil
        case .failure(.expired):
            discard(path, headerSize: request.expectation.headerSize, judged: judged, in: storage)
            return nil
        case .failure(.corrupt(let corruption, _)):
            count { $0.corruptEntries += 1 }
            discard(path, headerSize: request.expectation.headerSize, judged: judged, in: storage)
            if strict { throw YCache.Error.corruptEntry(reason: corruption.description) }
            return nil
        case .failure(.system(let error)):
            if strict { throw YCache.Error.system(error, path: self.path, operation: "reading an entry") }
            return nil
        case .failure(.overLimit):
            throw LeavesCallerExecutor()
        }
    }

    /// The slots and current epochs of `request`'s key, taken before a read or a generation so that a
    /// removal that happens meanwhile invalidates the memory item (I10). Nil without storage.
    func epochs<Codec: CacheCodec>(of request: ProductionRequest<Codec>, in storage: StorageContext?)
        -> EpochSnapshot?
    {
        guard let storage else { return nil }
        let slots = request.expectation.slots
        return EpochSnapshot(slots: slots, stamp: storage.directory.state.stamp(slots))
    }

    /// Unlinks the entry file a lookup proved corrupt or expired (`judged`: that file, never one published
    /// at the path since), unless the root path no longer names this root (I13: never unlink in a
    /// directory that was renamed away).
    private func discard(_ path: EntryPath, headerSize: Int, judged: JudgedFile?, in storage: StorageContext) {
        guard let judged, storage.directory.isStillNamedByPath() else { return }
        _ = storage.files.remove(path.relative, payload: .headerSize(headerSize), judged: judged)
    }

    /// Counts in this cache's statistics, and in the directory's shared counters when it is open.
    private func count(_ update: (inout CacheStatistics) -> Void) {
        counters.count(state: stateIfOpen, update)
    }
}

/// `Policy.storageReopenInterval` in nanoseconds, read once.
private let storageReopenInterval = Policy.storageReopenInterval.nanoseconds

/// Whether this process rehearsed its first lookup (`CacheEngine.rehearseFirstLookup`).
private let firstLookupRehearsed = Atomic<Bool>(false)

extension Result where Success == StorageContext, Failure == YCache.Error {
    /// The storage for a lookup: the context, or under `.treatAsMiss` nil when it cannot be opened (a
    /// miss); under `.throwError` the error.
    func orMiss(under policy: CacheReadFailurePolicy) throws(YCache.Error) -> StorageContext? {
        switch self {
        case .success(let context): return context
        case .failure(let error):
            if policy == .throwError { throw error }
            return nil
        }
    }
}
