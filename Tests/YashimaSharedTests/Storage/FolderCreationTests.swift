// Folders appear with their final mode or not at all: many openers racing on a fresh directory all
// succeed, every folder has exactly the sharing mode's bits, and no staging folder is left behind.

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

@Suite("Folder creation")
struct FolderCreationTests {
    /// Every folder under `root` (relative paths) and its mode bits.
    static func folders(under root: String) throws -> [String: UInt32] {
        var result: [String: UInt32] = [:]
        for name in try FileManager.default.subpathsOfDirectory(atPath: root) {
            var info = stat()
            guard lstat(root + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { continue }
            result[name] = UInt32(info.st_mode & 0o7777)
        }
        return result
    }

    @Test(
        "eight openers racing on a fresh directory: all succeed, every folder exact, nothing left staging",
        arguments: [StorageSharingMode.privateToUser, .groupShared])
    func racingOpeners(sharing: StorageSharingMode) async throws {
        let dir = TemporaryDirectory("folders")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let cache = YCache(storageDirectory: dir.url, sharing: sharing)
                    try await cache.store(Data([UInt8(index)]), for: CacheKey("k\(index)"), codec: DataCodec())
                }
            }
            try await group.waitForAll()
        }
        let folders = try Self.folders(under: dir.path)
        // entries, locks, tmp, and the fan-out folders the eight entries needed (made on first use).
        #expect(folders.count >= 3 + 1 && folders.count <= 3 + 2 * 8, "\(folders.keys.sorted())")
        let expected: UInt32 = sharing == .groupShared ? 0o2770 : 0o700
        #expect(folders.values.allSatisfy { $0 == expected }, "\(folders.filter { $0.value != expected })")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(!names.contains { $0.hasPrefix(Directory.folderStagingPrefix) }, "\(names)")
    }

    @Test("instances racing to make the same fan-out folders on a fresh directory still generate each key once")
    func racingFolderCreationKeepsSingleFlight() async throws {
        for round in 0..<3 {
            let dir = TemporaryDirectory("folders-flight-\(round)")
            let generations = GenerationTally()
            // Separate instances coordinate only through the directory (lock files), as processes do.
            let caches = (0..<8).map { _ in YCache(storageDirectory: dir.url) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for cache in caches {
                    group.addTask {
                        for index in 0..<24 {
                            let key = CacheKey("k\(index)")
                            _ = try await cache.data(for: key) {
                                generations.counts.withLock { $0["k\(index)", default: 0] += 1 }
                                try await Task.sleep(for: .milliseconds(5))
                                return Data("v\(index)".utf8)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let counts = generations.counts.withLock { $0 }
            #expect(counts.count == 24 && counts.values.allSatisfy { $0 == 1 }, "round \(round): \(counts)")
        }
    }

    @Test("trim removes empty staging folders older than an hour from the root; keeps young or filled ones")
    func staleStagingFoldersAreSwept() async throws {
        let (dir, cache) = makeCache("folders-debris")
        try cache.openStorage()
        let prefix = dir.path + "/" + Directory.folderStagingPrefix
        for name in ["old", "young", "filled"] { #expect(mkdir(prefix + name, 0o700) == 0) }
        try writeFile(Data("x".utf8), to: URL(fileURLWithPath: prefix + "filled/inside"))
        try setModificationTime(URL(fileURLWithPath: prefix + "old"), secondsAgo: 2 * 3600)
        try setModificationTime(URL(fileURLWithPath: prefix + "filled"), secondsAgo: 2 * 3600)
        try await cache.trimStorageIfNeeded()
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path)
            .filter { $0.hasPrefix(Directory.folderStagingPrefix) }.sorted()
        #expect(left == [".folder-filled", ".folder-young"])
    }

    @Test("a fan-out folder removed while in use comes back with its exact mode, through a staging name")
    func recreatedFanOut() async throws {
        let dir = TemporaryDirectory("folders-again")
        let cache = YCache(storageDirectory: dir.url, sharing: .groupShared)
        let key = CacheKey("again")
        try await cache.store(Data("1".utf8), for: key, codec: DataCodec())
        try FileManager.default.removeItem(at: dir.url.appendingPathComponent(Directory.entriesFolder))
        try await cache.store(Data("2".utf8), for: key, codec: DataCodec())
        let folders = try Self.folders(under: dir.path)
        #expect(folders.values.allSatisfy { $0 == 0o2770 }, "\(folders.filter { $0.value != 0o2770 })")
        #expect(
            try await YCache(storageDirectory: dir.url, sharing: .groupShared).valueIfCached(
                for: key, codec: DataCodec()) == Data("2".utf8))
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(!names.contains { $0.hasPrefix(Directory.folderStagingPrefix) }, "\(names)")
    }

    /// A filesystem without `RENAME_NOREPLACE` answers `renameat2` with EINVAL; folders are then made in
    /// place and their mode set right after. No filesystem here lacks the flag, so child processes get a
    /// shim (LD_PRELOAD, built with the system C compiler) whose `syscall` answers every
    /// `renameat2(RENAME_NOREPLACE)` with EINVAL and notes each refusal in a file.
    @Test(
        "without RENAME_NOREPLACE, folders are made in place with their exact mode and single-flight holds",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")))
    func withoutRenameNoReplace() async throws {
        let dir = TemporaryDirectory("folders-no-noreplace")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let shim = dir.path + "/no-renameat2.so"
        try Data(Self.noRenameat2Shim.utf8).write(to: URL(fileURLWithPath: dir.path + "/shim.c"))
        let compiler = try ChildProcess(
            executable: URL(fileURLWithPath: "/usr/bin/cc"),
            ["-shared", "-fPIC", "-O2", "-o", shim, dir.path + "/shim.c", "-ldl"])
        try #require(await compiler.exitStatus() == 0, "the shim did not compile")
        let root = dir.path + "/cache"
        let ledger = dir.path + "/ledger"
        let refusals = dir.path + "/refusals"
        let children = try (0..<4).map { _ in
            try ChildProcess(
                [
                    "worker", "get", "--directory", root, "--sharing", "group", "--key", "k", "--count", "24",
                    "--ledger", ledger, "--go",
                ], environment: ["LD_PRELOAD": shim, "NO_RENAMEAT2_REFUSALS": refusals])
        }
        #expect(await startTogether(children))
        for child in children {
            for _ in 0..<24 { #expect(await child.json()?["correct"] as? Bool == true) }
            #expect(await child.exitStatus() == 0)
        }
        let refused = (try? Data(contentsOf: URL(fileURLWithPath: refusals)).count) ?? 0
        #expect(refused > 0, "the shim never refused: the fallback was not exercised")
        let generated = Ledger(path: ledger).lines().map { $0.split(separator: " ")[0] }
        #expect(generated.count == 24 && Set(generated).count == 24, "\(generated.count) generations for 24 keys")
        let folders = try Self.folders(under: root)
        #expect(folders.count > 3)
        #expect(folders.values.allSatisfy { $0 == 0o2770 }, "\(folders.filter { $0.value != 0o2770 })")
        let names = try FileManager.default.contentsOfDirectory(atPath: root)
        #expect(!names.contains { $0.hasPrefix(Directory.folderStagingPrefix) }, "\(names)")
    }

    /// The LD_PRELOAD shim for `withoutRenameNoReplace`: glibc's `syscall`, except that
    /// `renameat2(…, RENAME_NOREPLACE)` fails with EINVAL (one byte appended to $NO_RENAMEAT2_REFUSALS).
    static let noRenameat2Shim = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <errno.h>
        #include <fcntl.h>
        #include <stdarg.h>
        #include <stdlib.h>
        #include <sys/syscall.h>
        #include <unistd.h>

        long syscall(long number, ...) {
            va_list list;
            va_start(list, number);
            long a[6];
            for (int i = 0; i < 6; i++) a[i] = va_arg(list, long);
            va_end(list);
            if (number == SYS_renameat2 && (a[4] & 1)) {
                const char *path = getenv("NO_RENAMEAT2_REFUSALS");
                int fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
                if (fd >= 0) { (void)write(fd, "x", 1); close(fd); }
                errno = EINVAL;
                return -1;
            }
            static long (*next)(long, ...);
            if (!next) next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
            return next(number, a[0], a[1], a[2], a[3], a[4], a[5]);
        }
        """

    @Test("staging names are unpredictable and two hex digits per random byte")
    func stagingNames() {
        let names = (0..<64).map { _ in Directory.randomHex(byteCount: 8) }
        #expect(names.allSatisfy { $0.count == 16 && $0.allSatisfy { "0123456789abcdef".contains($0) } })
        #expect(Set(names).count == 64)
    }
}

/// Generations per key, counted from concurrent generators.
private final class GenerationTally: Sendable {
    let counts = Mutex<[String: Int]>([:])
}
