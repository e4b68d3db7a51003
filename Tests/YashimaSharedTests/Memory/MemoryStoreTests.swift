// The in-memory layer: CostLRU on its own (order, cost and count bounds, replacement, slot reuse) and
// MemoryStore's item checks (expiry against an explicit clock, removal epochs, namespace removal).

import Foundation
import Testing

@testable import YashimaShared

/// A key of the tests' LRUs, written as a string literal; its index hash is its `hashValue`.
struct Name: TableKey, ExpressibleByStringLiteral, CustomStringConvertible {
    let text: String
    init(stringLiteral text: String) { self.text = text }
    var description: String { text }
}

/// A key of the tests' LRUs, written as an integer literal; `bucket` > 0 files every key under its value
/// modulo `bucket`, so that many keys share a hash (the index's clusters and their repair on removal).
struct Number: TableKey, ExpressibleByIntegerLiteral {
    let value: Int
    var bucket = 0
    init(integerLiteral value: Int) { self.value = value }
    init(_ value: Int, bucket: Int = 0) {
        self.value = value
        self.bucket = bucket
    }
    static func == (lhs: Number, rhs: Number) -> Bool { lhs.value == rhs.value }
    func hash(into hasher: inout Hasher) { hasher.combine(value) }
    var tableHash: Int { bucket > 0 ? value % bucket : hashValue }
}

@Suite("CostLRU")
struct CostLRUTests {
    @Test("the cost bound evicts the least recently used; a read makes an item recent")
    func costBound() {
        var lru = CostLRU<Name, Int>(maximumCost: 10, maximumCount: nil)
        #expect(lru.insert(1, for: "a", cost: 4).isEmpty)
        #expect(lru.insert(2, for: "b", cost: 4).isEmpty)
        #expect(lru.value(for: "a") == 1)  // "b" is now the least recently used
        #expect(lru.insert(3, for: "c", cost: 4) == ["b"])
        #expect(lru.value(for: "b") == nil)
        #expect(lru.totalCost == 8)
        #expect(lru.insert(4, for: "d", cost: 9) == ["a", "c"])  // evicts in LRU order until it fits
        #expect(lru.count == 1)
        #expect(lru.totalCost == 9)
    }

    @Test("the count bound evicts the least recently used")
    func countBound() {
        var lru = CostLRU<Number, Int>(maximumCost: nil, maximumCount: 3)
        for key in 0..<3 { lru.insert(key, for: Number(key), cost: 1_000_000) }
        _ = lru.value(for: 0)
        #expect(lru.insert(3, for: 3, cost: 1) == [1])
        #expect(lru.insert(4, for: 4, cost: 1) == [2])
        #expect(lru.value(for: 0) == 0)
        #expect(lru.count == 3)
    }

    @Test("an item costing more than the whole bound is not kept, and replaces nothing else")
    func oversized() {
        var lru = CostLRU<Name, Int>(maximumCost: 10, maximumCount: nil)
        lru.insert(1, for: "a", cost: 5)
        lru.insert(2, for: "b", cost: 5)
        #expect(lru.insert(3, for: "b", cost: 11) == ["b"])  // the old "b" goes too: it was replaced
        #expect(lru.value(for: "b") == nil)
        #expect(lru.value(for: "a") == 1)
        #expect(lru.totalCost == 5)
        #expect(lru.insert(4, for: "c", cost: 10) == ["a"])  // exactly the bound fits
        #expect(lru.value(for: "c") == 4)
    }

    @Test("a bound of 0 keeps nothing, not even items of cost 0")
    func zeroBounds() {
        var byCost = CostLRU<Name, Int>(maximumCost: 0, maximumCount: nil)
        byCost.insert(1, for: "a", cost: 0)
        byCost.insert(2, for: "b", cost: 1)
        #expect(byCost.count == 0)
        var byCount = CostLRU<Name, Int>(maximumCost: nil, maximumCount: 0)
        byCount.insert(1, for: "a", cost: 0)
        #expect(byCount.count == 0)
        #expect(byCount.value(for: "a") == nil)
    }

    @Test("replacing updates value and cost; negative costs count as 0")
    func replace() {
        var lru = CostLRU<Name, Int>(maximumCost: 10, maximumCount: nil)
        lru.insert(1, for: "a", cost: 3)
        lru.insert(2, for: "a", cost: 7)
        #expect(lru.count == 1)
        #expect(lru.totalCost == 7)
        #expect(lru.value(for: "a") == 2)
        lru.insert(3, for: "n", cost: -5)
        #expect(lru.totalCost == 7)
        #expect(lru.removeValue(for: "a") == 2)
        #expect(lru.removeValue(for: "a") == nil)
        #expect(lru.totalCost == 0)
    }

    @Test("removeAll(where:) and removeAll() keep the list consistent; freed slots are reused")
    func removals() {
        var lru = CostLRU<Number, Int>(maximumCost: 100, maximumCount: nil)
        for key in 0..<10 { lru.insert(key, for: Number(key), cost: 1) }
        lru.removeAll { $0.value % 2 == 0 }
        #expect(lru.count == 5)
        #expect(lru.totalCost == 5)
        for key in 10..<15 { lru.insert(key, for: Number(key), cost: 1) }  // reuses the freed slots
        #expect(lru.count == 10)
        // LRU order is still insertion order: each eviction takes the oldest survivor.
        var lru2 = lru
        let evicted = (0..<10).flatMap { lru2.insert(100 + $0, for: Number(100 + $0), cost: 10) }.map(\.value)
        #expect(evicted == [1, 3, 5, 7, 9, 10, 11, 12, 13, 14])
        lru.removeAll()
        #expect(lru.count == 0)
        #expect(lru.totalCost == 0)
        lru.insert(1, for: 1, cost: 1)
        #expect(lru.value(for: 1) == 1)
    }

    @Test(
        "random operations agree with a simple reference model (keys of their own hashes, and three shared hashes)",
        arguments: [0, 3])
    func againstModel(bucket: Int) {
        var lru = CostLRU<Number, Int>(maximumCost: 50, maximumCount: 8)
        var model: [(key: Int, cost: Int)] = []  // least recently used first
        var state: UInt64 = 42
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33) % bound
        }
        for _ in 0..<5000 {
            let key = next(20)
            let lruKey = Number(key, bucket: bucket)
            switch next(3) {
            case 0:
                let cost = next(30)
                lru.insert(key, for: lruKey, cost: cost)
                model.removeAll { $0.key == key }
                if cost <= 50 {
                    model.append((key, cost))
                    while model.reduce(0, { $0 + $1.cost }) > 50 || model.count > 8 { model.removeFirst() }
                }
            case 1:
                let found = lru.value(for: lruKey)
                if let index = model.firstIndex(where: { $0.key == key }) {
                    model.append(model.remove(at: index))
                    #expect(found == key)
                } else {
                    #expect(found == nil)
                }
            default:
                lru.removeValue(for: lruKey)
                model.removeAll { $0.key == key }
            }
            #expect(lru.count == model.count)
            #expect(lru.totalCost == model.reduce(0) { $0 + $1.cost })
        }
    }

    @Test(
        "the index keeps finding every key as it grows and loses keys, also when many share a hash",
        arguments: [0, 7])
    func indexAgainstDictionary(bucket: Int) {
        var lru = CostLRU<Number, Int>(maximumCost: nil, maximumCount: nil)
        var model: [Int: Int] = [:]
        var random = SplitMix(seed: 7)
        for round in 0..<20_000 {
            let key = Int(random.next() % 3000)
            if random.next() % 5 < 3 {
                lru.insert(round, for: Number(key, bucket: bucket), cost: 1)
                model[key] = round
            } else {
                #expect(lru.removeValue(for: Number(key, bucket: bucket)) == model.removeValue(forKey: key))
            }
            if round % 1000 == 999 {
                for probe in 0..<3000 { #expect(lru.peekValue(for: Number(probe, bucket: bucket)) == model[probe]) }
            }
        }
        #expect(lru.count == model.count)
        // A lookup by hash and predicate finds what a lookup by key finds, and marks it used.
        if let (key, value) = model.first {
            let hash = Number(key, bucket: bucket).tableHash
            let slot = lru.slot(hash: hash) { $0.value == key }
            #expect(slot.map { lru.withValue(at: $0) { $0 } } == value)
            #expect(lru.slot(hash: hash) { _ in false } == nil)
        }
    }
}

@Suite("MemoryStore")
struct MemoryStoreTests {
    static func item(
        _ value: String, cost: Int = 1, expiresAt: Int64? = nil, slots: SharedState.Slots? = nil,
        stamp: SharedState.Stamp? = nil
    ) -> MemoryItem {
        MemoryItem(
            value: value, cost: cost,
            metadata: YCache.Metadata(
                byteCount: 0, cost: cost, createdAt: Date(nanosecondsSince1970: 0),
                lastAccessedAt: Date(nanosecondsSince1970: 0), codecIdentifier: "c", keyDigest: nil,
                expiresAtNanoseconds: expiresAt),
            slots: slots, stamp: stamp, entryPath: nil)
    }

    static func key(_ identity: String, namespace: String = "default", codec: String = "c") -> EntryKey {
        EntryKey(key: CacheKey(identity, namespace: namespace), codecIdentifier: codec)
    }

    @Test("an item is live until its expiry instant, then dropped")
    func expiry() {
        let store = MemoryStore(maximumCost: nil, maximumCount: nil)
        store.insert(Self.item("v", expiresAt: 1000), for: Self.key("a"))
        #expect(store.item(for: Self.key("a"), state: nil, now: 999)?.contents.value(as: String.self) == "v")
        #expect(store.item(for: Self.key("a"), state: nil, now: 1000) == nil)
        #expect(store.count == 0)
    }

    @Test("an item's value comes back as its own type, as a type it converts to, and not as another type")
    func valueTypes() {
        let item = Self.item("v")
        #expect(item.contents.value(as: String.self) == "v")  // the exact type: one class check
        #expect(item.contents.value(as: (any Sendable).self) as? String == "v")  // the runtime's cast
        #expect(item.contents.value(as: (any Hashable & Sendable).self) as? String == "v")
        #expect(item.contents.value(as: Int.self) == nil)  // another type: a type mismatch for the hit
        #expect(item.contents.value(as: Substring.self) == nil)
    }

    @Test("an item stored under older epochs is dropped (I10)")
    func epochs() throws {
        let dir = TemporaryDirectory("memory-epochs")
        let directory = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        let state = directory.state
        let key = CacheKey("epoch", namespace: "ns")
        let slots = SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest)
        let store = MemoryStore(maximumCost: nil, maximumCount: nil)
        let entryKey = EntryKey(key: key, codecIdentifier: "c")
        let bumps: [() throws -> Void] = [
            { try state.bumpKey(slots) }, { try state.bumpNamespace(slot: slots.namespace) },
            { try state.bumpGlobal() },
        ]
        for bump in bumps {
            store.insert(Self.item("v", slots: slots, stamp: state.stamp(slots)), for: entryKey)
            #expect(store.item(for: entryKey, state: state, now: 0) != nil)
            try bump()
            #expect(store.item(for: entryKey, state: state, now: 0) == nil)
            #expect(store.count == 0)
        }
        // Without storage (no slots) an item is never invalidated by epochs.
        store.insert(Self.item("v"), for: entryKey)
        try state.bumpGlobal()
        #expect(store.item(for: entryKey, state: state, now: 0) != nil)
    }

    @Test("removal by entry, by namespace and of everything")
    func removals() {
        let store = MemoryStore(maximumCost: nil, maximumCount: nil)
        let keys = [
            Self.key("a"), Self.key("a", codec: "other"), Self.key("b"), Self.key("c", namespace: "x"),
            Self.key("d", namespace: "x"),
        ]
        for key in keys { store.insert(Self.item("v"), for: key) }
        store.remove(keys[2])
        #expect(store.count == 4)
        store.removeAll(inNamespace: "default")
        #expect(store.count == 2)
        store.removeAll(inNamespace: "x")
        #expect(store.count == 0)
        for key in keys { store.insert(Self.item("v", cost: 3), for: key) }
        #expect(store.totalCost == 15)
        store.removeAll()
        #expect(store.count == 0)
        #expect(store.totalCost == 0)
    }

    @Test("the last use of each key's entry file is remembered in its item for the touch rule")
    func lastUse() {
        let store = MemoryStore(maximumCost: nil, maximumCount: nil)
        let (key, other) = (Self.key("t"), Self.key("other"))
        func lastUse(_ key: EntryKey) -> Int64? {
            if case .hit(let item) = store.lookup(key, state: nil, now: 0) { return item.lastUse }
            return nil
        }
        store.noteUse(key, at: 5)  // no item: nothing to remember it in
        store.insert(Self.item("v", cost: 1), for: key, lastUse: 3)
        store.insert(Self.item("w", cost: 1), for: other)
        #expect(lastUse(key) == 3 && lastUse(other) == nil)
        store.noteUse(key, at: 9)
        store.noteUse(other, at: 7)
        #expect(lastUse(key) == 9 && lastUse(other) == 7)
        store.insert(Self.item("x", cost: 1), for: key)  // a new item: its own last use
        #expect(lastUse(key) == nil)
        store.removeAll()
        #expect(lastUse(key) == nil)
    }
}

@Suite("MemoryStore.quickItem")
struct MemoryQuickHitTests {
    static let margin: Int64 = 5_000_000
    static let now: Int64 = 1_000_000_000_000
    static let recent = Policy.touchInterval.nanoseconds - margin

    /// An item of `value` stamped now (or with `stamp`), stored at a path when `lastUse` is given.
    static func item(
        _ value: String, slots: SharedState.Slots, stamp: SharedState.Stamp?, expiresAt: Int64? = nil,
        stored: Bool = false
    ) -> MemoryItem {
        MemoryItem(
            value: value, cost: 1,
            metadata: YCache.Metadata(
                byteCount: 0, cost: 1, createdAt: Date(nanosecondsSince1970: 0),
                lastAccessedAt: Date(nanosecondsSince1970: 0), codecIdentifier: "c", keyDigest: nil,
                expiresAtNanoseconds: expiresAt),
            slots: slots, stamp: stamp,
            entryPath: stored ? EntryPath(fanOut: "entries/ab", relative: "entries/ab/x.entry") : nil)
    }

    /// A storage directory's state file, one key of it and an empty memory store.
    struct Fixture {
        let folder: TemporaryDirectory
        let directory: Directory
        let key = CacheKey("quick", namespace: "ns")
        let store = MemoryStore(maximumCost: nil, maximumCount: nil)

        init(_ name: String) throws {
            folder = TemporaryDirectory(name)
            directory = try Directory(path: folder.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        }

        var state: SharedState { directory.state }
        var entryKey: EntryKey { EntryKey(key: key, codecIdentifier: "c") }
        var slots: SharedState.Slots { SharedState.slots(namespace: key.namespace, keyDigest: key.stableDigest) }
    }

    @Test("a quick hit serves an item only when the full lookup would serve it as it is, and counts nothing else")
    func onlyWhatLookupServes() throws {
        let fixture = try Fixture("memory-quick")
        let (state, key, entryKey, slots, store) = (
            fixture.state, fixture.key, fixture.entryKey, fixture.slots, fixture.store
        )
        func quick<Value: Sendable>(_ type: Value.Type = String.self, now: Int64 = Self.now) -> Value? {
            guard case .found(let item) = store.quickItem(key, codecIdentifier: "c", as: type),
                item.isServable(in: state.live()!, now: now, margin: Self.margin, recent: Self.recent)
            else { return nil }
            return item.contents.value
        }
        func lookupHits(now: Int64 = Self.now) -> Bool {
            if case .hit = store.lookup(entryKey, state: state, now: now) { return true }
            return false
        }

        // Stamped now, not stored: both serve it; another codec identifier or type is not it.
        store.insert(Self.item("v", slots: slots, stamp: state.stamp(slots)), for: entryKey)
        #expect(quick() == "v" && lookupHits())
        #expect(quick(Int.self) == nil)
        if case .absent = store.quickItem(key, codecIdentifier: "d", as: String.self) {} else { Issue.record("found") }
        if case .otherType = store.quickItem(key, codecIdentifier: "c", as: Int.self) {} else { Issue.record("typed") }

        // Any epoch moved since the stamp: never quick (the full lookup drops it or checks storage).
        for bump in [
            { try state.bumpKey(slots) }, { try state.bumpNamespace(slot: slots.namespace) },
            { try state.bumpGlobal() },
        ] {
            store.insert(Self.item("v", slots: slots, stamp: state.stamp(slots)), for: entryKey)
            #expect(quick() == "v")
            try bump()
            #expect(quick() == nil)
            #expect(!lookupHits())
        }

        // Stamped while a write window was open on its slot: not quiet, never quick.
        let window = try state.openKeyWindow(slots)
        store.insert(Self.item("v", slots: slots, stamp: state.stamp(slots)), for: entryKey)
        #expect(quick() == nil)
        _ = window.close()

        // No stamp (stored while the state file could not be had): left to the full lookup.
        store.insert(Self.item("v", slots: slots, stamp: nil), for: entryKey)
        #expect(quick() == nil)

        // Expiry: served only when it lies beyond the margin.
        for (expiresAt, served) in [
            (Self.now + 10 * Self.margin, true), (Self.now + Self.margin, false), (Self.now + 1, false),
            (Self.now, false), (Self.now - 1, false),
        ] {
            store.insert(Self.item("v", slots: slots, stamp: state.stamp(slots), expiresAt: expiresAt), for: entryKey)
            #expect((quick() != nil) == served, "expires at now + \(expiresAt - Self.now) ns")
            if served { #expect(lookupHits()) }
        }
    }

    @Test("a stored item is served quick only when its hit touches nothing (I11), by a margin")
    func touchRule() throws {
        let fixture = try Fixture("memory-quick-touch")
        let (state, key, entryKey, slots, store) = (
            fixture.state, fixture.key, fixture.entryKey, fixture.slots, fixture.store
        )
        let minute = Policy.touchInterval.nanoseconds
        func served(lastUse: Int64?, now: Int64 = Self.now) -> Bool {
            store.insert(
                Self.item("v", slots: slots, stamp: state.stamp(slots), stored: true), for: entryKey, lastUse: lastUse)
            guard case .found(let item) = store.quickItem(key, codecIdentifier: "c", as: String.self) else {
                return false
            }
            return item.isServable(in: state.live()!, now: now, margin: Self.margin, recent: Self.recent)
        }
        #expect(served(lastUse: Self.now))
        #expect(served(lastUse: Self.now - minute / 2))
        #expect(!served(lastUse: nil))  // never used as far as this process knows: a touch is due
        #expect(!served(lastUse: Self.now - minute))  // a minute old: due
        #expect(!served(lastUse: Self.now - minute + Self.margin))  // within the margin of due
        #expect(!served(lastUse: Self.now + minute))  // a clock that jumped back: due
        // Something published after the last use: due.
        state.notePublish(atNanoseconds: Self.now + 1)
        #expect(!served(lastUse: Self.now))
        #expect(served(lastUse: Self.now + 1))
        for lastUse in [Self.now, Self.now - minute, Self.now + 1] {
            let due = EntryFile.shouldTouch(lastUse: lastUse, now: Self.now, lastPublish: Self.now + 1)
            if served(lastUse: lastUse) { #expect(!due) }
        }
    }
}
