// The lifecycle operations on stored entries: metadata, removal of one key (inside a write window on its
// epochs, I10), of a namespace or of everything (announced to observers, I15), of expired entries;
// listing; usage; trimming; and putting a value in memory only. Scans, removals of many entries and trims
// are blocking: the public API runs them off the cooperative pool (BlockingWork).

import Foundation

extension CacheEngine {
    func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) throws(YCache.Error) -> YCache.Metadata? {
        let entryKey = EntryKey(key: key, codecIdentifier: codec.identifier)
        let context: StorageContext
        switch storageTier.context(for: .read) {
        case .success(let value): context = value
        case .failure:
            let now = Syscall.realtimeNanoseconds
            return memoryTier.store.item(for: entryKey, state: nil, now: now)?.metadata
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
            return memoryTier.liveItem(entryKey, now: Syscall.realtimeNanoseconds, storage: context)?.metadata
        case .failure(.system(let error)):
            throw .system(error, path: storagePath, operation: "reading an entry header")
        }
    }

    /// Removes `key`'s value from every tier, the last first (Tier.swift); true when any held it (as
    /// Yashima reports it). Every tier is asked; the first error is thrown after that. The whole walk is a
    /// write window on the key's epochs (I10): a remote value a production fetched before the remote
    /// delete is not published while it is open, nor after (`PublishMode.addingUnlessWrittenSince`, I16).
    func remove(key: CacheKey, codecIdentifier: String) async throws(YCache.Error) -> Bool {
        let key = TierKey(key: key, codecIdentifier: codecIdentifier)
        var deleteRemote: RemoteTier.Delete?
        if let tier = remoteTier { deleteRemote = { await tier.deleteRemote(key.identity) } }
        let window = RemoteWriteWindow.opened(
            in: try? storageTier.context(for: .write).get(),
            slots: SharedState.slots(namespace: key.key.namespace, keyDigest: key.key.stableDigest),
            identity: key.identity, for: deleteRemote)
        var removed = false
        var failure: YCache.Error?
        for tier in tiers.reversed() {
            do throws(YCache.Error) {
                removed = try await tier.remove(key, engine: self) || removed
            } catch {
                failure = failure ?? error
            }
        }
        await RemoteWriteWindow.close(window, deleteRemote: deleteRemote)
        if let failure { throw failure }
        return removed
    }

    /// Unlinks a key's entry file inside a write window on its epochs (I10), so that no process keeps, or
    /// caches again, the value it held. Returns the key's epoch slots and their stamp after the window
    /// (matching nothing when another write of the slot came between), and whether a file was unlinked.
    func unlinkStoredEntry(
        at path: EntryPath, headerSize: Int, namespace: String, keyDigest: SHA256Digest, in context: StorageContext
    ) throws(YCache.Error) -> (EpochSnapshot, Bool) {
        let slots = SharedState.slots(namespace: namespace, keyDigest: keyDigest)
        if Injection.removalNoBump {  // a defect for the history checker's proofs only
            let removed = context.files.remove(path.relative, payload: .headerSize(headerSize))
            let stamp = context.directory.state.stamp(slots)
            return (EpochSnapshot(slots: slots, stamp: stamp), ((try? removed.get()) ?? nil) != nil)
        }
        let window = try context.directory.state.openKeyWindow(slots)
        let outcome = context.files.remove(path.relative, payload: .headerSize(headerSize))
        let after = window.close() ?? .unavailable
        let unlinked: Bool
        switch outcome {
        case .success(let removed): unlinked = removed != nil
        case .failure(let error): throw .system(error, path: storagePath, operation: "removing an entry")
        }
        return (EpochSnapshot(slots: slots, stamp: after), unlinked)
    }

    /// Removes every entry (whose namespace matches, when given). Blocking: run through BlockingWork.
    func removeAll(inNamespace namespace: String?) throws(YCache.Error) -> Int {
        if let namespace { memoryTier.store.removeAll(inNamespace: namespace) } else { memoryTier.store.removeAll() }
        let context = try storageTier.context(for: .write).get()  // reported, as in remove(key:)
        let signal = RemovalSignal.begin(namespace: namespace, in: context.directory)  // I15: one event for observers
        let removed = Result { () throws(YCache.Error) in try unlinkAll(inNamespace: namespace, in: context) }
        signal?.end()
        return try removed.get()
    }

    /// The unlinks of `removeAll`: each entry inside a write window on its key's epochs (I10), as a removal
    /// of that key, all inside a window on the namespace's or the global word, opened before the scan and
    /// closed after it. While that one is open no stamp of the namespace is quiet, so memory items whose
    /// entry was gone already (trimmed) or that were never stored go too, and a remover that took an entry
    /// aside while the scan passed its path does not put it back (`JudgedFile`, `KeyWindow.isUndisturbed`).
    private func unlinkAll(inNamespace namespace: String?, in context: StorageContext) throws(YCache.Error) -> Int {
        let state = context.directory.state
        let slot = namespace.map(SharedState.namespaceSlot)
        let window = Injection.removalNoBump ? nil : try state.openRemovalWindow(namespaceSlot: slot)
        let scanned = Result { () throws(YCache.Error) -> Int in
            var removed = 0
            for entry in context.files.scanEntries() {
                guard case .success(let (header, bytes, _)) = context.files.readHeader(entry.relative),
                    let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset])
                else {
                    // Not a sound entry: nobody can have it in memory. Removed unless a namespace is asked for.
                    if namespace == nil, case .success(_?) = context.files.remove(entry.relative, payload: .readHeader)
                    {
                        removed += 1
                    }
                    continue
                }
                if let namespace, key.namespace != namespace { continue }
                if Injection.removalNoBump {  // a defect for the history checker's proofs only
                    let outcome = context.files.remove(entry.relative, payload: .headerSize(header.payloadOffset))
                    if case .success(_?) = outcome { removed += 1 }
                    continue
                }
                let keyWindow = try state.openKeyWindow(
                    SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest))
                let outcome = context.files.remove(entry.relative, payload: .headerSize(header.payloadOffset))
                _ = keyWindow.close()
                if case .success(_?) = outcome { removed += 1 }
            }
            return removed
        }
        try window?.close()  // also after a failed scan: the namespace must not stay unquiet
        return try scanned.get()
    }

    /// Removes expired entries: each the file judged expired, never one published at its path since
    /// (`JudgedFile`). Blocking.
    func removeExpired() -> Int {
        guard case .success(let context) = storageTier.context(for: .write) else { return 0 }
        let now = Syscall.realtimeNanoseconds
        var removed = 0
        for entry in context.files.scanEntries() {
            guard case .success(let (header, bytes, status)) = context.files.readHeader(entry.relative),
                header.isExpired(atNanoseconds: now)
            else { continue }
            let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset])
            let slots = key.map { SharedState.slots(namespace: $0.namespace, keyDigest: $0.stableDigest) }
            let judged = JudgedFile(status: status, unlessTouched: false, slots: slots)
            if case .success(_?) = context.files.remove(
                entry.relative, payload: .headerSize(header.payloadOffset), judged: judged)
            {
                removed += 1
            }
        }
        return removed
    }

    /// Lists entries of `namespace` (all when nil). Blocking.
    func entries(inNamespace namespace: String?) -> [StoredEntryInfo] {
        guard case .success(let context) = storageTier.context(for: .read) else { return [] }
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
        try storageTier.context(for: .write).get().trimmer.reconcileUsage()  // writes both counters (I13)
    }

    /// An explicit trim: down to the budget itself (no low-water mark, no per-pass limit), then a recount;
    /// without a budget only the debris sweep and the recount. Blocking.
    func trimStorage() throws(YCache.Error) -> CountedUsage {
        let context = try storageTier.context(for: .write).get()  // I13: trims and sweeps write
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
        if case .success(let context) = storageTier.context(for: .read) {
            let keySlots = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
            slots = keySlots
            stamp = context.directory.state.stamp(keySlots)
        }
        memoryTier.store.insert(
            MemoryItem(value: value, cost: charged, metadata: metadata, slots: slots, stamp: stamp, entryPath: nil),
            for: EntryKey(key: key, codecIdentifier: codec.identifier))
    }
}
