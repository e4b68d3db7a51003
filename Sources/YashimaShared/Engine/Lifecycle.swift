// The lifecycle operations on stored entries: metadata, removal of one key (between two bumps of its
// epochs, I10), of a namespace or of everything (announced to observers, I15), of expired entries;
// listing; usage; trimming; and putting a value in memory only. Scans, removals of many entries and trims
// are blocking: the public API runs them off the cooperative pool (BlockingWork).

import Foundation

extension CacheEngine {
    func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) throws(YCache.Error) -> YCache.Metadata? {
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        let context: StorageContext
        switch storage(for: .read) {
        case .success(let value): context = value
        case .failure:
            let now = Syscall.realtimeNanoseconds
            return memory.item(for: memoryKey, state: nil, now: now)?.metadata
        }
        let expectation = EntryExpectation(key: key, codecIdentifier: codec.identifier)
        let path = expectation.path
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
        case .failure(.missing), .failure(.corrupt), .failure(.expired), .failure(.overLimit):
            return liveMemoryItem(memoryKey, now: Syscall.realtimeNanoseconds, storage: context)?.metadata
        case .failure(.system(let error)):
            throw .system(error, path: storagePath, operation: "reading an entry header")
        }
    }

    /// Removes `key`'s value from every tier, the last first (Tier.swift); true when any held it (as
    /// Yashima reports it). Every tier is asked; the first error is thrown after that.
    func remove(key: CacheKey, codecIdentifier: String) async throws(YCache.Error) -> Bool {
        let key = TierKey(key: key, codecIdentifier: codecIdentifier)
        var removed = false
        var failure: YCache.Error?
        for tier in tiers.reversed() {
            do throws(YCache.Error) {
                removed = try await tier.remove(key, engine: self) || removed
            } catch {
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
        return removed
    }

    /// Unlinks a key's entry file between two bumps of its epoch (I10), so that no process keeps, or
    /// caches again, the value it held. Returns the key's epoch slots and their stamp after the second bump,
    /// and whether a file was unlinked.
    func unlinkStoredEntry(
        at path: EntryPath, headerSize: Int, namespace: String, keyDigest: SHA256Digest, in context: StorageContext
    ) throws(YCache.Error) -> (EpochSnapshot, Bool) {
        let slots = SharedState.slots(namespace: namespace, keyDigest: keyDigest)
        let state = context.directory.state
        let before = state.stamp(slots)
        let afterFirst = try Injection.removalNoBump ? before : state.bumpKey(slots, expecting: before)  // I10: before
        let outcome = context.files.remove(path.relative, payload: .headerSize(headerSize))
        // And again after: a reader that stamped its epochs after the first bump may have read the file
        // before the unlink; its memory copy must not outlive this call.
        let afterSecond: SharedState.Stamp?
        if let afterFirst {
            afterSecond = try Injection.removalNoBump ? nil : state.bumpKey(slots, expecting: afterFirst)
        } else {
            try state.bumpKey(slots)
            afterSecond = nil
        }
        let unlinked: Bool
        switch outcome {
        case .success(let removed): unlinked = removed != nil
        case .failure(let error): throw .system(error, path: storagePath, operation: "removing an entry")
        }
        // The epochs a value kept only in memory by this writer is valid under: from our second bump on,
        // unless another removal interleaved (then `before`, which no longer matches).
        return (EpochSnapshot(slots: slots, stamp: afterSecond ?? before), unlinked)
    }

    /// Removes every entry (whose namespace matches, when given). Blocking: run through BlockingWork.
    func removeAll(inNamespace namespace: String?) throws(YCache.Error) -> Int {
        if let namespace { memory.removeAll(inNamespace: namespace) } else { memory.removeAll() }
        let context = try storage(for: .write).get()  // reported, as in remove(key:)
        let signal = RemovalSignal.begin(namespace: namespace, in: context.directory)  // I15: one event for observers
        let removed = Result { () throws(YCache.Error) in try unlinkAll(inNamespace: namespace, in: context) }
        signal?.end()
        return try removed.get()
    }

    /// The unlinks of `removeAll`, between two bumps of the namespace's or the global epoch (I10).
    private func unlinkAll(inNamespace namespace: String?, in context: StorageContext) throws(YCache.Error) -> Int {
        let bump = { () throws(YCache.Error) in
            if Injection.removalNoBump { return }
            if let namespace {
                try context.directory.state.bumpNamespace(slot: SharedState.namespaceSlot(namespace))
            } else {
                try context.directory.state.bumpGlobal()
            }
        }
        try bump()  // I10: before unlinking
        var removed = 0
        for entry in context.files.scanEntries() {
            var charge = PayloadCharge.readHeader
            if let namespace {
                guard case .success(let (header, bytes, _)) = context.files.readHeader(entry.relative),
                    let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]),
                    key.namespace == namespace
                else { continue }
                charge = .headerSize(header.payloadOffset)
            }
            if case .success(_?) = context.files.remove(entry.relative, payload: charge) { removed += 1 }
        }
        // And again after: a reader that stamped its epochs after the first bump may have read an entry
        // before the scan unlinked it; its memory copy must not outlive this call.
        try bump()
        return removed
    }

    /// Removes expired entries. Blocking.
    func removeExpired() -> Int {
        guard case .success(let context) = storage(for: .write) else { return 0 }
        let now = Syscall.realtimeNanoseconds
        var removed = 0
        for entry in context.files.scanEntries() {
            guard case .success(let (header, _, _)) = context.files.readHeader(entry.relative),
                header.isExpired(atNanoseconds: now)
            else { continue }
            if case .success(_?) = context.files.remove(entry.relative, payload: .headerSize(header.payloadOffset)) {
                removed += 1
            }
        }
        return removed
    }

    /// Lists entries of `namespace` (all when nil). Blocking.
    func entries(inNamespace namespace: String?) -> [StoredEntryInfo] {
        guard case .success(let context) = storage(for: .read) else { return [] }
        let now = Syscall.realtimeNanoseconds
        var found: [StoredEntryInfo] = []
        for entry in context.files.scanEntries() {
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

    // MARK: Usage and trimming

    /// Recounts usage from a scan (I9). Blocking.
    func storageUsage() throws(YCache.Error) -> CountedUsage {
        try storage(for: .write).get().trimmer.reconcileUsage()  // writes both counters (I13)
    }

    /// An explicit trim: down to the budget itself (no low-water mark, no per-pass limit), then a recount;
    /// without a budget only the debris sweep and the recount. Blocking.
    func trimStorage() throws(YCache.Error) -> CountedUsage {
        let context = try storage(for: .write).get()  // I13: trims and sweeps write
        guard budget.isBounded else {
            Maintenance.sweepDebris(context)
            return context.trimmer.reconcileUsage()
        }
        switch Maintenance.trimIfNeeded(context, budget: budget, force: true) {
        case .success(let usage): return usage ?? context.trimmer.reconcileUsage()
        case .failure(let error): throw .system(error, path: storagePath, operation: "trimming")
        }
    }

    // MARK: Memory only

    /// `putInMemory`: a value in memory only, under the key's current epochs (I10) when storage is open.
    func putInMemory<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, cost: CacheCost?, expiry: CacheExpiry
    ) throws {
        let byteCount = try codec.encode(value).count
        let now = Syscall.realtimeNanoseconds
        let charged = cost?.charged ?? codec.memoryCost(of: value, encodedByteCount: byteCount)
        let metadata = key.metadata(
            codecIdentifier: codec.identifier, createdAt: now, expiresAt: expiry.expiresAtNanoseconds(now: now),
            byteCount: byteCount, cost: charged)
        var slots: SharedState.Slots?
        var stamp: SharedState.Stamp?
        if case .success(let context) = storage(for: .read) {
            let keySlots = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
            slots = keySlots
            stamp = context.directory.state.stamp(keySlots)
        }
        memory.insert(
            MemoryItem(value: value, cost: charged, metadata: metadata, slots: slots, stamp: stamp, entryPath: nil),
            for: MemoryKey(key: key, codecIdentifier: codec.identifier))
    }
}
