// Yashima's public call shapes, written as a Yashima app writes them, compiled against YashimaShared
// with only the import changed. Each test also checks what the call returns. Nothing here uses a
// YashimaShared-only name, so a shape that stops compiling is a compatibility break.

import Foundation
import Testing
import YashimaShared

@Suite("Yashima call shapes")
struct CallShapeTests {
    @Test("the generator is the unlabelled last argument: in parentheses, or a trailing closure")
    func generatorArgument() async throws {
        let directory = ScratchDirectory("generator")
        let cache = YCache(storageDirectory: directory.url)
        let bytes: @Sendable () async throws -> Data = { Data("bytes".utf8) }
        #expect(try await cache.data(for: compatKey("a"), bytes) == Data("bytes".utf8))
        #expect(try await cache.data(for: compatKey("b"), options: .default, bytes) == Data("bytes".utf8))
        #expect(try await cache.value(for: compatKey("c"), codec: DataCodec(), bytes) == Data("bytes".utf8))
        #expect(try await cache.value(for: compatKey("d"), codec: DataCodec(), options: .default) { Data() } == Data())
        let resolved = try await cache.resolve(for: compatKey("e"), codec: PlainTextCodec(), { "e" })
        #expect(resolved.value == "e")
        #expect(try await cache.refresh(for: compatKey("e"), codec: PlainTextCodec(), { "e2" }) == "e2")
        #expect(try await cache.optionalValue(for: compatKey("f"), codec: PlainTextCodec(), { nil }) == nil)
        let summary: [String: Int] = try await cache.codable(for: compatKey("g"), format: .propertyList) { ["n": 1] }
        #expect(summary == ["n": 1])
        let json: [Int] = try await cache.codable(for: compatKey("h")) { [1, 2] }
        #expect(json == [1, 2])

        let typed = cache.using(PlainTextCodec())
        let text: @Sendable () async throws -> String = { "typed" }
        #expect(try await typed.value(for: compatKey("i"), text) == "typed")
        #expect(try await typed.resolve(for: compatKey("j"), options: .default, text).source == .generated)
        #expect(try await typed.refresh(for: compatKey("j"), text) == "typed")
        #expect(try await typed.optionalValue(for: compatKey("k")) { nil } == nil)
    }

    @Test("options: cost first as a CacheCost, the policies under their top-level names, both presets")
    func optionsAndPolicies() {
        let recipe = YCache.Options(cost: .bytes(256 * 1024), writeFailurePolicy: .bestEffort)
        #expect(recipe.cost == .bytes(262_144))
        #expect(recipe.writeFailurePolicy == .bestEffort)
        let strict = YCache.Options(
            lookupPolicy: .cacheOnly, readFailurePolicy: .throwError, writeFailurePolicy: .throwError,
            singleFlightPolicy: .disabled)
        let lookup: CacheLookupPolicy = strict.lookupPolicy
        let write: CacheWritePolicy = strict.writePolicy
        let readFailure: CacheReadFailurePolicy = strict.readFailurePolicy
        let writeFailure: CacheWriteFailurePolicy = strict.writeFailurePolicy
        let singleFlight: CacheSingleFlightPolicy = strict.singleFlightPolicy
        #expect(lookup == .cacheOnly && write == .memoryAndStorage && readFailure == .throwError)
        #expect(writeFailure == .throwError && singleFlight == .disabled)
        let policies: Set<CacheSingleFlightPolicy> = [.share, .cancelWhenNoWaiters, .disabled, .share]
        #expect(policies.count == 3)
        #expect(YCache.Options() == .default)
        #expect(YCache.Options.default.singleFlightPolicy == .share)
        #expect(YCache.Options.default.readFailurePolicy == .treatAsMiss)
        #expect(YCache.Options.uiLifecycle.writeFailurePolicy == .bestEffort)
        #expect(YCache.Options.uiLifecycle.singleFlightPolicy == .cancelWhenNoWaiters)
        #expect(CacheCost.units(3) != CacheCost.bytes(3))
        var options = YCache.Options.default
        options.cost = .units(7)
        options.lookupPolicy = .refresh
        options.writePolicy = .memoryOnly
        #expect(options != .default)
    }

    @Test("resolve reports a YCache.Resolved with optional metadata; the result types have public initializers")
    func resultTypes() async throws {
        let directory = ScratchDirectory("results")
        let cache = YCache(storageDirectory: directory.url)
        let codec = PlainTextCodec()
        let results = try await withThrowingTaskGroup(of: YCache.Resolved<String>.self) { group in
            for _ in 0..<3 {
                group.addTask { try await cache.resolve(for: compatKey("shared"), codec: codec) { "one" } }
            }
            var all: [YCache.Resolved<String>] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.allSatisfy { $0.value == "one" })
        let first = try #require(results.first?.metadata)
        #expect(first.byteCount == 3)
        #expect(first.codecIdentifier == codec.identifier)
        #expect(first.lastAccessedAt >= first.createdAt)
        let source: YCache.Source = results[0].source
        switch source {
        case .memory, .storage, .generated: break
        }

        let now = Date()
        let metadata = YCache.Metadata(
            byteCount: 4, cost: nil, createdAt: now, lastAccessedAt: now, codecIdentifier: "x-v1")
        let made = YCache.Resolved(value: "made", source: .memory, metadata: metadata, wasSharedGeneration: false)
        #expect(made.metadata?.cost == nil)
        #expect(made.metadata == metadata)
        let usage = YCache.StorageUsage(byteCount: 10, entryCount: 2, maximumByteCount: nil)
        let limit = 10
        #expect(usage.byteCount <= limit && usage.maximumByteCount == nil)
    }

    @Test("YCache.Error: cacheMiss is thrown, caught and rethrown by name")
    func errorType() async throws {
        let directory = ScratchDirectory("error")
        let cache = YCache(storageDirectory: directory.url)
        do {
            _ = try await cache.value(
                for: compatKey("none"), codec: DataCodec(), options: .init(lookupPolicy: .cacheOnly)
            ) {
                Data()
            }
            Issue.record("a cache-only miss returned a value")
        } catch YCache.Error.cacheMiss {
        }
        let error: YCache.Error = .cacheMiss
        #expect(error == YCache.Error.cacheMiss)
        await #expect(throws: YCache.Error.cacheMiss) {
            _ = try await cache.data(for: compatKey("thrown")) { throw YCache.Error.cacheMiss }
        }
    }

    @Test("lifecycle calls: peek and putInMemory are async and throwing, remove reports what it removed")
    func lifecycle() async throws {
        let directory = ScratchDirectory("lifecycle")
        let cache = YCache(storageDirectory: directory.url)
        let codec = PlainTextCodec()
        let key = compatKey("life")
        try await cache.store("stored", for: key, codec: codec)
        #expect(try await cache.peek(for: key, codec: codec) == "stored")
        #expect(try await cache.contains(for: key, codec: codec))
        #expect(try await cache.metadata(for: key, codec: codec)?.byteCount == 6)
        #expect(try await cache.valueIfCached(for: key, codec: codec) == "stored")
        let removed = try await cache.remove(for: key, codec: codec)
        let removedAgain: Bool = try await cache.remove(for: key, codec: codec)
        #expect(removed && !removedAgain)
        try await cache.remove(for: key, codec: codec)  // the result may be discarded
        try await cache.putInMemory("memory", for: key, codec: codec)
        try await cache.putInMemory("costly", for: compatKey("cost"), codec: codec, cost: .bytes(64))
        #expect(try await cache.peek(for: key, codec: codec) == "memory")
        #expect(try await YCache(storageDirectory: directory.url).valueIfCached(for: key, codec: codec) == nil)
        try await cache.removeAll(in: "compat")
        try await cache.removeAll()
        let usage: YCache.StorageUsage = try await cache.storageUsage()
        #expect(usage.entryCount == 0)
        let trimmed = try await cache.trimStorageIfNeeded()
        #expect(trimmed.entryCount == 0 && trimmed.maximumByteCount == 128 * 1024 * 1024)
        try await cache.trimStorageIfNeeded()

        let peek: (CacheKey, PlainTextCodec) async throws -> String? = cache.peek(for:codec:)
        #expect(try await peek(key, codec) == nil)
    }

    @Test("the typed view has every lifecycle call, with Yashima's shapes")
    func typedView() async throws {
        let directory = ScratchDirectory("typed")
        let cache = YCache(storageDirectory: directory.url)
        let typed: YCache.Typed<PlainTextCodec> = cache.using(PlainTextCodec())
        #expect(typed.codec.identifier == "compat-plain-text-v1")
        let key = compatKey("typed")
        try await typed.store("stored", for: key)
        #expect(try await typed.peek(for: key) == "stored")
        #expect(try await typed.valueIfCached(for: key) == "stored")
        #expect(try await typed.contains(for: key))
        #expect(try await typed.metadata(for: key)?.byteCount == 6)
        let removed = try await typed.remove(for: key)
        #expect(removed)
        try await typed.putInMemory("memory", for: key, cost: .units(1))
        try await typed.putInMemory("memory", for: key)
        #expect(try await typed.peek(for: key) == "memory")
        try await typed.remove(for: key)
    }

    @Test("keys: Yashima's initializers, mutable parts, insertion-ordered components, Codable")
    func keys() throws {
        let built = CacheKey(namespace: "reports", identity: "weekly").variant("locale", "en-US").version("renderer", 1)
        let listed = CacheKey(
            namespace: "reports", identity: "weekly", variants: [CacheKeyComponent(name: "locale", value: "en-US")],
            versions: [CacheKeyComponent("renderer", "1")])
        #expect(built == listed)
        #expect(built.stableIdentifier == listed.stableIdentifier)

        var key = CacheKey("photo", namespace: "thumbnails")
        key.namespace = "previews"
        key.identity = "photo-2"
        key.variants.append(CacheKeyComponent("size", "64"))
        key.variants.append(CacheKeyComponent("scale", "2"))
        key.versions = [CacheKeyComponent(name: "renderer", value: "3")]
        var component = key.variants[0]
        component.value = "65"
        #expect(component.name == "size" && component.value == "65")
        #expect(key.variants.map(\.name) == ["size", "scale"])  // the order they were added in
        let same = CacheKey(namespace: "previews", identity: "photo-2").variant("scale", 2).variant("size", 64)
            .version("renderer", 3)
        #expect(key == same)
        #expect(key.hashValue == same.hashValue)
        #expect(key.stableIdentifier == same.stableIdentifier)
        #expect(Set([key, same]).count == 1)

        let encoded = try JSONEncoder().encode(key)
        #expect(try JSONDecoder().decode(CacheKey.self, from: encoded) == key)
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Set(object.keys) == ["namespace", "identity", "variants", "versions"])
        let variants = try #require(object["variants"] as? [[String: String]])
        #expect(variants == [["name": "size", "value": "64"], ["name": "scale", "value": "2"]])
        let decoded = try JSONDecoder().decode(
            CacheKey.self,
            from: Data(#"{"namespace":"n","identity":"i","variants":[],"versions":[{"name":"v","value":"1"}]}"#.utf8))
        #expect(decoded == CacheKey(namespace: "n", identity: "i").version("v", 1))
        let sorted = JSONEncoder()
        sorted.outputFormatting = .sortedKeys
        #expect(try sorted.encode(CacheKeyComponent("a", "b")) == Data(#"{"name":"a","value":"b"}"#.utf8))
    }

    @Test("the standard codecs are Equatable and keep Yashima's identifiers (except where noted)")
    func codecs() {
        #expect(DataCodec() == DataCodec())
        #expect(DataCodec().identifier == "data-v1")
        #expect(CompressedDataCodec() == CompressedDataCodec())
        let json = CodableCodec<[String: Int]>(format: .json)
        #expect(json == CodableCodec<[String: Int]>())
        #expect(json.format == .json)
        #expect(json.identifier == "codable-json-v1:" + String(reflecting: [String: Int].self))
        #expect(CodableCodec<[String: Int]>(format: .propertyList) != json)
    }
}

@Suite("Yashima's configuration")
struct ConfigurationTests {
    @Test("the default budgets are Yashima's constants, and the convenience initializer uses them")
    func defaults() {
        let directory = ScratchDirectory("config-defaults")
        let configuration = YCache.Configuration(storageDirectory: directory.url)
        #expect(YCache.Configuration.defaultMemoryMaximumCost == 67_108_864)
        #expect(YCache.Configuration.defaultMemoryMaximumEntryCount == nil)
        #expect(YCache.Configuration.defaultStorageMaximumByteCount == 134_217_728)
        #expect(configuration.memoryMaximumCost == YCache.Configuration.defaultMemoryMaximumCost)
        #expect(configuration.memoryMaximumEntryCount == nil)
        #expect(configuration.storageMaximumByteCount == YCache.Configuration.defaultStorageMaximumByteCount)
        #expect(configuration.storageDirectory == directory.url)
        #expect(YCache(storageDirectory: directory.url).configuration == configuration)
        #expect(YCache(configuration: configuration).configuration == configuration)
        #expect(YCache(configuration: configuration).storageDirectory == directory.url)
    }

    @Test("custom and explicitly unbounded budgets are kept; negative ones become 0")
    func budgets() {
        let directory = ScratchDirectory("config-budgets")
        let custom = YCache.Configuration(
            storageDirectory: directory.url, memoryMaximumCost: 12, memoryMaximumEntryCount: 34,
            storageMaximumByteCount: 56)
        #expect(custom.memoryMaximumCost == 12 && custom.memoryMaximumEntryCount == 34)
        #expect(custom.storageMaximumByteCount == 56)
        let unbounded = YCache.Configuration(
            storageDirectory: directory.url, memoryMaximumCost: nil, memoryMaximumEntryCount: nil,
            storageMaximumByteCount: nil)
        #expect(unbounded.memoryMaximumCost == nil && unbounded.storageMaximumByteCount == nil)
        let negative = YCache.Configuration(
            storageDirectory: directory.url, memoryMaximumCost: -1, memoryMaximumEntryCount: -2,
            storageMaximumByteCount: -3)
        #expect(negative.memoryMaximumCost == 0 && negative.memoryMaximumEntryCount == 0)
        #expect(negative.storageMaximumByteCount == 0)
        var mutated = custom
        mutated.storageMaximumByteCount = -9  // set after init: the cache clamps it
        #expect(YCache(configuration: mutated).configuration.storageMaximumByteCount == 0)
        let cache = YCache(
            storageDirectory: directory.url, memoryMaximumCost: 5, memoryMaximumEntryCount: 6,
            storageMaximumByteCount: 7)
        #expect(cache.configuration == custom.with(memory: 5, count: 6, storage: 7))
    }
}

extension YCache.Configuration {
    fileprivate func with(memory: Int?, count: Int?, storage: Int?) -> YCache.Configuration {
        var copy = self
        copy.memoryMaximumCost = memory
        copy.memoryMaximumEntryCount = count
        copy.storageMaximumByteCount = storage
        return copy
    }
}
