// The per-process in-memory layer (L1): a cost- and count-bounded LRU of decoded values. Each item
// remembers the removal epochs it was stored under (I10) and its expiry; a lookup that finds it expired
// drops it, and one that finds its epochs moved either drops it (a value kept only in memory) or hands it
// back unconfirmed, for the engine to check against storage (a value that names a stored entry). No I/O
// here. Synchronous and short: safe to call from any task.

import Synchronization

/// What identifies a value in memory: the key and the codec that decoded it.
struct MemoryKey: Hashable, Sendable {
    let key: CacheKey
    let codecIdentifier: String
}

/// One value in memory, with what a hit needs to know about it.
struct MemoryItem: Sendable {
    let value: any Sendable
    let cost: Int
    let metadata: YCache.Metadata
    /// Epoch slots and the epochs at store time (nil when storage is unavailable); a confirmed item gets
    /// newer ones (see `MemoryLookup.unconfirmed`).
    let slots: SharedState.Slots?
    var stamp: SharedState.Stamp?
    /// Entry path in storage, for the LRU touch of memory hits (P15); nil if not stored.
    let entryPath: EntryPath?
    /// Which publish of that entry the value was read from or written as; nil if not stored.
    let entryVersion: EntryVersion?
    /// Set by `MemoryStore.insert`: tells this item from a later one under the same key.
    fileprivate(set) var serial: UInt64 = 0

    init(
        value: any Sendable, cost: Int, metadata: YCache.Metadata, slots: SharedState.Slots?,
        stamp: SharedState.Stamp?, entryPath: EntryPath?, entryVersion: EntryVersion? = nil
    ) {
        self.value = value
        self.cost = cost
        self.metadata = metadata
        self.slots = slots
        self.stamp = stamp
        self.entryPath = entryPath
        self.entryVersion = entryVersion
    }
}

/// What a memory lookup found.
enum MemoryLookup {
    case miss
    case hit(MemoryItem)
    /// The item's epochs moved (I10) but it names a stored entry: another key sharing its epoch slot may
    /// have been removed or replaced, not this one. The caller checks that storage still holds the same
    /// publish of the entry, then `confirm`s the item with `current` (the epochs read here, before that
    /// check) or `drop`s it.
    case unconfirmed(MemoryItem, current: SharedState.Stamp)
}

/// A plain, non-thread-safe LRU with a cost bound and an optional count bound.
struct CostLRU<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var cost: Int
        var previous: Int
        var next: Int
    }

    private var nodes: [Node] = []
    private var free: [Int] = []
    private var slots: [Key: Int] = [:]
    private var head = -1  // most recently used
    private var tail = -1  // least recently used
    private(set) var totalCost = 0
    let maximumCost: Int?
    let maximumCount: Int?

    init(maximumCost: Int?, maximumCount: Int?) {
        self.maximumCost = maximumCost
        self.maximumCount = maximumCount
    }

    var count: Int { slots.count }

    /// Changes the value of `key` in place (its LRU position and cost stay); false when there is none.
    @discardableResult
    mutating func update(_ key: Key, _ body: (inout Value) -> Void) -> Bool {
        guard let slot = slots[key] else { return false }
        body(&nodes[slot].value)
        return true
    }

    /// The value without marking it used.
    func peekValue(for key: Key) -> Value? {
        slots[key].map { nodes[$0].value }
    }

    /// The value, marked most recently used.
    mutating func value(for key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return nodes[slot].value
    }

    /// Inserts or replaces, then evicts least recently used items over the bounds. An item whose cost
    /// alone exceeds the cost bound is not kept, and a bound of 0 keeps nothing (not even items of cost 0,
    /// as `YCache` documents for a memory budget of 0 or less). Returns the evicted keys.
    @discardableResult
    mutating func insert(_ value: Value, for key: Key, cost: Int) -> [Key] {
        let cost = max(0, cost)
        if let maximumCost, cost > maximumCost || maximumCost <= 0 {
            removeValue(for: key)
            return [key]
        }
        if let slot = slots[key] {
            totalCost += cost - nodes[slot].cost
            nodes[slot].value = value
            nodes[slot].cost = cost
            moveToFront(slot)
        } else {
            let node = Node(key: key, value: value, cost: cost, previous: -1, next: head)
            let slot: Int
            if let reused = free.popLast() {
                nodes[reused] = node
                slot = reused
            } else {
                nodes.append(node)
                slot = nodes.count - 1
            }
            if head >= 0 { nodes[head].previous = slot }
            head = slot
            if tail < 0 { tail = slot }
            slots[key] = slot
            totalCost += cost
        }
        var evicted: [Key] = []
        while tail >= 0,
            (maximumCost.map { totalCost > $0 } ?? false) || (maximumCount.map { slots.count > $0 } ?? false)
        {
            let victim = nodes[tail].key
            evicted.append(victim)
            removeValue(for: victim)
        }
        return evicted
    }

    @discardableResult
    mutating func removeValue(for key: Key) -> Value? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        unlink(slot)
        totalCost -= nodes[slot].cost
        let value = nodes[slot].value
        free.append(slot)
        return value
    }

    mutating func removeAll(where predicate: (Key) -> Bool) {
        for key in slots.keys where predicate(key) { removeValue(for: key) }
    }

    mutating func removeAll() {
        nodes.removeAll()
        free.removeAll()
        slots.removeAll()
        head = -1
        tail = -1
        totalCost = 0
    }

    private mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous >= 0 { nodes[previous].next = next } else { head = next }
        if next >= 0 { nodes[next].previous = previous } else { tail = previous }
        nodes[slot].previous = -1
        nodes[slot].next = -1
    }

    private mutating func moveToFront(_ slot: Int) {
        guard slot != head else { return }
        unlink(slot)
        nodes[slot].next = head
        if head >= 0 { nodes[head].previous = slot }
        head = slot
        if tail < 0 { tail = slot }
    }
}

/// The L1 of one `YCache`.
final class MemoryStore: Sendable {
    private let lru: Mutex<CostLRU<MemoryKey, MemoryItem>>
    /// When each key's entry file was last marked used, as far as this process knows (I11, P15).
    private let touches = Mutex<[MemoryKey: Int64]>([:])
    /// The next item's serial.
    private let nextSerial = Atomic<UInt64>(1)

    init(maximumCost: Int?, maximumCount: Int?) {
        lru = Mutex(CostLRU(maximumCost: maximumCost, maximumCount: maximumCount))
    }

    /// The item for `key`: a hit when it is not expired and was stored under the current epochs (I10);
    /// unconfirmed when its epochs moved but it names a stored entry (the caller checks storage); a miss
    /// otherwise (an expired item, or one kept only in memory whose epochs moved, is dropped).
    func lookup(_ key: MemoryKey, state: SharedState?, now: Int64) -> MemoryLookup {
        lru.withLock { lru -> MemoryLookup in
            guard let item = lru.value(for: key) else { return .miss }
            if let expiresAt = item.metadata.expiresAtNanoseconds, now >= expiresAt {
                lru.removeValue(for: key)
                return .miss
            }
            if let slots = item.slots, let stamp = item.stamp, let state {
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

    /// A live item, or nil: `lookup` with an unconfirmed item treated as a miss and dropped.
    func item(for key: MemoryKey, state: SharedState?, now: Int64) -> MemoryItem? {
        switch lookup(key, state: state, now: now) {
        case .miss: return nil
        case .hit(let item): return item
        case .unconfirmed(let item, _):
            drop(key, serial: item.serial)
            return nil
        }
    }

    /// Keeps an unconfirmed item, valid from now on under `stamp`, if `key` still holds that item.
    func confirm(_ key: MemoryKey, serial: UInt64, stamp: SharedState.Stamp) {
        lru.withLock { lru in
            _ = lru.update(key) { item in
                if item.serial == serial { item.stamp = stamp }
            }
        }
    }

    /// Drops the item of `key` if it is still the one with `serial` (a newer one may have replaced it).
    func drop(_ key: MemoryKey, serial: UInt64) {
        lru.withLock { lru in
            if lru.peekValue(for: key)?.serial == serial { lru.removeValue(for: key) }
        }
    }

    /// Inserts `item`; returns false when it was not kept (its cost alone exceeds the budget).
    @discardableResult
    func insert(_ item: MemoryItem, for key: MemoryKey) -> Bool {
        var item = item
        item.serial = nextSerial.wrappingAdd(1, ordering: .relaxed).oldValue
        return lru.withLock { lru in
            guard lru.maximumCost.map({ item.cost <= $0 }) ?? true, lru.maximumCount != 0 else { return false }
            lru.insert(item, for: key, cost: item.cost)
            return true
        }
    }

    /// Removes the value of `key`; true when there was one.
    @discardableResult
    func remove(_ key: MemoryKey) -> Bool {
        lru.withLock { $0.removeValue(for: key) } != nil
    }

    /// Removes every codec's value for `key`.
    func remove(key: CacheKey) {
        lru.withLock { $0.removeAll { $0.key == key } }
    }

    func removeAll(inNamespace namespace: String) {
        lru.withLock { $0.removeAll { $0.key.namespace == namespace } }
    }

    func removeAll() {
        lru.withLock { $0.removeAll() }
        touches.withLock { $0.removeAll() }
    }

    var totalCost: Int { lru.withLock { $0.totalCost } }
    var count: Int { lru.withLock { $0.count } }

    /// When the entry file of `key` was last marked used (its mtime as this process set or saw it), for
    /// the touch rule of memory hits (I11, P15); nil when unknown.
    func lastUse(_ key: MemoryKey) -> Int64? {
        touches.withLock { $0[key] }
    }

    /// Records that the entry file of `key` was marked used at `nanoseconds`.
    func noteUse(_ key: MemoryKey, at nanoseconds: Int64) {
        touches.withLock { touches in
            if touches.count > 100_000 { touches.removeAll(keepingCapacity: true) }
            touches[key] = nanoseconds
        }
    }
}
