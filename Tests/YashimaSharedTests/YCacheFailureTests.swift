// Failures a caller sees through YCache: write failures under both policies, encoding failures, and
// storage directories that cannot be used (a file in the way, a file as a parent, a newer layout).
// Tests run as root, so paths are made unusable by putting a regular file where a folder must be.

import Foundation
import Testing

@testable import YashimaShared

@Suite("YCache failures")
struct YCacheFailureTests {
    static let codec = StringCodec()
    static let bestEffort = YCache.Options(writeFailurePolicy: .bestEffort)

    /// A cache whose publishes of `key` fail: a non-empty folder sits at the key's entry path, so the
    /// publishing rename fails (EISDIR). (A file at the fan-out folder no longer works: the cache
    /// repairs its own folders, I13.)
    static func cacheWithBlockedKey(_ label: String, _ name: String) throws -> (TemporaryDirectory, CacheKey, YCache) {
        let (dir, key) = (TemporaryDirectory(label), CacheKey(name))
        let cache = YCache(storageDirectory: dir.url)
        try cache.openStorage()
        let entry = try cache.entryURL(key, codec)
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: true)
        try writeFile(Data("in the way".utf8), to: entry.appendingPathComponent("blocker"))
        return (dir, key, cache)
    }

    static func isPublishFailure(_ error: any Error) -> Bool {
        if case YCache.Error.ioFailure(let operation, _) = error { return operation == "publishing an entry" }
        return false
    }

    // MARK: Write failures

    @Test("writeFailurePolicy .throwError: a failed publish throws and neither layer is written")
    func writeFailureThrows() async throws {
        let (dir, key, cache) = try Self.cacheWithBlockedKey("fail-write", "blocked")
        let calls = Counter()
        await #expect(
            performing: {
                try await cache.value(for: key, codec: Self.codec) {
                    calls.increment()
                    return "lost"
                }
            }, throws: Self.isPublishFailure)
        #expect(calls.value == 1)
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
        #expect(try await stored(in: dir, key, Self.codec) == nil)
        #expect(cache.statistics.writeFailures == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.appendingPathComponent("tmp").path).isEmpty)
        // Nothing was kept: the next call generates again (and fails again).
        await #expect(
            performing: { try await cache.value(for: key, codec: Self.codec) { "again" } },
            throws: Self.isPublishFailure)
        // An explicit store fails the same way.
        await #expect(
            performing: { try await cache.store("stored", for: key, codec: Self.codec) }, throws: Self.isPublishFailure)
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
    }

    @Test("writeFailurePolicy .throwError also drops an older value from memory")
    func writeFailureDropsOlderMemory() async throws {
        let (dir, key, cache) = try Self.cacheWithBlockedKey("fail-write-refresh", "blocked-refresh")
        defer { withExtendedLifetime(dir) {} }  // the folder stays until the test ends
        try await cache.putInMemory("old", for: key, codec: Self.codec)
        await #expect(
            performing: { try await cache.refresh(for: key, codec: Self.codec) { "new" } },
            throws: Self.isPublishFailure)
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
    }

    @Test("writeFailurePolicy .bestEffort: the value is returned and kept in memory only")
    func writeFailureBestEffort() async throws {
        let (dir, key, cache) = try Self.cacheWithBlockedKey("fail-best", "blocked")
        #expect(try await cache.value(for: key, codec: Self.codec, options: Self.bestEffort) { "kept" } == "kept")
        #expect(try await cache.peek(for: key, codec: Self.codec) == "kept")
        #expect(try await cache.resolve(for: key, codec: Self.codec) { "other" }.source == .memory)
        #expect(try await stored(in: dir, key, Self.codec) == nil)
        #expect(cache.statistics.writeFailures == 1)
        try await cache.store("stored", for: key, codec: Self.codec, options: Self.bestEffort)
        #expect(try await cache.peek(for: key, codec: Self.codec) == "stored")
    }

    @Test("an encode that throws gives the codec's own error under every policy; nothing is stored anywhere")
    func encodingFailure() async throws {
        let (dir, cache) = makeCache("fail-encode")
        let codec = UnencodableCodec()
        let key = CacheKey("unencodable")
        await #expect(throws: CodecFailure()) { try await cache.value(for: key, codec: codec) { "v" } }
        await #expect(throws: CodecFailure()) { try await cache.store("v", for: key, codec: codec) }
        await #expect(throws: CodecFailure()) {
            try await cache.value(for: key, codec: codec, options: Self.bestEffort) { "memory" }
        }
        await #expect(throws: CodecFailure()) {
            try await cache.store("v", for: key, codec: codec, options: .init(writePolicy: .memoryOnly))
        }
        await #expect(throws: CodecFailure()) { try await cache.putInMemory("v", for: key, codec: codec) }
        #expect(try await cache.peek(for: key, codec: codec) == nil)
        #expect(entryFiles(in: dir.url).isEmpty)
        #expect(cache.statistics.writeFailures == 0)  // no storage write was attempted
        // Writing nothing at all needs no encoding.
        #expect(try await cache.value(for: key, codec: codec, options: .init(writePolicy: .disabled)) { "v" } == "v")
    }

    // MARK: Unusable storage directories

    @Test("a storage path that is a regular file: storageUnavailable, or memory only under best effort")
    func storagePathIsFile() async throws {
        let dir = TemporaryDirectory("fail-file")
        try writeFile(Data("a file".utf8), to: dir.url)
        let cache = YCache(storageDirectory: dir.url)
        let key = CacheKey("k")
        await #expect(
            performing: { try await cache.value(for: key, codec: Self.codec) { "v" } }, throws: Self.isUnavailable)
        #expect(throws: YCache.Error.self) { try cache.openStorage() }
        #expect(Self.isUnavailable(try Self.error { try cache.openStorage() }))
        // Reads are misses unless asked to throw.
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
        await #expect(
            performing: {
                try await cache.valueIfCached(
                    for: key, codec: Self.codec, options: .init(readFailurePolicy: .throwError))
            }, throws: Self.isUnavailable)
        await #expect(performing: { _ = try await cache.storageUsage() }, throws: Self.isUnavailable)
        await #expect(performing: { _ = try await cache.entries() }, throws: Self.isUnavailable)
        // Best effort: the value is still returned, and served from memory afterwards.
        #expect(try await cache.value(for: key, codec: Self.codec, options: Self.bestEffort) { "v" } == "v")
        #expect(try await cache.resolve(for: key, codec: Self.codec) { "other" }.source == .memory)
        #expect(try await cache.metadata(for: key, codec: Self.codec)?.codecIdentifier == Self.codec.identifier)
        // A removal reports the unusable directory (its entry would come back later) but drops memory.
        await #expect(performing: { try await cache.remove(for: key, codec: Self.codec) }, throws: Self.isUnavailable)
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
        // So does emptying a namespace, and emptying everything.
        let other = CacheKey("other", namespace: "emptied")
        #expect(try await cache.value(for: other, codec: Self.codec, options: Self.bestEffort) { "o" } == "o")
        await #expect(performing: { try await cache.removeAll(in: "emptied") }, throws: Self.isUnavailable)
        #expect(try await cache.peek(for: other, codec: Self.codec) == nil)
        await #expect(performing: { try await cache.removeAll() }, throws: Self.isUnavailable)
        #expect(try Data(contentsOf: dir.url) == Data("a file".utf8))  // never touched
    }

    @Test("a parent component that is a file, or a storage folder that is a file: storageUnavailable")
    func parentIsFile() async throws {
        let dir = TemporaryDirectory("fail-parent")
        try writeFile(Data("a file".utf8), to: dir.url)
        let nested = YCache(storageDirectory: dir.url.appendingPathComponent("cache/inner"))
        #expect(Self.isUnavailable(try Self.error { try nested.openStorage() }))
        await #expect(performing: { try await nested.data(for: CacheKey("k")) { Data() } }, throws: Self.isUnavailable)

        for folder in [Directory.entriesFolder, Directory.stagingFolder, Directory.locksFolder] {
            let root = TemporaryDirectory("fail-folder")
            try FileManager.default.createDirectory(at: root.url, withIntermediateDirectories: true)
            try writeFile(Data(), to: root.url.appendingPathComponent(folder))
            #expect(
                Self.isUnavailable(try Self.error { try YCache(storageDirectory: root.url).openStorage() }), "\(folder)"
            )
        }
    }

    @Test("openStorage on a good path creates the directory and its layout file")
    func openStorageCreates() throws {
        let dir = TemporaryDirectory("open")
        let root = dir.url.appendingPathComponent("a/b/c")
        let cache = YCache(storageDirectory: root)
        try cache.openStorage()
        try cache.openStorage()
        #expect(
            try String(contentsOf: root.appendingPathComponent("layout"), encoding: .utf8)
                == "yashima-shared layout 1\n")
        for folder in [Directory.entriesFolder, Directory.stagingFolder, Directory.locksFolder] {
            var isDirectory: ObjCBool = false
            #expect(
                FileManager.default.fileExists(
                    atPath: root.appendingPathComponent(folder).path, isDirectory: &isDirectory))
            #expect(isDirectory.boolValue)
        }
        let mode = try FileManager.default.attributesOfItem(atPath: root.path)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        try YCache(storageDirectory: root).openStorage()  // a second instance accepts what the first wrote
    }

    @Test(
        "a layout file of another version is refused with unsupportedLayout; an unreadable one is unavailable",
        arguments: ["yashima-shared layout 99\n", "yashima-shared layout 0\n", "something else\n"])
    func layoutVersions(_ text: String) async throws {
        let dir = TemporaryDirectory("layout")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        try writeFile(Data(text.utf8), to: dir.url.appendingPathComponent("layout"))
        let cache = YCache(storageDirectory: dir.url)
        let error = try Self.error { try cache.openStorage() }
        let supported = CrossProcessProtocol.layoutVersion
        switch text {
        case "yashima-shared layout 99\n":
            #expect(error == .unsupportedLayout(path: dir.url.path, found: 99, supported: supported))
        case "yashima-shared layout 0\n":
            #expect(error == .unsupportedLayout(path: dir.url.path, found: 0, supported: supported))
        default:
            #expect(Self.isUnavailable(error))
        }
        await #expect(throws: error) { try await cache.value(for: CacheKey("k"), codec: Self.codec) { "v" } }
        #expect(try String(contentsOf: dir.url.appendingPathComponent("layout"), encoding: .utf8) == text)
    }

    // MARK: Helpers

    static func isUnavailable(_ error: any Error) -> Bool {
        if case YCache.Error.storageUnavailable = error { return true }
        return false
    }

    /// The YCache.Error `body` throws (the test fails with another error, or none).
    static func error(_ body: () throws -> Void) throws -> YCache.Error {
        do {
            try body()
        } catch let error as YCache.Error {
            return error
        }
        throw CodecFailure()  // it did not throw
    }
}
