// A key's canonical byte form (shared byte for byte with the Yashima cache engine): what its stable
// identifier hashes and what an entry file stores, written with the field encoding of
// CanonicalEncoding.swift, and the strict parser that reads it back (listing, observation).

extension CacheKey {
    /// The key's canonical byte form, as hashed into ``stableIdentifier``.
    ///
    /// A sequence of fields, each the decimal count of its UTF-8 bytes, a 0x00 byte, the bytes and a
    /// 0x0A byte: `yashima.cache-key.v1`, `namespace`, the namespace, `identity`, the identity,
    /// `variants`, the variant count, then `component`, name, value for each sorted variant, then
    /// `versions`, the version count and the versions in the same way.
    var canonicalBytes: [UInt8] {
        let count = canonicalByteCount
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var writer = CanonicalFieldWriter(UnsafeMutableRawBufferPointer(buffer))
            writeCanonical(to: &writer)
            initialized = writer.finish(expecting: count)
        }
    }

    /// The SHA-256 of ``canonicalBytes``, encoded into one temporary buffer (on the stack when small).
    var stableDigest: SHA256Digest {
        let count = canonicalByteCount
        return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
            var writer = CanonicalFieldWriter(buffer)
            writeCanonical(to: &writer)
            return SHA256.hash(UnsafeRawBufferPointer(rebasing: buffer[..<writer.finish(expecting: count)]))
        }
    }

    /// The exact length of ``canonicalBytes``, computed without encoding anything.
    var canonicalByteCount: Int {
        var total =
            CanonicalFieldWriter.fieldSize(CanonicalLabel.keyMagic)
            + CanonicalFieldWriter.fieldSize(CanonicalLabel.namespace)
            + CanonicalFieldWriter.fieldSize(namespace)
            + CanonicalFieldWriter.fieldSize(CanonicalLabel.identity)
            + CanonicalFieldWriter.fieldSize(identity)
        total += Self.componentsByteCount(sortedVariants, label: CanonicalLabel.variants)
        total += Self.componentsByteCount(sortedVersions, label: CanonicalLabel.versions)
        return total
    }

    /// The encoded size of a labelled component list.
    private static func componentsByteCount(_ components: [CacheKeyComponent], label: StaticString) -> Int {
        var total =
            CanonicalFieldWriter.fieldSize(label)
            + CanonicalFieldWriter.fieldSize(length: CanonicalFieldWriter.decimalDigitCount(components.count))
        for component in components {
            total +=
                CanonicalFieldWriter.fieldSize(CanonicalLabel.component)
                + CanonicalFieldWriter.fieldSize(component.name)
                + CanonicalFieldWriter.fieldSize(component.value)
        }
        return total
    }

    /// Parses a canonical byte form back into a key, as when listing stored entries.
    ///
    /// Only exact canonical forms are accepted: every length and count in shortest decimal, valid
    /// UTF-8 text, components in sorted order and nothing after the last field. So a parsed key's
    /// ``canonicalBytes`` always equal the input.
    ///
    /// - Parameter canonicalBytes: Bytes previously produced by ``canonicalBytes``.
    /// - Returns: `nil` for any malformed, truncated or trailing-garbage input.
    init?(canonicalBytes: some Collection<UInt8>) {
        let parsed: CacheKey?? = canonicalBytes.withContiguousStorageIfAvailable { Self.parse($0) }
        if let parsed {
            guard let key = parsed else { return nil }
            self = key
        } else {
            guard let key = Array(canonicalBytes).withUnsafeBufferPointer({ Self.parse($0) }) else { return nil }
            self = key
        }
    }

    /// Writes the canonical fields of this key; `writer` must have ``canonicalByteCount`` bytes of room.
    func writeCanonical(to writer: inout CanonicalFieldWriter) {
        writer.field(CanonicalLabel.keyMagic)
        writer.field(CanonicalLabel.namespace)
        writer.field(namespace)
        writer.field(CanonicalLabel.identity)
        writer.field(identity)
        Self.writeComponents(sortedVariants, label: CanonicalLabel.variants, to: &writer)
        Self.writeComponents(sortedVersions, label: CanonicalLabel.versions, to: &writer)
    }

    /// Writes a component list: its label, its count, then `component`, name, value for each.
    private static func writeComponents(
        _ components: [CacheKeyComponent], label: StaticString, to writer: inout CanonicalFieldWriter
    ) {
        writer.field(label)
        writer.decimalField(components.count)
        for component in components {
            writer.field(CanonicalLabel.component)
            writer.field(component.name)
            writer.field(component.value)
        }
    }

    /// Parses a whole canonical form, or returns `nil`.
    private static func parse(_ buffer: UnsafeBufferPointer<UInt8>) -> CacheKey? {
        var reader = CanonicalFieldReader(buffer: buffer)
        guard reader.expect(CanonicalLabel.keyMagic),
            reader.expect(CanonicalLabel.namespace),
            let namespace = reader.string(),
            reader.expect(CanonicalLabel.identity),
            let identity = reader.string(),
            let variants = parseComponents(&reader, label: CanonicalLabel.variants),
            let versions = parseComponents(&reader, label: CanonicalLabel.versions),
            reader.isAtEnd
        else { return nil }
        // Sorted already (checked while parsing).
        return CacheKey(namespace: namespace, identity: identity, sortedVariants: variants, sortedVersions: versions)
    }

    /// Parses a labelled component list, requiring sorted order.
    private static func parseComponents(_ reader: inout CanonicalFieldReader, label: StaticString)
        -> [CacheKeyComponent]?
    {
        guard reader.expect(label), let count = reader.decimal() else { return nil }
        var components: [CacheKeyComponent] = []
        // Every component takes at least 18 bytes, which bounds any up-front reservation.
        components.reserveCapacity(min(count, reader.remaining / 18))
        for _ in 0..<count {
            guard reader.expect(CanonicalLabel.component),
                let name = reader.string(),
                let value = reader.string()
            else { return nil }
            let component = CacheKeyComponent(name: name, value: value)
            if let last = components.last, CacheKeyComponent.order(last, component) > 0 { return nil }
            components.append(component)
        }
        return components
    }
}
