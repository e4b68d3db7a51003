// The entry key of flights and tiers: a cache key and the codec that reads its value, compared by their
// UTF-8 bytes as the entry identity (EntryIdentity.swift) hashes them (UTF8Order.swift), so that a memory
// item, a flight and an entry file are named by the same pair. In-process only: no invariant of its own.

/// What identifies a value in memory: the key and the codec that decoded it, both compared by their UTF-8
/// bytes (as the entry identity hashes them): two codec identifiers that differ only in Unicode
/// normalisation name two entries, never one memory item.
struct EntryKey: Hashable, Sendable, TableKey {
    let key: CacheKey
    let codecIdentifier: String

    static func == (lhs: EntryKey, rhs: EntryKey) -> Bool {
        lhs.matches(rhs.key, codecIdentifier: rhs.codecIdentifier)
    }

    func hash(into hasher: inout Hasher) {
        key.hash(into: &hasher)
        hashUTF8(codecIdentifier, into: &hasher)
    }

    /// Whether this is the entry key of `key` and `codecIdentifier` (`==` without building one).
    func matches(_ key: CacheKey, codecIdentifier: String) -> Bool {
        self.key == key && compareUTF8(self.codecIdentifier, codecIdentifier) == 0
    }

    /// The tables' hash (CostLRU, FixedTable): the key's canonical hash, made once per key, mixed with the
    /// codec identifier's length (two codecs of one key rarely share one, and when they do the table tells
    /// them apart by `==`); no `Hasher`, and no pass over any bytes, per lookup.
    var tableHash: Int { Self.tableHash(key, codecIdentifier: codecIdentifier) }

    /// `tableHash` of the entry key of `key` and `codecIdentifier`, from its parts.
    static func tableHash(_ key: CacheKey, codecIdentifier: String) -> Int {
        mixedTableHash(UInt64(bitPattern: Int64(key.canonicalHash)) ^ (UInt64(codecIdentifier.utf8.count) << 56))
    }
}
