// The storage directory deleted or replaced under a running process (I13). The engine holds the root
// open; a write first checks that the root path still names that directory, and otherwise reopens
// (creating the directory again when it is gone) or reports `storageUnavailable` when the path is now a
// file. A write never lands in the directory that was renamed away.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: root replaced")
    struct RootReplaced {
        let dir = TemporaryDirectory("root")
        var moved: String { dir.path + ".moved" }

        func cleanUp() { try? FileManager.default.removeItem(atPath: moved) }

        @Test("renamed away and recreated by another process: writes go to the new directory")
        func renamedAndRecreatedByAnotherProcess() async throws {
            defer { cleanUp() }
            let cache = YCache(storageDirectory: dir.url)
            _ = try await cache.data(for: CacheKey("before")) { Data("1".utf8) }
            try #require(rename(dir.path, moved) == 0)
            // A real second process creates a fresh directory at the path and publishes there.
            let other = try ChildProcess(["worker", "get", "--directory", dir.path, "--key", "theirs"])
            #expect(await other.json()?["correct"] as? Bool == true)
            #expect(await other.exitStatus() == 0)
            let movedBefore = Snapshot(moved)

            _ = try await cache.data(for: CacheKey("after")) { Data("2".utf8) }

            #expect(Snapshot(moved) == movedBefore, "nothing was written into the moved directory")
            #expect(Hardening.isRegularFile(KeyFiles(root: dir.path, key: CacheKey("after")).entry))
            let reader = YCache(storageDirectory: dir.url)
            #expect(try await reader.valueIfCached(for: CacheKey("after"), codec: DataCodec()) == Data("2".utf8))
            // Removal and trimming act on the new directory too, never on the moved one.
            try await cache.removeAll()
            try await cache.trimStorageIfNeeded()
            #expect(Snapshot(moved) == movedBefore)
            #expect(!Hardening.allNames(under: dir.path).contains { $0.hasSuffix(".entry") })
        }

        @Test("deleted: the next write creates it again")
        func deletedIsRecreated() async throws {
            let cache = YCache(storageDirectory: dir.url)
            _ = try await cache.data(for: CacheKey("before")) { Data("1".utf8) }
            try FileManager.default.removeItem(atPath: dir.path)

            _ = try await cache.data(for: CacheKey("after")) { Data("2".utf8) }

            #expect(Hardening.isRegularFile(dir.path + "/layout"))
            #expect(Hardening.isRegularFile(KeyFiles(root: dir.path, key: CacheKey("after")).entry))
            #expect(Hardening.mode(dir.path) == 0o700)
        }

        @Test("replaced by a file: a clear error (or the value under .bestEffort), never a write elsewhere")
        func replacedByFile() async throws {
            defer { cleanUp() }
            let cache = YCache(storageDirectory: dir.url)
            _ = try await cache.data(for: CacheKey("before")) { Data("1".utf8) }
            try #require(rename(dir.path, moved) == 0)
            _ = FileManager.default.createFile(atPath: dir.path, contents: Data("a file now".utf8))
            let movedBefore = Snapshot(moved)

            let error = await #expect(throws: YCache.Error.self) {
                try await cache.data(for: CacheKey("after")) { Data("2".utf8) }
            }
            guard case .storageUnavailable(_, let reason) = error else {
                Issue.record("expected storageUnavailable, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("not a directory"))
            let value = try await cache.data(for: CacheKey("after2"), options: .init(writeFailurePolicy: .bestEffort)) {
                Data("3".utf8)
            }
            #expect(value == Data("3".utf8))
            // Removing with no usable storage reports it (memory is dropped); the moved directory keeps its entry.
            await #expect(throws: YCache.Error.self) {
                try await cache.remove(for: CacheKey("before"), codec: DataCodec())
            }
            #expect(Snapshot(moved) == movedBefore)
            #expect(try String(contentsOfFile: dir.path, encoding: .utf8) == "a file now")
        }

        @Test("a second instance keeps working while the first reopens")
        func twoInstances() async throws {
            defer { cleanUp() }
            let first = YCache(storageDirectory: dir.url)
            let second = YCache(storageDirectory: dir.url)
            _ = try await first.data(for: CacheKey("a")) { Data("a".utf8) }
            _ = try await second.data(for: CacheKey("b")) { Data("b".utf8) }
            try #require(rename(dir.path, moved) == 0)
            let movedBefore = Snapshot(moved)
            _ = try await first.data(for: CacheKey("c")) { Data("c".utf8) }  // recreates the root
            _ = try await second.data(for: CacheKey("d")) { Data("d".utf8) }  // reopens the new root
            #expect(Snapshot(moved) == movedBefore)
            let names = Hardening.allNames(under: dir.path).filter { $0.hasSuffix(".entry") }
            #expect(names.count == 2)
        }
    }
}
