// Writes the committed seed corpus (Fuzz/corpus): valid entries built with EntryFormat.encodeHeader for
// keys with variants, versions, NUL bytes, emoji and empty parts, plus a few near-misses (a flipped
// checksum, a truncated file, a wrong identity) and bare canonical key bytes. Run by Fuzz/make-seeds.sh.

import Foundation

@main
enum SeedCorpus {
    static func entry(_ key: CacheKey, codec: String, payload: [UInt8], expires: Int64 = 0) -> [UInt8] {
        let identity = EntryIdentity(key: key, codecIdentifier: codec)
        let header = EntryFormat.encodeHeader(
            keyBytes: key.canonicalBytes, codecIdentifier: codec, entryIdentity: identity.digest,
            keyStableDigest: key.stableDigest, payloadByteCount: payload.count,
            payloadChecksum: CRC32C.checksum(payload), createdAtNanoseconds: 1_700_000_000_000_000_000,
            expiresAtNanoseconds: expires)
        return header + payload
    }

    static func main() throws {
        let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "corpus"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keys: [(String, CacheKey)] = [
            ("plain", CacheKey(namespace: "thumbnail", identity: "video-42")),
            ("variants", CacheKey(namespace: "t", identity: "v").variant("size", "320x180").variant("a", "b")
                .version("renderer", 3)),
            ("empty", CacheKey(namespace: "", identity: "")),
            ("nul-dotdot", CacheKey(namespace: "../..", identity: "a\u{0}b/c")),
            ("emoji", CacheKey(namespace: "ns", identity: "🙂é\u{301}").variant("", "")),
            ("duplicates", CacheKey(namespace: "d", identity: "x").variant("k", "v").variant("k", "v")),
        ]
        var files: [(String, [UInt8])] = []
        for (name, key) in keys {
            files.append(("key-\(name)", key.canonicalBytes))
            files.append(("entry-\(name)", entry(key, codec: "data-v1", payload: Array("payload \(name)".utf8))))
        }
        let base = entry(keys[1].1, codec: "json-v1", payload: Array(repeating: 0xAB, count: 300), expires: 5)
        files.append(("entry-expiring", base))
        files.append(("entry-empty-payload", entry(keys[0].1, codec: "", payload: [])))
        var flipped = base
        flipped[20] ^= 1  // header checksum
        files.append(("bad-header-checksum", flipped))
        var payloadFlipped = base
        payloadFlipped[payloadFlipped.count - 1] ^= 1
        files.append(("bad-payload-checksum", payloadFlipped))
        files.append(("truncated", Array(base.dropLast(7))))
        files.append(("header-only", Array(base.prefix(EntryFormat.fixedHeaderSize))))
        // Another entry's identity with a correct header checksum: only the identity check rejects it.
        var wrongIdentity = base
        wrongIdentity[60] ^= 0xFF
        let headerEnd = base.count - 300
        let checksum = wrongIdentity.withUnsafeBytes {
            EntryFormat.headerChecksum(UnsafeRawBufferPointer(rebasing: $0[0..<headerEnd]))
        }
        withUnsafeBytes(of: checksum.littleEndian) { for i in 0..<4 { wrongIdentity[20 + i] = $0[i] } }
        files.append(("wrong-identity", wrongIdentity))
        var version2 = base
        version2[8] = 2
        files.append(("version-2", version2))
        for (name, bytes) in files {
            try Data(bytes).write(to: URL(fileURLWithPath: directory + "/seed-" + name))
        }
        print("wrote \(files.count) seeds to \(directory)")
    }
}
