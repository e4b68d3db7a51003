// The memory tier: this process's L1 (MemoryStore), its own; a hit valid only under the removal epochs it
// was stored with (I10; an item whose epochs moved but that names a stored entry is revalidated against the
// entry's header); a hit on a stored value touches its file by the rule of I11.

import Synchronization

/// This process's memory (L1) as a tier: the memory store, its hits, peeks and what it remembers.
final class MemoryTier: CacheTier {
    /// The memory store (its LRU and items).
    let store: MemoryStore
    /// This cache's memory hits (`CacheStatistics.memoryHits`, added by `addCounters`): one atomic add
    /// per hit, not a copy of every counter under the counters' lock.
    private let hits = Atomic<Int>(0)

    /// How far the coarse clock may lag the exact one (`coarseMargin`), nil when no hit may be quick
    /// (no margin known, or the `memory-no-epochs` injection, which only the full lookup applies); and the
    /// touch interval less it. Read once here: a global is a lazy initializer's check per read.
    private let quickMargin: Int64?
    private let quickRecent: Int64

    init(_ store: MemoryStore) {
        self.store = store
        quickMargin = Injection.memoryNoEpochs ? nil : coarseMargin
        quickRecent = touchIntervalNanoseconds - (coarseMargin ?? 0)
    }

    var place: TierPlace { .beforeFlight }

    func addCounters(to statistics: inout CacheStatistics) {
        statistics.memoryHits += hits.load(ordering: .relaxed)
    }

    /// A memory hit decided from the item and the state file's words alone, for a lookup on its caller's
    /// executor: the contents when memory holds the key with a value of type `Value`, not expired, stamped
    /// quiet under the epochs current now (I10), and the hit touches nothing (I11); `absent` when memory
    /// holds nothing for the key and codec identifier; `undecided` in every other case (an item expired or
    /// near its expiry, epochs moved, a touch due, another type, storage not open): the caller then takes
    /// the full path, which finds the same item and decides with more work (`hit`). Nothing here writes
    /// but the LRU order and the hit counts.
    ///
    /// Why it serves only what `hit` would serve: it requires what `MemoryStore.lookup` requires for a
    /// `.hit` (not expired, a stamp that matches one read now from the live state file), and whatever it
    /// does not decide exactly it leaves to `hit`. The clock it reads is the coarse one (the last tick:
    /// never ahead of the exact clock, behind it by at most `coarseMargin`): an item is served only when
    /// it expires more than that margin after the coarse now, so it is unexpired by the exact clock too;
    /// and the touch rule is applied the same way, the hit passing only when no touch is due by a margin.
    @inline(__always)
    func quickHit<Value: Sendable>(
        _ key: CacheKey, codecIdentifier: String, as type: Value.Type, storage: StorageTier
    ) -> QuickHit<Value> {
        // The item first (a miss costs a probe), then the storage's state file (which may check the root
        // path, I13) and the epochs in it.
        guard let margin = quickMargin else { return .undecided }
        let item: QuickItem<Value>
        switch store.quickItem(key, codecIdentifier: codecIdentifier, as: type) {
        case .absent: return .absent
        case .otherType: return .undecided
        case .found(let found): item = found
        }
        guard let context = storage.usableContext(for: .read), let mapping = context.directory.state.live(),
            item.isServable(in: mapping, now: Syscall.coarseRealtimeNanoseconds, margin: margin, recent: quickRecent)
        else { return .undecided }
        hits.add(1, ordering: .relaxed)
        SharedState.increment(.memoryHits, in: mapping)
        return .hit(item.contents)
    }

    /// What `quickHit` decided.
    enum QuickHit<Value: Sendable> {
        /// Served: the contents of the item.
        case hit(TypedMemoryContents<Value>)
        /// Memory holds no item for the key and codec identifier.
        case absent
        /// Anything else: the full lookup decides (`hit`).
        case undecided

        var isAbsent: Bool {
            if case .absent = self { true } else { false }
        }
    }

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
        hits.add(1, ordering: .relaxed)
        storage?.directory.state.add(.memoryHits)
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

/// How far the coarse clock may lag the exact one, with room to spare (`MemoryTier.quickHit`): three of its
/// ticks and a millisecond. Nil, and no quick hits, when the kernel gives no resolution or a tick longer
/// than 100 ms.
private let coarseMargin: Int64? = Syscall.coarseResolution.flatMap { $0 <= 100_000_000 ? 3 * $0 + 1_000_000 : nil }
