// The memory tier: this process's L1 (MemoryStore), its own; a hit valid only under the removal epochs it
// was stored with (I10; an item whose epochs moved but that names a stored entry is revalidated against the
// entry's header); a hit on a stored value touches its file by the rule of I11.

/// This process's memory (L1) as a tier: the memory store, its hits, peeks and what it remembers.
final class MemoryTier: CacheTier {
    /// The memory store (its LRU and items).
    let store: MemoryStore
    /// The cache's counters (memory hits).
    private let counters: CacheCounters

    init(_ store: MemoryStore, counters: CacheCounters) {
        self.store = store
        self.counters = counters
    }

    var place: TierPlace { .beforeFlight }

    /// Pre-specialised; the body is `lookupHit`, so the generic entry only dispatches (no generic metadata
    /// made).
    @_specialize(where Codec == DataCodec)
    @_specialize(where Codec == StringCodec)
    func lookup<Codec: CacheCodec>(_ lookup: inout TierLookup<Codec>, engine: CacheEngine) throws
        -> YCache.Resolved<Codec.Value>?
    {
        try lookupHit(lookup)
    }

    @inline(never)
    private func lookupHit<Codec: CacheCodec>(_ lookup: TierLookup<Codec>) throws -> YCache.Resolved<Codec.Value>? {
        try hit(lookup.entryKey, codec: lookup.codec, storage: try? lookup.opened.get(), now: lookup.now)
    }

    func remove(_ key: TierKey, engine: CacheEngine) async throws(YCache.Error) -> Bool {
        store.remove(key.entryKey)
    }

    /// A hit in memory, or nil, with the storage (nil when it cannot be opened) and the realtime clock the
    /// lookup already has. Throws `valueTypeMismatch` when memory holds the key and codec identifier with
    /// a value of another type (two codecs sharing one identifier), as Yashima does.
    func hit<Codec: CacheCodec>(_ entryKey: EntryKey, codec: Codec, storage: StorageContext?, now: Int64)
        throws(YCache.Error) -> YCache.Resolved<Codec.Value>?
    {
        guard let item = liveItem(entryKey, now: now, storage: storage) else { return nil }
        guard let value = item.contents.value(as: Codec.Value.self) else { throw .valueTypeMismatch }
        counters.count(state: storage?.directory.state) { $0.memoryHits += 1 }
        if let path = item.entryPath, let storage {
            // A value served from memory is still in use: keep its file from looking cold to trim, by the
            // touch rule of I11 (nothing is written unless something was published since its last use, or
            // that use is a minute old).
            if let touched = storage.files.touchIfStale(path, lastUse: item.lastUse ?? 0, now: now) {
                store.noteUse(entryKey, at: touched)
            }
        }
        return YCache.Resolved(value: value, source: .memory, metadata: item.metadata, wasSharedGeneration: false)
    }

    /// `peek`: a hit in memory only, with the storage open now (nil when it cannot be opened).
    func peek<Codec: CacheCodec>(_ key: CacheKey, codec: Codec, storage: StorageContext?) throws(YCache.Error)
        -> Codec.Value?
    {
        try hit(
            EntryKey(key: key, codecIdentifier: codec.identifier), codec: codec, storage: storage,
            now: Syscall.realtimeNanoseconds)?.value
    }

    /// The memory item of `entryKey` if it is live (I10). An item whose epochs moved, or that was stamped
    /// or is looked up while a write window is open on its slot, but that names a stored entry, is served
    /// when storage still holds the same publish of that entry: one open and a 128-byte read instead of
    /// dropping it and reading the whole entry again. Confirmed only under a quiet stamp.
    ///
    /// Why this keeps each key linearizable (I10): every publish and removal renames inside a write window
    /// on the key's slot (opened before, closed after), and a memory item is served without a look at
    /// storage only when the stamp it carries is quiet and equal to the current one, that is when no
    /// window opened since it was stamped. The current stamp is read before the look at storage and kept
    /// only if quiet: a rename after that read moves the epochs again, so the next lookup looks again. So a
    /// memory hit returns what a read of storage at that instant would (or a value no write has replaced
    /// since it was read), and once any process reads a new value, or finds a removed one gone, no process
    /// serves the old one from memory.
    func liveItem(_ entryKey: EntryKey, now: Int64, storage: StorageContext?) -> MemoryItem? {
        switch store.lookup(entryKey, state: storage?.directory.state, now: now) {
        case .miss:
            return nil
        case .hit(let item):
            return item
        case .unconfirmed(let item, let current):
            guard let storage, let path = item.entryPath, let version = item.entryVersion,
                storage.files.publishedVersion(path) == version
            else {
                store.drop(entryKey, serial: item.serial)
                return nil
            }
            store.confirm(entryKey, serial: item.serial, stamp: current)
            return item
        }
    }

    /// Puts a value in memory with the epochs it was read or made under (I10), and records when its entry
    /// file was last used, when it has one (I11).
    func remember(_ item: MemoryItem, for entryKey: EntryKey, lastUse: Int64?) {
        store.insert(item, for: entryKey, lastUse: lastUse)
    }
}
