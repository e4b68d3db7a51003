// The on-disk format as a spec another language can implement (Docs/Format.md): entries written by YCache
// are read back by Docs/reference/yashima_read.py, a Python reader written from the spec alone, run as a
// child process; and the spec's golden vectors are checked against the Swift code.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Format spec: a second implementation reads what Swift writes")
struct FormatSpecTests {
    /// The repository root: this file is `Tests/YashimaSharedTests/Storage/FormatSpecTests.swift`.
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let reader = repositoryRoot.appendingPathComponent("Docs/reference/yashima_read.py")
    static let spec = repositoryRoot.appendingPathComponent("Docs/Format.md")

    static let goldenKey = CacheKey(namespace: "thumbnail", identity: "video-42")
        .variant("size", "320x180").variant("scale", 2).version("renderer", 3)
    static let goldenStableIdentifier = "a02bbdf6fd55ad4512872772211b170d6693e8e80faefb18344ca7a3b0bd7791"
    static let goldenEntryIdentity = "5f3a3ae57d96bbf2e16e62da269509d4f1638e6650f243676087636fb8a6a0a4"

    struct PythonMissing: Error, CustomStringConvertible {
        let path: String
        var description: String {
            "python3 is not on PATH (\(path)): FormatSpecTests runs Docs/reference/yashima_read.py with it; "
                + "install Python 3 (CI machines have it)"
        }
    }

    /// `python3` from PATH.
    static func python3() throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for folder in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent("python3")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw PythonMissing(path: path)
    }

    struct ReaderRun {
        let status: Int32?
        let output: Data
        let errors: String
    }

    /// Runs the reference reader with `arguments`.
    static func runReader(_ arguments: [String]) async throws -> ReaderRun {
        let child = try ChildProcess(
            executable: try python3(), [reader.path] + arguments, capturingStandardError: true)
        let output = await child.output(timeout: 60)
        let status = await child.exitStatus(timeout: 60)
        return ReaderRun(status: status, output: output, errors: await child.standardErrorText())
    }

    /// The reader's key and codec arguments. Components go in reverse sorted order, so the reader's own
    /// sorting is what makes them match. (Arguments cannot hold NUL, and a name cannot hold `=`.)
    static func keyArguments(_ key: CacheKey, codec: String) -> [String] {
        ["--namespace=" + key.namespace, "--identity=" + key.identity, "--codec=" + codec]
            + key.variants.reversed().map { "--variant=\($0.name)=\($0.value)" }
            + key.versions.reversed().map { "--version=\($0.name)=\($0.value)" }
    }

    static func read(_ key: CacheKey, codec: String = "data-v1", in storage: URL) async throws -> ReaderRun {
        try await runReader(["--storage=" + storage.path] + keyArguments(key, codec: codec))
    }

    /// Deterministic pseudo-random bytes.
    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var state = seed
        return Data(
            (0..<count).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 33)
            })
    }

    /// Keys and payloads that together cover the format: sizes on both sides of the 64 KiB mapping
    /// threshold, key text that must never reach a path, components in any order, duplicates.
    static let cases: [(label: String, key: CacheKey, payload: Data)] = [
        ("golden key, tiny payload", goldenKey, Data("hello".utf8)),
        ("empty payload", CacheKey(namespace: "spec", identity: "empty"), Data()),
        (
            "payload over 64 KiB", CacheKey(namespace: "spec", identity: "large").version("v", 1),
            bytes(200_000, seed: 7)
        ),
        (
            "odd key text",
            CacheKey(namespace: "../..", identity: "a/b/../../c").variant("..", "/").variant("🦀", "é=ü 🎞️")
                .version("emoji", "👩‍👩‍👧"),
            bytes(1000, seed: 8)
        ),
        ("empty namespace and identity", CacheKey(namespace: "", identity: "").variant("", ""), Data("x".utf8)),
        (
            "components inserted out of order, with a duplicate",
            CacheKey(namespace: "spec", identity: "order").variant("z", 1).variant("a", 2).variant("m", "b")
                .variant("m", "a").variant("a", 2).version("b", 1).version("a", 9),
            bytes(4096, seed: 9)
        ),
    ]

    // MARK: Identifiers

    @Test("the reader computes the golden stableIdentifier and entry identity")
    func goldenIdentifiers() async throws {
        let run = try await Self.runReader(["--identifiers"] + Self.keyArguments(Self.goldenKey, codec: "data-v1"))
        #expect(run.status == 0, "\(run.errors)")
        let lines = String(decoding: run.output, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines == [Self.goldenStableIdentifier, Self.goldenEntryIdentity])
        #expect(Self.goldenKey.stableIdentifier == Self.goldenStableIdentifier)
        #expect(EntryIdentity(key: Self.goldenKey, codecIdentifier: "data-v1").hex == Self.goldenEntryIdentity)
    }

    @Test("a lookup's expectation, which encodes the key once, names the same entry as the key itself")
    func expectationMatchesIdentity() {
        let expectation = EntryExpectation(key: Self.goldenKey, codecIdentifier: "data-v1")
        #expect(expectation.identity.hex == Self.goldenEntryIdentity)
        #expect(expectation.keyDigest.hex == Self.goldenStableIdentifier)
        // A key whose canonical form is far past any stack buffer, beside the spec's keys.
        let long = CacheKey(namespace: "spec", identity: String(repeating: "é", count: 20_000)).variant("v", 1)
        for key in Self.cases.map(\.key) + [long] {
            for codec in ["data-v1", "string-utf8-v1", ""] {
                let expectation = EntryExpectation(key: key, codecIdentifier: codec)
                #expect(expectation.identity == EntryIdentity(key: key, codecIdentifier: codec), "\(codec)")
                #expect(expectation.keyDigest == key.stableDigest)
                #expect(expectation.keyBytes == key.canonicalBytes)
            }
        }
    }

    @Test("the reader's identifiers equal Swift's for every test key and codec")
    func identifiersMatchSwift() async throws {
        for (label, key, _) in Self.cases {
            for codec in ["data-v1", "string-utf8-v1", "zlib-data-v1"] {
                let run = try await Self.runReader(["--identifiers"] + Self.keyArguments(key, codec: codec))
                let lines = String(decoding: run.output, as: UTF8.self).split(separator: "\n").map(String.init)
                let expected = [key.stableIdentifier, EntryIdentity(key: key, codecIdentifier: codec).hex]
                #expect(lines == expected, "\(label), \(codec): \(run.errors)")
            }
        }
    }

    // MARK: Reading what Swift wrote

    @Test("the reader returns exactly the bytes YCache stored, through both publish paths")
    func readsStoredPayloads() async throws {
        let directory = TemporaryDirectory("format-spec")
        let cache = YCache(storageDirectory: directory.url)
        for (index, (_, key, payload)) in Self.cases.enumerated() {
            if index.isMultiple(of: 2) {
                try await cache.store(payload, for: key, codec: DataCodec())  // a staging file in tmp/
            } else {
                _ = try await cache.value(for: key, codec: DataCodec()) { payload }  // the key's lock file
            }
        }
        for (label, key, payload) in Self.cases {
            #expect(fileExists(try cache.entryURL(key, DataCodec())), "\(label)")
            let run = try await Self.read(key, in: directory.url)
            #expect(run.status == 0, "\(label): \(run.errors)")
            #expect(run.output == payload, "\(label): \(run.output.count) bytes, expected \(payload.count)")
        }
        // The codec identifier is part of the identity: the same key with another codec is another entry.
        let other = try await Self.read(Self.goldenKey, codec: "string-utf8-v1", in: directory.url)
        #expect(other.status == 1)
        #expect(other.errors == "miss: no entry file\n")
    }

    @Test("an entry whose expiry has passed is a miss; one expiring in an hour is a hit")
    func expiry() async throws {
        let (directory, cache) = makeCache("format-spec")
        let expired = CacheKey(namespace: "spec", identity: "expired")
        let fresh = CacheKey(namespace: "spec", identity: "fresh")
        var options = YCache.Options.default
        options.expiry = .at(Date(timeIntervalSince1970: 1_000_000_000))
        try await cache.store(Data("old".utf8), for: expired, codec: DataCodec(), options: options)
        options.expiry = .after(.seconds(3600))
        try await cache.store(Data("new".utf8), for: fresh, codec: DataCodec(), options: options)

        #expect(fileExists(try cache.entryURL(expired, DataCodec())), "Swift stores an already expired entry")
        let miss = try await Self.read(expired, in: directory.url)
        #expect(miss.status == 1)
        #expect(miss.errors == "miss: expired\n")
        #expect(miss.output.isEmpty)
        let hit = try await Self.read(fresh, in: directory.url)
        #expect(hit.status == 0, "\(hit.errors)")
        #expect(hit.output == Data("new".utf8))
    }

    @Test("one flipped payload byte is a miss")
    func flippedPayloadByte() async throws {
        let directory = TemporaryDirectory("format-spec")
        let cache = YCache(storageDirectory: directory.url)
        let key = CacheKey(namespace: "spec", identity: "flipped")
        let payload = Self.bytes(100_000, seed: 10)
        try await cache.store(payload, for: key, codec: DataCodec())
        #expect(try await Self.read(key, in: directory.url).output == payload)

        let url = try cache.entryURL(key, DataCodec())
        var bytes = try Data(contentsOf: url)
        bytes[bytes.count - 5_000] ^= 0x10
        try replaceFile(at: url, with: bytes)  // a new inode, as any writer must (I1)
        let run = try await Self.read(key, in: directory.url)
        #expect(run.status == 1)
        #expect(run.errors == "miss: payload checksum mismatch\n")
        #expect(run.output.isEmpty)
    }

    @Test("every kind of damage is a miss, for the same reason the Swift reader gives", arguments: EntryDamage.allCases)
    func damage(_ damage: EntryDamage) async throws {
        let directory = TemporaryDirectory("format-spec")
        let cache = YCache(storageDirectory: directory.url)
        try cache.openStorage()  // layout, state and folders; the entry is planted below
        let key = CacheKey(namespace: "spec", identity: "damaged").variant("w", 64)
        let payload = Array(Self.bytes(300, seed: 11))
        let entry = EntryBytes.make(key: key, codec: "data-v1", payload: payload)
        let damaged = damage.apply(to: entry, key: key, codec: "data-v1", payload: payload)
        try writeFile(Data(damaged), to: try cache.entryURL(key, DataCodec()))

        let expected = damage.expected(
            entryCount: entry.count, keyCount: key.canonicalBytes.count, codecCount: "data-v1".utf8.count)
        let run = try await Self.read(key, in: directory.url)
        #expect(run.status == 1)
        #expect(run.errors == "miss: \(expected.description)\n")
        #expect(run.output.isEmpty)
    }

    // MARK: The spec's other statements

    @Test("the golden entry file in Docs/Format.md is what the Swift encoder writes")
    func goldenEntryDump() throws {
        let text = try String(contentsOf: Self.spec, encoding: .utf8)
        let begin = try #require(text.range(of: "<!-- golden-entry-begin -->"))
        let end = try #require(text.range(of: "<!-- golden-entry-end -->"))
        var dumped: [UInt8] = []
        for line in text[begin.upperBound..<end.lowerBound].split(separator: "\n") where !line.hasPrefix("```") {
            // "00000000  59 53 48 ...": an offset, then up to 16 hex bytes.
            let words = line.split(separator: " ")
            #expect(Int(words[0], radix: 16) == dumped.count, "offset of \(line)")
            dumped += words.dropFirst().map { UInt8($0, radix: 16)! }
        }
        let encoded = EntryBytes.make(
            key: Self.goldenKey, codec: "data-v1", payload: Array("hello".utf8),
            createdAt: 1_700_000_000_123_456_789, expiresAt: 1_800_000_000_000_000_000)
        #expect(dumped.count == 320)
        #expect(dumped == encoded)
    }

    @Test("layout and state files, slots, paths and modes are as the spec says")
    func directoryLayout() async throws {
        let directory = TemporaryDirectory("format-spec")
        let cache = YCache(storageDirectory: directory.url)
        try await cache.store(Data("hello".utf8), for: Self.goldenKey, codec: DataCodec())

        let layout = try Data(contentsOf: directory.url.appendingPathComponent("layout"))
        #expect(layout == Data("yashima-shared layout 1\n".utf8))
        let state = try Data(contentsOf: directory.url.appendingPathComponent("state"))
        #expect(state.count == 65_536)
        #expect(Array(state.prefix(16)) == Array("YSHSTATE".utf8) + [1, 0, 0, 0, 0, 0, 0, 0])
        #expect(Int64(littleEndian: state[16..<24].withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }) == 4096)

        let slots = SharedState.slots(namespace: "thumbnail", keyDigest: Self.goldenKey.stableDigest)
        #expect(slots == SharedState.Slots(namespace: 755, key: 2976))

        let relative = "entries/5f/\(Self.goldenEntryIdentity).entry"
        #expect(try cache.entryURL(Self.goldenKey, DataCodec()) == directory.url.appendingPathComponent(relative))
        let attributes = try FileManager.default.attributesOfItem(
            atPath: directory.url.appendingPathComponent(relative).path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let lock = try cache.storageContext().directory.lockPath(forKeyDigest: Self.goldenKey.stableDigest)
        #expect(lock.relative == "locks/a0/\(Self.goldenStableIdentifier).lock")
        // Fan-out folders are made on first use: the golden entry's is there.
        for folder in ["entries", "locks", "tmp", "entries/5f"] {
            let folderAttributes = try FileManager.default.attributesOfItem(
                atPath: directory.url.appendingPathComponent(folder).path)
            #expect(folderAttributes[.type] as? FileAttributeType == .typeDirectory, "\(folder)")
            #expect(folderAttributes[.posixPermissions] as? Int == 0o700, "\(folder)")
        }
    }
}
