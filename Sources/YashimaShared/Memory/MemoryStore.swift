// The per-process memory layer (L1): a cost- and count-bounded LRU of decoded values, each with the removal
// epochs it was stored under (I10) and its expiry; an item whose epochs moved is dropped or handed back
// unconfirmed for the engine to check against storage. No I/O.

import Synchronization

/// What a memory item holds that never changes, behind one reference: a hit copies the item out of the
/// LRU (and through the lookup's result) as one pointer, not one reference count per field, and finds the
/// value's type by the class of its contents (`TypedMemoryContents`), not by a cast through the runtime.
///
/// `@unchecked Sendable` because a non-final class cannot be checked: every stored property, here and in
/// the only subclass (`TypedMemoryContents`, final, in this file), is a `let` of a `Sendable` type, so no
/// instance is ever mutated after its initializer returns and sharing one between threads is safe.
class MemoryContents: @unchecked Sendable {
    let cost: Int
    let metadata: YCache.Metadata
    /// Epoch slots (nil when storage is unavailable).
    let slots: SharedState.Slots?
    /// Entry path in storage, for the LRU touch of memory hits (I11); nil if not stored.
    let entryPath: EntryPath?
    /// Whether `entryPath` is set (read by a hit without copying the path).
    let isStored: Bool
    /// Which publish of that entry the value was read from or written as; nil if not stored.
    let entryVersion: EntryVersion?

    fileprivate init(
        cost: Int, metadata: YCache.Metadata, slots: SharedState.Slots?, entryPath: EntryPath?,
        entryVersion: EntryVersion?
    ) {
        self.cost = cost
        self.metadata = metadata
        self.slots = slots
        self.entryPath = entryPath
        isStored = entryPath != nil
        self.entryVersion = entryVersion
    }

    /// The value as `Value`, or nil when memory holds a value of another type under the key (two codecs
    /// sharing one identifier). The exact type costs one class check; another type it converts to (a
    /// subclass, an existential) goes through the runtime's cast.
    @inline(__always)
    final func value<Value: Sendable>(as type: Value.Type) -> Value? {
        if let typed = self as? TypedMemoryContents<Value> { return typed.value }
        return (self as? any MemoryValueHolder)?.anyValue as? Value
    }
}

/// Contents that hold a value of some type (the slow path of `MemoryContents.value(as:)`).
private protocol MemoryValueHolder {
    var anyValue: any Sendable { get }
}

/// The contents of a memory item whose value is a `Value`. `@unchecked Sendable` restated from
/// `MemoryContents`, by the same proof: its one stored property is a `let` of a `Sendable` type.
final class TypedMemoryContents<Value: Sendable>: MemoryContents, MemoryValueHolder, @unchecked Sendable {
    let value: Value

    fileprivate init(
        _ value: Value, cost: Int, metadata: YCache.Metadata, slots: SharedState.Slots?, entryPath: EntryPath?,
        entryVersion: EntryVersion?
    ) {
        self.value = value
        super.init(cost: cost, metadata: metadata, slots: slots, entryPath: entryPath, entryVersion: entryVersion)
    }

    var anyValue: any Sendable { value }

    /// A memory hit's resolution of this value.
    var resolution: YCache.Resolved<Value> {
        YCache.Resolved(value: value, source: .memory, metadata: metadata, wasSharedGeneration: false)
    }
}

/// One value in memory, with what a hit needs to know about it: the contents that never change, and what
/// the store updates in place (the stamp, the last use).
struct MemoryItem: Sendable {
    let contents: MemoryContents
    /// The epochs at store time (nil when storage is unavailable); a confirmed item gets newer ones (see
    /// `MemoryLookup.unconfirmed`).
    var stamp: SharedState.Stamp?
    /// Set by `MemoryStore.insert`: tells this item from a later one under the same key.
    fileprivate(set) var serial: UInt64 = 0
    /// When its entry file was last marked used, as this process set or saw it (its mtime), for the touch
    /// rule of memory hits (I11); nil when unknown. Kept in the item: a hit reads it with the item.
    fileprivate(set) var lastUse: Int64?

    init<Value: Sendable>(
        value: Value, cost: Int, metadata: YCache.Metadata, slots: SharedState.Slots?,
        stamp: SharedState.Stamp?, entryPath: EntryPath?, entryVersion: EntryVersion? = nil
    ) {
        contents = TypedMemoryContents(
            value, cost: cost, metadata: metadata, slots: slots, entryPath: entryPath, entryVersion: entryVersion)
        self.stamp = stamp
    }

    var cost: Int { contents.cost }
    var metadata: YCache.Metadata { contents.metadata }
    var slots: SharedState.Slots? { contents.slots }
    var entryPath: EntryPath? { contents.entryPath }
    var entryVersion: EntryVersion? { contents.entryVersion }
}

/// What `MemoryStore.quickItem` found.
enum QuickLook<Value: Sendable>: Sendable {
    case found(QuickItem<Value>)
    /// No item for the key and codec identifier.
    case absent
    /// An item whose value is of another type (the full lookup decides: a type mismatch, or a conversion).
    case otherType
}

/// What a quick memory hit reads of an item (`MemoryStore.quickItem`): its contents, when they hold a value
/// of the caller's type, and the fields the store changes in place, as they were when it was found.
struct QuickItem<Value: Sendable>: Sendable {
    let contents: TypedMemoryContents<Value>
    let stamp: SharedState.Stamp?
    let lastUse: Int64?

    @inline(__always)
    init?(_ item: borrowing MemoryItem) {
        guard let contents = item.contents as? TypedMemoryContents<Value> else { return nil }
        self.contents = contents
        stamp = item.stamp
        lastUse = item.lastUse
    }

    /// Whether a hit may serve this item as it is: stamped quiet under the epochs `mapping` holds now
    /// (I10), not expiring within `margin` of `now`, and a hit on it touches nothing (I11): its last use
    /// lies less than `recent` (the touch interval less the margin) either side of now, and nothing was
    /// published since. False in every other case, which `MemoryStore.lookup` and `MemoryTier.hit` decide
    /// (MemoryTier.quickHit says why this serves only what they serve).
    @inline(__always)
    func isServable(in mapping: StateMapping, now: Int64, margin: Int64, recent: Int64) -> Bool {
        guard let stamp, let slots = contents.slots, let current = SharedState.stamp(slots, in: mapping),
            stamp.matches(current)
        else { return false }
        if let expiresAt = contents.metadata.expiresAtNanoseconds, expiresAt - now <= margin { return false }
        guard contents.isStored else { return true }
        // The touch rule (EntryFile.shouldTouch) with room for the clock's lag; a last publish ahead of now
        // (left by a clock that jumped back) is left to the full lookup.
        let lastUse = lastUse ?? 0
        return mapping.loadSigned(SharedState.lastPublishOffset) <= lastUse && now - lastUse < recent
            && lastUse - now < recent
    }
}

/// What a memory lookup found.
enum MemoryLookup {
    case miss
    case hit(MemoryItem)
    /// The item's epochs moved, or a write window is open on them (I10), but it names a stored entry:
    /// another key sharing its epoch slot may have been written or removed, not this one. The caller checks
    /// that storage still holds the same publish of the entry (then the item is what a read of storage would
    /// return now), serves it and `confirm`s it with `current` (the epochs read here, before that check), or
    /// `drop`s it.
    case unconfirmed(MemoryItem, current: SharedState.Stamp)
}

/// The L1 of one `YCache`.
final class MemoryStore: Sendable {
    private let lru: Mutex<CostLRU<EntryKey, MemoryItem>>
    /// The next item's serial.
    private let nextSerial = Atomic<UInt64>(1)
    /// The LRU's limits (fixed at creation), readable without its lock.
    private let maximumCost: Int?
    private let maximumCount: Int?

    init(maximumCost: Int?, maximumCount: Int?) {
        lru = Mutex(CostLRU(maximumCost: maximumCost, maximumCount: maximumCount))
        self.maximumCost = maximumCost
        self.maximumCount = maximumCount
    }

    /// Whether `insert` could keep an item of this cost at all: false when its cost alone exceeds the
    /// budget or no item may be kept (`insert` would return false). Lets a caller skip building the item.
    func mightKeep(cost: Int) -> Bool {
        (maximumCost.map { cost <= $0 } ?? true) && maximumCount != 0
    }

    /// The item for `key`: a hit when it is not expired and was stored under the current epochs (I10);
    /// unconfirmed when its epochs moved but it names a stored entry (the caller checks storage); a miss
    /// otherwise (an expired item, or one kept only in memory whose epochs moved, is dropped).
    func lookup(_ key: EntryKey, state: SharedState?, now: Int64) -> MemoryLookup {
        lru.withLock { lru -> MemoryLookup in
            guard let item = lru.value(for: key) else { return .miss }
            if let expiresAt = item.metadata.expiresAtNanoseconds, now >= expiresAt {
                lru.removeValue(for: key)
                return .miss
            }
            if !Injection.memoryNoEpochs, let slots = item.slots, let stamp = item.stamp, let state {
                let current = state.stamp(slots)
                if !stamp.matches(current) {
                    // A stored entry is re-checked against storage instead of dropped (unless no state file
                    // can be had now: then nothing can confirm it).
                    if item.entryPath != nil && item.entryVersion != nil && current.isAvailable {
                        return .unconfirmed(item, current: current)
                    }
                    lru.removeValue(for: key)
                    return .miss
                }
            }
            return .hit(item)
        }
    }

    /// The item of `key` and `codecIdentifier` when it holds a `Value`, marked used, found without building
    /// their entry key and read in place (a memory hit's first look: `QuickItem.isServable` decides
    /// whether it may be served as it is, MemoryTier.quickHit).
    @inline(__always)
    func quickItem<Value: Sendable>(_ key: CacheKey, codecIdentifier: String, as type: Value.Type)
        -> QuickLook<Value>
    {
        let hash = EntryKey.tableHash(key, codecIdentifier: codecIdentifier)
        return lru.withLock { lru -> QuickLook<Value> in
            guard let slot = lru.slot(hash: hash, where: { $0.matches(key, codecIdentifier: codecIdentifier) })
            else { return .absent }
            guard let found = lru.withValue(at: slot, { QuickItem<Value>($0) }) else { return .otherType }
            lru.markUsed(slot)
            return .found(found)
        }
    }

    /// A live item, or nil: `lookup` with an unconfirmed item treated as a miss and dropped.
    func item(for key: EntryKey, state: SharedState?, now: Int64) -> MemoryItem? {
        switch lookup(key, state: state, now: now) {
        case .miss: return nil
        case .hit(let item): return item
        case .unconfirmed(let item, _):
            drop(key, serial: item.serial)
            return nil
        }
    }

    /// Keeps an unconfirmed item, valid from now on under `stamp`, if `key` still holds that item. A stamp
    /// read while a write window was open (not quiet) vouches for nothing: the item keeps its old one, and
    /// its next lookup looks at storage again (I10).
    func confirm(_ key: EntryKey, serial: UInt64, stamp: SharedState.Stamp) {
        guard stamp.isQuiet else { return }
        lru.withLock { lru in
            _ = lru.update(key) { item in
                if item.serial == serial { item.stamp = stamp }
            }
        }
    }

    /// Drops the item of `key` if it is still the one with `serial` (a newer one may have replaced it).
    func drop(_ key: EntryKey, serial: UInt64) {
        lru.withLock { lru in
            if lru.peekValue(for: key)?.serial == serial { lru.removeValue(for: key) }
        }
    }

    /// Inserts `item`, its entry file last used at `lastUse` (I11); returns false when it was not kept (its
    /// cost alone exceeds the budget).
    @discardableResult
    func insert(_ item: MemoryItem, for key: EntryKey, lastUse: Int64? = nil) -> Bool {
        var item = item
        item.lastUse = lastUse
        item.serial = nextSerial.wrappingAdd(1, ordering: .relaxed).oldValue
        return lru.withLock { lru in
            guard mightKeep(cost: item.cost) else { return false }
            lru.insert(item, for: key, cost: item.cost)
            return true
        }
    }

    /// Removes the value of `key`; true when there was one.
    @discardableResult
    func remove(_ key: EntryKey) -> Bool {
        lru.withLock { $0.removeValue(for: key) } != nil
    }

    func removeAll(inNamespace namespace: String) {
        lru.withLock { $0.removeAll { $0.key.namespace == namespace } }
    }

    func removeAll() {
        lru.withLock { $0.removeAll() }
    }

    var totalCost: Int { lru.withLock { $0.totalCost } }
    var count: Int { lru.withLock { $0.count } }

    /// Inserts an item for `key` into a scratch LRU, not this one: the type metadata a process makes on its
    /// first insert (the runtime looks the key's `Hashable` up, a scan of every conformance record) made
    /// ahead of time (`CacheEngine.rehearseWake`). Returns the scratch LRU's count (1).
    static func rehearseInsert(for key: EntryKey, metadata: YCache.Metadata) -> Int {
        var scratch = CostLRU<EntryKey, MemoryItem>(maximumCost: nil, maximumCount: nil)
        scratch.insert(
            MemoryItem(value: 0, cost: 0, metadata: metadata, slots: nil, stamp: nil, entryPath: nil), for: key, cost: 0
        )
        return scratch.count
    }

    /// Records that the entry file of `key` was marked used at `nanoseconds` (I11), in its item.
    func noteUse(_ key: EntryKey, at nanoseconds: Int64) {
        lru.withLock { lru in _ = lru.update(key) { $0.lastUse = nanoseconds } }
    }
}
