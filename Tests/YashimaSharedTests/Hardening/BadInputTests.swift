// One test per row of Docs/BadInput.md, named after the row: each bad input gets exactly what the table
// says (a working entry, a miss, a typed error, or the value without storing it). The symlink and hard
// link rows are covered by PlantedLinkTests.swift, named there after the same rows.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: bad input table")
    struct BadInput {
        let dir = TemporaryDirectory("bad-input")

        /// Generates, then checks a fresh instance reads the same value back from storage.
        func roundTrip(_ key: CacheKey, _ value: Data) async throws {
            let generated = try await YCache(storageDirectory: dir.url).resolve(for: key, codec: DataCodec()) { value }
            #expect(generated.source == .generated)
            let stored = try await YCache(storageDirectory: dir.url).resolve(for: key, codec: DataCodec()) { Data() }
            #expect(stored.source == .storage)
            #expect(stored.value == value)
        }

        /// No name under the root but the cache's own (hex digests and fixed words).
        func expectOnlyHashedNames() {
            for name in Hardening.allNames(under: dir.path) {
                let last = name.split(separator: "/").last.map(String.init) ?? name
                #expect(last.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == ".") }, "\(name)")
            }
        }

        // MARK: Keys

        @Test("empty key parts: a valid key, distinct from any other")
        func emptyKeyParts() async throws {
            let empty = CacheKey(namespace: "", identity: "")
            let emptyVariant = empty.variant("", "")
            try await roundTrip(empty, Data("empty".utf8))
            try await roundTrip(emptyVariant, Data("empty variant".utf8))
            #expect(empty.stableIdentifier != emptyVariant.stableIdentifier)
            #expect(try await YCache(storageDirectory: dir.url).data(for: empty) { Data() } == Data("empty".utf8))
        }

        @Test("huge key parts (1 MiB): stored in the entry header, never in a path")
        func hugeKeyParts() async throws {
            let huge = CacheKey(namespace: "n", identity: String(repeating: "h", count: 1 << 20))
            try await roundTrip(huge, Data("huge".utf8))
            expectOnlyHashedNames()
            let listed = try await YCache(storageDirectory: dir.url).entries(in: "n")
            #expect(listed.map(\.key) == [huge])
        }

        @Test(
            "a key over 64 MiB: returned, never stored (no reader would accept it)",
            .enabled(
                if: ProcessInfo.processInfo.environment["YASHIMA_SLOW_TESTS"] != nil,
                "hashing 64 MiB several times takes ~20 s in a debug build (minutes under sanitizers); set YASHIMA_SLOW_TESTS=1"
            ))
        func keyOverTheHeaderLimit() async throws {
            let key = CacheKey(namespace: "n", identity: String(repeating: "x", count: EntryFormat.maximumKeyByteCount))
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: nil)
            #expect(try await cache.data(for: key) { Data("v".utf8) } == Data("v".utf8))
            #expect(Hardening.entryBytes(dir.path) == 0)
            #expect(cache.statistics.corruptEntries == 0)
        }

        @Test("a codec identifier over 4 KiB: returned and kept in memory, never stored (no reader would accept it)")
        func codecIdentifierOverTheHeaderLimit() async throws {
            struct LongNamedCodec: CacheCodec {
                let identifier = String(repeating: "c", count: EntryFormat.maximumCodecByteCount + 1)
                func encode(_ value: Data) throws -> Data { value }
                func decode(_ data: Data) throws -> Data { data }
            }
            let cache = YCache(storageDirectory: dir.url)
            let key = CacheKey("long-codec")
            #expect(try await cache.value(for: key, codec: LongNamedCodec()) { Data("v".utf8) } == Data("v".utf8))
            #expect(try await cache.peek(for: key, codec: LongNamedCodec()) == Data("v".utf8))
            #expect(Hardening.entryBytes(dir.path) == 0)
            let other = YCache(storageDirectory: dir.url)
            #expect(try await other.valueIfCached(for: key, codec: LongNamedCodec()) == nil)
            #expect(other.statistics.corruptEntries == 0 && cache.statistics.corruptEntries == 0)
        }

        @Test("NUL bytes in key parts: distinct keys, no effect on paths")
        func nulInKeyParts() async throws {
            let withNul = CacheKey(namespace: "a\u{0}b", identity: "c\u{0}")
            let without = CacheKey(namespace: "ab", identity: "c")
            try await roundTrip(withNul, Data("nul".utf8))
            try await roundTrip(without, Data("plain".utf8))
            #expect(withNul.stableIdentifier != without.stableIdentifier)
            expectOnlyHashedNames()
        }

        @Test("'..' and '/' in key parts: no effect on paths, nothing outside the root")
        func dotDotInKeyParts() async throws {
            // The root sits two levels below a folder of its own, so anything escaping it would show.
            let root = dir.url.appendingPathComponent("a/root")
            let key = CacheKey(namespace: "../../..", identity: "../../etc/passwd").variant("/", "..")
            let cache = YCache(storageDirectory: root)
            #expect(try await cache.data(for: key) { Data("dots".utf8) } == Data("dots".utf8))
            #expect(try await YCache(storageDirectory: root).data(for: key) { Data() } == Data("dots".utf8))
            let names = Hardening.allNames(under: dir.path)
            #expect(names.allSatisfy { $0 == "a" || $0.hasPrefix("a/root") }, "\(names)")
            expectOnlyHashedNames()
        }

        // MARK: The directory

        @Test("unknown layout version: unsupportedLayout naming both versions")
        func unknownLayoutVersion() throws {
            try YCache(storageDirectory: dir.url).openStorage()
            try "yashima-shared layout 2\n".write(toFile: dir.path + "/layout", atomically: false, encoding: .utf8)
            let error = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
            #expect(error == .unsupportedLayout(path: dir.url.standardizedFileURL.path, found: 2, supported: 1))
            try "not a layout".write(toFile: dir.path + "/layout", atomically: false, encoding: .utf8)
            let garbled = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
            #expect(garbled?.description.contains("unreadable layout file") == true)

            // A directory holding only a newer layout file: refused before anything is created in it.
            let newer = TemporaryDirectory("newer-layout")
            try FileManager.default.createDirectory(at: newer.url, withIntermediateDirectories: false)
            chmod(newer.path, 0o700)
            try "yashima-shared layout 2\n".write(toFile: newer.path + "/layout", atomically: false, encoding: .utf8)
            #expect(throws: YCache.Error.self) { try YCache(storageDirectory: newer.url).openStorage() }
            #expect(try FileManager.default.contentsOfDirectory(atPath: newer.path) == ["layout"])
        }

        @Test("foreign files in the directory: ignored by lookups, listing and trim; kept unless they pose as entries")
        func foreignFiles() async throws {
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 8192)
            _ = try await cache.data(for: CacheKey("real")) { Data("real".utf8) }
            let foreign = [
                "README", "entries/README", "entries/ab/notes.txt", "locks/ab/notes.txt", "tmp/young-foreign",
            ]
            Hardening.makePrivateFolder(dir.path + "/entries/ab")
            Hardening.makePrivateFolder(dir.path + "/entries/not-a-fan-out")
            Hardening.makePrivateFolder(dir.path + "/locks/ab")
            for name in foreign {
                _ = FileManager.default.createFile(atPath: dir.path + "/" + name, contents: Data("x".utf8))
            }
            let posing = dir.path + "/entries/ab/" + String(repeating: "ab", count: 32) + ".entry"
            _ = FileManager.default.createFile(atPath: posing, contents: Data("garbage".utf8))

            #expect(try await cache.data(for: CacheKey("real")) { Data() } == Data("real".utf8))
            let listed = try await YCache(storageDirectory: dir.url).entries()
            #expect(listed.map(\.key) == [CacheKey("real")])
            for index in 0..<4 {
                _ = try await cache.data(for: CacheKey("more-\(index)")) { Data(count: 3000) }
            }
            try await cache.trimStorageIfNeeded()
            try await cache.removeAll()
            for name in foreign {
                #expect(FileManager.default.fileExists(atPath: dir.path + "/" + name), "\(name) was kept")
            }
            #expect(Hardening.isDirectory(dir.path + "/entries/not-a-fan-out"))
            #expect(!FileManager.default.fileExists(atPath: posing), "a garbage .entry file in a fan-out is removed")
        }

        @Test(
            "a file where a folder should be: the root or a top-level folder is an error naming it; a fan-out is replaced"
        )
        func fileWhereAFolderShouldBe() async throws {
            // The root itself.
            _ = FileManager.default.createFile(atPath: dir.path, contents: Data("file".utf8))
            let rootError = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
            #expect(rootError?.description.contains("not a directory") == true)
            try FileManager.default.removeItem(atPath: dir.path)
            // A top-level folder.
            Hardening.makePrivateFolder(dir.path)
            _ = FileManager.default.createFile(atPath: dir.path + "/entries", contents: Data("file".utf8))
            let folderError = #expect(throws: YCache.Error.self) { try YCache(storageDirectory: dir.url).openStorage() }
            guard case .storageUnavailable(_, let reason) = folderError else {
                Issue.record("expected storageUnavailable, got \(String(describing: folderError))")
                return
            }
            #expect(reason.contains("entries exists and is not a directory"))
            // A fan-out folder: replaced by the next publish.
            try FileManager.default.removeItem(atPath: dir.path + "/entries")
            try YCache(storageDirectory: dir.url).openStorage()
            let key = CacheKey("fan-out")
            let files = KeyFiles(root: dir.path, key: key)
            _ = FileManager.default.createFile(atPath: files.entryFanOut, contents: Data("file".utf8))
            try await roundTrip(key, Data("v".utf8))
            #expect(Hardening.isDirectory(files.entryFanOut))
        }

        // MARK: Values and budgets

        @Test("a payload over the storage budget: returned and kept in memory, never stored, no error")
        func payloadOverQuota() async throws {
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 4096)
            let big = Data(count: 10_000)
            let first = try await cache.resolve(for: CacheKey("big"), codec: DataCodec()) { big }
            #expect(first.value == big)
            #expect(Hardening.entryBytes(dir.path) == 0)
            #expect(try await cache.resolve(for: CacheKey("big"), codec: DataCodec()) { Data() }.source == .memory)
            #expect(cache.statistics.writeFailures == 0)
        }

        struct ThrowingCodec: CacheCodec {
            struct Failure: Error, Equatable {}
            let failEncode: Bool
            let failDecode: Bool
            var identifier: String { "throwing-v1" }
            func encode(_ value: Data) throws -> Data {
                if failEncode { throw Failure() }
                return value
            }
            func decode(_ data: Data) throws -> Data {
                if failDecode { throw Failure() }
                return Data(data)
            }
        }

        @Test("a codec that throws on encode: its own error under every write-failure policy, nothing stored")
        func codecThrowsOnEncode() async throws {
            let cache = YCache(storageDirectory: dir.url)
            let codec = ThrowingCodec(failEncode: true, failDecode: false)
            await #expect(throws: ThrowingCodec.Failure()) {
                try await cache.value(for: CacheKey("e"), codec: codec) { Data("v".utf8) }
            }
            await #expect(throws: ThrowingCodec.Failure()) {
                try await cache.value(
                    for: CacheKey("e"), codec: codec, options: .init(writeFailurePolicy: .bestEffort)
                ) { Data("v".utf8) }
            }
            #expect(try await cache.peek(for: CacheKey("e"), codec: codec) == nil)
            #expect(Hardening.entryBytes(dir.path) == 0)
        }

        @Test("a codec that throws on decode: a miss (entry removed, regenerated), its own error under .throwError")
        func codecThrowsOnDecode() async throws {
            let key = CacheKey("d")
            _ = try await YCache(storageDirectory: dir.url).value(
                for: key, codec: ThrowingCodec(failEncode: false, failDecode: false)
            ) { Data("v".utf8) }
            let failing = ThrowingCodec(failEncode: false, failDecode: true)
            let strict = YCache(storageDirectory: dir.url)
            await #expect(throws: ThrowingCodec.Failure()) {
                try await strict.value(for: key, codec: failing, options: .init(readFailurePolicy: .throwError)) {
                    Data()
                }
            }
            _ = try await YCache(storageDirectory: dir.url).value(
                for: key, codec: ThrowingCodec(failEncode: false, failDecode: false)
            ) { Data("v".utf8) }
            let lenient = YCache(storageDirectory: dir.url)
            let resolved = try await lenient.resolve(for: key, codec: failing) { Data("again".utf8) }
            #expect(resolved.source == .generated)
            #expect(resolved.value == Data("again".utf8))
            #expect(lenient.statistics.corruptEntries == 1)
        }

        @Test("a generator that throws: its error reaches the caller, nothing is stored, the next call generates")
        func generatorThrows() async throws {
            struct Boom: Error {}
            let cache = YCache(storageDirectory: dir.url)
            await #expect(throws: Boom.self) { try await cache.data(for: CacheKey("g")) { throw Boom() } }
            #expect(Hardening.entryBytes(dir.path) == 0)
            #expect(!Hardening.allNames(under: dir.path + "/locks").contains { $0.hasSuffix(".lock") })
            #expect(try await cache.data(for: CacheKey("g")) { Data("ok".utf8) } == Data("ok".utf8))
        }

        @Test(
            "a negative or zero budget: nothing is stored (storage) or kept (memory); values are still returned",
            arguments: [-1, 0])
        func negativeOrZeroBudget(budget: Int) async throws {
            let cache = YCache(storageDirectory: dir.url, memoryMaximumCost: budget, storageMaximumByteCount: budget)
            let first = try await cache.resolve(for: CacheKey("z"), codec: DataCodec()) { Data("v".utf8) }
            #expect(first.value == Data("v".utf8))
            let second = try await cache.resolve(for: CacheKey("z"), codec: DataCodec()) { Data("w".utf8) }
            #expect(second.source == .generated)
            #expect(second.value == Data("w".utf8))
            #expect(Hardening.entryBytes(dir.path) == 0)
            try await cache.trimStorageIfNeeded()
        }

        @Test("an expiry in the past: the value is returned, and the next lookup misses")
        func expiryInThePast() async throws {
            let cache = YCache(storageDirectory: dir.url, memoryMaximumCost: 0)
            let options = YCache.Options(expiry: .after(.seconds(-5)))
            #expect(try await cache.data(for: CacheKey("p"), options: options) { Data("v".utf8) } == Data("v".utf8))
            #expect(try await cache.valueIfCached(for: CacheKey("p"), codec: DataCodec()) == nil)
        }
    }
}
