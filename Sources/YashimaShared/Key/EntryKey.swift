// The entry key of flights and tiers: a cache key and the codec that reads its value, compared by their
// UTF-8 bytes as the entry identity (EntryIdentity.swift) hashes them (UTF8Order.swift), so that a memory
// item, a flight and an entry file are named by the same pair. In-process only: no invariant of its own.

/// What identifies a value in memory: the key and the codec that decoded it, both compared by their UTF-8
/// bytes (as the entry identity hashes them): two codec identifiers that differ only in Unicode
/// normalisation name two entries, never one memory item.
struct EntryKey: Hashable, Sendable {
    let key: CacheKey
    let codecIdentifier: String

    static func == (lhs: EntryKey, rhs: EntryKey) -> Bool {
        lhs.key == rhs.key && compareUTF8(lhs.codecIdentifier, rhs.codecIdentifier) == 0
    }

    func hash(into hasher: inout Hasher) {
        key.hash(into: &hasher)
        hashUTF8(codecIdentifier, into: &hasher)
    }
}
