// A fixed-capacity map for per-process caches of facts that can always be recomputed (VerifiedInodes,
// Engine/ExpectationCache): two slots per set; no growth and no clearing, so a lookup costs the same
// whatever the directory holds (issue 24). Slots are allocated a chunk of sets at a time, on the first
// insert into the chunk: a short-lived process (a `yashima run` hit) touches a few KiB, not megabytes.

/// A two-way set-associative map of fixed capacity (see the file's header). Not synchronized: its owner
/// keeps it behind a lock. `Key: TableKey` is asked of the operations, not of the type: a constraint on
/// the type makes the runtime look the conformance up (a scan of every conformance record, long in the
/// static `yashima` binary) when a process first makes one.
struct FixedTable<Key, Value> {
    /// The slots of `setsPerChunk` consecutive sets.
    fileprivate struct Chunk {
        var keys: [Key?]
        var values: [Value?]
        /// Per set, the way used last (0 or 1).
        var lastUsed: [UInt8]

        init(sets: Int) {
            keys = Array(repeating: nil, count: 2 * sets)
            values = Array(repeating: nil, count: 2 * sets)
            lastUsed = Array(repeating: 0, count: sets)
        }
    }

    /// Nil until a key of the chunk's sets is stored.
    private var chunks: [Chunk?]
    private let setMask: Int
    private let setsPerChunk: Int

    /// Sets per chunk at most (two slots each).
    private static var maximumSetsPerChunk: Int { 128 }

    /// A table of at least `capacity` slots (rounded up to a power of two, at least two).
    init(capacity: Int) {
        var sets = 1
        while sets * 2 < capacity { sets *= 2 }
        setMask = sets - 1
        setsPerChunk = min(sets, Self.maximumSetsPerChunk)
        chunks = Array(repeating: nil, count: sets / setsPerChunk)
    }

    var capacity: Int { (setMask + 1) * 2 }

    /// How many slots hold an entry (tests).
    var count: Int { chunks.reduce(0) { $0 + ($1?.keys.reduce(0) { $0 + ($1 == nil ? 0 : 1) } ?? 0) } }
}

extension FixedTable where Key: TableKey {
    /// The chunk and the set within it of `key`.
    private func place(of key: Key) -> (chunk: Int, set: Int) {
        let set = key.tableHash & setMask
        return (set / setsPerChunk, set % setsPerChunk)
    }

    /// The value stored for `key`, marking it used.
    mutating func value(for key: Key) -> Value? {
        let (chunk, set) = place(of: key)
        // Through optional chaining, the chunk is changed in place: `chunks[chunk]!` would copy it out
        // (retaining its three arrays) at every step.
        return chunks[chunk]?.value(for: key, set: set) ?? nil
    }

    /// Stores `value` for `key`: in its own slot, an empty one, or the one of its set not used last.
    mutating func insert(_ value: Value, for key: Key) {
        let (chunk, set) = place(of: key)
        if chunks[chunk] == nil { chunks[chunk] = Chunk(sets: setsPerChunk) }
        chunks[chunk]!.insert(value, for: key, set: set)
    }
}

extension FixedTable.Chunk where Key: TableKey {
    /// The value stored for `key` in `set`, marking it used; its slots' keys compared in place.
    mutating func value(for key: Key, set: Int) -> Value? {
        let way = keys.withUnsafeBufferPointer { keys in
            keys[2 * set] == key ? 0 : keys[2 * set + 1] == key ? 1 : -1
        }
        guard way >= 0 else { return nil }
        lastUsed[set] = UInt8(way)
        return values[2 * set + way]
    }

    /// Stores `value` for `key` in `set`: its own slot, an empty one, or the one not used last.
    mutating func insert(_ value: Value, for key: Key, set: Int) {
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
}
