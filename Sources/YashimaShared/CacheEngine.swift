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
    let storageMaximumByteCount: Int64?
    let sharing: StorageSharingMode
    let allowNetworkFilesystem: Bool
    let memory: MemoryStore
    let flights = FlightTable()
    let statistics = Mutex(CacheStatistics())
    let expectations = ExpectationCache()

    private enum Opening {
        case notYet
        case open(StorageContext)
        case failed(YCacheError, at: Int64)
    }

    private let opening = Mutex<Opening>(.notYet)

    /// A failed open is retried at most this often (the directory may become usable later).
    private static let reopenInterval: Int64 = 1_000_000_000

    init(
        storagePath: String, memoryMaximumCost: Int?, memoryMaximumEntryCount: Int?, storageMaximumByteCount: Int64?,
        sharing: StorageSharingMode, allowNetworkFilesystem: Bool
    ) {
        self.storagePath = storagePath
        self.storageMaximumByteCount = storageMaximumByteCount
        self.sharing = sharing
        self.allowNetworkFilesystem = allowNetworkFilesystem
        self.memory = MemoryStore(maximumCost: memoryMaximumCost, maximumCount: memoryMaximumEntryCount)
    }

    // MARK: Storage access

    /// The storage context, opening the directory on first use (and again after a failure, at most once
    /// a second; also after a fork, I7, and when the root path no longer names the open root, I13).
    /// - Parameter verifyingRoot: Check the root path now (before a write) rather than at most once per
    ///   `Policy.rootCheckInterval`.
    func storage(verifyingRoot: Bool = false) -> Result<StorageContext, YCacheError> {
        opening.withLock { opening in
            let now = Syscall.monotonicNanoseconds
            switch opening {
            case .open(let context) where context.directory.isUsable(verifyingRoot: verifyingRoot, now: now):
                return .success(context)
            case .failed(let error, let at) where now - at < CacheEngine.reopenInterval:
                return .failure(error)
            default:
                do throws(YCacheError) {
                    let directory = try Directory(
                        path: storagePath, sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem,
                        onRepair: { [weak self] in self?.count { $0.auxiliaryFileRepairs += 1 } })
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
        statistics.withLock { update(&$0) }
    }

    // MARK: Lookup

    /// Slots and current epochs of `key`, taken before a read or generation so a removal that happens
    /// meanwhile invalidates the memory item (I10).
    private func epochs(for key: CacheKey, keyDigest: SHA256Digest, context: StorageContext?)
        -> (SharedState.Slots, SharedState.Stamp)?
    {
        guard let context else { return nil }
        let slots = SharedState.slots(namespace: key.namespace, keyDigest: keyDigest)
        return (slots, context.directory.state.stamp(slots))
    }

    func memoryHit<Codec: CacheCodec>(_ memoryKey: MemoryKey, codec: Codec) -> CacheResolution<Codec.Value>? {
        let now = Syscall.realtimeNanoseconds
        guard let item = memory.item(for: memoryKey, state: openStorage?.directory.state, now: now),
            let value = item.value as? Codec.Value
        else { return nil }
        count { $0.memoryHits += 1 }
        if let path = item.entryPath, memory.shouldTouch(memoryKey, now: now), let context = openStorage {
            // P15: a value served from memory is still in use; keep its file from looking cold to trim.
            context.files.touchIfStale(path, modifiedAt: 0, now: now)
        }
        return CacheResolution(value: value, source: .memory, metadata: item.metadata, wasSharedGeneration: false)
    }

    /// Looks in storage; a hit is decoded, put in memory, and its file touched (I11). A corrupt or expired
    /// entry is removed and is a miss, or throws under `.throwError`.
    func storageHit<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, context: StorageContext?, shared: Bool
    ) throws(YCacheError) -> CacheResolution<Codec.Value>? {
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
                discard(path, in: context)
                if strict {
                    throw .decodingFailed(codec: request.codec.identifier, reason: "\(error)")
                }
                return nil
            }
            context.files.touchIfStale(path, modifiedAt: entry.modifiedNanoseconds, now: now)
            let metadata = request.key.metadata(header: entry.header, codecIdentifier: request.codec.identifier)
            let cost =
                request.options.cost
                ?? request.codec.memoryCost(of: value, encodedByteCount: entry.payload.count)
            if request.options.writePolicy != .disabled,
                memory.insert(
                    MemoryItem(
                        value: value, cost: cost, metadata: metadata, slots: epochs?.0, stamp: epochs?.1,
                        entryPath: path),
                    for: request.memoryKey)
            {
                _ = memory.shouldTouch(request.memoryKey, now: now)  // just touched (or fresh): start the interval
            }
            count { $0.storageHits += 1 }
            return CacheResolution(value: value, source: .storage, metadata: metadata, wasSharedGeneration: shared)
        case .failure(.missing):
            return nil
        case .failure(.expired):
            discard(path, in: context)
            return nil
        case .failure(.corrupt(let corruption, _)):
            count { $0.corruptEntries += 1 }
            discard(path, in: context)
            if strict { throw .corruptEntry(reason: corruption.description) }
            return nil
        case .failure(.system(let error)):
            if strict { throw .system(error, path: storagePath, operation: "reading an entry") }
            return nil
        }
    }

    /// Unlinks an entry a lookup proved corrupt or expired, unless the root path no longer names this
    /// root (I13: never unlink in a directory that was renamed away).
    private func discard(_ path: EntryPath, in context: StorageContext) {
        guard context.directory.isStillNamedByPath() else { return }
        _ = context.files.remove(path.relative)
    }

    /// Memory, then storage. Storage failures to open are a miss unless `.throwError`.
    func cachedValue<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) throws(YCacheError)
        -> CacheResolution<Codec.Value>?
    {
        if let hit = memoryHit(request.memoryKey, codec: request.codec) { return hit }
        return try storageHit(request, context: try readableStorage(request.options), shared: false)
    }

    private func readableStorage(_ options: YCache.Options, verifyingRoot: Bool = false) throws(YCacheError)
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
    ) async throws -> CacheResolution<Codec.Value>? {
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
            case .value(let value, let metadata, let source, let sharedAcrossProcesses):
                guard let value = value as? Codec.Value else { break }  // same codec id, other type: run our own
                if joined { count { $0.sharedGenerations += 1 } }
                return CacheResolution(
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
    func refresh<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) async throws -> CacheResolution<Codec.Value>? {
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
        case .value(let value, let metadata, let source, _):
            guard let value = value as? Codec.Value else {
                return try await produceDirectly(request, coordinate: false, refreshing: true)
            }
            return CacheResolution(value: value, source: source, metadata: metadata, wasSharedGeneration: joined)
        case .noValue:
            return nil
        case .failure(let error):
            throw error
        }
    }

    /// Generation without an in-process flight (`.disabled`, or a fallback).
    private func produceDirectly<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, coordinate: Bool, refreshing: Bool = false
    ) async throws -> CacheResolution<Codec.Value>? {
        var request = request
        if !coordinate { request = request.with(crossProcess: .processLocal) }
        switch await produce(request, flight: nil, refreshing: refreshing) {
        case .value(let value, let metadata, let source, let shared):
            guard let value = value as? Codec.Value else { return nil }
            return CacheResolution(value: value, source: source, metadata: metadata, wasSharedGeneration: shared)
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
            let coordinate =
                request.options.crossProcess == .coordinate && request.options.singleFlightPolicy != .disabled
                && request.options.writePolicy == .memoryAndStorage && (context?.isLocalFilesystem ?? false)
            // The caller missed storage just before starting this flight; a coordinated producer looks
            // again once it holds the lock (I5 step 3), an uncoordinated one looks again now.
            if !refreshing, !coordinate, let hit = try storageHit(request, context: context, shared: false) {
                return .value(hit.value, hit.metadata, .storage, sharedAcrossProcesses: false)
            }
            if coordinate, let context {
                let lockPath = context.directory.lockPath(forKeyDigest: request.expectation.keyDigest)
                let outcome = try await CrossProcessFlight.acquire(
                    lockPath, in: context.directory, timeout: request.options.crossProcessWaitTimeout
                ) { () throws(YCacheError) -> CacheResolution<Codec.Value>? in
                    refreshing ? nil : try self.storageHit(request, context: context, shared: true)
                }
                switch outcome {
                case .found(let hit):
                    count { $0.sharedGenerations += 1 }
                    return .value(hit.value, hit.metadata, .storage, sharedAcrossProcesses: true)
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
            let metadata = try await store(
                value, request: request, context: context, epochs: epochs, bumpEpoch: refreshing, lock: held,
                published: published)
            return .value(value, metadata, .generated, sharedAcrossProcesses: false)
        } catch {
            return .failure(error)
        }
    }

    // MARK: Store

    /// Writes `value` according to the options' write policy; returns its metadata. Under
    /// `.throwError` a failed write leaves neither layer written; under `.bestEffort` memory keeps it.
    func store<Codec: CacheCodec>(
        _ value: Codec.Value, request: ProductionRequest<Codec>, context: StorageContext?,
        epochs: (SharedState.Slots, SharedState.Stamp)?, bumpEpoch: Bool, lock: HeldLock? = nil,
        published: PublishedFlag? = nil
    ) async throws(YCacheError) -> CacheMetadata {
        let options = request.options
        let now = Syscall.realtimeNanoseconds
        let expiresAt = options.expiry.expiresAtNanoseconds(now: now)
        var metadata = request.key.metadata(
            codecIdentifier: request.codec.identifier, createdAt: now, expiresAt: expiresAt, payloadByteCount: 0,
            keyDigest: request.expectation.keyDigest)
        var epochs = epochs
        var entryPath: EntryPath?
        var encodedCount: Int?
        if options.writePolicy == .disabled { return metadata }
        if options.writePolicy == .memoryAndStorage {
            do throws(YCacheError) {
                let encoded: Data
                do {
                    encoded = try request.codec.encode(value)
                } catch {
                    throw YCacheError.encodingFailed(codec: request.codec.identifier, reason: "\(error)")
                }
                encodedCount = encoded.count
                metadata = request.key.metadata(
                    codecIdentifier: request.codec.identifier, createdAt: now, expiresAt: expiresAt,
                    payloadByteCount: encoded.count, keyDigest: request.expectation.keyDigest)
                let context = try storageForWriting(context)
                let charged = EntryFile.chargedBytes(
                    payloadByteCount: encoded.count, keyByteCount: request.expectation.keyBytes.count,
                    codecByteCount: request.expectation.codecBytes.count)
                let tooLargeForBudget = storageMaximumByteCount.map { charged > $0 } ?? false
                // A key or codec identifier no reader accepts (EntryFormat) would only be read back as corrupt.
                let unreadable =
                    request.expectation.keyBytes.count > EntryFormat.maximumKeyByteCount
                    || request.expectation.codecBytes.count > EntryFormat.maximumCodecByteCount
                if tooLargeForBudget || unreadable {
                    // Returned (and kept in memory) but never stored. A store or refresh replaces the
                    // value, so the old stored entry must not outlive it in any process (I10).
                    if bumpEpoch {
                        let path = context.directory.entryPath(for: request.expectation.identity)
                        epochs = try unlinkStoredEntry(
                            at: path, namespace: request.key.namespace, keyDigest: request.expectation.keyDigest,
                            context: context)
                    }
                } else {
                    let path = context.directory.entryPath(for: request.expectation.identity)
                    let files = context.files
                    let (expectation, codecIdentifier) = (request.expectation, request.codec.identifier)
                    let knownAbsent = lock != nil && !bumpEpoch
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
                    case .success:
                        entryPath = path
                        published?.set()
                    case .failure(let error):
                        throw YCacheError.system(error, path: storagePath, operation: "publishing an entry")
                    }
                    if bumpEpoch {
                        // A refresh or explicit store replaces the value: other processes' L1 copies go (I10).
                        let slots = SharedState.slots(
                            namespace: request.key.namespace, keyDigest: request.expectation.keyDigest)
                        try context.directory.state.bumpKey(slots)
                        epochs = (slots, context.directory.state.stamp(slots))
                    }
                    if let budget = storageMaximumByteCount, context.directory.state.usage > budget {
                        let trimmer = context.trimmer
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
        let cost = options.cost ?? request.codec.memoryCost(of: value, encodedByteCount: encodedCount)
        if memory.insert(
            MemoryItem(
                value: value, cost: cost, metadata: metadata, slots: epochs?.0, stamp: epochs?.1, entryPath: entryPath),
            for: request.memoryKey)
        {
            _ = memory.shouldTouch(request.memoryKey, now: now)
        }
        return metadata
    }

    private func storageForWriting(_ context: StorageContext?) throws(YCacheError) -> StorageContext {
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

    func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) throws(YCacheError) -> CacheMetadata? {
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
        case .success(let (header, bytes, _)):
            let matches = bytes.withUnsafeBytes {
                EntryFormat.validateIdentity(
                    header, bytes: $0, expectedIdentity: expectation.identity.digest, keyBytes: expectation.keyBytes,
                    codecBytes: expectation.codecBytes)
            }
            guard case .success = matches, !header.isExpired(atNanoseconds: Syscall.realtimeNanoseconds) else {
                return nil
            }
            return key.metadata(header: header, codecIdentifier: codec.identifier)
        case .failure(.missing), .failure(.corrupt), .failure(.expired):
            let now = Syscall.realtimeNanoseconds
            return memory.item(for: memoryKey, state: context.directory.state, now: now)?.metadata
        case .failure(.system(let error)):
            throw .system(error, path: storagePath, operation: "reading an entry header")
        }
    }

    func remove(key: CacheKey, codecIdentifier: String) throws(YCacheError) {
        memory.remove(MemoryKey(key: key, codecIdentifier: codecIdentifier))
        // The memory copy is gone either way; a storage directory that cannot be opened is reported,
        // because its entry would come back once the directory is usable again.
        let context = try storage(verifyingRoot: true).get()
        let path = context.directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: codecIdentifier))
        _ = try unlinkStoredEntry(at: path, namespace: key.namespace, keyDigest: key.stableDigest, context: context)
    }

    /// Unlinks a key's entry file between two bumps of its epoch (I10), so that no process keeps, or
    /// caches again, the value it held. Returns the key's epoch slots and their stamp after the second bump.
    private func unlinkStoredEntry(
        at path: EntryPath, namespace: String, keyDigest: SHA256Digest, context: StorageContext
    ) throws(YCacheError) -> (SharedState.Slots, SharedState.Stamp) {
        let slots = SharedState.slots(namespace: namespace, keyDigest: keyDigest)
        try context.directory.state.bumpKey(slots)  // I10: before unlinking
        let outcome = context.files.remove(path.relative)
        // And again after: a reader that stamped its epochs after the first bump may have read the file
        // before the unlink; its memory copy must not outlive this call.
        try context.directory.state.bumpKey(slots)
        if case .failure(let error) = outcome {
            throw .system(error, path: storagePath, operation: "removing an entry")
        }
        return (slots, context.directory.state.stamp(slots))
    }

    /// Removes every entry (whose namespace matches, when given). Blocking: run through BlockingWork.
    func removeAll(inNamespace namespace: String?) throws(YCacheError) -> Int {
        if let namespace { memory.removeAll(inNamespace: namespace) } else { memory.removeAll() }
        let context = try storage(verifyingRoot: true).get()  // reported, as in remove(key:)
        let bump = { () throws(YCacheError) in
            if let namespace {
                try context.directory.state.bumpNamespace(slot: SharedState.namespaceSlot(namespace))
            } else {
                try context.directory.state.bumpGlobal()
            }
        }
        try bump()  // I10: before unlinking
        var removed = 0
        for entry in context.trimmer.scanEntries() {
            if let namespace {
                guard case .success(let (header, bytes, _)) = context.files.readHeader(entry.relative),
                    let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]),
                    key.namespace == namespace
                else { continue }
            }
            if case .success(true) = context.files.remove(entry.relative) { removed += 1 }
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
            if case .success(true) = context.files.remove(entry.relative) { removed += 1 }
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
                    key: key, metadata: key.metadata(header: header, codecIdentifier: codec),
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
    func metadata(header: EntryFormat.Header, codecIdentifier: String) -> CacheMetadata {
        CacheMetadata(
            keyDigest: header.keyStableDigest, codecIdentifier: codecIdentifier,
            createdAtNanoseconds: header.createdAtNanoseconds,
            expiresAtNanoseconds: header.expiresAtNanoseconds == 0 ? nil : header.expiresAtNanoseconds,
            payloadByteCount: Int(header.payloadByteCount))
    }

    func metadata(
        codecIdentifier: String, createdAt: Int64, expiresAt: Int64?, payloadByteCount: Int,
        keyDigest: SHA256Digest? = nil
    ) -> CacheMetadata {
        CacheMetadata(
            keyDigest: keyDigest ?? stableDigest, codecIdentifier: codecIdentifier, createdAtNanoseconds: createdAt,
            expiresAtNanoseconds: expiresAt, payloadByteCount: payloadByteCount)
    }
}
