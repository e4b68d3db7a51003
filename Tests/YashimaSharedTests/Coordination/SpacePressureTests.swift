// Making room on a full filesystem without a full filesystem (FullDiskTests has the real ones): the
// floor's bytes, the trim that makes room (LRU order, the write's size plus the margin), `trim.lock` held
// by another trimmer (waited for at most the bound after ENOSPC, not at all below the floor), a write no
// trim could make room for, and a floor the filesystem cannot meet (on the test machine's own disk).

import Foundation
import Testing

@testable import YashimaShared

@Suite("Space pressure")
struct SpacePressureTests {
    @Test("the floor's bytes: the smaller bound, clamped; its description")
    func floorBytes() {
        let gibibyte: Int64 = 1 << 30
        #expect(YCache.FreeSpaceFloor.standard.bytes(ofFilesystemBytes: 10 * gibibyte) == gibibyte / 2)
        #expect(YCache.FreeSpaceFloor.standard.bytes(ofFilesystemBytes: 100 * gibibyte) == gibibyte)
        #expect(YCache.FreeSpaceFloor.bytes(5000).bytes(ofFilesystemBytes: 1000) == 5000)
        #expect(YCache.FreeSpaceFloor.bytes(-1).bytes(ofFilesystemBytes: 1000) == 0)
        #expect(YCache.FreeSpaceFloor.fraction(0.25).bytes(ofFilesystemBytes: 1000) == 250)
        #expect(YCache.FreeSpaceFloor.fraction(2).bytes(ofFilesystemBytes: 1000) == 1000)
        #expect(YCache.FreeSpaceFloor.fraction(.nan).bytes(ofFilesystemBytes: 1000) == 0)
        #expect(YCache.FreeSpaceFloor.smallerOf(bytes: 100, fraction: 0.5).bytes(ofFilesystemBytes: 1000) == 100)
        #expect(YCache.FreeSpaceFloor.standard.description == "the smaller of 1073741824 bytes and 5%")
        #expect(YCache.FreeSpaceFloor.fraction(0.125).description == "12.5%")
        #expect(YCache.Configuration(storageDirectory: URL(fileURLWithPath: "/x")).storageFreeSpaceFloor == .standard)
    }

    /// Twenty one-block entries, `e0` the least recently used, and the storage they are in.
    static func agedEntries(_ dir: TemporaryDirectory) async throws -> ([String], [String: URL], StorageContext) {
        let names = (0..<20).map { "e\($0)" }
        let urls = try await TrimTests.writeEntries(names, in: dir)
        try TrimTests.age(names, urls)
        let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
        return (names, urls, try cache.engine.storageTier.context(for: .write).get())
    }

    @Test("after ENOSPC: the least recently used entries go, the write's size plus a tenth of the usage")
    func makeRoomAfterOutOfSpace() async throws {
        let dir = TemporaryDirectory("room")
        let (names, urls, storage) = try await Self.agedEntries(dir)
        let block = Int64(TrimTests.block)
        #expect(storage.directory.state.usage == 20 * block)
        let watch = FreeSpaceWatch(floor: nil)
        // Two blocks, plus 10 % of 20 blocks: four entries.
        let made = await offPool { SpacePressure.makeRoom(for: 2 * block, outOfSpace: true, in: storage, watch: watch) }
        #expect(made.unlinked == 4)
        #expect(made.worthTrying)
        #expect(TrimTests.present(urls) == Set(names.dropFirst(4)))
        #expect(storage.directory.state.usage == 16 * block)
    }

    @Test("a write larger than the filesystem could hold with every entry gone trims nothing")
    func makeRoomCannotHelp() async throws {
        let dir = TemporaryDirectory("room-hopeless")
        let (names, urls, storage) = try await Self.agedEntries(dir)
        let total = try #require(try? Syscall.filesystemSpace(storage.directory.descriptor).get()).totalBytes
        let watch = FreeSpaceWatch(floor: nil)
        let made = await offPool {
            SpacePressure.makeRoom(for: total + 1, outOfSpace: true, in: storage, watch: watch)
        }
        #expect(made.unlinked == 0)
        #expect(!made.worthTrying)
        #expect(TrimTests.present(urls) == Set(names))
    }

    @Test("trim.lock held by another trimmer: after ENOSPC waited for (bounded), then retried; below the floor not")
    func anotherTrimmer() async throws {
        let dir = TemporaryDirectory("room-busy")
        let (names, urls, storage) = try await Self.agedEntries(dir)
        let held: TrimLock
        switch TrimLock.acquire(in: storage.directory, waitingAtMost: .zero) {
        case .success(let lock?): held = lock
        default:
            Issue.record("trim.lock could not be had")
            return
        }
        switch TrimLock.acquire(in: storage.directory, waitingAtMost: .zero) {
        case .success(nil): break
        case .success(let lock?):
            lock.release()
            Issue.record("trim.lock locked twice")
        case .failure(let error): Issue.record("\(error)")
        }
        let watch = FreeSpaceWatch(floor: .fraction(1))
        // Waits `Policy.pressureTrimLockWait` for the holder, then counts on its pass: retry, nothing unlinked.
        let afterFailure = await offPool {
            SpacePressure.makeRoom(for: 4096, outOfSpace: true, in: storage, watch: watch)
        }
        #expect(afterFailure.unlinked == 0)
        #expect(afterFailure.worthTrying)
        let belowFloor = await offPool {
            SpacePressure.makeRoom(for: 4096, outOfSpace: false, in: storage, watch: watch)
        }
        #expect(belowFloor.unlinked == 0)
        #expect(!belowFloor.worthTrying)
        #expect(TrimTests.present(urls) == Set(names))
        held.release()
        let after = await offPool { SpacePressure.makeRoom(for: 4096, outOfSpace: true, in: storage, watch: watch) }
        #expect(after.unlinked > 0)
    }

    @Test("a floor the filesystem cannot meet empties the cache at the next write, which is stored")
    func unreachableFloor() async throws {
        let dir = TemporaryDirectory("room-floor")
        let (_, urls, _) = try await Self.agedEntries(dir)
        let cache = YCache(
            configuration: .init(
                storageDirectory: dir.url, storageMaximumByteCount: nil, storageFreeSpaceFloor: .fraction(1)))
        _ = try await cache.value(for: CacheKey("new"), codec: TrimTests.codec) { "new value" }
        #expect(TrimTests.present(urls).isEmpty, "every older entry trimmed")
        #expect(cache.statistics.pressureTrims == 1)
        #expect(cache.statistics.writeFailures == 0)
        #expect(try await stored(in: dir, CacheKey("new"), TrimTests.codec) == "new value")
        #expect(try cache.engine.storageTier.context().get().directory.state.total(.pressureTrims) == 1)
    }
}
