// The storage tier: reading the key's entry file (I3: no lock, full validation), decoding it, remembering
// it in memory under the epochs read before the read (I10), touching it (I11). A corrupt or expired entry,
// or one the codec refuses, is removed and a miss (thrown under `.throwError`). Removal: I10's two bumps.

/// The shared storage directory (L2) as a tier. A production looks here again under the key's lock
/// (KeyLock, I5) through `CacheEngine.storageHit`, the same read.
struct StorageTier: CacheTier {
    var place: TierPlace { .beforeFlight }

    /// A miss when storage cannot be opened, unless `.throwError`. (Pre-specialised: the generic entry only
    /// dispatches to the specialisation; the body is `hit`, so no generic metadata is made on the way.)
    @_specialize(where Codec == DataCodec)
    @_specialize(where Codec == StringCodec)
    func lookup<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?
    {
        try Self.hit(lookup, engine: engine)
    }

    @inline(never)
    private static func hit<Codec: CacheCodec>(_ lookup: TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?
    {
        // A decompressing codec may turn a small payload into a large value: decoded on the pool.
        if lookup.readLimit != nil, Codec.self == CompressedDataCodec.self { throw LeavesCallerExecutor() }
        let request = engine.request(lookup.entryKey, codec: lookup.codec, options: lookup.options) { nil }
        let storage = try lookup.opened.orMiss(under: request.options.readFailurePolicy)
        return try engine.storageHit(request, in: storage, shared: false, now: lookup.now, limit: lookup.readLimit)?
            .resolution
    }

    /// Unlinks the entry between two bumps of its epochs (I10). A storage directory that cannot be opened
    /// is reported, because its entry would come back once the directory is usable again.
    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool {
        let context = try engine.storage(for: .write).get()
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

extension CacheEngine {
    /// Looks in storage; a hit is decoded, put in memory, and its file touched (I11). A corrupt or expired
    /// entry, or one the codec cannot decode, is removed and is a miss, or throws under `.throwError`: a
    /// `YCache.Error`, or the codec's own error as it threw it.
    /// - Parameters:
    ///   - shared: Whether a hit is another process's generation this lookup waited for.
    ///   - now: The lookup's realtime clock when it has one (nil: read it now).
    ///   - limit: The largest entry file to read; a larger one throws `LeavesCallerExecutor` (nil: any).
    func storageHit<Codec: CacheCodec>(
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
            let lastUse =
                storage.files.touchIfStale(path, lastUse: entry.modifiedNanoseconds, now: now)
                ?? entry.modifiedNanoseconds
            let cost =
                request.options.cost?.charged
                ?? request.codec.memoryCost(of: value, encodedByteCount: entry.payload.count)
            let metadata = request.key.metadata(
                header: entry.header, codecIdentifier: request.codec.identifier, cost: cost, lastAccessedAt: now)
            // A memory that cannot keep this value (L1 disabled, or the value larger than its budget) is
            // not asked: `insert` would refuse it after the item was built and copied.
            if request.options.writePolicy != .disabled, memory.mightKeep(cost: cost) {
                remember(
                    MemoryItem(
                        value: value, cost: cost, metadata: metadata, slots: epochs?.slots, stamp: epochs?.stamp,
                        entryPath: path, entryVersion: EntryVersion(entry.header)),
                    for: request.entryKey, lastUse: lastUse)
            }
            count(state: storage.directory.state) { $0.storageHits += 1 }
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
            if strict { throw YCache.Error.system(error, path: storagePath, operation: "reading an entry") }
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
}
