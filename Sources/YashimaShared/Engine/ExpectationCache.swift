// The expectation cache: what a storage lookup of a key expects to find (its entry identity, canonical key
// bytes and digests), remembered for recently used keys so a lookup of a key seen before computes no
// SHA-256. Bounded by `Policy.expectationCacheCapacity`; cleared when full.

import Synchronization

/// Recently used keys' entry expectations (see the file's header).
final class ExpectationCache: Sendable {
    private let table = Mutex<[MemoryKey: EntryExpectation]>([:])

    func expectation(for key: MemoryKey) -> EntryExpectation {
        if let cached = table.withLock({ $0[key] }) { return cached }
        let expectation = EntryExpectation(key: key.key, codecIdentifier: key.codecIdentifier)
        table.withLock { table in
            if table.count >= Policy.expectationCacheCapacity { table.removeAll(keepingCapacity: true) }
            table[key] = expectation
        }
        return expectation
    }
}
