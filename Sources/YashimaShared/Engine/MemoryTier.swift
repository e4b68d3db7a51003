// The memory tier: a hit in this process's L1 (MemoryStore), valid only under the removal epochs it was
// stored with (I10; an item whose epochs moved but that names a stored entry is revalidated against the
// entry's header); a hit on a stored value touches its file by the rule of I11.

/// This process's memory (L1) as a tier.
struct MemoryTier: CacheTier {
    var place: TierPlace { .beforeFlight }

    /// Pre-specialised; the body is `hit`, so the generic entry only dispatches (no generic metadata made).
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
        try engine.memoryHit(
            lookup.memoryKey, codec: lookup.codec, storage: try? lookup.opened.get(), now: lookup.now)
    }

    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool {
        engine.memory.remove(key.memoryKey)
    }
}

extension CacheEngine {
    /// A hit in memory, or nil, with the storage (nil when it cannot be opened) and the realtime clock the
    /// lookup already has. Throws `valueTypeMismatch` when memory holds the key and codec identifier with
    /// a value of another type (two codecs sharing one identifier), as Yashima does.
    func memoryHit<Codec: CacheCodec>(_ memoryKey: MemoryKey, codec: Codec, storage: StorageContext?, now: Int64)
        throws(YCache.Error) -> YCache.Resolved<Codec.Value>?
    {
        guard let item = liveMemoryItem(memoryKey, now: now, storage: storage) else { return nil }
        guard let value = item.value as? Codec.Value else { throw .valueTypeMismatch }
        count(state: storage?.directory.state) { $0.memoryHits += 1 }
        if let path = item.entryPath, let storage {
            // A value served from memory is still in use: keep its file from looking cold to trim, by the
            // touch rule of I11 (nothing is written unless something was published since its last use, or
            // that use is a minute old).
            if let touched = storage.files.touchIfStale(path, lastUse: item.lastUse ?? 0, now: now) {
                memory.noteUse(memoryKey, at: touched)
            }
        }
        return YCache.Resolved(value: value, source: .memory, metadata: item.metadata, wasSharedGeneration: false)
    }

    /// `peek`: a hit in memory only.
    func peek<Codec: CacheCodec>(_ key: CacheKey, codec: Codec) throws(YCache.Error) -> Codec.Value? {
        try memoryHit(
            MemoryKey(key: key, codecIdentifier: codec.identifier), codec: codec,
            storage: try? storage(for: .read).get(), now: Syscall.realtimeNanoseconds)?.value
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
    func liveMemoryItem(_ memoryKey: MemoryKey, now: Int64, storage: StorageContext?) -> MemoryItem? {
        switch memory.lookup(memoryKey, state: storage?.directory.state, now: now) {
        case .miss:
            return nil
        case .hit(let item):
            return item
        case .unconfirmed(let item, let current):
            guard let storage, let path = item.entryPath, let version = item.entryVersion,
                storage.files.publishedVersion(path) == version
            else {
                memory.drop(memoryKey, serial: item.serial)
                return nil
            }
            memory.confirm(memoryKey, serial: item.serial, stamp: current)
            return item
        }
    }

    /// Puts a value in memory with the epochs it was read or made under (I10), and records when its entry
    /// file was last used, when it has one (I11).
    func remember(_ item: MemoryItem, for memoryKey: MemoryKey, lastUse: Int64?) {
        memory.insert(item, for: memoryKey, lastUse: lastUse)
    }
}
