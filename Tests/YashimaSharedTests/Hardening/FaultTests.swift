// Full disks and write errors without special mounts: a worker child runs under RLIMIT_FSIZE
// (`ulimit -f`, with SIGXFSZ ignored so write(2) returns EFBIG). Under `.throwError` the worker gets a
// typed `storageFull`; under `.bestEffort` it gets its value. Either way no partial file becomes visible
// at an entry path, the staging file is removed, and the usage counter is unchanged and still agrees
// with the files. Where tmpfs can be mounted (root, no container restriction), a real ENOSPC test too.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: faults", .serialized)
    struct Faults {
        /// The storage directory, opened (state and layout exist) with one small entry in it.
        static func preparedDirectory() async throws -> (TemporaryDirectory, YCache) {
            let (dir, cache) = makeCache("faults")
            _ = try await cache.data(for: CacheKey("warm")) { Data(count: 1000) }
            return (dir, cache)
        }

        /// ThreadSanitizer's runtime itself dies with SIGBUS at startup under a small RLIMIT_FSIZE (so does a
        /// plain C program built with -fsanitize=thread), so the file-size-limit children cannot run in a
        /// TSan build; the tmpfs test still covers the fault there when mounting is allowed.
        static let isThreadSanitized = dlsym(nil, "__tsan_init") != nil

        /// `ulimit -f 16` (8–16 KiB: dash counts 512-byte blocks) allows the entry header and a little
        /// payload, so the write fails in the middle of the payload, leaving a partial staging file to clean.
        static let limited = "trap '' XFSZ; ulimit -f 16"

        @Test(
            "file-size limit: .throwError gives storageFull, nothing partial is visible, usage unchanged",
            .disabled(if: isThreadSanitized, "TSan's runtime cannot start under RLIMIT_FSIZE"),
            arguments: ["throw", "best-effort"])
        func fileSizeLimit(policy: String) async throws {
            let (dir, cache) = try await Self.preparedDirectory()
            let countedBefore = try await cache.storageUsage()  // reconciles the counter with the files
            let usageBefore = try Hardening.usageHint(cache)
            let key = CacheKey(namespace: "stress", identity: "big")
            let files = KeyFiles(root: dir.path, key: key)

            let child = try workerUnderShell(
                Self.limited,
                [
                    "worker", "get", "--directory", dir.path, "--key", "big", "--size", "\(1 << 20)",
                    "--write-failure", policy,
                ])
            let line = try #require(await child.json())
            let status = await child.exitStatus()
            if policy == "throw" {
                #expect(line["error"] as? String == "storageFull", "\(line)")
                #expect((line["description"] as? String)?.contains("full") == true)
                #expect(status == 3)
            } else {
                #expect(line["correct"] as? Bool == true, "\(line)")
                #expect(line["source"] as? String == "generated")
                #expect(status == 0)
            }
            #expect(Hardening.linkStatus(files.entry) == nil, "no file at the entry path")
            #expect(Hardening.allNames(under: dir.path + "/tmp").isEmpty, "the staging file was removed")
            #expect(try Hardening.usageHint(cache) == usageBefore, "a failed publish charges nothing")
            let counted = try await cache.storageUsage()
            #expect(counted == countedBefore)
            #expect(counted.allocatedByteCount == Hardening.entryBytes(dir.path))
            #expect(try Hardening.usageHint(cache) == counted.allocatedByteCount)
            // The directory still works for a writer without the limit.
            let ok = try ChildProcess([
                "worker", "get", "--directory", dir.path, "--key", "big", "--size", "\(1 << 20)",
            ])
            #expect(await ok.json()?["correct"] as? Bool == true)
            #expect(await ok.exitStatus() == 0)
            #expect(Hardening.isRegularFile(files.entry))
        }

        @Test(
            "a limit too small even for the entry header fails the same way",
            .disabled(if: isThreadSanitized, "TSan's runtime cannot start under RLIMIT_FSIZE"))
        func limitBelowTheHeader() async throws {
            let (dir, _) = try await Self.preparedDirectory()
            let child = try workerUnderShell(
                "trap '' XFSZ; ulimit -f 0",
                ["worker", "get", "--directory", dir.path, "--key", "tiny", "--size", "10"])
            #expect(await child.json()?["error"] as? String == "storageFull")
            #expect(await child.exitStatus() == 3)
            #expect(Hardening.allNames(under: dir.path + "/tmp").isEmpty)
        }

        // MARK: A real full filesystem (tmpfs)

        /// Whether this process may mount a tmpfs (root outside a restricted container). Probed once.
        static let canMountTmpfs: Bool = {
            let probe = FileManager.default.temporaryDirectory.appendingPathComponent("ysh-tmpfs-probe-\(getpid())")
                .path
            try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
            defer { rmdir(probe) }
            guard mount("tmpfs", probe, "tmpfs", 0, "size=64k") == 0 else { return false }
            umount(probe)
            return true
        }()

        @Test(
            "a full tmpfs: typed storageFull or the value, nothing partial, staging removed",
            .enabled(if: canMountTmpfs, "needs permission to mount a tmpfs"))
        func fullTmpfs() async throws {
            let mountPoint = TemporaryDirectory("tmpfs")
            Hardening.makePrivateFolder(mountPoint.path)
            try #require(mount("tmpfs", mountPoint.path, "tmpfs", 0, "size=1m,mode=0700") == 0)
            defer { umount2(mountPoint.path, Int32(MNT_DETACH)) }
            let root = URL(fileURLWithPath: mountPoint.path + "/cache")
            let cache = YCache(storageDirectory: root, storageMaximumByteCount: nil)
            _ = try await cache.data(for: CacheKey("small")) { Data(count: 1000) }
            let usageBefore = try Hardening.usageHint(cache)
            let big = Data(repeating: 7, count: 2 << 20)

            let error = await #expect(throws: YCache.Error.self) {
                try await cache.data(for: CacheKey("big")) { big }
            }
            if case .storageFull = error {
            } else {
                Issue.record("expected storageFull, got \(String(describing: error))")
            }
            let value = try await cache.data(for: CacheKey("big"), options: .init(writeFailurePolicy: .bestEffort)) {
                big
            }
            #expect(value == big)

            #expect(Hardening.allNames(under: root.path + "/tmp").isEmpty)
            #expect(Hardening.linkStatus(KeyFiles(root: root.path, key: CacheKey("big")).entry) == nil)
            #expect(try Hardening.usageHint(cache) == usageBefore)
            #expect(try await cache.storageUsage().allocatedByteCount == Hardening.entryBytes(root.path))
            // Space is back for a value that fits.
            _ = try await cache.data(for: CacheKey("fits")) { Data(count: 10_000) }
        }
    }
}
