// RemoteHTTPStreamingTests.swift: large remote values through YCache stream through files (issue 18):
// a 256 MiB value generated on one host (its upload streamed from the published entry file) is a
// `.remote` hit on a second host in a child process (the test bundle, running only the child test), whose
// peak resident memory during the hit grows by one copy of the value and no more: the body went into a
// staging file that became the local entry, and the caller's copy was read back from it. Also: a truncated or damaged remote body is a miss (regenerated,
// no staging file left behind), values of 1–16 MiB go the same way with Redis leases, and a value of
// the streaming threshold or more is uploaded from its published entry file (counted by the store as
// `storesFromFile`), a smaller one from memory.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote tier through YCache: HTTP streaming", .nginxServer, .serialized)
struct RemoteHTTPStreamingTests {
    static let childVariable = "YASHIMA_HTTP_STREAMING_CHILD"
    static let size = 256 << 20
    static let key = CacheKey(namespace: "stream", identity: "large")
    private let codec = DataCodec()

    /// A cache without a storage budget (the default 128 MiB would keep 256 MiB out of storage).
    static func unbounded(_ directory: URL, _ remote: YCache.Remote?) -> YCache {
        YCache(configuration: .init(storageDirectory: directory, storageMaximumByteCount: nil, remote: remote))
    }

    /// The 256 MiB value, one repeated 1 MiB chunk.
    static var chunk: Data { payload(1 << 20, seed: 7) }

    @Test("256 MiB through YCache across two hosts: the second host's hit holds one copy of the value, no more")
    func largeHitBoundedMemory() async throws {
        guard ProcessInfo.processInfo.environment[Self.childVariable] == nil else { return }
        let server = try await NginxServer.start()
        let (one, two) = (TemporaryDirectory("stream-one"), TemporaryDirectory("stream-two"))
        let remote = try YCache.Remote.http(
            server.url(), options: .init(operationTimeout: .seconds(30), maximumValueByteCount: 512 << 20))
        do {
            // Built from one chunk (a byte-at-a-time payload of 256 MiB would hold a pool thread for seconds).
            let chunk = Self.chunk
            var value = Data(capacity: Self.size)
            for _ in 0..<(Self.size >> 20) { value.append(chunk) }
            let first = Self.unbounded(one.url, remote)
            let made = value
            _ = try await first.value(for: Self.key, codec: codec) { made }
            #expect(first.statistics.remotePuts == 1)
        }
        let (line, fields) = try await childTestReport(
            filter: "RemoteHTTPStreamingTests/childHit", Self.childVariable, "\(server.url())|\(two.path)",
            prefix: "STREAM-HIT ")
        print("HTTP 256 MiB remote hit through YCache (child): \(line ?? "no output")")
        let (baseline, peak) = (fields["baseline"] ?? 0, fields["peak"] ?? 0)
        #expect(fields["remote"] == 1 && fields["exact"] == 1 && fields["stored"] == 1, "\(line ?? "no output")")
        // One copy of the value (the caller's: read back from the entry file, never a mapping of it, which
        // a truncation would turn into SIGBUS), no second one for the transfer.
        #expect(
            baseline > 0 && peak - baseline < Self.size + 64 << 20, "the hit grew \((peak - baseline) >> 20) MiB")
        await server.stop()
    }

    /// Runs in the child only: the second host's hit, with the figures on one line.
    @Test("(child) 256 MiB remote hit", .enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func childHit() async throws {
        let parts = (ProcessInfo.processInfo.environment[Self.childVariable] ?? "").split(separator: "|")
        let (url, folder) = (String(parts[0]), String(parts[1]))
        let remote = try YCache.Remote.http(
            url, options: .init(operationTimeout: .seconds(30), maximumValueByteCount: 512 << 20))
        let cache = Self.unbounded(URL(fileURLWithPath: folder), remote)
        let chunk = Self.chunk
        resetPeakMemory()
        let baseline = residentMemory().current
        let resolved = try await cache.resolve(for: Self.key, codec: codec) { Data() }
        let peak = residentMemory().peak
        // Compared a chunk at a time (the pages of the mapped value are read after the peak was taken).
        var exact = resolved.value.count == Self.size
        for index in 0..<(Self.size >> 20) where exact {
            exact = resolved.value[(index << 20)..<((index + 1) << 20)] == chunk
        }
        // The entry was published: another cache on this host's directory, without the remote, hits it.
        let local = Self.unbounded(URL(fileURLWithPath: folder), nil)
        let again = try await local.resolve(for: Self.key, codec: codec) { Data() }
        print(
            "STREAM-HIT remote=\(resolved.origin == .remote ? 1 : 0) exact=\(exact ? 1 : 0) "
                + "stored=\(again.origin == .storage && again.value.count == Self.size ? 1 : 0) "
                + "baseline=\(baseline) peak=\(peak)")
        fflush(nil)
    }

    @Test(
        "a value of 1 MiB or more is uploaded from its published entry file (generated or stored), a smaller one from memory"
    )
    func uploadFromEntryFile() async throws {
        let server = try await NginxServer.start()
        let remote = try YCache.Remote.http(server.url(), options: .init(operationTimeout: .seconds(10)))
        let threshold = HTTPRemoteConfiguration.defaultStreamingThreshold
        for (index, (size, fromFile)) in [(threshold, true), (3 << 20, true), (threshold - 1, false)].enumerated() {
            let (one, two) = (TemporaryDirectory("stream-u1"), TemporaryDirectory("stream-u2"))
            let key = CacheKey(namespace: "stream", identity: "upload-\(size)")
            let value = payload(size, seed: UInt8(index + 21))
            let first = YCache(storageDirectory: one.url, remote: remote)
            let store = try #require(first.remoteValues as? HTTPRemoteStore)
            #expect(store.fileStreamingThreshold == threshold)
            _ = try await first.value(for: key, codec: codec) { value }
            #expect(first.statistics.remotePuts == 1, "\(size)")
            #expect(store.statistics.snapshot[.storesFromFile] == (fromFile ? 1 : 0), "\(size)")
            // nginx received the whole envelope, and another host reads it back byte for byte.
            let identity = EntryIdentity(key: key, codecIdentifier: codec.identifier)
            let stored = try FileManager.default.attributesOfItem(atPath: server.file(of: store.url(for: identity)))
            #expect(
                (stored[.size] as? Int) == RemoteEnvelope.sealedSize(payloadCount: size, signed: store.secret != nil),
                "\(size)")
            let fetched = try await YCache(storageDirectory: two.url, remote: remote).resolve(for: key, codec: codec) {
                Data()
            }
            #expect(fetched.origin == .remote && fetched.value == value, "\(size)")
            // An explicit store of a large value goes from its entry file too.
            let replacement = payload(size, seed: UInt8(index + 31))
            try await first.store(replacement, for: key, codec: codec)
            #expect(first.statistics.remotePuts == 2, "\(size)")
            #expect(store.statistics.snapshot[.storesFromFile] == (fromFile ? 2 : 0), "\(size)")
            let third = TemporaryDirectory("stream-u3")
            let refetched = try await YCache(storageDirectory: third.url, remote: remote).resolve(
                for: key, codec: codec
            ) { Data() }
            #expect(refetched.origin == .remote && refetched.value == replacement, "\(size)")
        }
        await server.stop()
    }

    @Test("a truncated or damaged remote body is a miss: regenerated, no staging file left")
    func damagedBodyIsMiss() async throws {
        let server = try await NginxServer.start()
        let remote = try YCache.Remote.http(server.url(), options: .init(operationTimeout: .seconds(5)))
        for damage in ["truncate", "flip"] {
            let (one, two) = (TemporaryDirectory("stream-d1"), TemporaryDirectory("stream-d2"))
            let key = CacheKey(namespace: "stream", identity: "damaged-\(damage)")
            let large = payload(3 << 20, seed: 3)
            let first = YCache(storageDirectory: one.url, remote: remote)
            _ = try await first.value(for: key, codec: codec) { large }
            #expect(first.statistics.remotePuts == 1)
            // Damage the one file nginx stores.
            let files = try FileManager.default.subpathsOfDirectory(atPath: server.directory + "/www")
                .map { server.directory + "/www/" + $0 }
                .filter {
                    (try? FileManager.default.attributesOfItem(atPath: $0)[.type] as? FileAttributeType) == .typeRegular
                }
            #expect(files.count == 1)
            for file in files {
                var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
                if damage == "truncate" {
                    bytes = bytes.prefix(bytes.count - 1000)
                } else {
                    bytes[bytes.count / 2] ^= 0xFF
                }
                try bytes.write(to: URL(fileURLWithPath: file))
            }
            let second = YCache(storageDirectory: two.url, remote: remote)
            let fetched = try await second.resolve(for: key, codec: codec) { payload(5) }
            #expect(fetched.origin == .generated && fetched.value == payload(5), "\(damage)")
            #expect(second.statistics.remoteHits == 0, "\(damage)")
            let staging = (try? FileManager.default.contentsOfDirectory(atPath: two.path + "/tmp")) ?? []
            #expect(staging.isEmpty, "\(damage): \(staging)")
            _ = try await second.remove(for: key, codec: codec)
        }
        await server.stop()
    }

    @Test("1, 4 and 16 MiB through HTTP with Redis leases: .remote hits, byte-exact", .redisServer)
    func mediumValuesWithLeases() async throws {
        let server = try await NginxServer.start()
        let redis = try await RedisServer.start()
        let remote = try YCache.Remote.http(
            server.url(), leases: YCache.Remote.redis(redis.url), options: .init(operationTimeout: .seconds(10)))
        for (index, size) in [1 << 20, 4 << 20, 16 << 20].enumerated() {
            let (one, two) = (TemporaryDirectory("stream-l1"), TemporaryDirectory("stream-l2"))
            let key = CacheKey(namespace: "stream", identity: "leased-\(size)")
            let chunk = payload(1 << 20, seed: UInt8(index + 11))
            var built = Data(capacity: size)
            for _ in 0..<(size >> 20) { built.append(chunk) }
            let value = built
            let first = YCache(storageDirectory: one.url, remote: remote)
            _ = try await first.value(for: key, codec: codec) { value }
            #expect(first.statistics.remotePuts == 1)
            let second = YCache(storageDirectory: two.url, remote: remote)
            let fetched = try await second.resolve(for: key, codec: codec) { Data() }
            #expect(fetched.origin == .remote && fetched.value == value, "\(size)")
            let local = try await YCache(storageDirectory: two.url).resolve(for: key, codec: codec) { Data() }
            #expect(local.origin == .storage && local.value == value, "\(size)")
        }
        await redis.stop()
        await server.stop()
    }
}
