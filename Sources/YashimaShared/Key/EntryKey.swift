// The entry key of flights and tiers: a cache key and the codec that reads its value, compared by their
// UTF-8 bytes as the entry identity (EntryIdentity.swift) hashes them (UTF8Order.swift), so that a memory
// item, a flight and an entry file are named by the same pair. In-process only: no invariant of its own.

/// A key of `CostLRU` (Memory/): hashable, with the hash the LRU's index uses (`lruHash`).
protocol LRUKey: Hashable {
    /// This key's hash for the index: equal keys have equal ones. Unlike `hashValue`, a key may make it
    /// without a `Hasher` (EntryKey mixes the hash its key keeps with its codec identifier's length), and a caller may compute
    /// it from the parts of a key it has not built (`CostLRU.slot(hash:where:)`).
    var lruHash: Int { get }
}

extension LRUKey {
    var lruHash: Int { hashValue }
}

/// What identifies a value in memory: the key and the codec that decoded it, both compared by their UTF-8
/// bytes (as the entry identity hashes them): two codec identifiers that differ only in Unicode
/// normalisation name two entries, never one memory item.
struct EntryKey: Hashable, Sendable, LRUKey {
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

    /// The memory table's hash (CostLRU): the key's canonical hash, made once per key, mixed with the
    /// codec identifier's length (two codecs of one key rarely share one, and when they do the table tells
    /// them apart by `matches`); no `Hasher`, and no pass over any bytes, per lookup.
    var lruHash: Int { Self.lruHash(key, codecIdentifier: codecIdentifier) }

    /// `lruHash` of the entry key of `key` and `codecIdentifier`, from its parts.
    static func lruHash(_ key: CacheKey, codecIdentifier: String) -> Int {
        // splitmix64's finalizer over both, so that every bit of the index's bucket depends on both.
        var mixed = UInt64(bitPattern: Int64(key.canonicalHash)) ^ (UInt64(codecIdentifier.utf8.count) << 56)
        mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
        return Int(bitPattern: UInt(mixed ^ (mixed >> 31)))
    }
}
