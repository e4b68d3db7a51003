// A forked child (a process whose pid is not the one that opened the storage) must not release its
// parent's locks and must reopen the storage (I7). Forking a Swift test process is unsafe (other threads
// may hold runtime or malloc locks at fork time), so these tests drive the same code with a Directory
// whose recorded owner is another pid, and model the parent's copy of a shared open file description
// with dup(2) — a descriptor the kernel treats exactly as a forked child's inherited one for flock.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: fork and pid change")
    struct PidChange {
        let dir = TemporaryDirectory("fork")
        static let key = CacheKey(namespace: "fork", identity: "k")

        /// Whether another descriptor can take the lock now (LOCK_NB).
        func lockIsFree(_ path: LockPath, in directory: Directory) -> Bool {
            let fd = open(dir.path + "/" + path.relative, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { return true }
            defer { close(fd) }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                flock(fd, LOCK_UN)
                return true
            }
            return false
        }

        func acquire(_ directory: Directory) async throws -> KeyLock {
            let path = directory.lockPath(forKeyDigest: Self.key.stableDigest)
            guard
                case .acquired(let held) = try KeyLock.step(path, in: directory, afterWait: false, lookAgain: nil)
                    as KeyLock.Step<Never>
            else {
                throw YCache.Error.ioFailure(operation: "lock", detail: "not acquired")
            }
            return held
        }

        @Test("a handle opened by another pid is not usable and must be reopened")
        func otherOwnerIsNotUsable() throws {
            let mine = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            let inherited = try Directory(
                path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false,
                ownerProcessID: getpid() &+ 1)
            #expect(mine.isOwnedByThisProcess)
            #expect(mine.isUsable(verifyingRoot: true, now: Syscall.monotonicNanoseconds))
            #expect(!inherited.isOwnedByThisProcess)
            #expect(!inherited.isUsable(verifyingRoot: false, now: Syscall.monotonicNanoseconds))
            #expect(!inherited.isUsable(verifyingRoot: true, now: Syscall.monotonicNanoseconds))
        }

        @Test("a child releasing an inherited lock neither unlocks (LOCK_UN) nor unlinks the parent's lock")
        func childDoesNotReleaseParentsLock() async throws {
            // The lock was taken by the "parent" (another pid); this process plays the forked child.
            let inherited = try Directory(
                path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false,
                ownerProcessID: getpid() &+ 1)
            let held = try await acquire(inherited)
            let path = held.path
            let parentsCopy = dup(held.descriptor)  // the parent still has the shared description
            try #require(parentsCopy >= 0)
            #expect(!lockIsFree(path, in: inherited))

            held.abandon()

            #expect(Hardening.isRegularFile(dir.path + "/" + path.relative), "the child did not unlink it")
            #expect(!lockIsFree(path, in: inherited), "the parent still holds the lock")
            close(parentsCopy)  // the parent releases
            // Free once no description holds it. Another test's child may hold a copy for a moment, between
            // its fork and its exec (which closes it): polled, not read once.
            #expect(await eventually { lockIsFree(path, in: inherited) })
        }

        @Test("the owner releasing does unlock the shared description (why a child must not)")
        func ownerReleaseUnlocksSharedDescription() async throws {
            let mine = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            let held = try await acquire(mine)
            let otherCopy = dup(held.descriptor)
            try #require(otherCopy >= 0)
            defer { close(otherCopy) }
            // Another open file description of the lock file, to see the lock from outside once the file
            // is unlinked (abandoning unlinks it).
            let probe = open(dir.path + "/" + held.path.relative, O_RDWR | O_CLOEXEC)
            try #require(probe >= 0)
            defer { close(probe) }
            #expect(flock(probe, LOCK_EX | LOCK_NB) != 0)
            held.abandon()
            // LOCK_UN dropped the lock for every descriptor sharing the description, the dup included.
            #expect(flock(probe, LOCK_EX | LOCK_NB) == 0)
        }

        @Test("the engine reopens storage when its handle belongs to another process or root")
        func engineReopens() async throws {
            let cache = YCache(storageDirectory: dir.url)
            _ = try await cache.data(for: Self.key) { Data("v".utf8) }
            let first = try cache.engine.storageTier.context().get().directory
            // Same process, root unchanged: the same handle.
            #expect(try cache.engine.storageTier.context(for: .write).get().directory === first)
            // The root replaced (the part of the check a test can trigger without forking): a new handle.
            try FileManager.default.moveItem(atPath: dir.path, toPath: dir.path + ".moved")
            defer { try? FileManager.default.removeItem(atPath: dir.path + ".moved") }
            let second = try cache.engine.storageTier.context(for: .write).get().directory
            #expect(second !== first)
            #expect(second.isStillNamedByPath())
        }
    }
}
