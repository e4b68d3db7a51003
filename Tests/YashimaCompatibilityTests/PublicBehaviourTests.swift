// The rest of Yashima's public behaviour, as its documentation and public tests describe it, written
// against YashimaShared's public API: get-or-generate and persistence, single-flight and cancellation,
// optional generators, lifecycle calls, failure policies, the memory layer's budget and LRU, the standard
// conveniences and codecs. Where a test of Yashima's needs its on-disk layout (`*.data` files), the test
// here uses YashimaShared's documented layout instead.

import Foundation
import Testing
import YashimaShared

@Suite("Yashima's public behaviour")
struct PublicBehaviourTests {
    static let codec = PlainTextCodec()

    // MARK: Get or generate

    @Test("resolve generates, stores and reports metadata; a new instance reads the value from storage")
    func resolveAndPersist() async throws {
        let directory = ScratchDirectory("resolve")
        let key = compatKey("resolve")
        let generated = try await YCache(storageDirectory: directory.url).resolve(for: key, codec: Self.codec) {
            "fresh"
        }
        #expect(generated.value == "fresh" && generated.source == .generated && !generated.wasSharedGeneration)
        #expect(generated.metadata?.byteCount == 5)
        #expect(generated.metadata?.codecIdentifier == Self.codec.identifier)
        let persisted = try await YCache(storageDirectory: directory.url).resolve(for: key, codec: Self.codec) {
            "regenerated"
        }
        #expect(persisted.value == "fresh" && persisted.source == .storage)
    }

    @Test("valueIfCached: nil on a miss; a storage hit is put in memory (peek sees it only afterwards)")
    func valueIfCachedPromotes() async throws {
        let directory = ScratchDirectory("if-cached")
        let key = compatKey("promoted")
        let cache = YCache(storageDirectory: directory.url)
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
        try await cache.store("stored", for: key, codec: Self.codec)
        let cold = YCache(storageDirectory: directory.url)
        #expect(try await cold.peek(for: key, codec: Self.codec) == nil)
        #expect(try await cold.valueIfCached(for: key, codec: Self.codec) == "stored")
        #expect(try await cold.peek(for: key, codec: Self.codec) == "stored")
    }

    @Test("refresh bypasses the cached value and replaces it")
    func refreshReplaces() async throws {
        let directory = ScratchDirectory("refresh")
        let cache = YCache(storageDirectory: directory.url)
        let key = compatKey("refresh")
        #expect(try await cache.value(for: key, codec: Self.codec) { "old" } == "old")
        #expect(try await cache.refresh(for: key, codec: Self.codec) { "new" } == "new")
        #expect(try await cache.value(for: key, codec: Self.codec) { "unused" } == "new")
        #expect(try await YCache(storageDirectory: directory.url).valueIfCached(for: key, codec: Self.codec) == "new")
    }

    @Test("the typed view and the root API name the same entries")
    func typedSharesIdentity() async throws {
        let directory = ScratchDirectory("typed-identity")
        let cache = YCache(storageDirectory: directory.url)
        let typed = cache.using(Self.codec)
        let key = compatKey("shared")
        try await cache.store("root", for: key, codec: Self.codec)
        #expect(try await typed.valueIfCached(for: key) == "root")
        try await typed.store("typed", for: key)
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == "typed")
    }

    // MARK: Single-flight and cancellation

    @Test("concurrent callers of one key share one generation")
    func concurrentCallersShare() async throws {
        let directory = ScratchDirectory("coalesce")
        let cache = YCache(storageDirectory: directory.url)
        let calls = CallCounter()
        let release = Latch()
        let key = compatKey("coalesced")
        let results = try await withThrowingTaskGroup(of: YCache.Resolved<String>.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await cache.resolve(for: key, codec: Self.codec) {
                        let call = await calls.next()
                        await release.wait()
                        return "shared-\(call)"
                    }
                }
            }
            group.addTask {
                // Let the generation finish once it has started; later callers then hit memory.
                while await calls.count == 0 { await Task.yield() }
                await release.open()
                return YCache.Resolved(value: "shared-1", source: .memory, metadata: nil, wasSharedGeneration: false)
            }
            var all: [YCache.Resolved<String>] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 21)
        #expect(results.allSatisfy { $0.value == "shared-1" })
        #expect(await calls.count == 1)
    }

    @Test("singleFlightPolicy .disabled runs every caller's generator, concurrently")
    func disabledSingleFlightIsIndependent() async throws {
        let directory = ScratchDirectory("independent")
        let cache = YCache(storageDirectory: directory.url)
        let calls = CallCounter()
        let allRunning = Latch()
        let options = YCache.Options(lookupPolicy: .refresh, singleFlightPolicy: .disabled)
        let values = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await cache.optionalValue(for: compatKey("independent"), codec: Self.codec, options: options) {
                        let call = await calls.next()
                        if call == 6 { await allRunning.open() }
                        // Only six generators running at once can get past this.
                        return await allRunning.wait(within: 30) ? "value-\(call)" : nil
                    }
                }
            }
            var all: [String?] = []
            for try await value in group { all.append(value) }
            return all
        }
        #expect(Set(values.compactMap { $0 }).count == 6)
        #expect(await calls.count == 6)
    }

    @Test("under .uiLifecycle a cancelled caller gets CancellationError, the producer is cancelled, nothing is stored")
    func cancellationStoresNothing() async throws {
        let directory = ScratchDirectory("cancel")
        let cache = YCache(storageDirectory: directory.url)
        let started = Latch()
        let observedCancellation = Latch()
        let key = compatKey("cancelled")
        let call = Task {
            try await cache.optionalValue(for: key, codec: Self.codec, options: .uiLifecycle) {
                await started.open()
                while !Task.isCancelled { await Task.yield() }
                await observedCancellation.open()
                throw CancellationError()
            }
        }
        #expect(await started.wait(within: 30))
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(await observedCancellation.wait(within: 30))
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
    }

    // MARK: Optional generators

    @Test("optionalValue: nil is never stored, sequential nils run the generator again, a value is stored")
    func optionalValueNil() async throws {
        let directory = ScratchDirectory("optional")
        let cache = YCache(storageDirectory: directory.url)
        let calls = CallCounter()
        let key = compatKey("optional")
        for _ in 0..<2 {
            let value = try await cache.optionalValue(for: key, codec: Self.codec) { () -> String? in
                _ = await calls.next()
                return nil
            }
            #expect(value == nil)
        }
        #expect(await calls.count == 2)
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == nil)
        try await cache.store("old", for: key, codec: Self.codec)
        let refreshed = try await cache.optionalValue(
            for: key, codec: Self.codec, options: .init(lookupPolicy: .refresh)
        ) {
            "new"
        }
        #expect(refreshed == "new")
        #expect(try await cache.valueIfCached(for: key, codec: Self.codec) == "new")
    }

    // MARK: Lifecycle

    @Test("removeAll deletes every entry, keeps files the cache did not make, and values regenerate")
    func removeAllKeepsUnmanagedFiles() async throws {
        let directory = ScratchDirectory("remove-all")
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let note = directory.url.appendingPathComponent("unmanaged.txt")
        try Data("mine".utf8).write(to: note)
        let cache = YCache(storageDirectory: directory.url)
        try await cache.store("a", for: compatKey("a"), codec: Self.codec)
        try await cache.store("b", for: compatKey("b"), codec: Self.codec)
        try await cache.removeAll()
        #expect(try await cache.valueIfCached(for: compatKey("a"), codec: Self.codec) == nil)
        #expect(
            try await YCache(storageDirectory: directory.url).valueIfCached(for: compatKey("b"), codec: Self.codec)
                == nil)
        #expect(try await cache.value(for: compatKey("a"), codec: Self.codec) { "regenerated" } == "regenerated")
        #expect(FileManager.default.fileExists(atPath: note.path))
    }

    @Test("removeAll(in:) removes one namespace, in this instance and for new ones")
    func removeNamespace() async throws {
        let directory = ScratchDirectory("remove-namespace")
        let cache = YCache(storageDirectory: directory.url)
        let kept = CacheKey(namespace: "kept", identity: "value")
        let removed = CacheKey(namespace: "removed", identity: "value")
        try await cache.store("kept", for: kept, codec: Self.codec)
        try await cache.store("removed", for: removed, codec: Self.codec)
        try await cache.removeAll(in: "removed")
        for reader in [cache, YCache(storageDirectory: directory.url)] {
            #expect(try await reader.valueIfCached(for: removed, codec: Self.codec) == nil)
            #expect(try await reader.valueIfCached(for: kept, codec: Self.codec) == "kept")
        }
    }

    @Test("contains and metadata do not decode the payload")
    func containsAndMetadataDoNotDecode() async throws {
        let directory = ScratchDirectory("no-decode")
        let codec = FailingCodec()
        let key = compatKey("stored")
        try await YCache(storageDirectory: directory.url).store("stored", for: key, codec: codec)
        let cold = YCache(storageDirectory: directory.url)
        #expect(try await cold.contains(for: key, codec: codec))
        let metadata = try await cold.metadata(for: key, codec: codec)
        #expect(metadata?.byteCount == 6 && metadata?.codecIdentifier == codec.identifier)
        #expect(try await cold.valueIfCached(for: key, codec: codec) == nil)  // the decode failure is a miss
    }

    // MARK: Failure policies

    @Test("a storage path that is a file: .bestEffort returns the value and keeps it in memory only")
    func bestEffortKeepsMemory() async throws {
        let directory = ScratchDirectory("best-effort")
        try Data("not a directory".utf8).write(to: directory.url)
        let cache = YCache(storageDirectory: directory.url)
        let key = compatKey("memory")
        let resolved = try await cache.resolve(
            for: key, codec: Self.codec, options: .init(writeFailurePolicy: .bestEffort)
        ) {
            "memory"
        }
        #expect(resolved.value == "memory" && resolved.source == .generated)
        #expect(resolved.metadata?.byteCount == 6)
        #expect(try await cache.peek(for: key, codec: Self.codec) == "memory")
        #expect(try await YCache(storageDirectory: directory.url).valueIfCached(for: key, codec: Self.codec) == nil)
    }

    @Test("a storage path that is a file: .throwError throws, and neither layer keeps the value")
    func throwingWriteKeepsNothing() async throws {
        let directory = ScratchDirectory("throw-error")
        try Data("not a directory".utf8).write(to: directory.url)
        let cache = YCache(storageDirectory: directory.url)
        let key = compatKey("nothing")
        await #expect(throws: (any Error).self) {
            try await cache.value(for: key, codec: Self.codec) { "should not be cached" }
        }
        #expect(try await cache.peek(for: key, codec: Self.codec) == nil)
        #expect(try await YCache(storageDirectory: directory.url).valueIfCached(for: key, codec: Self.codec) == nil)
    }

    // MARK: Memory layer

    @Test("a small memory budget evicts the least recently used value (peek counts as a use); storage keeps all")
    func memoryLRU() async throws {
        let directory = ScratchDirectory("memory-lru")
        let cache = YCache(storageDirectory: directory.url, memoryMaximumCost: 10, storageMaximumByteCount: nil)
        let codec = DataCodec()
        let (first, second, third) = (compatKey("first"), compatKey("second"), compatKey("third"))
        try await cache.store(Data(repeating: 1, count: 4), for: first, codec: codec)
        try await cache.store(Data(repeating: 2, count: 4), for: second, codec: codec)
        _ = try await cache.peek(for: first, codec: codec)
        try await cache.store(Data(repeating: 3, count: 4), for: third, codec: codec)
        #expect(try await cache.peek(for: first, codec: codec) == Data(repeating: 1, count: 4))
        #expect(try await cache.peek(for: second, codec: codec) == nil)
        #expect(try await cache.peek(for: third, codec: codec) == Data(repeating: 3, count: 4))
        let fromStorage = try await cache.resolve(for: second, codec: codec) { throw CodecFailure.cannotDecode }
        #expect(fromStorage.source == .storage && fromStorage.value == Data(repeating: 2, count: 4))
    }

    @Test("a value larger than the memory budget never stays in memory but is stored")
    func largerThanMemory() async throws {
        let directory = ScratchDirectory("memory-large")
        let cache = YCache(storageDirectory: directory.url, memoryMaximumCost: 5, storageMaximumByteCount: nil)
        let key = compatKey("large")
        try await cache.store(Data(count: 6), for: key, codec: DataCodec())
        #expect(try await cache.peek(for: key, codec: DataCodec()) == nil)
        let resolved = try await cache.resolve(for: key, codec: DataCodec()) { throw CodecFailure.cannotDecode }
        #expect(resolved.source == .storage && resolved.value == Data(count: 6))
        #expect(try await cache.peek(for: key, codec: DataCodec()) == nil)
    }

    // MARK: Conveniences and codecs

    @Test("data(for:) and codable(for:) use DataCodec and CodableCodec(.json) entries, and persist")
    func conveniences() async throws {
        let directory = ScratchDirectory("conveniences")
        let cache = YCache(storageDirectory: directory.url)
        let bytes = Data([0x59, 0x41, 0x53, 0x48])
        #expect(try await cache.data(for: compatKey("data")) { bytes } == bytes)
        let viaCodec = try await cache.resolve(for: compatKey("data"), codec: DataCodec()) { Data() }
        #expect(viaCodec.source == .memory && viaCodec.metadata?.codecIdentifier == DataCodec().identifier)
        let summary = ["pages": 12]
        let generated: [String: Int] = try await cache.codable(for: compatKey("json")) { summary }
        #expect(generated == summary)
        let viaJSON = try await cache.resolve(for: compatKey("json"), codec: CodableCodec<[String: Int]>(format: .json))
        {
            [:]
        }
        #expect(viaJSON.source == .memory)
        let cold = YCache(storageDirectory: directory.url)
        #expect(try await cold.data(for: compatKey("data")) { Data() } == bytes)
        let coldSummary: [String: Int] = try await cold.codable(for: compatKey("json")) { [:] }
        #expect(coldSummary == summary)
        // The two formats are two entries of one key.
        let plist: [String: Int] = try await cache.codable(for: compatKey("json"), format: .propertyList) { ["p": 1] }
        #expect(plist == ["p": 1])
        let json: [String: Int] = try await cache.codable(for: compatKey("json"), format: .json) { [:] }
        #expect(json == summary)
    }

    @Test("CompressedDataCodec: round-trips, its entry is smaller than the input, its cost is the decompressed size")
    func compressedData() async throws {
        let directory = ScratchDirectory("compressed")
        let html = Data(String(repeating: "<section><p>Yashima on Linux</p></section>\n", count: 200).utf8)
        let codec = CompressedDataCodec()
        let key = compatKey("page")
        let resolved = try await YCache(storageDirectory: directory.url).resolve(for: key, codec: codec) { html }
        #expect(resolved.value == html && resolved.metadata?.cost == html.count)
        #expect(resolved.metadata?.codecIdentifier == codec.identifier)
        let cold = try await YCache(storageDirectory: directory.url).using(codec).resolve(for: key) { Data() }
        #expect(cold.source == .storage && cold.value == html && cold.metadata?.cost == html.count)
        let entry = try #require(directory.entryFiles.first)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: entry.path)[.size] as? Int)
        #expect(size < html.count)
        // Another codec, another entry of the same key.
        #expect(
            try await YCache(storageDirectory: directory.url).data(for: key) { Data("plain".utf8) }
                == Data("plain".utf8))
        #expect(throws: (any Error).self) { try codec.decode(Data("not compressed".utf8)) }
    }

    @Test("a corrupt entry file is a miss by default: the value is generated again")
    func corruptEntryIsAMiss() async throws {
        let directory = ScratchDirectory("corrupt")
        let key = compatKey("corrupt")
        _ = try await YCache(storageDirectory: directory.url).value(for: key, codec: CompressedDataCodec()) {
            Data(repeating: 7, count: 1000)
        }
        let entry = try #require(directory.entryFiles.first)
        try Data("not a valid entry".utf8).write(to: entry)
        let again = try await YCache(storageDirectory: directory.url).resolve(for: key, codec: CompressedDataCodec()) {
            Data("regenerated".utf8)
        }
        #expect(again.source == .generated && again.value == Data("regenerated".utf8))
    }
}
