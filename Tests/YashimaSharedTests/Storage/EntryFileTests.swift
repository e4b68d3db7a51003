// EntryFile on real files: publish (staging file + rename, usage accounting), read (buffered and
// mapped), header-only reads, each kind of damage rejected with its reason, touch and remove.

import CFileLock
import Foundation
import Testing

@testable import YashimaShared

@Suite("EntryFile")
struct EntryFileTests {
    /// An opened storage root in a fresh temporary directory.
    struct Fixture {
        let temporary = TemporaryDirectory("entryfile")
        let directory: Directory
        var files: EntryFile { EntryFile(directory: directory) }
        var root: URL { temporary.url }

        init() throws {
            directory = try Directory(path: temporary.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        }

        func path(_ key: CacheKey, _ codec: String = "data-v1") -> EntryPath {
            directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: codec))
        }

        func url(_ path: EntryPath) -> URL { root.appendingPathComponent(path.relative) }

        @discardableResult
        func publish(_ key: CacheKey, _ payload: Data, codec: String = "data-v1", expiresAt: Int64 = 0) throws
            -> PublishOutcome
        {
            let content = EntryContent(
                payload: payload, expectation: EntryExpectation(key: key, codecIdentifier: codec),
                codecIdentifier: codec, createdAt: Syscall.realtimeNanoseconds, expiresAt: expiresAt)
            return try files.publish(content, to: path(key, codec)).get()
        }

        func read(_ key: CacheKey, codec: String = "data-v1", now: Int64 = Syscall.realtimeNanoseconds)
            -> Result<StoredEntry, EntryReadFailure>
        {
            var opened: FileStatus?
            return files.read(
                path(key, codec), expecting: EntryExpectation(key: key, codecIdentifier: codec), now: now,
                opened: &opened)
        }

        func stagingFiles() throws -> [String] {
            try FileManager.default.contentsOfDirectory(
                atPath: root.appendingPathComponent(Directory.stagingFolder).path)
        }
    }

    /// Payloads for the damage tests: buffered and mapped (past `(128 * 1024)`), made once.
    static let damagePayloads = [200: payload(200), 140_000: payload(140_000)]

    static func payload(_ count: Int, seed: UInt8 = 1) -> Data {
        periodicBytes(count) { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    // MARK: Publish and read

    @Test("publish then read returns the payload, buffered and mapped", arguments: [0, 1, 5000, 64 * 1024, 300_000])
    func publishThenRead(size: Int) throws {
        let fixture = try Fixture()
        let key = CacheKey("k\(size)")
        let payload = Self.payload(size)
        let outcome = try fixture.publish(key, payload)
        let charged = EntryFile.chargedBytes(
            payloadByteCount: size, keyByteCount: key.canonicalBytes.count, codecByteCount: 7)
        #expect(outcome.allocatedBytes == charged)
        #expect(outcome.replacedAllocatedBytes == 0)
        #expect(fixture.directory.state.usage == charged)
        #expect(fixture.directory.state.payloadBytes == Int64(size))
        let entry = try fixture.read(key).get()
        #expect(entry.payload == payload)
        #expect(entry.payload.startIndex == 0)
        #expect(entry.header == outcome.header)
        #expect(entry.allocatedBytes == charged)
        #expect(try fixture.stagingFiles().isEmpty)
        // The file is exactly the format's size, at the directory's path for this key.
        let attributes = try FileManager.default.attributesOfItem(atPath: fixture.url(fixture.path(key)).path)
        #expect((attributes[.size] as? Int) == EntryFormat.fixedHeaderSize + key.canonicalBytes.count + 7 + size)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test("publishes replacing an entry while removals unlink it keep the counters exact (I9)")
    func replaceRacingRemoveKeepsCounters() throws {
        let fixture = try Fixture()
        let key = CacheKey("contended")
        let relative = fixture.path(key).relative
        let payloads = [Self.payload(3_000, seed: 1), Self.payload(70_000, seed: 2)]
        // Two publishers of different sizes and a remover on one key: a publish that looked at the entry
        // before a removal unlinked it, then renamed over the empty name, subtracted it a second time.
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            for _ in 0..<1_500 {
                if worker < 2 {
                    _ = try? fixture.publish(key, payloads[worker])
                } else {
                    _ = fixture.files.remove(relative, payload: .readHeader)
                }
            }
        }
        let left = try? fixture.read(key).get()
        #expect(fixture.directory.state.payloadBytes == Int64(left?.payload.count ?? 0))
        #expect(fixture.directory.state.usage == (left?.allocatedBytes ?? 0))
        #expect(try fixture.stagingFiles().isEmpty)
    }

    @Test("a missing entry is a plain miss")
    func missing() throws {
        let fixture = try Fixture()
        guard case .failure(.missing) = fixture.read(CacheKey("absent")) else {
            Issue.record("expected .missing")
            return
        }
    }

    @Test("a replaced entry leaves an earlier mapped payload intact, and usage counts the difference")
    func replaceKeepsMappings() throws {
        let fixture = try Fixture()
        let key = CacheKey("replace")
        let old = Self.payload(200_000, seed: 1)
        try fixture.publish(key, old)
        var mapped = try fixture.read(key).get().payload
        let new = Self.payload(5_000, seed: 2)
        let outcome = try fixture.publish(key, new)
        #expect(outcome.replacedAllocatedBytes > 0)
        #expect(outcome.replacedPayloadBytes == 200_000)
        #expect(fixture.directory.state.usage == outcome.allocatedBytes)
        #expect(fixture.directory.state.payloadBytes == 5_000)
        #expect(mapped == old)  // I1/I4: the old inode's pages stay valid
        mapped[0] ^= 0xFF  // private mapping: writable, never written through
        #expect(try fixture.read(key).get().payload == new)
    }

    @Test("mutating a large payload read from storage never changes the file")
    func mappedPayloadIsPrivate() throws {
        let fixture = try Fixture()
        let key = CacheKey("private")
        let payload = Self.payload(128 * 1024 + 70_000)
        try fixture.publish(key, payload)
        var mapped = try fixture.read(key).get().payload
        for index in stride(from: 0, to: mapped.count, by: 4096) { mapped[index] ^= 0xFF }
        #expect(mapped != payload)
        #expect(try fixture.read(key).get().payload == payload)
    }

    @Test("a publish that cannot rename (a folder at the entry path) fails and leaves no staging file")
    func publishIntoFileFails() throws {
        let fixture = try Fixture()
        let key = CacheKey("blocked")
        let path = fixture.path(key)
        let entry = fixture.root.appendingPathComponent(path.relative)
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: true)
        try writeFile(Data("in the way".utf8), to: entry.appendingPathComponent("blocker"))
        let result = fixture.files.publish(
            EntryContent(
                payload: Data("v".utf8), expectation: EntryExpectation(key: key, codecIdentifier: "data-v1"),
                codecIdentifier: "data-v1", createdAt: 1, expiresAt: 0),
            to: path)
        guard case .failure(let error) = result else {
            Issue.record("publish into a file succeeded")
            return
        }
        #expect(error.errno == .isDirectory || error.errno == .directoryNotEmpty)
        #expect(try fixture.stagingFiles().isEmpty)
        #expect(fixture.directory.state.usage == 0)
    }

    @Test("a removal meeting a folder planted at the entry path fails and leaves the folder where it was")
    func removeLeavesPlantedFolder() throws {
        let fixture = try Fixture()
        let path = fixture.path(CacheKey("planted"))
        let entry = fixture.root.appendingPathComponent(path.relative)
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: true)
        try writeFile(Data("someone's".utf8), to: entry.appendingPathComponent("file"))
        guard case .failure(let error) = fixture.files.remove(path.relative, payload: .readHeader) else {
            Issue.record("removing a folder succeeded")
            return
        }
        #expect(error.errno == .isDirectory)
        #expect(fileExists(entry.appendingPathComponent("file")))
        #expect(try fixture.stagingFiles().isEmpty)
    }

    @Test("a missing fan-out folder is created on publish")
    func fanOutCreated() throws {
        let fixture = try Fixture()
        let key = CacheKey("fan")
        try fixture.publish(key, Data("1".utf8))
        try FileManager.default.removeItem(at: fixture.root.appendingPathComponent(Directory.entriesFolder))
        try fixture.publish(key, Data("2".utf8))
        #expect(try fixture.read(key).get().payload == Data("2".utf8))
    }

    // MARK: Rejections on real files

    @Test(
        "each damaged file is a miss with its reason (read and header-only read)",
        arguments: EntryDamage.allCases, [200, 140_000])
    func damagedFile(_ damage: EntryDamage, payloadSize: Int) throws {
        let fixture = try Fixture()
        let key = CacheKey("damaged", namespace: "files").variant("size", payloadSize)
        let payload = Self.damagePayloads[payloadSize]!
        try fixture.publish(key, payload)
        let url = fixture.url(fixture.path(key))
        let entry = Array(try Data(contentsOf: url))
        try replaceFile(
            at: url, with: Data(damage.apply(to: entry, key: key, codec: "data-v1", payload: Array(payload))))
        let expected = damage.expected(entryCount: entry.count, keyCount: key.canonicalBytes.count, codecCount: 7)
        switch fixture.read(key) {
        case .failure(.corrupt(let corruption, _)): #expect(corruption == expected)
        case .success: Issue.record("\(damage) was read as valid")
        case .failure(let other): Issue.record("\(damage): \(other)")
        }
        // A header-only read (metadata, listing) sees every header damage; identity and payload are
        // checked only by full reads.
        switch fixture.files.readHeader(fixture.path(key).relative) {
        case .success:
            #expect([.identityMismatch, .payloadChecksumMismatch].contains(expected), "\(damage)")
        case .failure(.corrupt(let corruption, _)): #expect(corruption == expected)
        case .failure(let other): Issue.record("\(damage): \(other)")
        }
    }

    @Test("a folder or a symlink at an entry path is a miss, never followed")
    func notARegularFile() throws {
        let fixture = try Fixture()
        let folderKey = CacheKey("folder")
        try fixture.publish(CacheKey("seed"), Data("x".utf8))  // creates some fan-out folders
        let folderPath = fixture.path(folderKey)
        try FileManager.default.createDirectory(
            at: fixture.url(folderPath), withIntermediateDirectories: true)
        guard case .failure(.corrupt) = fixture.read(folderKey) else {
            Issue.record("a folder was read as an entry")
            return
        }
        let linkKey = CacheKey("link")
        let target = fixture.url(fixture.path(CacheKey("seed")))
        let linkURL = fixture.url(fixture.path(linkKey))
        try FileManager.default.createDirectory(
            at: linkURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: linkURL, withDestinationURL: target)
        guard case .failure(.corrupt) = fixture.read(linkKey) else {
            Issue.record("a symlink was followed")
            return
        }
    }

    @Test("an expired entry is reported as expired from its expiry instant on")
    func expired() throws {
        let fixture = try Fixture()
        let key = CacheKey("expiring")
        let now = Syscall.realtimeNanoseconds
        let expiresAt = now + 60_000_000_000
        try fixture.publish(key, Data("v".utf8), expiresAt: expiresAt)
        #expect(throws: Never.self) { try fixture.read(key, now: expiresAt - 1).get() }
        guard case .failure(.expired) = fixture.read(key, now: expiresAt) else {
            Issue.record("expected .expired")
            return
        }
    }

    // MARK: Touch and remove

    @Test("the touch rule: after a later publish, or a minute old, or a minute ahead; otherwise no write")
    func touchRule() {
        let minute = Policy.touchInterval.nanoseconds
        #expect(!EntryFile.shouldTouch(lastUse: 100, now: 100, lastPublish: 100))
        #expect(!EntryFile.shouldTouch(lastUse: 100, now: 100 + minute - 1, lastPublish: 50))
        #expect(EntryFile.shouldTouch(lastUse: 100, now: 101, lastPublish: 101))
        #expect(EntryFile.shouldTouch(lastUse: 100, now: 100 + minute, lastPublish: 0))
        #expect(EntryFile.shouldTouch(lastUse: 100 + minute, now: 100, lastPublish: 0))
    }

    @Test("publish stamps mtime and the last publish; a later publish makes a hit touch past it, else no write")
    func touch() throws {
        let fixture = try Fixture()
        let state = fixture.directory.state
        let first = CacheKey("touch-first")
        let published = try fixture.publish(first, Data("v".utf8)).modifiedNanoseconds
        let firstPath = fixture.path(first)
        #expect(
            try Syscall.status(of: firstPath.relative, in: fixture.directory.descriptor).get().modifiedNanoseconds
                == published)
        #expect(state.lastPublishNanoseconds == published)
        let now = Syscall.realtimeNanoseconds
        #expect(fixture.files.touchIfStale(firstPath, lastUse: published, now: now) == nil)
        #expect(
            try Syscall.status(of: firstPath.relative, in: fixture.directory.descriptor).get().modifiedNanoseconds
                == published)

        let second = try fixture.publish(CacheKey("touch-second"), Data("w".utf8)).modifiedNanoseconds
        #expect(second > published && state.lastPublishNanoseconds == second)
        let touched = try #require(
            fixture.files.touchIfStale(firstPath, lastUse: published, now: Syscall.realtimeNanoseconds))
        #expect(touched > second)
        #expect(
            try Syscall.status(of: firstPath.relative, in: fixture.directory.descriptor).get().modifiedNanoseconds
                == touched)
        #expect(fixture.files.touchIfStale(firstPath, lastUse: touched, now: Syscall.realtimeNanoseconds) == nil)

        // A last publish far ahead (a clock that jumped back) is ignored, and the next publish lowers it.
        state.notePublish(atNanoseconds: Syscall.realtimeNanoseconds + 3600 * 1_000_000_000)
        #expect(fixture.files.touchIfStale(firstPath, lastUse: touched, now: Syscall.realtimeNanoseconds) == nil)
        let afterJump = try fixture.publish(CacheKey("touch-third"), Data("x".utf8)).modifiedNanoseconds
        #expect(state.lastPublishNanoseconds == afterJump)
    }

    @Test("verified inodes: a ctime moved by a cache touch is still the verified version; a write's is not")
    func verifiedInodesAndTouches() {
        let inodes = VerifiedInodes()
        let version = EntryVersion(createdAtNanoseconds: 7, payloadByteCount: 99_000, payloadChecksum: 42)
        var status = FileStatus(ysh_stat())
        status.device = 1
        status.inode = 2
        status.size = 100_000
        status.modifiedNanoseconds = 9_000_000_000
        status.changedNanoseconds = 10_000_000_000
        inodes.insert(
            status, version: version, now: status.changedNanoseconds + Policy.verifiedCtimeMinimumAge.nanoseconds)
        #expect(inodes.contains(status, version: version))
        var touched = status
        touched.modifiedNanoseconds = EntryFile.marked(20_000_000_001)
        touched.changedNanoseconds = 20_000_000_004
        #expect(inodes.contains(touched, version: version))
        // A write after the touch, even within one clock tick, sets mtime and ctime to one kernel time.
        var written = touched
        written.modifiedNanoseconds = 20_000_000_004
        #expect(!inodes.contains(written, version: version))
        var resized = touched
        resized.size += 1
        #expect(!inodes.contains(resized, version: version))
        var unmarked = touched
        unmarked.modifiedNanoseconds = 20_000_000_001
        #expect(!inodes.contains(unmarked, version: version))
        // Another publish on the same inode, size and ctime (an inode number reused, a coarse clock).
        let reused = EntryVersion(createdAtNanoseconds: 8, payloadByteCount: 99_000, payloadChecksum: 42)
        #expect(!inodes.contains(status, version: reused))
        var earlier = touched
        earlier.changedNanoseconds = 5_000_000_000
        #expect(!inodes.contains(earlier, version: version))
        #expect(EntryFile.marked(777) == 777 && EntryFile.marked(778) == 1777 && EntryFile.marked(1000) == 1777)
        #expect(EntryFile.isTouchMark(EntryFile.marked(123_456_789)) && !EntryFile.isTouchMark(123_456_789))
    }

    @Test("remove unlinks and gives both counts back, however it learns the payload; a missing entry is fine")
    func remove() throws {
        let fixture = try Fixture()
        let keys = (0..<2).map { CacheKey("gone-\($0)") }
        for key in keys { try fixture.publish(key, Self.payload(10_000)) }
        #expect(fixture.directory.state.usage > 0)
        #expect(fixture.directory.state.payloadBytes == 20_000)
        let headerSize = EntryExpectation(key: keys[0], codecIdentifier: "data-v1").headerSize
        let charges: [PayloadCharge] = [.readHeader, .headerSize(headerSize)]
        for (key, charge) in zip(keys, charges) {
            let removed = try fixture.files.remove(fixture.path(key).relative, payload: charge).get()
            #expect(removed?.payloadBytes == 10_000 && removed?.allocatedBytes ?? 0 > 0)
            #expect(!fileExists(fixture.url(fixture.path(key))))
        }
        #expect(fixture.directory.state.usage == 0)
        #expect(fixture.directory.state.payloadBytes == 0)
        #expect(try fixture.files.remove(fixture.path(keys[0]).relative, payload: .readHeader).get() == nil)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: fixture.root.appendingPathComponent("tmp").path).isEmpty
        )
    }

    @Test("a file that is not a sound entry is charged its whole size")
    func chargedPayloadOfDebris() throws {
        let fixture = try Fixture()
        let key = CacheKey("debris")
        try fixture.publish(key, Self.payload(100))
        let url = fixture.url(fixture.path(key))
        let status = try Syscall.status(of: fixture.path(key).relative, in: fixture.directory.descriptor).get()
        #expect(fixture.files.chargedPayloadBytes(fixture.path(key).relative, status: status) == 100)
        try Data(repeating: 0x41, count: 300).write(to: url)
        let garbage = try Syscall.status(of: fixture.path(key).relative, in: fixture.directory.descriptor).get()
        #expect(fixture.files.chargedPayloadBytes(fixture.path(key).relative, status: garbage) == 300)
        #expect(EntryFile.payloadBytes(fileSize: 300, headerSize: 200) == 100)
        #expect(EntryFile.payloadBytes(fileSize: 100, headerSize: 200) == 100)
    }

    @Test("the charge is the file size rounded up to 4 KiB")
    func chargedBytes() {
        let fixed = EntryFormat.fixedHeaderSize
        #expect(EntryFile.chargedBytes(payloadByteCount: 0, keyByteCount: 0, codecByteCount: 0) == 4096)
        #expect(
            EntryFile.chargedBytes(payloadByteCount: 4096 - fixed - 20, keyByteCount: 10, codecByteCount: 10) == 4096)
        #expect(
            EntryFile.chargedBytes(payloadByteCount: 4097 - fixed - 20, keyByteCount: 10, codecByteCount: 10) == 8192)
        #expect(
            EntryFile.chargedBytes(payloadByteCount: 1 << 20, keyByteCount: 0, codecByteCount: 0) == (1 << 20) + 4096)
    }
}
