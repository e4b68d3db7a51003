// Symlinks and hard links planted inside the storage directory (I13): an entry path, a fan-out
// folder, tmp/, a lock file and trim.lock pointing outside, and hard links of outside files. Each test
// checks that the outside file or folder is untouched (bytes, mode, mtime), that the lookup is a miss,
// and that a generation still returns the right value (replacing the planted link, never writing into
// its target). Reading cannot prevent a hard link (it is a real name of a real file), so a reader only
// trusts validated contents; writing never goes through one, because entries only ever appear by
// renaming a new file into place.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: planted links")
    struct PlantedLinks {
        let dir = TemporaryDirectory("links")
        let outside = TemporaryDirectory("links-outside")
        let key = CacheKey(namespace: "links", identity: "victim")
        let value = Data("the right value".utf8)

        init() {
            Hardening.makePrivateFolder(dir.path)
            Hardening.makePrivateFolder(outside.path)
        }

        var files: KeyFiles { KeyFiles(root: dir.path, key: key) }

        /// Opens the storage (creating its layout), then returns a fresh cache for the lookups.
        func openedCache(
            budget: Int? = 128 * 1024 * 1024, sharing: StorageSharingMode = .privateToUser
        ) throws -> YCache {
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: budget, sharing: sharing)
            try cache.openStorage()
            return cache
        }

        /// A miss, then a generation returning the right value, then a fresh instance reading it from storage.
        func expectMissThenRightValue(_ cache: YCache, sharing: StorageSharingMode = .privateToUser) async throws {
            #expect(try await cache.valueIfCached(for: key, codec: DataCodec()) == nil, "the planted link is a miss")
            let generated = try await cache.resolve(for: key, codec: DataCodec()) { value }
            #expect(generated.value == value)
            #expect(generated.source == .generated)
            let fresh = YCache(storageDirectory: dir.url, sharing: sharing)
            let stored = try await fresh.resolve(for: key, codec: DataCodec()) { Data("wrong".utf8) }
            #expect(stored.value == value)
            #expect(stored.source == .storage)
        }

        /// The root's folder `name` replaced by a symlink to a new outside folder (after the cache opened its
        /// storage, the old folder moved aside with `away`; else before it opens): a miss gets the right value,
        /// nothing is written outside, and `name` is a real folder again.
        func expectFolderLinkReplaced(_ name: String, away: ((String) -> Int32)? = nil) async throws {
            let cache = try away.map { _ in try openedCache() } ?? YCache(storageDirectory: dir.url)
            let target = outside.path + "/\(name)-elsewhere"
            Hardening.makeOutsideFolder(target)
            if let away { try #require(away(dir.path + "/" + name) == 0) }
            try #require(symlink(target, dir.path + "/" + name) == 0)
            let before = Snapshot(target)
            try await expectMissThenRightValue(cache)
            #expect(Snapshot(target) == before)
            #expect(Hardening.isDirectory(dir.path + "/" + name))
        }

        // MARK: Entries

        @Test("an entry path symlinked to an outside file is a miss and is replaced, never followed")
        func entrySymlink() async throws {
            let cache = try openedCache()
            let target = outside.path + "/secret"
            Hardening.makeOutsideFile(target)
            Hardening.makePrivateFolder(files.entryFanOut)
            try #require(symlink(target, files.entry) == 0)
            let before = Snapshot(target)

            try await expectMissThenRightValue(cache)

            #expect(Snapshot(target) == before)
            #expect(Hardening.isRegularFile(files.entry), "the link was replaced by a real entry")
        }

        @Test("a fan-out folder symlinked to an outside folder is never written through")
        func fanOutSymlink() async throws {
            let cache = try openedCache()
            let target = outside.path + "/elsewhere"
            // The outside folder even holds a file named like the entry: it must be neither read nor unlinked.
            Hardening.makeOutsideFolder(target, fileName: files.entryIdentity + ".entry")
            _ = rmdir(files.entryFanOut)  // fan-out folders are created with the directory
            try #require(symlink(target, files.entryFanOut) == 0)
            let before = Snapshot(target)

            try await expectMissThenRightValue(cache)
            try await cache.remove(for: key, codec: DataCodec())
            _ = try await cache.value(for: key, codec: DataCodec()) { value }
            try await cache.trimStorageIfNeeded()

            #expect(Snapshot(target) == before)
            #expect(Hardening.isDirectory(files.entryFanOut), "the link was replaced by a real folder")
        }

        @Test("entries/ itself symlinked to an outside folder is replaced, never written through")
        func entriesFolderSymlink() async throws {
            try await expectFolderLinkReplaced("entries") { rename($0, $0 + ".old") }
        }

        @Test("a hard link of an outside file at an entry path is a miss and is never written")
        func entryHardLink() async throws {
            let cache = try openedCache()
            let target = outside.path + "/hard"
            Hardening.makeOutsideFile(target, "not an entry, and owned by someone else")
            Hardening.makePrivateFolder(files.entryFanOut)
            try #require(link(target, files.entry) == 0)
            let before = Snapshot(target)

            try await expectMissThenRightValue(cache)

            #expect(Snapshot(target) == before)
            #expect(Hardening.linkStatus(files.entry)?.st_ino != Hardening.linkStatus(target)?.st_ino)
        }

        @Test("a hard link of a valid entry is served: readers trust validated contents, not names")
        func hardLinkedValidEntryIsValidatedNotPrevented() async throws {
            // Another process published the right value; someone hard-links it elsewhere and back.
            let cache = try openedCache()
            _ = try await cache.value(for: key, codec: DataCodec()) { value }
            let copy = outside.path + "/copy.entry"
            try #require(link(files.entry, copy) == 0)
            let fresh = YCache(storageDirectory: dir.url)
            let read = try await fresh.resolve(for: key, codec: DataCodec()) { Data("wrong".utf8) }
            #expect(read.value == value)
            #expect(read.source == .storage)
            // A refresh publishes a new file by rename: the linked inode (outside) keeps its old bytes.
            let before = Snapshot(copy)
            _ = try await fresh.refresh(for: key, codec: DataCodec()) { Data("newer".utf8) }
            #expect(Snapshot(copy) == before)
        }

        // MARK: tmp/

        @Test("tmp/ symlinked to an outside folder after open: staging goes to a real tmp/")
        func stagingFolderSymlinkAfterOpen() async throws {
            try await expectFolderLinkReplaced("tmp") { rmdir($0) }
        }

        @Test("tmp/ symlinked to an outside folder before open: open replaces the link")
        func stagingFolderSymlinkBeforeOpen() async throws {
            try await expectFolderLinkReplaced("tmp")
        }

        // MARK: Lock files

        // Each in both sharing modes: the group-shared mode creates lock files another way (linked into place).

        @Test(
            "a lock file symlinked to an outside file is never opened through",
            arguments: [false, true], [StorageSharingMode.privateToUser, .groupShared])
        func lockFileSymlink(lockFolderToo: Bool, sharing: StorageSharingMode) async throws {
            let cache = try openedCache(sharing: sharing)
            let target = outside.path + "/lock-target"
            Hardening.makeOutsideFile(target)
            if lockFolderToo {
                // The whole fan-out folder of the lock is a symlink to a folder holding the "lock file".
                let folder = outside.path + "/locks-elsewhere"
                Hardening.makeOutsideFolder(folder, fileName: files.keyIdentifier + ".lock")
                _ = rmdir(files.lockFanOut)  // fan-out folders are created with the directory
                try #require(symlink(folder, files.lockFanOut) == 0)
                let before = Snapshot(folder)
                try await expectMissThenRightValue(cache, sharing: sharing)
                #expect(Snapshot(folder) == before)
                #expect(Hardening.isDirectory(files.lockFanOut))
            } else {
                Hardening.makePrivateFolder(files.lockFanOut)
                try #require(symlink(target, files.lock) == 0)
                let before = Snapshot(target)
                try await expectMissThenRightValue(cache, sharing: sharing)
                #expect(Snapshot(target) == before)
                #expect(!Hardening.isSymbolicLink(files.lock))
            }
        }

        @Test(
            "a hard link of an outside file at a lock path is never chmod'ed, written or truncated",
            arguments: [StorageSharingMode.privateToUser, .groupShared])
        func lockFileHardLink(sharing: StorageSharingMode) async throws {
            let cache = try openedCache(sharing: sharing)
            let target = outside.path + "/lock-hard"
            Hardening.makeOutsideFile(target)  // mode 0644: a chmod to 0600 would show in the snapshot
            Hardening.makePrivateFolder(files.lockFanOut)
            try #require(link(target, files.lock) == 0)
            let before = Snapshot(target)

            try await expectMissThenRightValue(cache, sharing: sharing)

            #expect(Snapshot(target) == before)
        }

        @Test(
            "trim.lock as a symlink or a hard link of an outside file is never written through",
            arguments: [false, true], [StorageSharingMode.privateToUser, .groupShared])
        func trimLock(hardLink: Bool, sharing: StorageSharingMode) async throws {
            let cache = try openedCache(budget: 4096, sharing: sharing)
            let target = outside.path + "/trim-target"
            Hardening.makeOutsideFile(target)
            unlink(dir.path + "/trim.lock")
            try #require(
                (hardLink ? link(target, dir.path + "/trim.lock") : symlink(target, dir.path + "/trim.lock")) == 0)
            let before = Snapshot(target)

            for index in 0..<3 {
                _ = try await cache.value(for: CacheKey("trim-\(index)"), codec: DataCodec()) { Data(count: 3000) }
            }
            try await cache.trimStorageIfNeeded()

            #expect(Snapshot(target) == before)
            #expect(!Hardening.isSymbolicLink(dir.path + "/trim.lock"))
            #expect(try await cache.storageUsage().byteCount <= 4096)
        }

        // MARK: Root files

        @Test("layout symlinked to an outside file: open refuses with an error naming the file")
        func rootFileSymlink() throws {
            _ = try openedCache()
            let target = outside.path + "/layout"
            Hardening.makeOutsideFile(target)
            try #require(unlink(dir.path + "/layout") == 0)
            try #require(symlink(target, dir.path + "/layout") == 0)
            let before = Snapshot(target)
            let error = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
            guard case .storageUnavailable(_, let reason) = error else {
                Issue.record("expected storageUnavailable, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("layout"))
            #expect(Snapshot(target) == before)
        }

        @Test(
            "state symlinked or hard-linked to an outside file: replaced by a new state file, the outside file untouched",
            arguments: [false, true])
        func stateLink(hardLink: Bool) async throws {
            _ = try openedCache()
            let target = outside.path + "/state"
            // An outside file that looks like a state file: the right size, magic and version.
            var bytes = Data(count: SharedState.size)
            bytes.replaceSubrange(0..<16, with: Array("YSHSTATE".utf8) + [1, 0, 0, 0, 0, 0, 0, 0])
            try writeFile(bytes, to: URL(fileURLWithPath: target))
            try #require(unlink(dir.path + "/state") == 0)
            try #require((hardLink ? link(target, dir.path + "/state") : symlink(target, dir.path + "/state")) == 0)
            let before = Snapshot(target)
            let cache = YCache(storageDirectory: dir.url)
            try cache.openStorage()
            try await expectMissThenRightValue(cache)
            try await cache.remove(for: key, codec: DataCodec())
            #expect(Snapshot(target) == before, "the outside file was written through the link")
            #expect(Hardening.isRegularFile(dir.path + "/state") && !Hardening.isSymbolicLink(dir.path + "/state"))
            #expect(Hardening.linkStatus(dir.path + "/state")?.st_nlink == 1)
            #expect(cache.statistics.auxiliaryFileRepairs == 1)
        }
    }
}
