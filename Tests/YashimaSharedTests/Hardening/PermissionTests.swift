// Modes on every create path, under a hostile umask (I2, I6), and the owner check at open (Storage/Root.swift).
// The umask is process-wide and other suites run in parallel, so the hostile umasks are set in child
// processes (`/bin/sh -c 'umask 000; exec yashima-stress worker …'`), never in this test process: the
// library code under test is the same, and no other test can be disturbed.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: permissions", .serialized)
    struct Permissions {
        /// Expected modes: folders, files.
        static func modes(_ sharing: String) -> (folder: UInt32, file: UInt32) {
            sharing == "group" ? (0o2770, 0o660) : (0o700, 0o600)
        }

        // MARK: Modes under a hostile umask

        @Test(
            "every created folder and file gets its mode explicitly, whatever the umask",
            arguments: ["000", "077", "022"], ["private", "group"])
        func modesIgnoreTheUmask(umask: String, sharing: String) async throws {
            let dir = TemporaryDirectory("modes")
            // The root and its parent do not exist yet: the library creates the whole chain.
            let root = dir.path + "/parent/root"
            let expected = Self.modes(sharing)
            let key = CacheKey(namespace: "stress", identity: "held")
            let files = KeyFiles(root: root, key: key)

            // 1. A generator that holds its key's lock file: stat the lock file while it exists.
            let holder = try workerUnderShell(
                "umask \(umask)",
                [
                    "worker", "get", "--directory", root, "--key", "held", "--generate-ms", "60000", "--announce",
                    "--sharing", sharing,
                ])
            var announced = false
            while let line = await holder.line(timeout: 60) {
                if line.hasPrefix("GENERATING") { announced = true; break }
            }
            #expect(announced)
            #expect(Hardening.mode(files.lock) == expected.file, "lock file")
            #expect(Hardening.mode(files.lockFanOut) == expected.folder, "lock fan-out folder")
            holder.kill()
            await holder.exitStatus()

            // 2. Three entries over a two-entry budget: entries, fan-outs, staging (renamed into the
            //    entries), state, layout and trim.lock are all created.
            let writer = try workerUnderShell(
                "umask \(umask)",
                [
                    "worker", "get", "--directory", root, "--key", "k", "--count", "3", "--size", "3000",
                    "--budget", "8192", "--sharing", sharing,
                ])
            for _ in 0..<3 { #expect(await writer.json()?["correct"] as? Bool == true) }
            #expect(await writer.exitStatus() == 0)

            for folder in ["parent", "parent/root"] {
                #expect(Hardening.mode(dir.path + "/" + folder) == expected.folder, "\(folder)")
            }
            for name in Hardening.allNames(under: root) {
                let path = root + "/" + name
                if Hardening.isDirectory(path) {
                    #expect(Hardening.mode(path) == expected.folder, "folder \(name)")
                } else {
                    #expect(Hardening.isRegularFile(path), "\(name) is a regular file")
                    #expect(Hardening.mode(path) == expected.file, "file \(name)")
                }
            }
            let names = Set(Hardening.allNames(under: root))
            for required in ["layout", "state", "trim.lock", "tmp", "entries", "locks"] {
                #expect(names.contains(required), "\(required) was created")
            }
            #expect(names.contains { $0.hasSuffix(".entry") })
        }

        @Test("the group-shared mode keeps setgid on folders so files inherit the group")
        func groupSharedFoldersAreSetgid() async throws {
            let dir = TemporaryDirectory("setgid")
            let cache = YCache(storageDirectory: dir.url, sharing: .groupShared)
            _ = try await cache.data(for: CacheKey("g")) { Data("v".utf8) }
            for name in Hardening.allNames(under: dir.path) where Hardening.isDirectory(dir.path + "/" + name) {
                #expect((Hardening.mode(dir.path + "/" + name) ?? 0) & 0o2000 != 0, "\(name) is setgid")
            }
        }

        // MARK: Two users of one group

        /// Two users of one group, each with the usual umask 022, miss the same fresh keys together. A lock
        /// file made in place is 0640 until its `fchmod`; the other user's open of it then fails (EACCES)
        /// and it generates without the lock. Before lock files were linked into place with their mode,
        /// 40–70% of the keys here were generated twice.
        @Test(
            "two users racing on fresh keys in group-shared mode generate each key once",
            .enabled(if: SharedUsers.available))
        func twoUsersShareSingleFlight() async throws {
            let users = try SharedUsers()
            let ledger = users.base + "/ledger"
            #expect(FileManager.default.createFile(atPath: ledger, contents: nil) && chmod(ledger, 0o666) == 0)
            let keyCount = 300
            let children = try [SharedUsers.first, SharedUsers.second, SharedUsers.first, SharedUsers.second].map {
                user in
                try users.worker(
                    as: user,
                    [
                        "get", "--key", "k", "--count", "\(keyCount)", "--size", "256", "--ledger", ledger, "--go",
                    ])
            }
            #expect(await startTogether(children))
            var lockFailures = 0
            for child in children {
                for _ in 0..<keyCount {
                    guard let result = await child.json() else { break }
                    #expect(result["correct"] as? Bool == true)
                    lockFailures = max(lockFailures, result["lockFailures"] as? Int ?? -1)
                }
                #expect(await child.exitStatus() == 0)
            }
            #expect(lockFailures == 0, "a process generated without the key's lock file")
            let generated = Ledger(path: ledger).lines().map { $0.split(separator: " ")[0] }
            #expect(generated.count == keyCount, "\(generated.count - Set(generated).count) keys generated twice")
            #expect(Set(generated).count == keyCount)
        }

        /// Processes of two users open a storage root that does not exist yet, all at once: whoever creates
        /// a folder of the path, the others must be able to create inside it. A folder made in place has its
        /// creator's umasked mode (02750) until its chmod, and another user's mkdir in it fails (EACCES).
        @Test("two users creating the same storage path at once all open it", .enabled(if: SharedUsers.available))
        func twoUsersCreateTheRootTogether() async throws {
            let users = try SharedUsers()
            try #require(chown(users.base, 0, SharedUsers.group) == 0 && chmod(users.base, 0o2770) == 0)
            for round in 0..<8 {
                let root = users.base + "/round-\(round)/a/cache"
                let children = try (0..<8).map { index in
                    try users.worker(
                        as: index % 2 == 0 ? SharedUsers.first : SharedUsers.second,
                        ["get", "--key", "k\(index)", "--go"], directory: root)
                }
                #expect(await startTogether(children))
                for child in children {
                    let result = await child.json()
                    #expect(result?["correct"] as? Bool == true, "round \(round): \(result ?? [:])")
                    #expect(await child.exitStatus() == 0)
                }
                for folder in ["/round-\(round)", "/round-\(round)/a", "/round-\(round)/a/cache"] {
                    #expect(Hardening.mode(users.base + folder) == 0o2770, "\(folder)")
                }
            }
        }

        /// A storage path whose parent the user may write into and search but not list (mode 0730, a drop
        /// folder): creating the root there needs only those rights, as `mkdir` does.
        @Test(
            "a storage root is created in a parent the user can write into but not list",
            .enabled(if: SharedUsers.available))
        func rootInAnUnlistableParent() async throws {
            let users = try SharedUsers()
            let parent = users.base + "/drop"
            try #require(mkdir(parent, 0o700) == 0 && chown(parent, 0, SharedUsers.group) == 0)
            try #require(chmod(parent, 0o730) == 0)
            let child = try users.worker(as: SharedUsers.first, ["get", "--key", "k"], directory: parent + "/cache")
            let result = await child.json()
            #expect(result?["correct"] as? Bool == true, "\(result ?? [:])")
            #expect(await child.exitStatus() == 0)
            #expect(Hardening.mode(parent + "/cache") == 0o2770)
        }

        /// A generator killed while holding its key's lock leaves its lock file behind; a waiter of the other
        /// user takes over: it cannot use a lock file it does not own (the holder renames its lock file
        /// into place), so it unlinks that name and generates on a lock file of its own, exactly once.
        @Test("another user's waiter takes over from a killed generator", .enabled(if: SharedUsers.available))
        func anotherUserTakesOverFromAKilledGenerator() async throws {
            let users = try SharedUsers()
            let ledger = users.base + "/ledger"
            #expect(FileManager.default.createFile(atPath: ledger, contents: nil) && chmod(ledger, 0o666) == 0)
            let doomed = try users.worker(
                as: SharedUsers.first,
                ["get", "--key", "k", "--generate-ms", "60000", "--announce", "--ledger", ledger])
            #expect(await doomed.line(timeout: 60, where: { $0.hasPrefix("GENERATING") }) != nil)
            let waiters = try (0..<2).map { _ in
                try users.worker(
                    as: SharedUsers.second,
                    ["get", "--key", "k", "--generate-ms", "100", "--ledger", ledger, "--announce-wait"])
            }
            // Each waiter says when its lookup starts waiting for the holder's lock; then the holder dies.
            for waiter in waiters { #expect(await waiter.line(where: { $0.hasPrefix("WAITING") }) != nil) }
            doomed.kill()
            await doomed.exitStatus()
            for waiter in waiters {
                let result = await waiter.json(timeout: 60)
                #expect(result?["correct"] as? Bool == true, "a waiter hung or got a wrong value")
                #expect(result?["lockFailures"] as? Int == 0)
                #expect(await waiter.exitStatus() == 0)
            }
            // The killed holder's line, then exactly one takeover generation.
            #expect(Ledger(path: ledger).lines().count == 2, "\(Ledger(path: ledger).lines())")
        }

        /// One user repairs and removes what the other wrote: a corrupt entry of the first user is a miss
        /// for the second, who regenerates it and renames the new entry over it; the second user's
        /// `removeAll()` unlinks the first user's entries, and the first user's next lookups miss.
        @Test("another user repairs a corrupt entry and removes everything", .enabled(if: SharedUsers.available))
        func anotherUserRepairsAndRemoves() async throws {
            let users = try SharedUsers()
            func get(as user: uid_t) async throws -> [String] {
                let child = try users.worker(as: user, ["get", "--key", "k", "--count", "5"])
                var sources: [String] = []
                for _ in 0..<5 {
                    let result = await child.json()
                    #expect(result?["correct"] as? Bool == true)
                    sources.append(result?["source"] as? String ?? "none")
                }
                #expect(await child.exitStatus() == 0)
                return sources
            }
            #expect(try await get(as: SharedUsers.first) == Array(repeating: "generated", count: 5))
            // Damage the first user's entry for k-0: its last payload byte.
            let damaged = KeyFiles(root: users.root, key: CacheKey(namespace: "stress", identity: "k-0")).entry
            let handle = try #require(FileHandle(forUpdatingAtPath: damaged))
            let end = try handle.seekToEnd()
            try handle.seek(toOffset: end - 1)
            let last = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: end - 1)
            try handle.write(contentsOf: [last ^ 0xFF])
            try handle.close()
            #expect(try await get(as: SharedUsers.second) == ["generated"] + Array(repeating: "storage", count: 4))
            #expect(
                Hardening.linkStatus(damaged)?.st_uid == SharedUsers.second, "the repaired entry is the second user's")
            let remover = try users.worker(as: SharedUsers.second, ["remove", "--all"])
            #expect(await remover.json()?["removed"] as? Bool == true)
            #expect(await remover.exitStatus() == 0)
            #expect(Hardening.allNames(under: users.root).filter { $0.hasSuffix(".entry") }.isEmpty)
            #expect(try await get(as: SharedUsers.first) == Array(repeating: "generated", count: 5))
        }

        /// A hit marks the entry used (its mtime, the LRU clock, I11) also when another user wrote it. A
        /// touch with any explicit time (`UTIME_OMIT` for the access time included) needs the file's owner,
        /// so before the touch set both times to now, the other user's use never counted and trim took
        /// entries it kept using.
        @Test("another user's hit marks the entry used", .enabled(if: SharedUsers.available))
        func anotherUsersHitTouchesTheEntry() async throws {
            let users = try SharedUsers()
            let writer = try users.worker(as: SharedUsers.first, ["get", "--key", "doc"])
            #expect(await writer.json()?["source"] as? String == "generated")
            #expect(await writer.exitStatus() == 0)
            let entries = Hardening.allNames(under: users.root).filter { $0.hasSuffix(".entry") }
            try #require(entries.count == 1)
            let entry = users.root + "/" + entries[0]
            // An hour old: older than the touch interval, so the next hit must touch it.
            var times = [timespec](repeating: timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), count: 2)
            try #require(utimensat(AT_FDCWD, entry, &times, AT_SYMLINK_NOFOLLOW) == 0)
            let reader = try users.worker(as: SharedUsers.second, ["get", "--key", "doc"])
            #expect(await reader.json()?["source"] as? String == "storage")
            #expect(await reader.exitStatus() == 0)
            var info = stat()
            try #require(lstat(entry, &info) == 0)
            #expect(info.st_uid == SharedUsers.first, "the entry is still the first user's")
            #expect(time(nil) - info.st_mtim.tv_sec < 600, "the second user's hit set the mtime to now")
        }

        /// Everything one user does to another user's files in a shared directory: hits (touch), replacing
        /// stores (rename over), removals (unlink), trims (unlink, the shared usage counter), lock files
        /// left behind. Four processes of two users under a budget a quarter of the data.
        @Test("two users mixing gets, stores and removes under a budget", .enabled(if: SharedUsers.available))
        func twoUsersMixUnderABudget() async throws {
            let users = try SharedUsers()
            let budget = 256 * 1024
            let children = try [SharedUsers.first, SharedUsers.second, SharedUsers.first, SharedUsers.second].map {
                user in
                try users.worker(
                    as: user,
                    [
                        "mix", "--keys", "200", "--ops", "1500", "--gets", "60", "--sets", "30", "--deletes", "10",
                        "--size", "4096", "--budget", "\(budget)", "--memory-budget", "16384", "--go",
                    ])
            }
            #expect(await startTogether(children))
            for child in children {
                let result = await child.json(timeout: 120)
                #expect(result?["ops"] as? Int == 1500)
                for counter in ["writeFailures", "lockFailures", "corruptEntries"] {
                    #expect(result?[counter] as? Int == 0, "\(counter)")
                }
                #expect(await child.exitStatus() == 0)
            }
            #expect(payloadEntryBytes(URL(fileURLWithPath: users.root)) <= Int64(budget))
            for name in Hardening.allNames(under: users.root) {
                var info = stat()
                try #require(lstat(users.root + "/" + name, &info) == 0)
                #expect(info.st_gid == SharedUsers.group, "\(name) belongs to the shared group")
                let isFolder = info.st_mode & S_IFMT == S_IFDIR
                #expect(info.st_mode & 0o7777 == (isFolder ? 0o2770 : 0o660), "\(name)")
            }
        }

        @Test(
            "another user's empty folder at trim.lock is removed (it cannot be moved), and the trim goes on",
            .enabled(if: SharedUsers.available))
        func anotherUsersFolderAtTrimLock() async throws {
            let users = try SharedUsers()
            let executable = users.base + "/yashima"
            try FileManager.default.copyItem(atPath: yashimaExecutable.path, toPath: executable)
            let lock = users.root + "/trim.lock"
            // The first user's folder, mode 0755: moving it (rename) needs write permission on it, for its `..`.
            try #require(mkdir(lock, 0o755) == 0 && chown(lock, SharedUsers.first, SharedUsers.group) == 0)
            let result = try await shell(
                "umask 022; exec /usr/bin/setpriv --reuid=\(SharedUsers.second) --regid=\(SharedUsers.group) "
                    + "--groups=\(SharedUsers.group) \"$Y\" trim --dir \"$D\" --max-size 1M",
                environment: ["Y": executable, "D": users.root])
            #expect(result.status == 0, "\(result.error)")
            #expect(Hardening.isRegularFile(lock), "trim.lock is a lock file again")
        }

        // MARK: The owner check at open

        @Test("a root owned by another user is refused in private mode, naming the owner")
        func foreignOwnerIsRefused() throws {
            let dir = TemporaryDirectory("owner")
            Hardening.makePrivateFolder(dir.path)
            try #require(chown(dir.path, 12345, 12345) == 0, "the test runs as root")
            let error = #expect(throws: YCache.Error.self) {
                try YCache(storageDirectory: dir.url).openStorage()
            }
            guard case .insecureStorageDirectory(_, let reason) = error else {
                Issue.record("expected insecureStorageDirectory, got \(String(describing: error))")
                return
            }
            #expect(reason.contains("owned by uid 12345"))
            // Nothing was created inside.
            #expect(Hardening.allNames(under: dir.path).isEmpty)
        }

        @Test("group-shared mode accepts another user's root only when this process is in its group")
        func groupSharedOwnerNeedsGroupMembership() throws {
            let dir = TemporaryDirectory("group-owner")
            Hardening.makePrivateFolder(dir.path)
            chmod(dir.path, 0o2770)
            // Owned by uid 12345 in group 12345, which this process is not in: refused.
            try #require(chown(dir.path, 12345, 12345) == 0)
            #expect(throws: YCache.Error.self) {
                try YCache(storageDirectory: dir.url, sharing: .groupShared).openStorage()
            }
            // Same owner, but the group is this process's group: accepted.
            try #require(chown(dir.path, 12345, getegid()) == 0)
            chmod(dir.path, 0o2770)  // chown clears setgid
            try YCache(storageDirectory: dir.url, sharing: .groupShared).openStorage()
            // And still refused in private mode (group-writable, and not ours).
            #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
        }

        @Test("a world-writable root is refused with an error naming the problem", arguments: [0o777, 0o1777, 0o703])
        func worldWritableRootIsRefused(mode: Int) throws {
            let dir = TemporaryDirectory("world")
            Hardening.makePrivateFolder(dir.path)
            chmod(dir.path, mode_t(mode))
            for sharing in [StorageSharingMode.privateToUser, .groupShared] {
                let error = #expect(throws: YCache.Error.self) {
                    try YCache(storageDirectory: dir.url, sharing: sharing).openStorage()
                }
                guard case .insecureStorageDirectory(let path, let reason) = error else {
                    Issue.record("expected insecureStorageDirectory, got \(String(describing: error))")
                    continue
                }
                #expect(path == dir.url.standardizedFileURL.path)
                #expect(reason.contains("writable by other users"))
                #expect(error?.description.contains("insecure") == true)
            }
        }

        @Test("a group-writable root is refused in private mode and accepted in group-shared mode")
        func groupWritableRoot() throws {
            let dir = TemporaryDirectory("groupw")
            Hardening.makePrivateFolder(dir.path)
            chmod(dir.path, 0o770)
            let error = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
            if case .insecureStorageDirectory(_, let reason) = error {
                #expect(reason.contains("group-writable"))
            } else {
                Issue.record("expected insecureStorageDirectory, got \(String(describing: error))")
            }
            try YCache(storageDirectory: dir.url, sharing: .groupShared).openStorage()
        }
    }
}
