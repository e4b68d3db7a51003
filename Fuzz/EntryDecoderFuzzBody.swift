// The checks of the entry-decoder fuzz target, shared with the corpus replay test
// (Tests/YashimaSharedTests/Hardening/FuzzCorpusReplayTests.swift includes this file by symlink).
// Pure: no I/O. Invariants are checked with `fuzzCheck`, which traps, so libFuzzer records the input.

#if canImport(YashimaShared)
@testable import YashimaShared  // in the test target; the fuzz build compiles the library files directly
#endif

enum EntryDecoderFuzz {
    /// A failed invariant: traps (libFuzzer then saves the input as a crash).
    static func fuzzCheck(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError("fuzz invariant failed: \(message())") }
    }

    /// Decodes `bytes` as a whole entry file, as a header-only prefix, and (all of it) as key bytes.
    static func run(_ bytes: UnsafeRawBufferPointer) {
        decodeKey(bytes)
        decodeWholeEntry(bytes)
        decodeHeaderPrefix(bytes)
    }

    /// `CacheKey(canonicalBytes:)`: a parsed key re-encodes to exactly its input, and its digests agree.
    @discardableResult
    static func decodeKey(_ bytes: UnsafeRawBufferPointer) -> CacheKey? {
        guard let key = CacheKey(canonicalBytes: bytes) else { return nil }
        let canonical = key.canonicalBytes
        fuzzCheck(canonical.count == bytes.count && canonical.elementsEqual(bytes), "key bytes do not round-trip")
        fuzzCheck(key.canonicalByteCount == bytes.count, "canonicalByteCount disagrees with the bytes")
        fuzzCheck(key.stableDigest == SHA256.hash(bytes), "stableDigest is not the SHA-256 of the bytes")
        fuzzCheck(CacheKey(canonicalBytes: canonical) == key, "re-parsed key differs")
        // Key text never reaches the description (it may be private).
        fuzzCheck(key.description == "CacheKey(" + key.stableIdentifier.prefix(16) + "…)", "description shape")
        return key
    }

    /// The reader's full validation (EntryFile.validate) over a whole file.
    static func decodeWholeEntry(_ bytes: UnsafeRawBufferPointer) {
        let fileSize = Int64(bytes.count)
        guard case .success(let header) = EntryFormat.parseFixedHeader(bytes, fileSize: fileSize) else { return }
        fuzzCheck(header.fileSize == fileSize, "accepted header describes another size")
        fuzzCheck(header.keyByteCount >= 0 && header.codecByteCount >= 0 && header.payloadByteCount >= 0,
                  "negative length accepted")
        fuzzCheck(header.payloadOffset <= bytes.count, "payload offset past the end")
        guard case .success = EntryFormat.validateHeaderChecksum(header, bytes: bytes) else { return }
        let keyBytes = UnsafeRawBufferPointer(rebasing: bytes[header.keyOffset..<header.codecOffset])
        let codecBytes = Array(bytes[header.codecOffset..<header.payloadOffset])
        let payload = UnsafeRawBufferPointer(
            rebasing: bytes[header.payloadOffset..<(header.payloadOffset + Int(header.payloadByteCount))])
        _ = CRC32C.checksum(payload) == header.payloadChecksum
        guard let key = decodeKey(keyBytes) else { return }
        // An expectation built from what the file claims: matches only when the stored identity is right.
        let codec = String(decoding: codecBytes, as: UTF8.self)
        let identity = EntryIdentity(key: key, codecIdentifier: codec)
        let matches = EntryFormat.validateIdentity(
            header, bytes: bytes, expectedIdentity: identity.digest, keyBytes: key.canonicalBytes,
            codecBytes: Array(codec.utf8))
        if case .success = matches {
            fuzzCheck(header.entryIdentity == identity.digest, "identity accepted without matching")
        }
        // Another key's expectation must never match (a reader must not serve another key's value).
        let other = CacheKey(namespace: key.namespace, identity: key.identity + "\u{0}other")
        let otherIdentity = EntryIdentity(key: other, codecIdentifier: codec)
        let wrong = EntryFormat.validateIdentity(
            header, bytes: bytes, expectedIdentity: otherIdentity.digest, keyBytes: other.canonicalBytes,
            codecBytes: Array(codec.utf8))
        if case .failure(.identityMismatch) = wrong {} else { fuzzCheck(false, "another key's expectation matched") }
        _ = header.isExpired(atNanoseconds: Int64.max)
        _ = header.isExpired(atNanoseconds: Int64.min)
    }

    /// The header-only read (EntryFile.readHeader): at most `typicalHeaderReadSize` bytes of a file that
    /// may be longer, then the full header when the key is larger.
    static func decodeHeaderPrefix(_ bytes: UnsafeRawBufferPointer) {
        let prefix = UnsafeRawBufferPointer(rebasing: bytes[0..<min(bytes.count, EntryFormat.typicalHeaderReadSize)])
        for claimedSize in [Int64(bytes.count), Int64(bytes.count) + 1, Int64.max] {
            guard case .success(let header) = EntryFormat.parseFixedHeader(prefix, fileSize: claimedSize) else {
                continue
            }
            fuzzCheck(header.fileSize == claimedSize, "prefix header describes another size")
            let available = header.payloadOffset <= bytes.count ? bytes : prefix
            let checked = EntryFormat.validateHeaderChecksum(header, bytes: available)
            if available.count < header.payloadOffset {
                if case .failure(.tooShort) = checked {} else { fuzzCheck(false, "checksum over too few bytes") }
            }
        }
    }
}
