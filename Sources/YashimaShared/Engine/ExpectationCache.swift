// The expectation cache: what a storage lookup of a key expects to find (its entry identity, canonical key
// bytes and digests), remembered for recently used keys so a lookup of a key seen before computes no
// SHA-256. A fixed table of `Policy.expectationCacheCapacity` slots (Support/FixedTable): a key it no
// longer holds costs one computation (about 2.5 µs), never a clearing of the others.

import Synchronization

/// Recently used keys' entry expectations (see the file's header).
final class ExpectationCache: Sendable {
    private let table = Mutex(FixedTable<EntryKey, EntryExpectation>(capacity: Policy.expectationCacheCapacity))

    func expectation(for key: EntryKey) -> EntryExpectation {
        if let cached = table.withLock({ $0.value(for: key) }) { return cached }
        let expectation = EntryExpectation(key: key.key, codecIdentifier: key.codecIdentifier)
        table.withLock { $0.insert(expectation, for: key) }
        return expectation
    }
}
