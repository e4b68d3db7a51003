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

        func acquire(_ directory: Directory) throws -> (HeldLock, LockPath) {
            let path = directory.lockPath(forKeyDigest: Self.key.stableDigest)
            guard case .success(.acquired(let held)) = LockFile.tryAcquire(path, in: directory) else {
                throw YCache.Error.ioFailure(operation: "lock", detail: "not acquired")
            }
            return (held, path)
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
        func childDoesNotReleaseParentsLock() throws {
            // The lock was taken by the "parent" (another pid); this process plays the forked child.
            let inherited = try Directory(
                path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false,
                ownerProcessID: getpid() &+ 1)
            let (held, path) = try acquire(inherited)
            let parentsCopy = dup(held.descriptor)  // the parent still has the shared description
            try #require(parentsCopy >= 0)
            #expect(!lockIsFree(path, in: inherited))

            held.release(unlinking: true)

            #expect(Hardening.isRegularFile(dir.path + "/" + path.relative), "the child did not unlink it")
            #expect(!lockIsFree(path, in: inherited), "the parent still holds the lock")
            close(parentsCopy)  // the parent releases
            #expect(lockIsFree(path, in: inherited))
        }

        @Test("the owner releasing does unlock the shared description (why a child must not)")
        func ownerReleaseUnlocksSharedDescription() throws {
            let mine = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            let (held, path) = try acquire(mine)
            let otherCopy = dup(held.descriptor)
            try #require(otherCopy >= 0)
            defer { close(otherCopy) }
            held.release(unlinking: false)
            // LOCK_UN dropped the lock for every descriptor sharing the description, the dup included.
            #expect(lockIsFree(path, in: mine))
        }

        @Test("the engine reopens storage when its handle belongs to another process or root")
        func engineReopens() async throws {
            let cache = YCache(storageDirectory: dir.url)
            _ = try await cache.data(for: Self.key) { Data("v".utf8) }
            let first = try cache.engine.storage().get().directory
            // Same process, root unchanged: the same handle.
            #expect(try cache.engine.storage(verifyingRoot: true).get().directory === first)
            // The root replaced (the part of the check a test can trigger without forking): a new handle.
            try FileManager.default.moveItem(atPath: dir.path, toPath: dir.path + ".moved")
            defer { try? FileManager.default.removeItem(atPath: dir.path + ".moved") }
            let second = try cache.engine.storage(verifyingRoot: true).get().directory
            #expect(second !== first)
            #expect(second.isStillNamedByPath())
        }
    }
}
