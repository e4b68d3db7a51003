// The fixed table behind the verified-inode and expectation caches: its size never changes, a key just
// stored or just used stays, and a full table replaces instead of clearing (issue 24).

import Testing

@testable import YashimaShared

@Suite struct FixedTableTests {
    @Test("capacity is fixed; a key just stored is found; a set's slot used last survives the next insert")
    func replacesInsteadOfClearing() {
        var table = FixedTable<Number, Int>(capacity: 1000)  // Number: MemoryStoreTests.swift
        #expect(table.capacity == 1024)
        #expect(table.value(for: 1) == nil)
        for key in 0..<100_000 {
            table.insert(key * 2, for: Number(key))
            #expect(table.value(for: Number(key)) == key * 2)
        }
        #expect(table.count <= table.capacity)
        #expect(table.count > table.capacity / 2, "a full table holds most of its capacity, never cleared")
        // A key used between every insert stays (its set replaces the other slot).
        let hot = 123_456_789
        table.insert(1, for: Number(hot))
        for key in 200_000..<300_000 {
            #expect(table.value(for: Number(hot)) == 1)
            table.insert(key, for: Number(key))
        }
        #expect(table.value(for: Number(hot)) == 1)
        // Storing a key again replaces its value in place.
        table.insert(2, for: Number(hot))
        #expect(table.value(for: Number(hot)) == 2)
    }

    @Test("the caches' slots cost what Policy says")
    func slotSizes() {
        // VerifiedInodes: identity (device, inode) and (ctime, size), optional: 49 bytes with the set's byte.
        #expect(MemoryLayout<(UInt64, UInt64)?>.stride + MemoryLayout<(Int64, Int64)?>.stride <= 50)
        // ExpectationCache: a EntryKey and a reference, optional.
        let slot = MemoryLayout<EntryKey?>.stride + MemoryLayout<EntryExpectation?>.stride
        #expect(slot <= 96, "\(slot) bytes a slot")
    }
}
