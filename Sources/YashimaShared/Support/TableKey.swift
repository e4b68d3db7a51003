// The key of this process's own tables (Memory/CostLRU, Support/FixedTable): hashable, with the hash the
// table files it under. A key may make that hash without a `Hasher` (a seeded SipHash per lookup, a few
// hundred instructions), from what it keeps already.

/// A key of a per-process table (CostLRU, FixedTable), with the hash the table files it under.
protocol TableKey: Hashable {
    /// This key's hash for the table: equal keys have equal ones, and every bit of it depends on the key
    /// (a table takes its low bits). Unlike `hashValue`, a key may make it without a `Hasher` (EntryKey
    /// mixes the hash its key keeps with its codec identifier's length), and a caller may compute it from
    /// the parts of a key it has not built (`CostLRU.slot(hash:where:)`).
    var tableHash: Int { get }
}

extension TableKey {
    var tableHash: Int { hashValue }
}

/// splitmix64's finalizer: every bit of the result depends on every bit of `word` (for a table hash made
/// from words that are not random in their low bits).
func mixedTableHash(_ word: UInt64) -> Int {
    var mixed = word
    mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
    mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
    return Int(bitPattern: UInt(mixed ^ (mixed >> 31)))
}
