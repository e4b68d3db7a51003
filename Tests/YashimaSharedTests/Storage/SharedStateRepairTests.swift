// A damaged `state` or `trim.lock` is repaired, never fatal (I14), seen from one process: several YCache
// instances on one directory, each with its own mapping of the state file, stand in for processes that
// opened it before the damage (the cross-process version, with real processes, is in
// CrossProcess/AuxiliaryFileRepairTests.swift).

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("state and trim.lock repair (I14)")
struct SharedStateRepairTests {
    static let codec = StringCodec()

    /// Something that is not the cache's file at `path`: an empty folder, a folder with a file, a FIFO.
    static func plantForeign(_ kind: String, at path: String) throws {
        switch kind {
        case "fifo": try #require(mkfifo(path, 0o600) == 0)
        default:
            try #require(mkdir(path, 0o700) == 0)
            if kind == "folder with a file" {
                try writeFile(Data("mine".utf8), to: URL(fileURLWithPath: path + "/note"))
            }
        }
    }
    static func key(_ name: String) -> CacheKey { CacheKey(namespace: "repair", identity: name) }

    func statePath(_ dir: TemporaryDirectory) -> String { dir.path + "/state" }

    // MARK: state

    @Test(
        "a damaged state file under open caches: every call works, values are right, a later removal is seen",
        arguments: AuxiliaryDamage.allCases)
    func damagedState(damage: AuxiliaryDamage) async throws {
        let dir = TemporaryDirectory("state-\(damage.rawValue)")
        let writer = YCache(storageDirectory: dir.url)
        let reader = YCache(storageDirectory: dir.url)
        // k1's key epoch is 2 when the reader reads it (a removal bumps twice): after a repair, a removal
        // in the new file bumps it to 2 again, and only the file's instance id tells the two apart.
        // Generated, not stored: a store would bump once more.
        #expect(try await writer.value(for: Self.key("k1"), codec: Self.codec) { "zero" } == "zero")
        try await writer.remove(for: Self.key("k1"), codec: Self.codec)
        #expect(try await writer.value(for: Self.key("k1"), codec: Self.codec) { "one" } == "one")
        #expect(try await reader.value(for: Self.key("k1"), codec: Self.codec) { "wrong" } == "one")
        #expect(try await reader.peek(for: Self.key("k1"), codec: Self.codec) == "one")
        let before = try #require(inode(statePath(dir)))

        try damage.apply(to: statePath(dir))

        // Both instances keep working (a truncation would fault in them without the guard)...
        #expect(try await writer.value(for: Self.key("k2"), codec: Self.codec) { "two" } == "two")
        #expect(try await reader.value(for: Self.key("k2"), codec: Self.codec) { "wrong" } == "two")
        #expect(try await reader.value(for: Self.key("k1"), codec: Self.codec) { "wrong" } == "one")
        // ...and a cache opened after the damage too (opening repairs what it can see).
        let late = YCache(storageDirectory: dir.url)
        #expect(try await late.value(for: Self.key("k2"), codec: Self.codec) { "wrong" } == "two")
        // A removal by the instance that opened after the damage (on the repaired file, if any) is seen
        // by those that opened before it and only looked up since (a write would check the path first).
        try await late.remove(for: Self.key("k1"), codec: Self.codec)
        #expect(try await reader.peek(for: Self.key("k1"), codec: Self.codec) == nil, "memory served a removed entry")
        #expect(try await writer.peek(for: Self.key("k1"), codec: Self.codec) == nil, "memory served a removed entry")
        #expect(try await reader.valueIfCached(for: Self.key("k1"), codec: Self.codec) == nil)
        #expect(try await late.value(for: Self.key("k1"), codec: Self.codec) { "new" } == "new")
        #expect(try await reader.value(for: Self.key("k1"), codec: Self.codec) { "wrong" } == "new")
        // And one by an instance that opened before the damage is seen by all.
        #expect(try await late.peek(for: Self.key("k2"), codec: Self.codec) == "two")
        try await writer.remove(for: Self.key("k2"), codec: Self.codec)
        #expect(try await reader.peek(for: Self.key("k2"), codec: Self.codec) == nil, "memory served a removed entry")
        #expect(try await late.peek(for: Self.key("k2"), codec: Self.codec) == nil, "memory served a removed entry")
        #expect(try await reader.value(for: Self.key("k2"), codec: Self.codec) { "two" } == "two")
        // So is a replacement.
        try await writer.store("three", for: Self.key("k2"), codec: Self.codec)
        #expect(try await reader.peek(for: Self.key("k2"), codec: Self.codec) == nil)
        #expect(try await reader.value(for: Self.key("k2"), codec: Self.codec) { "wrong" } == "three")

        let repairs = [writer, reader, late].reduce(0) { $0 + $1.statistics.auxiliaryFileRepairs }
        #expect(repairs == (damage.isDetectableInStateFile ? 1 : 0))
        #expect(isGoodStateFile(statePath(dir)))
        #expect((inode(statePath(dir)) != before) == damage.isDetectableInStateFile)
    }

    @Test("a repaired state file has a new instance id: every stamp of the old file is stale")
    func newInstanceInvalidatesStamps() throws {
        let dir = TemporaryDirectory("state-instance")
        let directory = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        let slots = SharedState.slots(namespace: "n", keyDigest: Self.key("k").stableDigest)
        let old = directory.state.stamp(slots)
        #expect(old.isAvailable && old.instance != 0)
        try AuxiliaryDamage.fillWithZeros.apply(to: statePath(dir))
        let new = directory.state.stamp(slots)
        #expect(new.isAvailable)
        #expect(new.instance != old.instance)
        #expect(!old.matches(new))
        #expect(new.global == 0 && new.namespace == 0 && new.key == 0)
        #expect(!SharedState.Stamp.unavailable.matches(.unavailable))
    }

    @Test("usage after a repair is unknown until the next trim, which recounts it; the budget still holds")
    func usageIsRecountedAfterRepair() async throws {
        let dir = TemporaryDirectory("state-usage")
        // A disk cap (allocated bytes): 5,000-byte strings take 8 KiB each.
        let cache = YCache(
            configuration: YCache.Configuration(
                storageDirectory: dir.url, storageMaximumByteCount: nil, storageMaximumAllocatedByteCount: 64 * 1024))
        for index in 0..<8 {
            try await cache.store(String(repeating: "x", count: 5000), for: Self.key("u\(index)"), codec: Self.codec)
        }
        let counted = try await cache.storageUsage()
        #expect(counted.allocatedByteCount == 8 * 8192)
        try AuxiliaryDamage.truncateToZero.apply(to: statePath(dir))
        let state = try cache.storageContext().directory.state
        #expect(!state.isPayloadCounted, "a repaired file's usage is unknown")
        #expect(state.usage == 0 && state.payloadBytes == 0)
        // The next write over the budget recounts (finding what is really there) and trims to the low mark.
        try await cache.store(String(repeating: "y", count: 5000), for: Self.key("u8"), codec: Self.codec)
        #expect(state.isPayloadCounted)
        let after = try await cache.storageUsage()
        #expect(after.allocatedByteCount <= 64 * 1024)
        #expect(state.usage == after.allocatedByteCount)
        #expect(state.payloadBytes == Int64(after.byteCount))
        #expect(cache.statistics.auxiliaryFileRepairs == 1)
    }

    @Test(
        "a foreign state file (folder, FIFO, short garbage, newer version, unreadable) is replaced; a folder is kept aside",
        arguments: ["empty folder", "folder with a file", "fifo", "garbage", "version 2", "mode 000"])
    func foreignState(kind: String) async throws {
        let dir = TemporaryDirectory("state-foreign")
        let first = YCache(storageDirectory: dir.url)
        try await first.store("one", for: Self.key("k1"), codec: Self.codec)
        let path = statePath(dir)
        try #require(unlink(path) == 0)
        switch kind {
        case "empty folder", "folder with a file", "fifo": try Self.plantForeign(kind, at: path)
        case "garbage":
            try writeFile(Data((0..<100).map { UInt8($0) }), to: URL(fileURLWithPath: path))
        case "version 2":
            var bytes = Data(count: SharedState.size)
            bytes.replaceSubrange(0..<16, with: Array("YSHSTATE".utf8) + [2, 0, 0, 0, 0, 0, 0, 0])
            try writeFile(bytes, to: URL(fileURLWithPath: path))
        default:
            try writeFile(Data(count: SharedState.size), to: URL(fileURLWithPath: path))
            try #require(chmod(path, 0) == 0)
        }
        let cache = YCache(storageDirectory: dir.url)
        try cache.openStorage()
        #expect(try await cache.value(for: Self.key("k1"), codec: Self.codec) { "wrong" } == "one")
        try await cache.remove(for: Self.key("k1"), codec: Self.codec)
        // `first` still maps the unlinked old file, which nobody can reach to mark dead: its next write
        // checks the path at once (a lookup within `Policy.rootCheckInterval`) and switches.
        try await first.store("x", for: Self.key("other"), codec: Self.codec)
        #expect(try await first.peek(for: Self.key("k1"), codec: Self.codec) == nil, "memory served a removed entry")
        #expect(isGoodStateFile(path))
        #expect(cache.statistics.auxiliaryFileRepairs == 1)
        if kind == "folder with a file" {
            let aside = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/tmp").filter {
                $0.hasPrefix("state-") && $0.hasSuffix(".damaged")
            }
            #expect(aside.count == 1)
            #expect(
                FileManager.default.contents(atPath: dir.path + "/tmp/" + (aside.first ?? "") + "/note")
                    == Data("mine".utf8))
        }
    }

    @Test("a state file replaced by another (renamed over it) is noticed: the old one is marked dead")
    func replacedStateIsNoticed() async throws {
        let dir = TemporaryDirectory("state-replaced")
        let writer = YCache(storageDirectory: dir.url)
        let reader = YCache(storageDirectory: dir.url)
        try await writer.store("one", for: Self.key("k1"), codec: Self.codec)
        #expect(try await reader.value(for: Self.key("k1"), codec: Self.codec) { "wrong" } == "one")
        // Someone renames a good-looking state file over the path: the old inode stays mapped here.
        var bytes = Data(count: SharedState.size)
        bytes.replaceSubrange(0..<16, with: Array("YSHSTATE".utf8) + [1, 0, 0, 0, 0, 0, 0, 0])
        try replaceFile(at: URL(fileURLWithPath: statePath(dir)), with: bytes)
        // A removal checks the path first, marks the old file dead (the reader switches) and bumps the new one.
        try await writer.remove(for: Self.key("k1"), codec: Self.codec)
        #expect(try await reader.peek(for: Self.key("k1"), codec: Self.codec) == nil, "memory served a removed entry")
    }

    // MARK: trim.lock

    @Test(
        "trim.lock damaged in place: trim and writes go on, the budget holds (its contents mean nothing)",
        arguments: AuxiliaryDamage.allCases)
    func damagedTrimLock(damage: AuxiliaryDamage) async throws {
        let dir = TemporaryDirectory("trimlock-\(damage.rawValue)")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 32 * 1024)
        try await cache.trimStorageIfNeeded()  // makes trim.lock
        try damage.apply(to: dir.path + "/trim.lock")
        for index in 0..<12 {
            try await cache.store(String(repeating: "z", count: 5000), for: Self.key("t\(index)"), codec: Self.codec)
        }
        try await cache.trimStorageIfNeeded()
        #expect(try await cache.storageUsage().byteCount <= 32 * 1024)
        #expect(cache.statistics.auxiliaryFileRepairs == 0)
        #expect(cache.statistics.writeFailures == 0)
    }

    @Test(
        "trim.lock that cannot be a lock file (folder, FIFO, unreadable) is replaced and counted; trim works",
        arguments: ["empty folder", "folder with a file", "fifo", "mode 000"])
    func foreignTrimLock(kind: String) async throws {
        let dir = TemporaryDirectory("trimlock-foreign")
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 32 * 1024)
        try cache.openStorage()
        let path = dir.path + "/trim.lock"
        _ = unlink(path)
        if kind == "mode 000" {
            try writeFile(Data(), to: URL(fileURLWithPath: path))
            try #require(chmod(path, 0) == 0)
        } else {
            try Self.plantForeign(kind, at: path)
        }
        for index in 0..<12 {
            try await cache.store(String(repeating: "z", count: 5000), for: Self.key("t\(index)"), codec: Self.codec)
        }
        try await cache.trimStorageIfNeeded()
        #expect(try await cache.storageUsage().byteCount <= 32 * 1024)
        #expect(Hardening.isRegularFile(path))
        // Root ignores file modes: a mode-000 file opens for root and is a working lock file, left alone.
        let expected = kind == "mode 000" && geteuid() == 0 ? 0 : 1
        #expect(cache.statistics.auxiliaryFileRepairs == expected)
    }

    // MARK: layout stays a refusal

    @Test("an unparsable or newer layout, or a FIFO or folder there, is refused with an error that says what to do")
    func layoutIsRefused() throws {
        let dir = TemporaryDirectory("layout-refused")
        try YCache(storageDirectory: dir.url).openStorage()
        let path = dir.path + "/layout"
        try replaceFile(at: URL(fileURLWithPath: path), with: Data("garbage".utf8))
        let garbled = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
        #expect(garbled?.description.contains("delete it") == true)
        try replaceFile(at: URL(fileURLWithPath: path), with: Data("yashima-shared layout 7\n".utf8))
        let newer = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
        #expect(newer == .unsupportedLayout(path: dir.url.path, found: 7, supported: 1))
        #expect(newer?.description.contains("newer build") == true)
        #expect(FileManager.default.contents(atPath: path) == Data("yashima-shared layout 7\n".utf8))
        try #require(unlink(path) == 0)
        try #require(mkfifo(path, 0o600) == 0)
        let fifo = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
        #expect(fifo?.description.contains("unreadable layout file") == true)
        try #require(unlink(path) == 0)
        try #require(mkdir(path, 0o700) == 0)
        let folder = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
        #expect(folder?.description.contains("unreadable layout file") == true)
        #expect(Hardening.isDirectory(path))
    }
}
