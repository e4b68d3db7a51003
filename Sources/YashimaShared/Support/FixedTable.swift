// A fixed-capacity map for per-process caches of facts that can always be recomputed (VerifiedInodes,
// Engine/ExpectationCache): two slots per set; no growth and no clearing, so a lookup costs the same
// whatever the directory holds (issue 24).

/// A two-way set-associative map of fixed capacity (see the file's header). Not synchronized: its owner
/// keeps it behind a lock. Its slots are allocated on the first insert.
struct FixedTable<Key: Hashable, Value> {
    private var keys: [Key?] = []
    private var values: [Value?] = []
    /// Per set, the way used last (0 or 1).
    private var lastUsed: [UInt8] = []
    private let setMask: Int

    /// A table of at least `capacity` slots (rounded up to a power of two, at least two).
    init(capacity: Int) {
        var sets = 1
        while sets * 2 < capacity { sets *= 2 }
        setMask = sets - 1
    }

    var capacity: Int { (setMask + 1) * 2 }

    private func set(of key: Key) -> Int { key.hashValue & setMask }

    /// The value stored for `key`, marking it used.
    mutating func value(for key: Key) -> Value? {
        guard !keys.isEmpty else { return nil }
        let set = set(of: key)
        for way in 0..<2 where keys[2 * set + way] == key {
            lastUsed[set] = UInt8(way)
            return values[2 * set + way]
        }
        return nil
    }

    /// Stores `value` for `key`: in its own slot, an empty one, or the one of its set not used last.
    mutating func insert(_ value: Value, for key: Key) {
        if keys.isEmpty {
            keys = Array(repeating: nil, count: capacity)
            values = Array(repeating: nil, count: capacity)
            lastUsed = Array(repeating: 0, count: setMask + 1)
        }
        let set = set(of: key)
        var way = 1 - Int(lastUsed[set])
        if keys[2 * set] == key {
            way = 0
        } else if keys[2 * set + 1] == key {
            way = 1
        } else if keys[2 * set] == nil {
            way = 0
        } else if keys[2 * set + 1] == nil {
            way = 1
        }
        keys[2 * set + way] = key
        values[2 * set + way] = value
        lastUsed[set] = UInt8(way)
    }

    /// How many slots hold an entry (tests).
    var count: Int { keys.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
}
