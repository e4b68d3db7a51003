// The LRU behind the memory tier: a doubly linked list over an array of nodes (free slots reused), with a
// cost bound and an optional count bound, and an open-addressing index from each key's `tableHash` (TableKey,
// Support/TableKey.swift) to its node. Not thread-safe: MemoryStore holds it under a mutex. No I/O.

/// A plain, non-thread-safe LRU with a cost bound and an optional count bound.
struct CostLRU<Key: TableKey, Value> {
    /// A node's place in the list and its cost.
    private struct Link {
        var cost: Int
        var previous: Int
        var next: Int
    }

    /// Per slot, its key, value and link: three arrays, so that a lookup reads a key in place and copies
    /// only the value it returns (nil in a free slot: a removed value is released at once).
    private var keys: [Key?] = []
    private var values: [Value?] = []
    private var links: [Link] = []
    private var free: [Int] = []
    private var index = SlotIndex()
    private var head = -1  // most recently used
    private var tail = -1  // least recently used
    private(set) var totalCost = 0
    let maximumCost: Int?
    let maximumCount: Int?

    init(maximumCost: Int?, maximumCount: Int?) {
        self.maximumCost = maximumCost
        self.maximumCount = maximumCount
    }

    var count: Int { index.count }

    /// The slot of the key filed under `hash` that `matches` accepts, its key read in place (not copied):
    /// also a lookup by the parts of a key, without building one (MemoryStore.quickItem), followed by
    /// `withValue(at:_:)` and `markUsed(_:)`.
    func slot(hash: Int, where matches: (Key) -> Bool) -> Int? {
        keys.withUnsafeBufferPointer { keys in index.find(hash) { matches(keys[$0]!) } }
    }

    private func slot(of key: Key) -> Int? {
        slot(hash: key.tableHash) { $0 == key }
    }

    /// Changes the value of `key` in place (its LRU position and cost stay); false when there is none.
    @discardableResult
    mutating func update(_ key: Key, _ body: (inout Value) -> Void) -> Bool {
        guard let slot = slot(of: key) else { return false }
        body(&values[slot]!)
        return true
    }

    /// The value without marking it used.
    func peekValue(for key: Key) -> Value? {
        slot(of: key).flatMap { values[$0] }
    }

    /// The value, marked most recently used.
    mutating func value(for key: Key) -> Value? {
        guard let slot = slot(of: key) else { return nil }
        moveToFront(slot)
        return values[slot]
    }

    /// What `body` makes of the value in `slot`, read in place (not copied).
    @inline(__always)
    func withValue<Result>(at slot: Int, _ body: (borrowing Value) -> Result) -> Result {
        values.withUnsafeBufferPointer { values in
            switch values[slot] {
            case .some(let value): body(value)
            case .none: preconditionFailure("CostLRU: no value in a filed slot")
            }
        }
    }

    /// Marks the key in `slot` most recently used.
    mutating func markUsed(_ slot: Int) {
        moveToFront(slot)
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
        let hash = key.tableHash
        if let slot = slot(hash: hash, where: { $0 == key }) {
            totalCost += cost - links[slot].cost
            values[slot] = value
            links[slot].cost = cost
            moveToFront(slot)
        } else {
            let link = Link(cost: cost, previous: -1, next: head)
            let slot: Int
            if let reused = free.popLast() {
                keys[reused] = key
                values[reused] = value
                links[reused] = link
                slot = reused
            } else {
                keys.append(key)
                values.append(value)
                links.append(link)
                slot = links.count - 1
            }
            if head >= 0 { links[head].previous = slot }
            head = slot
            if tail < 0 { tail = slot }
            index.insert(slot, hash: hash)
            totalCost += cost
        }
        var evicted: [Key] = []
        while tail >= 0,
            (maximumCost.map { totalCost > $0 } ?? false) || (maximumCount.map { index.count > $0 } ?? false)
        {
            let victim = keys[tail]!
            evicted.append(victim)
            removeValue(for: victim)
        }
        return evicted
    }

    @discardableResult
    mutating func removeValue(for key: Key) -> Value? {
        let hash = key.tableHash
        guard let slot = slot(hash: hash, where: { $0 == key }) else { return nil }
        index.remove(slot, hash: hash)
        unlink(slot)
        totalCost -= links[slot].cost
        let value = values[slot]
        keys[slot] = nil
        values[slot] = nil
        free.append(slot)
        return value
    }

    mutating func removeAll(where predicate: (Key) -> Bool) {
        var matching: [Key] = []
        var slot = head
        while slot >= 0 {
            if predicate(keys[slot]!) { matching.append(keys[slot]!) }
            slot = links[slot].next
        }
        for key in matching { removeValue(for: key) }
    }

    mutating func removeAll() {
        keys.removeAll()
        values.removeAll()
        links.removeAll()
        free.removeAll()
        index = SlotIndex()
        head = -1
        tail = -1
        totalCost = 0
    }

    private mutating func unlink(_ slot: Int) {
        let previous = links[slot].previous
        let next = links[slot].next
        if previous >= 0 { links[previous].next = next } else { head = next }
        if next >= 0 { links[next].previous = previous } else { tail = previous }
        links[slot].previous = -1
        links[slot].next = -1
    }

    private mutating func moveToFront(_ slot: Int) {
        guard slot != head else { return }
        unlink(slot)
        links[slot].next = head
        if head >= 0 { links[head].previous = slot }
        head = slot
        if tail < 0 { tail = slot }
    }
}

/// An open-addressing index from a hash to a node slot: linear probing in a power-of-two table kept at
/// most half full, and deletion by shifting the rest of a cluster back (no tombstones), so a probe reads a
/// short run of buckets whatever has been removed before. The caller confirms a candidate (`matches`): two
/// keys may share a hash.
private struct SlotIndex {
    /// Per bucket, the node slot (-1: empty) and the hash it was filed under.
    private var slots: [Int] = []
    private var hashes: [Int] = []
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    /// The slot filed under `hash` that `matches` accepts.
    func find(_ hash: Int, _ matches: (Int) -> Bool) -> Int? {
        guard count > 0 else { return nil }
        var bucket = hash & mask
        while true {
            let slot = slots[bucket]
            if slot < 0 { return nil }
            if hashes[bucket] == hash && matches(slot) { return slot }
            bucket = (bucket + 1) & mask
        }
    }

    /// Files `slot` under `hash` (the caller knows no equal key is filed).
    mutating func insert(_ slot: Int, hash: Int) {
        if (count + 1) * 2 > slots.count { grow() }
        var bucket = hash & mask
        while slots[bucket] >= 0 { bucket = (bucket + 1) & mask }
        slots[bucket] = slot
        hashes[bucket] = hash
        count += 1
    }

    /// Removes `slot`, filed under `hash`, and moves back each later bucket of its cluster that may now
    /// sit nearer its home bucket.
    mutating func remove(_ slot: Int, hash: Int) {
        var hole = hash & mask
        while slots[hole] != slot { hole = (hole + 1) & mask }
        var bucket = hole
        while true {
            bucket = (bucket + 1) & mask
            if slots[bucket] < 0 { break }
            let home = hashes[bucket] & mask
            // The bucket stays when its home lies cyclically in (hole, bucket]: moving it would put it
            // before its home, where a probe never looks.
            let stays = hole <= bucket ? (hole < home && home <= bucket) : (hole < home || home <= bucket)
            if stays { continue }
            slots[hole] = slots[bucket]
            hashes[hole] = hashes[bucket]
            hole = bucket
        }
        slots[hole] = -1
        count -= 1
    }

    private mutating func grow() {
        let oldSlots = slots
        let oldHashes = hashes
        let capacity = max(16, slots.count * 2)
        slots = Array(repeating: -1, count: capacity)
        hashes = Array(repeating: 0, count: capacity)
        count = 0
        for (bucket, slot) in oldSlots.enumerated() where slot >= 0 { insert(slot, hash: oldHashes[bucket]) }
    }
}
