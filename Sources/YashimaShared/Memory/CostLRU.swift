// The LRU behind the memory tier: a doubly linked list over an array of nodes (free slots reused), with a
// cost bound and an optional count bound. Not thread-safe: MemoryStore holds it under a mutex. No I/O.

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
