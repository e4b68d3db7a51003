// Full filesystems as pressure (issue 38), on a real small filesystem: a tmpfs each test mounts itself as
// root (unmounted however the test ends). Real worker processes write more than fits: every value they get
// is right, no partial entry is left, the counters equal what is on disk afterwards; with a free-space
// floor, other data filling the filesystem makes the cache shrink at its next write. Skipped with the
// reason where a tmpfs cannot be mounted; YASHIMA_REQUIRE_TMPFS=1 (CI, as root) fails instead.

import ChildProcesses
import Foundation
import Glibc
import Testing

@_spi(Operator) @testable import YashimaShared

extension Trait where Self == ConditionTrait {
    /// The trait of every suite that mounts a tmpfs.
    static var tmpfsMounts: Self {
        .enabled(
            if: Hardening.FullDisk.canMountTmpfs || serverRequired(by: "YASHIMA_REQUIRE_TMPFS"),
            "cannot mount a tmpfs (needs root outside a restricted container): skipped (YASHIMA_REQUIRE_TMPFS=1 fails instead)"
        )
    }
}

extension Hardening {
    @Suite("Hardening: full filesystems", .serialized, .tmpfsMounts)
    struct FullDisk {
        /// Whether this process may mount a tmpfs. Probed once.
        static let canMountTmpfs: Bool = {
            let probe = TemporaryDirectory("tmpfs-probe")
            Hardening.makePrivateFolder(probe.path)
            guard mount("tmpfs", probe.path, "tmpfs", 0, "size=64k") == 0 else { return false }
            umount2(probe.path, Int32(MNT_DETACH))
            return true
        }()

        /// Runs `body` with the path of a new tmpfs of `size` (`mount -o size=`), unmounted when it ends,
        /// however it ends.
        static func withTmpfs<T>(size: String, _ body: (String) async throws -> T) async throws -> T {
            let mountPoint = TemporaryDirectory("tmpfs")
            Hardening.makePrivateFolder(mountPoint.path)
            try #require(
                mount("tmpfs", mountPoint.path, "tmpfs", 0, "size=\(size),mode=0700") == 0,
                "mount -t tmpfs -o size=\(size): errno \(errno)")
            defer { umount2(mountPoint.path, Int32(MNT_DETACH)) }
            return try await body(mountPoint.path)
        }

        /// The filesystem's size and free bytes (for unprivileged users: `f_bavail`).
        static func space(_ path: String) -> (total: Int64, free: Int64) {
            var status = statvfs()
            guard statvfs(path, &status) == 0 else { return (0, 0) }
            return (Int64(status.f_blocks) * Int64(status.f_frsize), Int64(status.f_bavail) * Int64(status.f_frsize))
        }

        /// What the `worker get --keep-going` processes said, line by line.
        struct Tally {
            var returned = 0
            var wrong = 0
            var failed: [String] = []
            var sources: [String: Int] = [:]
            /// Damaged auxiliary files the workers replaced (a state file faulting on a full disk would be one).
            var repairs = 0
        }

        /// Reads every line of `children` until they exit; their exit statuses with the tally.
        static func collect(_ children: [ChildProcess]) async -> (Tally, [Int32?]) {
            var tally = Tally()
            for child in children {
                while let line = await child.json() {
                    if let error = line["error"] as? String {
                        tally.failed.append("\(error): \(line["description"] as? String ?? "")")
                    } else if line["correct"] as? Bool == true {
                        tally.returned += 1
                        tally.repairs += line["repairs"] as? Int ?? 0
                        tally.sources[line["source"] as? String ?? "?", default: 0] += 1
                    } else {
                        tally.wrong += 1
                    }
                }
            }
            var statuses: [Int32?] = []
            for child in children { statuses.append(await child.exitStatus()) }
            return (tally, statuses)
        }

        /// `worker get` of `count` keys `<prefix>-0…` of `size` bytes, continuing after a typed error.
        static func writer(_ root: String, prefix: String, count: Int, size: Int, extra: [String] = [])
            throws -> ChildProcess
        {
            try ChildProcess(
                [
                    "worker", "get", "--directory", root, "--key", prefix, "--count", "\(count)", "--size", "\(size)",
                    "--budget", "100000000", "--keep-going",
                ] + extra)
        }

        /// What is on disk agrees with the counters, nothing is partial or left in `tmp/`, every entry
        /// verifies, and the directory fits its filesystem.
        static func expectConsistent(_ root: String, filesystemBytes: Int64) async throws {
            let cache = YCache(storageDirectory: URL(fileURLWithPath: root), storageMaximumByteCount: nil)
            let state = try cache.engine.storageTier.context().get().directory.state
            let onDisk = Hardening.entryBytes(root)
            #expect(state.usage == onDisk, "the usage counter against the entry files' blocks")
            #expect(state.payloadBytes == payloadEntryBytes(URL(fileURLWithPath: root)))
            #expect(onDisk <= filesystemBytes, "usage within the filesystem")
            #expect(Hardening.allNames(under: root + "/tmp").isEmpty, "no staging file left")
            let report = try cache.storageOperator().verify()
            #expect(report.damaged.isEmpty, "no partial or damaged entry: \(report.damaged)")
        }

        @Test(
            "the issue's check: 1 MiB tmpfs, 100 MB budget, 4 processes × 30 new 64 KiB values",
            .timeLimit(.minutes(5)))
        func fourWritersOnOneMebibyte() async throws {
            try await Self.withTmpfs(size: "1m") { mountPoint in
                let root = mountPoint + "/cache"
                let filesystem = Self.space(mountPoint).total
                let writers = try (0..<4).map {
                    try Self.writer(root, prefix: "w\($0)", count: 30, size: 64 << 10, extra: ["--go"])
                }
                #expect(await startTogether(writers))
                let (tally, statuses) = await Self.collect(writers)
                let state = try YCache(storageDirectory: URL(fileURLWithPath: root)).engine.storageTier.context().get()
                    .directory.state
                print(
                    "full tmpfs: \(tally.returned) of 120 lookups returned their value, \(tally.wrong) wrong, "
                        + "\(tally.failed.count) failed; pressure trims \(state.total(.pressureTrims)); "
                        + "first failure: \(tally.failed.first ?? "none")")
                #expect(tally.wrong == 0, "no wrong value")
                #expect(tally.returned + tally.failed.count == 120, "every lookup answered: \(statuses)")
                #expect(tally.returned >= 108, "at least 108 of 120 returned: \(tally.failed.prefix(3))")
                #expect(statuses.allSatisfy { $0 == 0 || $0 == 3 }, "\(statuses)")
                #expect(tally.repairs == 0, "the state file never faulted")
                #expect(state.total(.pressureTrims) > 0)
                try await Self.expectConsistent(root, filesystemBytes: filesystem)
                try await Self.expectStoredValuesRight(root)
            }
        }

        /// Every entry left is read by a new process as a storage hit with exactly the bytes its key's
        /// generator makes.
        static func expectStoredValuesRight(_ root: String) async throws {
            let cache = YCache(storageDirectory: URL(fileURLWithPath: root), storageMaximumByteCount: nil)
            let stored = try cache.storageOperator().entries(inNamespace: "stress").entries
            #expect(!stored.isEmpty)
            for entry in stored {
                let reader = try ChildProcess([
                    "worker", "get", "--directory", root, "--key", entry.key.identity,
                    "--size", "\(entry.payloadByteCount)", "--budget", "100000000",
                ])
                let line = await reader.json()
                #expect(line?["correct"] as? Bool == true, "\(entry.key.identity): \(line ?? [:])")
                #expect(line?["source"] as? String == "storage", "\(entry.key.identity): \(line ?? [:])")
                #expect(await reader.exitStatus() == 0)
            }
        }

        @Test(
            "a lone writer on a full tmpfs: every write is stored after a trim of its own entries",
            arguments: [YCache.Options.CrossProcessPolicy.coordinate, .processLocal])
        func loneWriter(coordination: YCache.Options.CrossProcessPolicy) async throws {
            try await Self.withTmpfs(size: "1m") { mountPoint in
                let root = URL(fileURLWithPath: mountPoint + "/cache")
                // No floor: only ENOSPC makes room here (through the key's lock file, or a new tmp/ file).
                let cache = YCache(
                    configuration: .init(
                        storageDirectory: root, storageMaximumByteCount: 100_000_000, storageFreeSpaceFloor: nil))
                var options = YCache.Options()
                options.crossProcess = coordination
                for index in 0..<30 {
                    let value = Data(repeating: UInt8(index), count: 64 << 10)
                    let got = try await cache.data(for: CacheKey("lone-\(index)"), options: options) { value }
                    #expect(got == value)
                    // Stored, not only returned: a new instance (another process's view) reads it.
                    #expect(try await Self.stored(in: root, CacheKey("lone-\(index)")) == value, "key \(index)")
                }
                let statistics = cache.statistics
                #expect(statistics.writeFailures == 0)
                #expect(statistics.pressureTrims > 0)
                #expect(try cache.engine.storageTier.context().get().directory.state.total(.pressureTrims) > 0)
                try await Self.expectConsistent(root.path, filesystemBytes: Self.space(mountPoint).total)
            }
        }

        /// What a new instance over `root` finds in storage for `key` (DataCodec), memory empty.
        static func stored(in root: URL, _ key: CacheKey) async throws -> Data? {
            try await YCache(storageDirectory: root, storageMaximumByteCount: nil).valueIfCached(
                for: key, codec: DataCodec())
        }

        @Test("a free-space floor: other data filling the filesystem makes the cache shrink at its next write")
        func floor() async throws {
            try await Self.withTmpfs(size: "4m") { mountPoint in
                let root = mountPoint + "/cache"
                let floor = 1 << 20
                let state = {
                    try YCache(storageDirectory: URL(fileURLWithPath: root)).engine.storageTier.context().get()
                        .directory.state
                }
                func write(_ prefix: String, count: Int) async throws {
                    let child = try Self.writer(
                        root, prefix: prefix, count: count, size: 64 << 10, extra: ["--free-space-floor", "\(floor)"])
                    let (tally, _) = await Self.collect([child])
                    #expect(tally.returned == count, "\(tally.failed.prefix(3))")
                    #expect(tally.wrong == 0)
                }
                // 20 × 68 KiB in 4 MiB: well above the floor, nothing trimmed.
                try await write("before", count: 20)
                let grown = try state().usage
                #expect(try state().total(.pressureTrims) == 0)
                #expect(Self.space(mountPoint).free > Int64(floor))

                // Other data leaves half the floor free: the next write (a process's first reads the free
                // space) trims until the floor is free again.
                let filler = mountPoint + "/other-data"
                let fillerBytes = Self.space(mountPoint).free - Int64(floor / 2)
                #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: Int(fillerBytes))))
                try await write("after", count: 1)
                let shrunk = try state().usage
                print("floor: usage \(grown) → \(shrunk) bytes, free \(Self.space(mountPoint).free) of floor \(floor)")
                #expect(shrunk < grown, "the cache shrank")
                #expect(try state().total(.pressureTrims) == 1)
                #expect(Self.space(mountPoint).free >= Int64(floor), "the floor is free again")
                try await Self.expectConsistent(root, filesystemBytes: Self.space(mountPoint).total)

                // The other data goes: the cache grows again, without trimming.
                unlink(filler)
                try await write("again", count: 20)
                #expect(try state().usage > grown, "the cache grew again, up to its budget")
                #expect(try state().total(.pressureTrims) == 1)
                try await Self.expectConsistent(root, filesystemBytes: Self.space(mountPoint).total)
            }
        }
    }
}
