// Key text never reaches a path or a log line unhashed (keys can hold private data): every file and
// folder name under the root is derived from SHA-256 digests, and descriptions print only a digest prefix.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: key privacy")
    struct KeyPrivacy {
        static let marker = "Zq7Private"
        static let key = CacheKey(namespace: "ns-\(marker)", identity: "id-\(marker)/../\u{0}x")
            .variant("variant-\(marker)", "value-\(marker)")
            .version("version-\(marker)", "v-\(marker)")

        @Test("no file or folder name under the root contains key text, also while generating")
        func namesAreHashed() async throws {
            let dir = TemporaryDirectory("privacy")
            let cache = YCache(storageDirectory: dir.url, storageMaximumByteCount: 8192)
            let root = dir.path
            _ = try await cache.data(for: Self.key) {
                // While generating, the key's lock file exists: its name must be hashed too.
                let names = Hardening.allNames(under: root)
                #expect(names.contains { $0.hasSuffix(".lock") })
                #expect(!names.contains { $0.contains(Self.marker) }, "\(names)")
                return Data(count: 3000)
            }
            for index in 0..<3 {  // force a trim: trim.lock and its scans
                _ = try await cache.data(for: Self.key.variant("n", index)) { Data(count: 3000) }
            }
            try await cache.trimStorageIfNeeded()
            let names = Hardening.allNames(under: root)
            #expect(names.contains { $0.hasSuffix(".entry") })
            for name in names {
                #expect(!name.contains(Self.marker), "\(name)")
                #expect(!name.contains("\u{0}"))
                let last = name.split(separator: "/").last.map(String.init) ?? name
                let allowed = last.allSatisfy { $0.isHexDigit || $0 == "." || $0.isLetter }
                #expect(allowed, "\(name) holds only hex digits and fixed words")
            }
        }

        @Test("descriptions and errors never contain key text")
        func descriptionsAreHashed() async throws {
            let key = Self.key
            for text in [key.description, "\(key)", String(reflecting: key), String(describing: [key])] {
                #expect(!text.contains(Self.marker), "\(text)")
                #expect(text.contains(String(key.stableIdentifier.prefix(16))))
            }
            // An error about this key's entry (corrupt, thrown under .throwError) names no key text.
            let (dir, cache) = makeCache("privacy-error")
            _ = try await cache.data(for: key) { Data("v".utf8) }
            let files = KeyFiles(root: dir.path, key: key)
            let handle = try #require(FileHandle(forWritingAtPath: files.entry))
            try handle.seek(toOffset: 40)  // the expiry field: breaks the header checksum
            handle.write(Data([1]))
            try handle.close()
            let fresh = YCache(storageDirectory: dir.url)
            let error = await #expect(throws: YCache.Error.self) {
                try await fresh.value(
                    for: key, codec: DataCodec(), options: .init(readFailurePolicy: .throwError)
                ) { Data() }
            }
            #expect(error.map { !$0.description.contains(Self.marker) } == true)
            let metadata = try await cache.metadata(for: key, codec: DataCodec())
            #expect(metadata?.keyStableIdentifier == key.stableIdentifier)
        }
    }
}
