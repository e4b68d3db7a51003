// Cross-process behaviour with real child processes (the built `yashima-stress worker`), real files
// and real SIGKILL. Children synchronise through READY/GO lines on pipes, never sleeps; where a test
// must act "while a child generates", the child announces GENERATING first, and "while a child waits for
// the lock", WAITING (`--announce-wait`, from the lock-wait observer). The two sleeps left do not order
// events: one varies the moment a publisher is killed, the other paces sampling while writers run.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite(.serialized) struct CrossProcessTests {
    private func worker(_ command: String, _ dir: TemporaryDirectory, _ extra: [String]) throws -> ChildProcess {
        try ChildProcess(["worker", command, "--directory", dir.path] + extra)
    }

    /// A `worker get --announce` that holds the key's lock: returned once it says GENERATING.
    private func generating(_ dir: TemporaryDirectory, _ extra: [String]) async throws -> ChildProcess {
        let child = try worker("get", dir, extra + ["--announce"])
        #expect(await child.line(timeout: 60, where: { $0.hasPrefix("GENERATING") }) != nil)
        return child
    }

    // MARK: Single-flight across processes (I5)

    @Test func eightProcessesMissingOneKeyGenerateOnce() async throws {
        let dir = TemporaryDirectory("burst")
        let ledger = dir.path + ".ledger"
        defer { unlink(ledger) }
        let children = try (0..<8).map { _ in
            try worker(
                "get", dir, ["--key", "hot", "--generate-ms", "1500", "--ledger", ledger, "--go", "--size", "65536"])
        }
        #expect(await startTogether(children))
        var results: [[String: Any]] = []
        for child in children { if let result = await child.json(timeout: 60) { results.append(result) } }
        #expect(results.count == 8)
        #expect(results.allSatisfy { $0["correct"] as? Bool == true })
        let generations = Ledger(path: ledger).lines()
        #expect(generations.count == 1, "generations: \(generations)")
        let shared = results.filter { $0["shared"] as? Bool == true }.count
        #expect(shared == 7)
        for child in children { #expect(await child.exitStatus() == 0) }
    }

    @Test func waiterTakesOverWhenGeneratorIsKilled() async throws {
        let dir = TemporaryDirectory("takeover")
        let ledger = dir.path + ".ledger"
        defer { unlink(ledger) }
        let doomed = try await generating(dir, ["--key", "k", "--generate-ms", "60000", "--ledger", ledger])
        let waiters = try (0..<3).map { _ in
            try worker(
                "get", dir, ["--key", "k", "--generate-ms", "100", "--ledger", ledger, "--announce", "--announce-wait"])
        }
        // Each waiter says when its lookup starts waiting for the holder's lock; then the holder dies holding it.
        for waiter in waiters { #expect(await waiter.line(where: { $0.hasPrefix("WAITING") }) != nil) }
        doomed.kill()
        await doomed.exitStatus()
        var results: [[String: Any]] = []
        for waiter in waiters { if let result = await waiter.json(timeout: 60) { results.append(result) } }
        #expect(results.count == 3, "a waiter hung after the holder was killed")
        #expect(results.allSatisfy { $0["correct"] as? Bool == true })
        // The killed holder's line, then exactly one takeover generation.
        #expect(Ledger(path: ledger).lines().count == 2, "\(Ledger(path: ledger).lines())")
        for waiter in waiters { #expect(await waiter.exitStatus() == 0) }
    }

    @Test func killingPublishersNeverLeavesATornEntry() async throws {
        let dir = TemporaryDirectory("publish-kill")
        // Large values make the write window wide; kill at varied moments inside it.
        for round in 0..<6 {
            let child = try await generating(dir, ["--key", "big-\(round)", "--size", "\(24 << 20)"])
            try await Task.sleep(for: .milliseconds(round * 15))
            child.kill()
            await child.exitStatus()
        }
        // Every file at a published path validates completely (header, lengths, checksum).
        #expect(invalidEntryFiles(dir.url).isEmpty)
        // And a reader gets the right bytes for every key (from storage, or regenerated).
        for round in 0..<6 {
            let reader = try worker("get", dir, ["--key", "big-\(round)", "--size", "\(24 << 20)"])
            #expect(await reader.json()?["correct"] as? Bool == true)
            #expect(await reader.exitStatus() == 0)
        }
    }

    @Test func removalInOneProcessIsSeenByOthers() async throws {
        let (dir, cache) = makeCache("invalidate")
        let key = CacheKey(namespace: "stress", identity: "shared")
        let other = CacheKey(namespace: "stress", identity: "other")
        let keep = CacheKey(namespace: "kept", identity: "x")
        for k in [key, other, keep] { _ = try await cache.data(for: k) { Data("v".utf8) } }
        #expect(try await cache.peek(for: key, codec: DataCodec()) != nil)

        let remover = try worker("remove", dir, ["--key", "shared"])
        #expect(await remover.exitStatus() == 0)
        #expect(try await cache.valueIfCached(for: key, codec: DataCodec()) == nil, "L1 served a removed entry")
        #expect(try await cache.valueIfCached(for: other, codec: DataCodec()) != nil)

        let namespaceRemover = try worker("remove", dir, ["--namespace", "stress"])
        #expect(await namespaceRemover.exitStatus() == 0)
        #expect(try await cache.valueIfCached(for: other, codec: DataCodec()) == nil)
        #expect(try await cache.valueIfCached(for: keep, codec: DataCodec()) != nil)

        let allRemover = try worker("remove", dir, ["--all"])
        #expect(await allRemover.exitStatus() == 0)
        #expect(try await cache.valueIfCached(for: keep, codec: DataCodec()) == nil)
    }

    @Test func replacementTooLargeToStoreIsSeenByOthers() async throws {
        let (dir, cache) = makeCache("oversized-replace")
        let key = CacheKey(namespace: "mix", identity: "k0")  // the key `worker mix --keys 1` stores
        _ = try await cache.data(for: key) { Data("old".utf8) }
        #expect(try await cache.peek(for: key, codec: DataCodec()) == Data("old".utf8))
        // Another process stores a value larger than its whole budget: kept in its memory only, and the
        // old entry must go for everyone (no process may keep reading the replaced value).
        let replacer = try worker(
            "mix", dir,
            ["--keys", "1", "--gets", "0", "--sets", "1", "--ops", "1", "--size", "65536", "--budget", "16384"])
        #expect(await replacer.exitStatus() == 0)
        #expect(try await cache.valueIfCached(for: key, codec: DataCodec()) == nil, "the replaced value was served")
        #expect(invalidEntryFiles(dir.url).isEmpty && allocatedEntryBytes(dir.url) == 0)
    }

    // MARK: Shared quota (I9)

    @Test func quotaHoldsWithFourWriters() async throws {
        let dir = TemporaryDirectory("quota")
        let budget = 1 << 20
        let entrySize = 16 * 1024
        let children = try (0..<4).map { index in
            try worker(
                "get", dir,
                [
                    "--key", "w\(index)", "--count", "150", "--size", "\(entrySize)", "--budget", "\(budget)", "--go",
                ])
        }
        #expect(await startTogether(children))
        // Sample real usage (payload bytes of entry files that exist together) while they write.
        var maximum: Int64 = 0
        var running = true
        while running {
            maximum = max(maximum, payloadEntryBytesAtOneInstant(dir.url))
            running = children.contains { $0.isRunning }
            try await Task.sleep(for: .milliseconds(2))
        }
        for child in children { #expect(await child.exitStatus() == 0) }
        // Slack: one in-flight entry per writing process.
        let slack = Int64(4 * entrySize)
        #expect(maximum <= Int64(budget) + slack, "usage reached \(maximum) over a budget of \(budget)")
        #expect(payloadEntryBytes(dir.url) <= Int64(budget))
    }

    // MARK: Lock files (I6)

    @Test func removeAndRegenerateRaceNeverHasTwoGenerators() async throws {
        let dir = TemporaryDirectory("churn")
        let ledger = dir.path + ".ledger"
        defer { unlink(ledger) }
        let children = try (0..<4).map { _ in
            try worker("churn", dir, ["--key", "contested", "--rounds", "60", "--ledger", ledger, "--go"])
        }
        #expect(await startTogether(children))
        for child in children {
            #expect(await child.json(timeout: 120)?["wrong"] as? Int == 0)
            #expect(await child.exitStatus() == 0)
        }
        let intervals = Ledger(path: ledger).lines().compactMap { line -> (UInt64, UInt64)? in
            let parts = line.split(separator: " ")
            guard parts.count == 3, let start = UInt64(parts[0]), let end = UInt64(parts[1]) else { return nil }
            return (start, end)
        }.sorted { $0.0 < $1.0 }
        #expect(intervals.count >= 60)
        for (previous, next) in zip(intervals, intervals.dropFirst()) {
            #expect(next.0 >= previous.1, "two generators overlapped: \(previous) and \(next)")
        }
        // Holders unlink their lock file on release: none pile up.
        #expect(lockFileCount(dir.url) <= 1)
    }

    // MARK: Waiting

    @Test func cancelledWaiterReturnsPromptly() async throws {
        let dir = TemporaryDirectory("cancel")
        let holder = try await generating(dir, ["--key", "slow", "--generate-ms", "20000"])
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "stress", identity: "slow")
        let waiting = Gate()
        let waiter = Task {
            // The lock-wait observer opens the gate once this lookup waits for the holder's lock.
            try await LockWait.$observer.withValue({ _ in waiting.open() }) {
                try await cache.data(for: key) { Data("mine".utf8) }
            }
        }
        #expect(await waiting.wait(within: 60))
        let start = ContinuousClock.now
        waiter.cancel()
        let result = await waiter.result
        let waited = ContinuousClock.now - start
        #expect(throws: CancellationError.self) { try result.get() }
        // Bounded, not a timing claim: far below the holder's 20 s.
        #expect(waited < .seconds(5))
        holder.kill()
        await holder.exitStatus()
    }

    @Test func hungHolderIsBypassedAfterTheWaitTimeout() async throws {
        let dir = TemporaryDirectory("timeout")
        let holder = try await generating(dir, ["--key", "hung", "--generate-ms", "60000"])
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey(namespace: "stress", identity: "hung")
        var options = YCache.Options()
        options.crossProcessWaitTimeout = .milliseconds(200)
        let resolution = try await cache.resolve(for: key, codec: DataCodec(), options: options) { Data("dup".utf8) }
        #expect(resolution.source == .generated)
        #expect(resolution.value == Data("dup".utf8))
        #expect(cache.statistics.crossProcessTimeouts == 1)
        holder.kill()
        await holder.exitStatus()
    }
}

/// Allocated bytes of every entry file under `root/entries` (exact in a quiet directory).
func allocatedEntryBytes(_ root: URL) -> Int64 {
    entryFileStatuses(root).reduce(Int64(0)) { $0 + Int64($1.status.st_blocks) * 512 }
}

/// Allocated bytes of entry files that all existed at one instant: a scan, then a second look that keeps
/// only the files still there as the same file. A scan alone is not a snapshot: while writers publish
/// and trim unlinks, it can count an entry unlinked after its folder was read and one published later
/// in a folder read after it, entries that never existed together. Every file kept was present when
/// the scan ended, so the sum never overstates the usage at that instant.
func allocatedEntryBytesAtOneInstant(_ root: URL) -> Int64 {
    entryFileStatuses(root).reduce(Int64(0)) { total, file in
        var now = stat()
        guard lstat(file.path, &now) == 0, now.st_ino == file.status.st_ino,
            now.st_ctim.tv_sec == file.status.st_ctim.tv_sec, now.st_ctim.tv_nsec == file.status.st_ctim.tv_nsec
        else { return total }
        return total + Int64(file.status.st_blocks) * 512
    }
}

/// Payload bytes of all entry files under `root`: what the storage budget counts (I9).
func payloadEntryBytes(_ root: URL) -> Int64 {
    entryFileStatuses(root).reduce(Int64(0)) { $0 + payloadBytes(ofEntryAt: $1.path) }
}

/// Payload bytes of entry files that all existed at one instant (see `allocatedEntryBytesAtOneInstant`).
func payloadEntryBytesAtOneInstant(_ root: URL) -> Int64 {
    entryFileStatuses(root).reduce(Int64(0)) { total, file in
        let payload = payloadBytes(ofEntryAt: file.path)
        var now = stat()
        guard lstat(file.path, &now) == 0, now.st_ino == file.status.st_ino,
            now.st_ctim.tv_sec == file.status.st_ctim.tv_sec, now.st_ctim.tv_nsec == file.status.st_ctim.tv_nsec
        else { return total }
        return total + payload
    }
}

/// The payload byte count in an entry file's header (0 when it cannot be read).
func payloadBytes(ofEntryAt path: String) -> Int64 {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var count: UInt64 = 0
    guard pread(fd, &count, 8, off_t(EntryFormat.Offset.payloadByteCount)) == 8 else { return 0 }
    return Int64(UInt64(littleEndian: count))
}

/// Every entry file under `root/entries` with its `lstat`.
private func entryFileStatuses(_ root: URL) -> [(path: String, status: stat)] {
    var found: [(path: String, status: stat)] = []
    let entries = root.appendingPathComponent("entries")
    guard let folders = try? FileManager.default.contentsOfDirectory(atPath: entries.path) else { return [] }
    for folder in folders {
        let path = entries.appendingPathComponent(folder).path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { continue }
        for name in names where name.hasSuffix(".entry") {
            var info = stat()
            if lstat(path + "/" + name, &info) == 0 { found.append((path + "/" + name, info)) }
        }
    }
    return found
}

/// Entry files that fail full validation (there must be none: publish is atomic, I1).
func invalidEntryFiles(_ root: URL) -> [String] {
    var bad: [String] = []
    let entries = root.appendingPathComponent("entries")
    let folders = (try? FileManager.default.contentsOfDirectory(atPath: entries.path)) ?? []
    for folder in folders {
        let path = entries.appendingPathComponent(folder).path
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where name.hasSuffix(".entry") {
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else { continue }
            let valid = data.withUnsafeBytes { bytes -> Bool in
                guard case .success(let header) = EntryFormat.parseFixedHeader(bytes, fileSize: Int64(data.count)),
                    case .success = EntryFormat.validateHeaderChecksum(header, bytes: bytes)
                else { return false }
                let payload = UnsafeRawBufferPointer(rebasing: bytes[header.payloadOffset...])
                return CRC32C.checksum(payload) == header.payloadChecksum
            }
            if !valid { bad.append(name) }
        }
    }
    return bad
}

func lockFileCount(_ root: URL) -> Int {
    let locks = root.appendingPathComponent("locks")
    guard let folders = try? FileManager.default.contentsOfDirectory(atPath: locks.path) else { return 0 }
    return folders.reduce(0) { count, folder in
        count
            + ((try? FileManager.default.contentsOfDirectory(atPath: locks.appendingPathComponent(folder).path))?.count
                ?? 0)
    }
}

/// The O_APPEND ledger the workers write (same format as the runner's).
struct Ledger {
    let path: String
    func lines() -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }
}
