// The per-process in-memory layer (L1): a cost- and count-bounded LRU of decoded values. Each item
// remembers the removal epochs it was stored under (I10) and its expiry; a lookup that finds either
// stale drops the item. Synchronous and short: safe to call from any task.

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
    let metadata: CacheMetadata
    /// Epoch slots and the epochs at store time (nil when storage is unavailable).
    let slots: SharedState.Slots?
    let stamp: SharedState.Stamp?
    /// Entry path in storage, for the LRU touch of memory hits (P15); nil if not stored.
    let entryPath: EntryPath?
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
    /// Last time a memory hit touched the entry's file, per key (P15), kept with the item.
    private let touches = Mutex<[MemoryKey: Int64]>([:])

    init(maximumCost: Int?, maximumCount: Int?) {
        lru = Mutex(CostLRU(maximumCost: maximumCost, maximumCount: maximumCount))
    }

    /// A live item: not expired, and stored under the current epochs (I10); stale items are dropped.
    func item(for key: MemoryKey, state: SharedState?, now: Int64) -> MemoryItem? {
        lru.withLock { lru -> MemoryItem? in
            guard let item = lru.value(for: key) else { return nil }
            if let expiresAt = item.metadata.expiresAtNanoseconds, now >= expiresAt {
                lru.removeValue(for: key)
                return nil
            }
            if let slots = item.slots, let stamp = item.stamp, let state, !stamp.matches(state.stamp(slots)) {
                lru.removeValue(for: key)
                return nil
            }
            return item
        }
    }

    /// Inserts `item`; returns false when it was not kept (its cost alone exceeds the budget).
    @discardableResult
    func insert(_ item: MemoryItem, for key: MemoryKey) -> Bool {
        lru.withLock { lru in
            guard lru.maximumCost.map({ item.cost <= $0 }) ?? true, lru.maximumCount != 0 else { return false }
            lru.insert(item, for: key, cost: item.cost)
            return true
        }
    }

    func remove(_ key: MemoryKey) {
        _ = lru.withLock { $0.removeValue(for: key) }
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

    /// True at most once per touch interval per key: time for a memory hit to touch the entry's file.
    func shouldTouch(_ key: MemoryKey, now: Int64) -> Bool {
        touches.withLock { touches in
            if let last = touches[key], now - last < Policy.touchInterval { return false }
            if touches.count > 100_000 { touches.removeAll(keepingCapacity: true) }
            touches[key] = now
            return true
        }
    }
}
