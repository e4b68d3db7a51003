// Memory items whose removal epochs moved because of another key in the same epoch slot (I10): an item
// that names a stored entry is revalidated against storage and kept when the entry is the same publish;
// it goes when its own entry was removed or replaced, and a value kept only in memory still goes.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Memory revalidation (I10)")
struct RevalidationTests {
    static let codec = StringCodec()

    /// Keys of one namespace whose key epochs share one slot of the state file.
    /// Two instances over a fresh directory (`label`), and `count` keys sharing an epoch slot.
    static func instances(_ label: String, keys count: Int) -> (TemporaryDirectory, [CacheKey], YCache, YCache) {
        let dir = TemporaryDirectory(label)
        return (
            dir, keysSharingAnEpochSlot(count), YCache(storageDirectory: dir.url), YCache(storageDirectory: dir.url)
        )
    }

    static func keysSharingAnEpochSlot(_ count: Int) -> [CacheKey] {
        let first = CacheKey("shared-0", namespace: "slots")
        let slot = SharedState.slots(namespace: "slots", keyDigest: first.stableDigest).key
        var keys = [first]
        var index = 1
        while keys.count < count {
            let key = CacheKey("shared-\(index)", namespace: "slots")
            if SharedState.slots(namespace: "slots", keyDigest: key.stableDigest).key == slot { keys.append(key) }
            index += 1
        }
        return keys
    }

    @Test("another instance's removal or replacement of a key in the same epoch slot keeps this key in memory")
    func neighbourChangesKeepTheItem() async throws {
        let (dir, keys, mine, other) = Self.instances("revalidate-neighbour", keys: 3)
        defer { withExtendedLifetime(dir) {} }  // the folder stays until the test ends
        for key in keys { try await mine.store(key.identity, for: key, codec: Self.codec) }
        try await other.remove(for: keys[1], codec: Self.codec)
        try await other.store("replaced", for: keys[2], codec: Self.codec)
        let hitsBefore = mine.statistics.memoryHits
        #expect(try await mine.peek(for: keys[0], codec: Self.codec) == keys[0].identity)
        #expect(mine.statistics.memoryHits == hitsBefore + 1)
        // The neighbours themselves: one removed, one replaced, neither served from memory any more.
        #expect(try await mine.peek(for: keys[1], codec: Self.codec) == nil)
        #expect(try await mine.peek(for: keys[2], codec: Self.codec) == nil)
        #expect(try await mine.valueIfCached(for: keys[1], codec: Self.codec) == nil)
        #expect(try await mine.valueIfCached(for: keys[2], codec: Self.codec) == "replaced")
        // Confirmed once, the kept item is a plain hit again (its epochs were brought up to date).
        #expect(try await mine.peek(for: keys[0], codec: Self.codec) == keys[0].identity)
    }

    @Test("a storage hit's memory copy is revalidated too, and a changed entry under it is not kept")
    func storageHitCopies() async throws {
        let (dir, keys, writer, reader) = Self.instances("revalidate-hit", keys: 2)
        defer { withExtendedLifetime(dir) {} }  // the folder stays until the test ends
        for key in keys { try await writer.store(key.identity, for: key, codec: Self.codec) }
        for key in keys { #expect(try await reader.valueIfCached(for: key, codec: Self.codec) == key.identity) }
        try await writer.store("new", for: keys[1], codec: Self.codec)
        #expect(try await reader.peek(for: keys[0], codec: Self.codec) == keys[0].identity)
        #expect(try await reader.peek(for: keys[1], codec: Self.codec) == nil)
        #expect(try await reader.valueIfCached(for: keys[1], codec: Self.codec) == "new")
        // Its own entry replaced: another publish, so the copy goes.
        try await writer.store("replaced", for: keys[0], codec: Self.codec)
        #expect(try await reader.peek(for: keys[0], codec: Self.codec) == nil)
        #expect(try await reader.valueIfCached(for: keys[0], codec: Self.codec) == "replaced")
    }

    @Test("a value kept only in memory still goes when its epoch slot moves")
    func memoryOnlyValuesGo() async throws {
        let (dir, keys, mine, other) = Self.instances("revalidate-memory-only", keys: 2)
        defer { withExtendedLifetime(dir) {} }  // the folder stays until the test ends
        try await mine.putInMemory("put", for: keys[0], codec: Self.codec)
        try await other.store("neighbour", for: keys[1], codec: Self.codec)
        try await other.remove(for: keys[1], codec: Self.codec)
        #expect(try await mine.peek(for: keys[0], codec: Self.codec) == nil)
    }

    @Test("MemoryStore: confirm and drop apply only to the item that was looked up")
    func confirmAndDropMatchTheItem() throws {
        let dir = TemporaryDirectory("revalidate-store")
        let directory = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        let state = directory.state
        let store = MemoryStore(maximumCost: nil, maximumCount: nil)
        let key = EntryKey(key: CacheKey("k"), codecIdentifier: "c")
        let slots = SharedState.slots(namespace: "default", keyDigest: key.key.stableDigest)
        let header = EntryFormat.Header(
            keyByteCount: 0, codecByteCount: 0, payloadByteCount: 1, createdAtNanoseconds: 1, expiresAtNanoseconds: 0,
            payloadChecksum: 0, entryIdentity: key.key.stableDigest, keyStableDigest: key.key.stableDigest)
        func item(_ value: String) -> MemoryItem {
            MemoryStoreTests.item(value).with(
                slots: slots, stamp: state.stamp(slots),
                entryPath: directory.entryPath(for: EntryIdentity(key: key.key, codecIdentifier: "c")),
                entryVersion: EntryVersion(header))
        }
        store.insert(item("old"), for: key)
        try state.bumpKey(slots)
        guard case .unconfirmed(let stale, let current) = store.lookup(key, state: state, now: 0) else {
            Issue.record("expected an unconfirmed item")
            return
        }
        store.insert(item("new"), for: key)  // replaced while the old one was being checked
        store.drop(key, serial: stale.serial)
        store.confirm(key, serial: stale.serial, stamp: current)
        guard case .hit(let kept) = store.lookup(key, state: state, now: 0) else {
            Issue.record("the newer item was dropped or restamped by the older one's check")
            return
        }
        #expect(kept.contents.value(as: String.self) == "new")
        try state.bumpKey(slots)
        guard case .unconfirmed(let newer, let now) = store.lookup(key, state: state, now: 0) else {
            Issue.record("expected an unconfirmed item")
            return
        }
        store.confirm(key, serial: newer.serial, stamp: now)
        guard case .hit = store.lookup(key, state: state, now: 0) else {
            Issue.record("a confirmed item is a hit")
            return
        }
        #expect(store.item(for: key, state: state, now: 0) != nil)
    }
}

extension MemoryItem {
    fileprivate func with(
        slots: SharedState.Slots, stamp: SharedState.Stamp, entryPath: EntryPath, entryVersion: EntryVersion
    ) -> MemoryItem {
        MemoryItem(
            value: contents.value(as: String.self) ?? "", cost: cost, metadata: metadata, slots: slots, stamp: stamp,
            entryPath: entryPath,
            entryVersion: entryVersion)
    }
}
