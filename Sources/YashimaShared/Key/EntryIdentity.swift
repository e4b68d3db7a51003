// The entry identity: a key bound to the codec that encodes its value, the name an entry is stored under
// (its SHA-256 names the entry file, Storage/Paths.swift). Changing the codec changes the entry, so
// differently encoded values never collide.

/// A cache key bound to the codec that encodes its value: the name under which an entry is stored.
///
/// The digest is the SHA-256 of the fields `yashima.cache-entry-identity.v1`, `key`, the key's
/// canonical bytes (as one field), `codec` and the codec identifier, in the key's field encoding.
/// Changing the codec thus changes the entry, so differently encoded values never collide.
struct EntryIdentity: Hashable, Sendable {
    /// The SHA-256 of the entry identity's fields.
    let digest: SHA256Digest

    /// Computes the identity of `key`'s entry as encoded by a codec.
    ///
    /// - Parameters:
    ///   - key: The cache key.
    ///   - codecIdentifier: The codec's stable identifier, such as `data-v1`.
    init(key: CacheKey, codecIdentifier: String) {
        digest = Self.digest(keyByteCount: key.canonicalByteCount, codecIdentifier: codecIdentifier) {
            key.writeCanonical(to: &$0)
        }
    }

    /// Computes the identity of a key's entry from the key's canonical bytes, already encoded: the same
    /// digest as ``init(key:codecIdentifier:)`` of the key they encode, without encoding the key again.
    ///
    /// - Parameters:
    ///   - canonicalKey: The key's `canonicalBytes`.
    ///   - codecIdentifier: The codec's stable identifier, such as `data-v1`.
    init(canonicalKey: UnsafeRawBufferPointer, codecIdentifier: String) {
        digest = Self.digest(keyByteCount: canonicalKey.count, codecIdentifier: codecIdentifier) {
            $0.write(canonicalKey)
        }
    }

    /// The SHA-256 of the identity's fields, the key's canonical bytes written by `writeKey`.
    private static func digest(
        keyByteCount: Int, codecIdentifier: String, writeKey: (inout CanonicalFieldWriter) -> Void
    ) -> SHA256Digest {
        let count =
            CanonicalFieldWriter.fieldSize(CanonicalLabel.entryMagic)
            + CanonicalFieldWriter.fieldSize(CanonicalLabel.key)
            + CanonicalFieldWriter.fieldSize(length: keyByteCount)
            + CanonicalFieldWriter.fieldSize(CanonicalLabel.codec)
            + CanonicalFieldWriter.fieldSize(codecIdentifier)
        return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
            var writer = CanonicalFieldWriter(buffer)
            writer.field(CanonicalLabel.entryMagic)
            writer.field(CanonicalLabel.key)
            writer.fieldPrefix(length: keyByteCount)
            writeKey(&writer)
            writer.fieldSuffix()
            writer.field(CanonicalLabel.codec)
            writer.field(codecIdentifier)
            return SHA256.hash(UnsafeRawBufferPointer(rebasing: buffer[..<writer.finish(expecting: count)]))
        }
    }

    /// The digest as 64 lowercase hexadecimal characters.
    var hex: String {
        digest.hex
    }
}
