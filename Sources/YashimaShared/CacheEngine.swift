// Get-or-generate: memory (L1) → storage (L2) → in-process single-flight → cross-process lock (I5) →
// generate → publish. Also the lifecycle operations. Owns no I/O of its own beyond calling Storage and
// Coordination; never blocks the cooperative pool (scans, trims and writes of payloads from
// Policy.offPoolWriteThreshold on go through BlockingWork, lock waits through LockWait).

import Foundation
import Synchronization

/// What a producer needs to generate and store one entry.
struct ProductionRequest<Codec: CacheCodec>: Sendable {
    let key: CacheKey
    let codec: Codec
    let options: YCache.Options
    let memoryKey: MemoryKey
    let expectation: EntryExpectation
    let generate: @Sendable () async throws -> Codec.Value?
}

/// The removal epochs (I10) a value was read or generated under. A memory item carries them, and so does
/// a flight's result: a caller that joined someone else's flight accepts the value only while they are
/// still current, because the flight may have read it before a removal that finished before that caller
/// began.
struct EpochSnapshot: Sendable, Equatable {
    let slots: SharedState.Slots
    let stamp: SharedState.Stamp
}

/// A storage hit and the epochs it was read under.
struct StorageHit<Value: Sendable>: Sendable {
    let resolution: YCache.Resolved<Value>
    let epochs: EpochSnapshot?
}

/// The opened storage root and the helpers bound to it.
struct StorageContext: Sendable {
    let directory: Directory
    let trimmer: Trimmer
    var files: EntryFile { EntryFile(directory: directory) }
    /// False on an allowed network filesystem: read instead of mmap, and no cross-process dedup.
    var isLocalFilesystem: Bool { directory.networkFilesystemName == nil }
}

final class CacheEngine: Sendable {
    let storagePath: String
    /// The storage budget this instance enforces when it writes (I9).
    let budget: StorageBudget
    let sharing: StorageSharingMode
    let allowNetworkFilesystem: Bool
    let memory: MemoryStore
    let flights = FlightTable()
    let statistics = Mutex(CacheStatistics())
    let expectations = ExpectationCache()

    private enum Opening {
        case notYet
        case open(StorageContext)
        case failed(YCache.Error, at: Int64)
    }

    private let opening = Mutex<Opening>(.notYet)

    /// A failed open is retried at most this often (the directory may become usable later).
    private static let reopenInterval: Int64 = 1_000_000_000

    init(
        storagePath: String, memoryMaximumCost: Int?, memoryMaximumEntryCount: Int?, budget: StorageBudget,
        sharing: StorageSharingMode, allowNetworkFilesystem: Bool
    ) {
        self.storagePath = storagePath
        self.budget = budget
        self.sharing = sharing
        self.allowNetworkFilesystem = allowNetworkFilesystem
        self.memory = MemoryStore(maximumCost: memoryMaximumCost, maximumCount: memoryMaximumEntryCount)
    }

    // MARK: Storage access

    /// The storage context, opening the directory on first use (and again after a failure, at most once
    /// a second; also after a fork, I7, and when the root path no longer names the open root, I13).
    /// - Parameter verifyingRoot: Check the root path now (before a write) rather than at most once per
    ///   `Policy.rootCheckInterval`.
    func storage(verifyingRoot: Bool = false) -> Result<StorageContext, YCache.Error> {
        opening.withLock { opening in
            let now = Syscall.monotonicNanoseconds
            switch opening {
            case .open(let context) where context.directory.isUsable(verifyingRoot: verifyingRoot, now: now):
                return .success(context)
            case .failed(let error, let at) where now - at < CacheEngine.reopenInterval:
                return .failure(error)
            default:
                do throws(YCache.Error) {
                    let directory = try Directory(
                        path: storagePath, sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem,
                        // Called with `opening` or the state's own lock held (a repair while opening or
                        // switching files): only the local counter, never `count`, whose shared-counter
                        // mirror takes both locks again.
                        onRepair: { [weak self] in self?.statistics.withLock { $0.auxiliaryFileRepairs += 1 } })
                    let context = StorageContext(directory: directory, trimmer: Trimmer(directory: directory))
                    opening = .open(context)
                    return .success(context)
                } catch {
                    opening = .failed(error, at: now)
                    return .failure(error)
                }
            }
        }
    }

    /// The storage context if the directory is usable, else nil (for best-effort paths).
    var openStorage: StorageContext? {
        if case .success(let context) = storage() { return context }
        return nil
    }

    func count(_ update: (inout CacheStatistics) -> Void) {
        let (before, after) = statistics.withLock { statistics in
            let before = statistics
            update(&statistics)
            return (before, statistics)
        }
        openedState?.add(after, since: before)  // the directory's shared counters (SharedState+Counters)
    }

    /// The open directory's state file, without opening the directory (nil until it is open).
    var openedState: SharedState? {
        opening.withLock { opening in
            if case .open(let context) = opening { return context.directory.state }
            return nil
        }
    }

    // MARK: Lookup

    /// Slots and current epochs of `key`, taken before a read or generation so a removal that happens
    /// meanwhile invalidates the memory item (I10).
    private func epochs(for key: CacheKey, keyDigest: SHA256Digest, context: StorageContext?) -> EpochSnapshot? {
        guard let context else { return nil }
        let slots = SharedState.slots(namespace: key.namespace, keyDigest: keyDigest)
        return EpochSnapshot(slots: slots, stamp: context.directory.state.stamp(slots))
    }

    /// True while no removal (or replacement) has bumped the epochs `epochs` were taken under (I10); true
    /// when there is nothing to compare (no storage).
    func isCurrent(_ epochs: EpochSnapshot?) -> Bool {
        guard let epochs, let state = openStorage?.directory.state else { return true }
        return epochs.stamp.matches(state.stamp(epochs.slots))
    }

    /// The memory item of `memoryKey` if it is live (I10). An item whose epochs moved but that names a
    /// stored entry is kept when storage still holds the same publish of that entry (a removal or a
    /// replacement of another key in its epoch slot moved them): one open and a 128-byte read instead of
    /// dropping it and reading the whole entry again.
    ///
    /// Why this keeps I10: a removal bumps the key's epochs, unlinks, and bumps again; a replacement
    /// publishes (rename), then bumps. `MemoryStore.lookup` read the current epochs before the check
    /// below, and the item is kept with those. If the check found the old file, it ran before the
    /// unlink or rename, so the epochs it read predate the removal's or replacement's last bump: the next
    /// lookup finds them moved again and checks again, and then the file is gone or another publish. So a
    /// lookup that begins after a removal has returned never serves the removed value; only a lookup that
    /// overlapped the removal can, as it could have before the removal began.
    func liveMemoryItem(_ memoryKey: MemoryKey, now: Int64, context: StorageContext?) -> MemoryItem? {
        switch memory.lookup(memoryKey, state: context?.directory.state, now: now) {
        case .miss:
            return nil
        case .hit(let item):
            return item
        case .unconfirmed(let item, let current):
            guard let context, let path = item.entryPath, let version = item.entryVersion,
                context.files.publishedVersion(path) == version
            else {
                memory.drop(memoryKey, serial: item.serial)
                return nil
            }
            memory.confirm(memoryKey, serial: item.serial, stamp: current)
            return item
        }
    }

    /// A hit in memory, or nil. Throws `valueTypeMismatch` when memory holds the key and codec identifier
    /// with a value of another type (two codecs sharing one identifier), as Yashima does.
    func memoryHit<Codec: CacheCodec>(_ memoryKey: MemoryKey, codec: Codec) throws(YCache.Error)
        -> YCache.Resolved<Codec.Value>?
    {
        let now = Syscall.realtimeNanoseconds
        let context = openStorage
        guard let item = liveMemoryItem(memoryKey, now: now, context: context) else { return nil }
        guard let value = item.value as? Codec.Value else { throw .valueTypeMismatch }
        count { $0.memoryHits += 1 }
        if let path = item.entryPath, let context {
            // P15: a value served from memory is still in use; keep its file from looking cold to trim, by
            // the touch rule of I11 (nothing is written unless something was published since its last use,
            // or that use is a minute old).
            let lastUse = memory.lastUse(memoryKey) ?? 0
            if let touched = context.files.touchIfStale(path, lastUse: lastUse, now: now) {
                memory.noteUse(memoryKey, at: touched)
            }
        }
        return YCache.Resolved(value: value, source: .memory, metadata: item.metadata, wasSharedGeneration: false)
    }

    /// Looks in storage; a hit is decoded, put in memory, and its file touched (I11). A corrupt or expired
    /// entry, or one the codec cannot decode, is removed and is a miss, or throws under `.throwError`: a
    /// `YCache.Error`, or the codec's own error as it threw it.
    func storageHit<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, context: StorageContext?, shared: Bool
    ) throws -> StorageHit<Codec.Value>? {
        guard let context else { return nil }
        let epochs = epochs(for: request.key, keyDigest: request.expectation.keyDigest, context: context)
        let path = context.directory.entryPath(for: request.expectation.identity)
        let now = Syscall.realtimeNanoseconds
        let read = context.files.read(
            path, expecting: request.expectation, now: now, useMapping: context.isLocalFilesystem)
        let strict = request.options.readFailurePolicy == .throwError
        switch read {
        case .success(let entry):
            let value: Codec.Value
            do {
                value = try request.codec.decode(entry.payload)
            } catch {
                count { $0.corruptEntries += 1 }
                discard(path, headerSize: request.expectation.headerSize, in: context)
                if strict { throw error }  // the codec's own error, unwrapped (as Yashima)
                return nil
            }
            let lastUse =
                context.files.touchIfStale(path, lastUse: entry.modifiedNanoseconds, now: now)
                ?? entry.modifiedNanoseconds
            let cost =
                request.options.cost?.charged
                ?? request.codec.memoryCost(of: value, encodedByteCount: entry.payload.count)
            let metadata = request.key.metadata(
                header: entry.header, codecIdentifier: request.codec.identifier, cost: cost, lastAccessedAt: now)
            if request.options.writePolicy != .disabled,
                memory.insert(
                    MemoryItem(
                        value: value, cost: cost, metadata: metadata, slots: epochs?.slots, stamp: epochs?.stamp,
                        entryPath: path, entryVersion: EntryVersion(entry.header)),
                    for: request.memoryKey)
            {
                memory.noteUse(request.memoryKey, at: lastUse)
            }
            count { $0.storageHits += 1 }
            return StorageHit(
                resolution: YCache.Resolved(
                    value: value, source: .storage, metadata: metadata, wasSharedGeneration: shared),
                epochs: epochs)
        case .failure(.missing):
            return nil
        case .failure(.expired):
            discard(path, headerSize: request.expectation.headerSize, in: context)
            return nil
        case .failure(.corrupt(let corruption, _)):
            count { $0.corruptEntries += 1 }
            discard(path, headerSize: request.expectation.headerSize, in: context)
            if strict { throw YCache.Error.corruptEntry(reason: corruption.description) }
            return nil
        case .failure(.system(let error)):
            if strict { throw YCache.Error.system(error, path: storagePath, operation: "reading an entry") }
            return nil
        }
    }

    /// Unlinks an entry a lookup proved corrupt or expired, unless the root path no longer names this
    /// root (I13: never unlink in a directory that was renamed away).
    private func discard(_ path: EntryPath, headerSize: Int, in context: StorageContext) {
        guard context.directory.isStillNamedByPath() else { return }
        _ = context.files.remove(path.relative, payload: .headerSize(headerSize))
    }

    /// Memory, then storage. Storage failures to open are a miss unless `.throwError`.
    func cachedValue<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) throws -> YCache.Resolved<Codec.Value>? {
        if let hit = try memoryHit(request.memoryKey, codec: request.codec) { return hit }
        return try storageHit(request, context: try readableStorage(request.options), shared: false)?.resolution
    }

    private func readableStorage(_ options: YCache.Options, verifyingRoot: Bool = false) throws(YCache.Error)
        -> StorageContext?
    {
        switch storage(verifyingRoot: verifyingRoot) {
        case .success(let context): return context
        case .failure(let error):
            if options.readFailurePolicy == .throwError { throw error }
            return nil
        }
    }

    // MARK: Get or generate

    /// The full get-or-generate path. Returns nil only when an optional generator produced nil (or the
    /// lookup is cache-only and missed).
    func resolve<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, optional: Bool
    ) async throws -> YCache.Resolved<Codec.Value>? {
        switch request.options.lookupPolicy {
        case .refresh:
            return try await refresh(request)
        case .cacheOnly:
            return try cachedValue(request)
        case .normal:
            break
        }
        if let hit = try cachedValue(request) { return hit }
        if request.options.singleFlightPolicy == .disabled {
            return try await produceDirectly(request, coordinate: false)
        }
        // A joiner whose producer returned nil (an optional generator) or whose refresh failed runs its
        // own generation instead of failing (no Yashima quirks: see the list).
        for _ in 0..<3 {
            let key = FlightKey(entry: request.memoryKey, kind: .lookup)
            let (result, joined, kind) = try await flights.run(
                key, cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
            ) { flight in
                await self.produce(request, flight: flight, refreshing: false)
            }
            switch result {
            case .value(let value, let metadata, let source, let sharedAcrossProcesses, let epochs):
                // Another codec with this identifier but another value type made it (as Yashima: an error).
                guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
                // I10: the flight may have read or made its value before a removal that finished before
                // this caller joined; then look again rather than return what was removed.
                if joined, !isCurrent(epochs) { break }
                if joined { count { $0.sharedGenerations += 1 } }
                if joined { openedState?.add(.misses) }  // shared counters; a producer counts its own
                return YCache.Resolved(
                    value: value, source: source, metadata: metadata,
                    wasSharedGeneration: joined || sharedAcrossProcesses)
            case .noValue:
                if optional { return nil }
                if !joined { return nil }
            case .failure(let error):
                if kind == .refresh && joined { break }  // a refresh's error is private to its callers
                throw error
            }
            if let hit = try cachedValue(request) { return hit }
        }
        return try await produceDirectly(request, coordinate: request.options.crossProcess == .coordinate)
    }

    /// `refresh`: always generates (sharing with concurrent refreshes of the same entry), then stores.
    func refresh<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) async throws -> YCache.Resolved<Codec.Value>? {
        if request.options.singleFlightPolicy == .disabled {
            return try await produceDirectly(request, coordinate: false, refreshing: true)
        }
        let key = FlightKey(entry: request.memoryKey, kind: .refresh)
        let (result, joined, _) = try await flights.run(
            key, cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters
        ) { flight in
            await self.produce(request, flight: flight, refreshing: true)
        }
        switch result {
        case .value(let value, let metadata, let source, _, let epochs):
            // Another codec with this identifier but another value type made it (as Yashima: an error).
            guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
            // I10: a joined refresh whose value a removal has replaced since: refresh for this caller.
            guard !joined || isCurrent(epochs) else {
                return try await produceDirectly(request, coordinate: false, refreshing: true)
            }
            return YCache.Resolved(value: value, source: source, metadata: metadata, wasSharedGeneration: joined)
        case .noValue:
            return nil
        case .failure(let error):
            throw error
        }
    }

    /// Generation without an in-process flight (`.disabled`, or a fallback).
    private func produceDirectly<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, coordinate: Bool, refreshing: Bool = false
    ) async throws -> YCache.Resolved<Codec.Value>? {
        var request = request
        if !coordinate { request = request.with(crossProcess: .processLocal) }
        switch await produce(request, flight: nil, refreshing: refreshing) {
        case .value(let value, let metadata, let source, let shared, _):
            guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
            return YCache.Resolved(value: value, source: source, metadata: metadata, wasSharedGeneration: shared)
        case .noValue: return nil
        case .failure(let error): throw error
        }
    }

    /// The producer: storage again, the cross-process lock (I5), generate, commit gate, publish.
    func produce<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, flight: Flight?, refreshing: Bool
    ) async -> FlightResult {
        var held: HeldLock?
        let published = PublishedFlag()  // set by store() once the lock file was renamed into place
        // I6: a publish renamed the lock file into place; a generation that published nothing unlinks
        // it (only if the path still names our inode).
        defer {
            if published.isSet {
                held?.release(unlinking: false)
            } else {
                held?.release(unlinkingIfStillNamed: true)
            }
        }
        do {
            let context: StorageContext?
            if request.options.writePolicy == .memoryAndStorage || !refreshing {
                // Verified now (I13): the lock file below is a write, and a miss is about to publish.
                context = try readableStorage(request.options, verifyingRoot: true)
            } else {
                context = nil
            }
            if !refreshing { context?.directory.state.add(.misses) }  // shared counters, in the verified root (I13)
            let coordinate =
                request.options.crossProcess == .coordinate && request.options.singleFlightPolicy != .disabled
                && request.options.writePolicy == .memoryAndStorage && (context?.isLocalFilesystem ?? false)
            // The caller missed storage just before starting this flight; a coordinated producer looks
            // again once it holds the lock (I5 step 3), an uncoordinated one looks again now.
            if !refreshing, !coordinate, let hit = try storageHit(request, context: context, shared: false) {
                return .value(
                    hit.resolution.value, hit.resolution.metadata, .storage, sharedAcrossProcesses: false,
                    epochs: hit.epochs)
            }
            if coordinate, let context {
                let lockPath = context.directory.lockPath(forKeyDigest: request.expectation.keyDigest)
                let outcome = try await CrossProcessFlight.acquire(
                    lockPath, in: context.directory, timeout: request.options.crossProcessWaitTimeout
                ) { () throws -> StorageHit<Codec.Value>? in
                    refreshing ? nil : try self.storageHit(request, context: context, shared: true)
                }
                switch outcome {
                case .found(let hit):
                    count { $0.sharedGenerations += 1 }
                    return .value(
                        hit.resolution.value, hit.resolution.metadata, .storage, sharedAcrossProcesses: true,
                        epochs: hit.epochs)
                case .acquired(let lock):
                    held = lock
                case .timedOut:
                    count { $0.crossProcessTimeouts += 1 }
                case .unavailable:
                    // Generate without the lock: a duplicate at worst, never a wrong value.
                    count { $0.crossProcessLockFailures += 1 }
                }
            }
            let epochs = epochs(for: request.key, keyDigest: request.expectation.keyDigest, context: context)
            guard let value = try await request.generate() else { return .noValue }
            count { $0.generations += 1 }
            if let flight, !flight.commit() { return .failure(CancellationError()) }
            if flight == nil, request.options.singleFlightPolicy == .cancelWhenNoWaiters, Task.isCancelled {
                return .failure(CancellationError())
            }
            let (metadata, storedEpochs) = try await store(
                value, request: request, context: context, epochs: epochs, bumpEpoch: refreshing, lock: held,
                published: published)
            return .value(value, metadata, .generated, sharedAcrossProcesses: false, epochs: storedEpochs)
        } catch {
            return .failure(error)
        }
    }

    // MARK: Store

    /// Writes `value` according to the options' write policy; returns its metadata and the epochs its
    /// memory item was stamped with (I10). The value is encoded for memory and storage alike (its
    /// metadata has the byte count); a codec that cannot encode it throws its own error under every
    /// policy and nothing is written, as in Yashima. Under `.throwError` a failed storage write leaves
    /// neither layer written; under `.bestEffort` memory keeps it.
    @discardableResult
    func store<Codec: CacheCodec>(
        _ value: Codec.Value, request: ProductionRequest<Codec>, context: StorageContext?,
        epochs: EpochSnapshot?, bumpEpoch: Bool, lock: HeldLock? = nil,
        published: PublishedFlag? = nil
    ) async throws -> (YCache.Metadata?, EpochSnapshot?) {
        let options = request.options
        let now = Syscall.realtimeNanoseconds
        let expiresAt = options.expiry.expiresAtNanoseconds(now: now)
        var byteCount = 0
        var epochs = epochs
        var entryPath: EntryPath?
        var entryVersion: EntryVersion?
        var publishedAt: Int64?
        if options.writePolicy == .disabled { return (nil, epochs) }
        let encoded = try request.codec.encode(value)  // the codec's error, unwrapped: nothing is written
        let encodedCount = encoded.count
        byteCount = encoded.count
        if options.writePolicy == .memoryAndStorage {
            do throws(YCache.Error) {
                let context = try storageForWriting(context)
                let charged = EntryFile.chargedBytes(
                    payloadByteCount: encoded.count, keyByteCount: request.expectation.keyBytes.count,
                    codecByteCount: request.expectation.codecBytes.count)
                let tooLargeForBudget =
                    (budget.payloadBytes.map { Int64(encoded.count) > $0 } ?? false)
                    || (budget.allocatedBytes.map { charged > $0 } ?? false)
                // A key or codec identifier no reader accepts (EntryFormat) would only be read back as corrupt.
                let unreadable =
                    request.expectation.keyBytes.count > EntryFormat.maximumKeyByteCount
                    || request.expectation.codecBytes.count > EntryFormat.maximumCodecByteCount
                if tooLargeForBudget || unreadable {
                    // Returned (and kept in memory) but never stored. A store or refresh replaces the
                    // value, so the old stored entry must not outlive it in any process (I10).
                    if bumpEpoch {
                        let path = context.directory.entryPath(for: request.expectation.identity)
                        (epochs, _) = try unlinkStoredEntry(
                            at: path, headerSize: request.expectation.headerSize, namespace: request.key.namespace,
                            keyDigest: request.expectation.keyDigest, context: context)
                    }
                } else {
                    let path = context.directory.entryPath(for: request.expectation.identity)
                    let files = context.files
                    let (expectation, codecIdentifier) = (request.expectation, request.codec.identifier)
                    let knownAbsent = lock != nil && !bumpEpoch
                    // A replacing write stamps its memory item from just before its publish (I10).
                    let slots = SharedState.slots(
                        namespace: request.key.namespace, keyDigest: request.expectation.keyDigest)
                    let beforePublish = context.directory.state.stamp(slots)
                    let publish = { @Sendable in
                        files.publish(
                            encoded, to: path, expectation: expectation, codecIdentifier: codecIdentifier,
                            createdAt: now, expiresAt: expiresAt ?? 0, lock: lock, knownAbsent: knownAbsent)
                    }
                    // A large payload's checksum and write hold a thread for milliseconds (far longer when
                    // the kernel throttles dirty pages): they run on a thread of their own, not the pool.
                    let outcome =
                        encoded.count >= Policy.offPoolWriteThreshold ? await BlockingWork.run(publish) : publish()
                    switch outcome {
                    case .success(let outcome):
                        entryPath = path
                        entryVersion = EntryVersion(outcome.header)
                        publishedAt = outcome.modifiedNanoseconds
                        published?.set()
                    case .failure(let error):
                        throw YCache.Error.system(error, path: storagePath, operation: "publishing an entry")
                    }
                    if bumpEpoch {
                        // A refresh or explicit store replaces the value: other processes' L1 copies go (I10).
                        // Our own copy is valid from our bump on, unless a removal ran since before our
                        // publish (it may have unlinked what we published): then it is re-read.
                        let after = try context.directory.state.bumpKey(slots, expecting: beforePublish)
                        epochs = EpochSnapshot(slots: slots, stamp: after ?? beforePublish)
                    }
                    if budget.isExceeded(by: context.directory.state) {
                        let (trimmer, budget) = (context.trimmer, budget)
                        _ = await BlockingWork.run { trimmer.trimIfNeeded(budget: budget) }
                    }
                }
            } catch {
                count { $0.writeFailures += 1 }
                if options.writeFailurePolicy == .throwError {
                    memory.remove(request.memoryKey)
                    throw error
                }
            }
        }
        let cost = options.cost?.charged ?? request.codec.memoryCost(of: value, encodedByteCount: encodedCount)
        let metadata = request.key.metadata(
            codecIdentifier: request.codec.identifier, createdAt: now, expiresAt: expiresAt, byteCount: byteCount,
            cost: cost, keyDigest: request.expectation.keyDigest)
        if memory.insert(
            MemoryItem(
                value: value, cost: cost, metadata: metadata, slots: epochs?.slots, stamp: epochs?.stamp,
                entryPath: entryPath, entryVersion: entryVersion),
            for: request.memoryKey),
            let publishedAt
        {
            memory.noteUse(request.memoryKey, at: publishedAt)
        }
        return (metadata, epochs)
    }

    private func storageForWriting(_ context: StorageContext?) throws(YCache.Error) -> StorageContext {
        // I13: never write through a root that was deleted or replaced since `context` was taken.
        if let context, context.directory.isOwnedByThisProcess, context.directory.isStillNamedByPath() {
            return context
        }
        switch storage(verifyingRoot: true) {
        case .success(let context): return context
        case .failure(let error): throw error
        }
    }

    // MARK: Lifecycle

    func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) throws(YCache.Error) -> YCache.Metadata? {
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        let context: StorageContext
        switch storage() {
        case .success(let value): context = value
        case .failure:
            let now = Syscall.realtimeNanoseconds
            return memory.item(for: memoryKey, state: nil, now: now)?.metadata
        }
        let expectation = EntryExpectation(key: key, codecIdentifier: codec.identifier)
        let path = context.directory.entryPath(for: expectation.identity)
        switch context.files.readHeader(path.relative) {
        case .success(let (header, bytes, status)):
            let matches = bytes.withUnsafeBytes {
                EntryFormat.validateIdentity(
                    header, bytes: $0, expectedIdentity: expectation.identity.digest, keyBytes: expectation.keyBytes,
                    codecBytes: expectation.codecBytes)
            }
            guard case .success = matches, !header.isExpired(atNanoseconds: Syscall.realtimeNanoseconds) else {
                return nil
            }
            return key.metadata(
                header: header, codecIdentifier: codec.identifier, cost: nil,
                lastAccessedAt: status.modifiedNanoseconds)
        case .failure(.missing), .failure(.corrupt), .failure(.expired):
            return liveMemoryItem(memoryKey, now: Syscall.realtimeNanoseconds, context: context)?.metadata
        case .failure(.system(let error)):
            throw .system(error, path: storagePath, operation: "reading an entry header")
        }
    }

    /// Removes `key`'s entry from memory and storage; true when either held it (as Yashima reports it).
    func remove(key: CacheKey, codecIdentifier: String) throws(YCache.Error) -> Bool {
        let removedFromMemory = memory.remove(MemoryKey(key: key, codecIdentifier: codecIdentifier))
        // The memory copy is gone either way; a storage directory that cannot be opened is reported,
        // because its entry would come back once the directory is usable again.
        let context = try storage(verifyingRoot: true).get()
        let path = context.directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: codecIdentifier))
        let headerSize = EntryFormat.fixedHeaderSize + key.canonicalByteCount + codecIdentifier.utf8.count
        let (_, unlinked) = try unlinkStoredEntry(
            at: path, headerSize: headerSize, namespace: key.namespace, keyDigest: key.stableDigest, context: context)
        return removedFromMemory || unlinked
    }

    /// Unlinks a key's entry file between two bumps of its epoch (I10), so that no process keeps, or
    /// caches again, the value it held. Returns the key's epoch slots and their stamp after the second bump,
    /// and whether a file was unlinked.
    private func unlinkStoredEntry(
        at path: EntryPath, headerSize: Int, namespace: String, keyDigest: SHA256Digest, context: StorageContext
    ) throws(YCache.Error) -> (EpochSnapshot, Bool) {
        let slots = SharedState.slots(namespace: namespace, keyDigest: keyDigest)
        let state = context.directory.state
        let before = state.stamp(slots)
        let afterFirst = try state.bumpKey(slots, expecting: before)  // I10: before unlinking
        let outcome = context.files.remove(path.relative, payload: .headerSize(headerSize))
        // And again after: a reader that stamped its epochs after the first bump may have read the file
        // before the unlink; its memory copy must not outlive this call.
        let afterSecond: SharedState.Stamp?
        if let afterFirst {
            afterSecond = try state.bumpKey(slots, expecting: afterFirst)
        } else {
            try state.bumpKey(slots)
            afterSecond = nil
        }
        let unlinked: Bool
        switch outcome {
        case .success(let value): unlinked = value
        case .failure(let error): throw .system(error, path: storagePath, operation: "removing an entry")
        }
        // The epochs a value kept only in memory by this writer is valid under: from our second bump on,
        // unless another removal interleaved (then `before`, which no longer matches).
        return (EpochSnapshot(slots: slots, stamp: afterSecond ?? before), unlinked)
    }

    /// Removes every entry (whose namespace matches, when given). Blocking: run through BlockingWork.
    func removeAll(inNamespace namespace: String?) throws(YCache.Error) -> Int {
        if let namespace { memory.removeAll(inNamespace: namespace) } else { memory.removeAll() }
        let context = try storage(verifyingRoot: true).get()  // reported, as in remove(key:)
        let signal = RemovalSignal.begin(namespace: namespace, in: context.directory)  // I15: one event for observers
        defer { signal?.end() }
        let bump = { () throws(YCache.Error) in
            if let namespace {
                try context.directory.state.bumpNamespace(slot: SharedState.namespaceSlot(namespace))
            } else {
                try context.directory.state.bumpGlobal()
            }
        }
        try bump()  // I10: before unlinking
        var removed = 0
        for entry in context.trimmer.scanEntries(readingPayloads: namespace == nil) {
            var payload = entry.payloadBytes
            if let namespace {
                guard case .success(let (header, bytes, _)) = context.files.readHeader(entry.relative),
                    let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]),
                    key.namespace == namespace
                else { continue }
                payload = header.payloadByteCount
            }
            if case .success(true) = context.files.remove(entry.relative, payload: .known(payload)) { removed += 1 }
        }
        // And again after: a reader that stamped its epochs after the first bump may have read an entry
        // before the scan unlinked it; its memory copy must not outlive this call.
        try bump()
        return removed
    }

    /// Removes expired entries. Blocking.
    func removeExpired() -> Int {
        guard case .success(let context) = storage(verifyingRoot: true) else { return 0 }
        let now = Syscall.realtimeNanoseconds
        var removed = 0
        for entry in context.trimmer.scanEntries() {
            guard case .success(let (header, _, _)) = context.files.readHeader(entry.relative),
                header.isExpired(atNanoseconds: now)
            else { continue }
            if case .success(true) = context.files.remove(entry.relative, payload: .known(header.payloadByteCount)) {
                removed += 1
            }
        }
        return removed
    }

    /// Lists entries of `namespace` (all when nil). Blocking.
    func entries(inNamespace namespace: String?) -> [StoredEntryInfo] {
        guard case .success(let context) = storage() else { return [] }
        let now = Syscall.realtimeNanoseconds
        var found: [StoredEntryInfo] = []
        for entry in context.trimmer.scanEntries() {
            guard case .success(let (header, bytes, status)) = context.files.readHeader(entry.relative),
                !header.isExpired(atNanoseconds: now),
                let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]),
                namespace == nil || key.namespace == namespace,
                let codec = String(validating: bytes[header.codecOffset..<header.payloadOffset], as: UTF8.self)
            else { continue }
            found.append(
                StoredEntryInfo(
                    key: key,
                    metadata: key.metadata(
                        header: header, codecIdentifier: codec, cost: nil, lastAccessedAt: status.modifiedNanoseconds),
                    allocatedByteCount: status.allocatedBytes))
        }
        return found
    }
}

/// Set once a producer's lock file has been renamed into place as the entry.
final class PublishedFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}

/// Recently used keys' entry expectations (canonical bytes, identity and key digests): two SHA-256
/// computations saved per storage lookup of a key seen before. Bounded; cleared when full.
final class ExpectationCache: Sendable {
    private let table = Mutex<[MemoryKey: EntryExpectation]>([:])
    private static let capacity = 16_384

    func expectation(for key: MemoryKey) -> EntryExpectation {
        if let cached = table.withLock({ $0[key] }) { return cached }
        let expectation = EntryExpectation(key: key.key, codecIdentifier: key.codecIdentifier)
        table.withLock { table in
            if table.count >= ExpectationCache.capacity { table.removeAll(keepingCapacity: true) }
            table[key] = expectation
        }
        return expectation
    }
}

extension ProductionRequest {
    func with(crossProcess: YCache.Options.CrossProcessPolicy) -> ProductionRequest {
        var options = self.options
        options.crossProcess = crossProcess
        return ProductionRequest(
            key: key, codec: codec, options: options, memoryKey: memoryKey, expectation: expectation,
            generate: generate)
    }
}

extension CacheKey {
    /// The metadata of a stored entry, read from its header. `lastAccessedAt` is when it was last used:
    /// now for a hit, the file's mtime for a header read; `cost` is nil when no value was decoded.
    func metadata(header: EntryFormat.Header, codecIdentifier: String, cost: Int?, lastAccessedAt: Int64)
        -> YCache.Metadata
    {
        YCache.Metadata(
            byteCount: Int(header.payloadByteCount), cost: cost,
            createdAt: Date(nanosecondsSince1970: header.createdAtNanoseconds),
            lastAccessedAt: Date(nanosecondsSince1970: lastAccessedAt), codecIdentifier: codecIdentifier,
            keyDigest: header.keyStableDigest,
            expiresAtNanoseconds: header.expiresAtNanoseconds == 0 ? nil : header.expiresAtNanoseconds)
    }

    /// The metadata of a value stored (or kept in memory) now: created and last accessed at `createdAt`.
    func metadata(
        codecIdentifier: String, createdAt: Int64, expiresAt: Int64?, byteCount: Int, cost: Int?,
        keyDigest: SHA256Digest? = nil
    ) -> YCache.Metadata {
        let date = Date(nanosecondsSince1970: createdAt)
        return YCache.Metadata(
            byteCount: byteCount, cost: cost, createdAt: date, lastAccessedAt: date, codecIdentifier: codecIdentifier,
            keyDigest: keyDigest ?? stableDigest, expiresAtNanoseconds: expiresAt)
    }
}
