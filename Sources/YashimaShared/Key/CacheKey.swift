// CacheKey.swift: the public cache key, its canonical byte form and its stable SHA-256 identifier.
// Owns the byte-exact key encoding shared with the Yashima cache engine, the parser that reads it
// back, and EntryIdentity (a key bound to a codec). Key text is data: it never appears in descriptions.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One named variant or version of a key, such as `size=320x180`.
///
/// Components order by name, then value, comparing their UTF-8 bytes; equality compares the same bytes
/// (not Unicode canonical equivalence).
public struct CacheKeyComponent: Hashable, Sendable, Comparable, Codable {
    /// The component's name, such as `size`.
    public var name: String
    /// The component's value as text, such as `320x180`.
    public var value: String

    /// Creates a component.
    ///
    /// - Parameters:
    ///   - name: The component's name.
    ///   - value: The component's value as text.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Creates a component.
    ///
    /// - Parameters:
    ///   - name: The component's name.
    ///   - value: The component's value as text.
    public init(_ name: String, _ value: String) {
        self.init(name: name, value: value)
    }

    /// Whether two components have byte-for-byte identical names and values.
    ///
    /// - Parameters:
    ///   - lhs: A component.
    ///   - rhs: Another component.
    /// - Returns: `true` when both the names' and the values' UTF-8 bytes are equal.
    public static func == (lhs: CacheKeyComponent, rhs: CacheKeyComponent) -> Bool {
        compareUTF8(lhs.name, rhs.name) == 0 && compareUTF8(lhs.value, rhs.value) == 0
    }

    /// Whether `lhs` sorts before `rhs`: by name, then by value, comparing UTF-8 bytes.
    ///
    /// - Parameters:
    ///   - lhs: A component.
    ///   - rhs: Another component.
    /// - Returns: `true` when `lhs` orders strictly before `rhs`.
    public static func < (lhs: CacheKeyComponent, rhs: CacheKeyComponent) -> Bool {
        order(lhs, rhs) < 0
    }

    /// Feeds the component's UTF-8 bytes into `hasher`.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) {
        hashUTF8(name, into: &hasher)
        hashUTF8(value, into: &hasher)
    }

    /// Three-way comparison by (name, value) over UTF-8 bytes: negative, zero or positive.
    static func order(_ lhs: CacheKeyComponent, _ rhs: CacheKeyComponent) -> Int {
        let byName = compareUTF8(lhs.name, rhs.name)
        return byName != 0 ? byName : compareUTF8(lhs.value, rhs.value)
    }
}

/// Identifies one cached value: a namespace, an identity, and any number of variant and version components.
///
/// Every part is opaque data. Slashes, `..`, NUL bytes, empty strings and emoji are all fine and never
/// reach a file name directly: the cache stores entries under ``stableIdentifier``, a SHA-256 of the
/// key's canonical byte form, which is compatible byte for byte with the Yashima cache engine.
///
/// `variants` and `versions` keep the order in which components were added (duplicates included); the
/// canonical form sorts them by name then value (comparing UTF-8 bytes), so the order does not matter to
/// equality, hashing or the entry a key names. Equality and hashing follow the canonical form: two keys
/// are equal exactly when their UTF-8 bytes are, so strings that are merely canonically equivalent in
/// Unicode (such as a precomposed and a decomposed "é") make different keys. `Codable` uses Yashima's
/// shape: `namespace`, `identity`, `variants` and `versions` (arrays of `name`/`value` objects).
///
/// ```swift
/// let key = CacheKey(namespace: "thumbnail", identity: "video-42")
///     .variant("size", "320x180")
///     .version("renderer", 3)
/// ```
public struct CacheKey: Hashable, Sendable, CustomStringConvertible, Codable {
    /// The namespace the key belongs to, such as `thumbnail`.
    public var namespace: String
    /// The identity of the cached thing within its namespace, such as `video-42`.
    public var identity: String
    /// The key's variant components, in the order they were added; duplicates are kept.
    public var variants: [CacheKeyComponent] {
        get { addedVariants }
        set {
            addedVariants = newValue
            sortedVariants = newValue.sorted()
        }
    }
    /// The key's version components, in the order they were added; duplicates are kept.
    public var versions: [CacheKeyComponent] {
        get { addedVersions }
        set {
            addedVersions = newValue
            sortedVersions = newValue.sorted()
        }
    }

    // The components as added (what `variants`/`versions` show) and sorted (what the canonical form,
    // equality and hashing use, kept up to date here so that hashing a key never sorts).
    private var addedVariants: [CacheKeyComponent] = []
    private var addedVersions: [CacheKeyComponent] = []
    private(set) var sortedVariants: [CacheKeyComponent] = []
    private(set) var sortedVersions: [CacheKeyComponent] = []

    /// Creates a key.
    ///
    /// - Parameters:
    ///   - namespace: The namespace the key belongs to; any text, including the empty string.
    ///   - identity: The identity within the namespace; any text, including the empty string.
    ///   - variants: Variant components, in any order.
    ///   - versions: Version components, in any order.
    public init(
        namespace: String, identity: String, variants: [CacheKeyComponent] = [], versions: [CacheKeyComponent] = []
    ) {
        self.namespace = namespace
        self.identity = identity
        self.variants = variants
        self.versions = versions
    }

    /// Creates a key with no variants or versions, in the `default` namespace unless told otherwise.
    ///
    /// - Parameters:
    ///   - identity: The identity within the namespace; any text, including the empty string.
    ///   - namespace: The namespace the key belongs to; `"default"` when omitted.
    public init(_ identity: String, namespace: String = "default") {
        self.init(namespace: namespace, identity: identity)
    }

    private enum CodingKeys: String, CodingKey {
        case namespace, identity, variants, versions
    }

    /// Decodes a key from Yashima's `Codable` shape.
    ///
    /// - Parameter decoder: The decoder to read from.
    /// - Throws: The decoder's errors when a field is missing or has the wrong type.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            namespace: try container.decode(String.self, forKey: .namespace),
            identity: try container.decode(String.self, forKey: .identity),
            variants: try container.decode([CacheKeyComponent].self, forKey: .variants),
            versions: try container.decode([CacheKeyComponent].self, forKey: .versions))
    }

    /// Encodes the key in Yashima's `Codable` shape (components in the order they were added).
    ///
    /// - Parameter encoder: The encoder to write to.
    /// - Throws: The encoder's errors.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(namespace, forKey: .namespace)
        try container.encode(identity, forKey: .identity)
        try container.encode(addedVariants, forKey: .variants)
        try container.encode(addedVersions, forKey: .versions)
    }

    /// Returns a copy of this key with one more variant component.
    ///
    /// A variant distinguishes renditions of the same thing (a size, a scale, a format).
    ///
    /// - Parameters:
    ///   - name: The variant's name.
    ///   - value: The variant's value; its text is `String(describing: value)`.
    /// - Returns: The extended key. Adding an existing component again keeps both copies.
    public func variant(_ name: String, _ value: some CustomStringConvertible) -> CacheKey {
        var copy = self
        let component = CacheKeyComponent(name: name, value: String(describing: value))
        copy.addedVariants.append(component)
        Self.insertSorted(component, into: &copy.sortedVariants)
        return copy
    }

    /// Returns a copy of this key with one more version component.
    ///
    /// A version names the code or data that produced the value (a renderer or schema version), so
    /// bumping it makes old entries unreachable.
    ///
    /// - Parameters:
    ///   - name: The version's name.
    ///   - value: The version's value; its text is `String(describing: value)`.
    /// - Returns: The extended key. Adding an existing component again keeps both copies.
    public func version(_ name: String, _ value: some CustomStringConvertible) -> CacheKey {
        var copy = self
        let component = CacheKeyComponent(name: name, value: String(describing: value))
        copy.addedVersions.append(component)
        Self.insertSorted(component, into: &copy.sortedVersions)
        return copy
    }

    /// The key's stable identifier: the lowercase hexadecimal SHA-256 of its canonical byte form.
    ///
    /// The same key gives the same 64-character identifier in every process, on every machine and in
    /// the Yashima cache engine; it is safe to use as a file name.
    public var stableIdentifier: String {
        stableDigest.hex
    }

    /// A short, privacy-safe description: `CacheKey(` then the first 16 characters of
    /// ``stableIdentifier``, then `…)`.
    ///
    /// Keys may hold private data, so no key text ever appears here.
    public var description: String {
        "CacheKey(" + String(stableIdentifier.prefix(16)) + "…)"
    }

    /// Whether two keys have identical canonical forms.
    ///
    /// - Parameters:
    ///   - lhs: A key.
    ///   - rhs: Another key.
    /// - Returns: `true` when namespace, identity and every component (in sorted order) are byte-for-byte
    ///   equal.
    public static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        compareUTF8(lhs.namespace, rhs.namespace) == 0
            && compareUTF8(lhs.identity, rhs.identity) == 0
            && lhs.sortedVariants == rhs.sortedVariants
            && lhs.sortedVersions == rhs.sortedVersions
    }

    /// Feeds the key's canonical content into `hasher`.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) {
        hashUTF8(namespace, into: &hasher)
        hashUTF8(identity, into: &hasher)
        hasher.combine(sortedVariants.count)
        for component in sortedVariants { component.hash(into: &hasher) }
        hasher.combine(sortedVersions.count)
        for component in sortedVersions { component.hash(into: &hasher) }
    }

    // MARK: Canonical form

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
        var key = CacheKey(namespace: namespace, identity: identity)
        key.addedVariants = variants  // sorted already (checked while parsing)
        key.sortedVariants = variants
        key.addedVersions = versions
        key.sortedVersions = versions
        return key
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

    /// Inserts `component` after any equal ones, keeping `components` sorted.
    private static func insertSorted(_ component: CacheKeyComponent, into components: inout [CacheKeyComponent]) {
        var low = 0
        var high = components.count
        while low < high {
            let middle = (low + high) / 2
            if CacheKeyComponent.order(components[middle], component) <= 0 {
                low = middle + 1
            } else {
                high = middle
            }
        }
        components.insert(component, at: low)
    }
}

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
        let keyCount = key.canonicalByteCount
        let count =
            CanonicalFieldWriter.fieldSize(CanonicalLabel.entryMagic)
            + CanonicalFieldWriter.fieldSize(CanonicalLabel.key)
            + CanonicalFieldWriter.fieldSize(length: keyCount)
            + CanonicalFieldWriter.fieldSize(CanonicalLabel.codec)
            + CanonicalFieldWriter.fieldSize(codecIdentifier)
        digest = withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
            var writer = CanonicalFieldWriter(buffer)
            writer.field(CanonicalLabel.entryMagic)
            writer.field(CanonicalLabel.key)
            writer.fieldPrefix(length: keyCount)
            key.writeCanonical(to: &writer)
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

// MARK: - Field encoding

/// The fixed field texts of the canonical forms.
enum CanonicalLabel {
    /// The first field of a key's canonical form.
    static let keyMagic: StaticString = "yashima.cache-key.v1"
    /// The first field of an entry identity.
    static let entryMagic: StaticString = "yashima.cache-entry-identity.v1"
    /// Precedes the namespace.
    static let namespace: StaticString = "namespace"
    /// Precedes the identity.
    static let identity: StaticString = "identity"
    /// Precedes the variant count.
    static let variants: StaticString = "variants"
    /// Precedes the version count.
    static let versions: StaticString = "versions"
    /// Precedes each component's name and value.
    static let component: StaticString = "component"
    /// Precedes the key's canonical bytes in an entry identity.
    static let key: StaticString = "key"
    /// Precedes the codec identifier in an entry identity.
    static let codec: StaticString = "codec"
}

/// Writes canonical fields into a buffer sized in advance with the matching `fieldSize` functions.
///
/// A field is the decimal count of its bytes, a 0x00 byte, the bytes, and a 0x0A byte. Writing past
/// the end of the buffer is a programming error and traps.
struct CanonicalFieldWriter {
    /// The destination.
    private let buffer: UnsafeMutableRawBufferPointer
    /// The offset of the next byte to write.
    private var position = 0

    /// Creates a writer at the start of `buffer`.
    ///
    /// - Parameter buffer: The destination; must stay valid while the writer is used.
    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    /// Checks that exactly the precomputed number of bytes was written.
    ///
    /// - Parameter expected: The size computed with the `fieldSize` functions.
    /// - Returns: The number of bytes written, which is `expected`.
    func finish(expecting expected: Int) -> Int {
        precondition(position == expected, "canonical size mismatch")
        return position
    }

    /// The number of decimal digits in `value`.
    ///
    /// - Parameter value: A non-negative count.
    /// - Returns: The length of `value` written in shortest decimal.
    static func decimalDigitCount(_ value: Int) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    /// The encoded size of a field whose content is `length` bytes long.
    ///
    /// - Parameter length: The content's byte count.
    /// - Returns: Digits, separator, content and terminator together.
    static func fieldSize(length: Int) -> Int {
        decimalDigitCount(length) + 2 + length
    }

    /// The encoded size of a field holding the UTF-8 bytes of `text`.
    ///
    /// - Parameter text: The field's content.
    /// - Returns: The field's encoded size.
    static func fieldSize(_ text: String) -> Int {
        fieldSize(length: text.utf8.count)
    }

    /// The encoded size of a field holding a constant label.
    ///
    /// - Parameter text: The field's content.
    /// - Returns: The field's encoded size.
    static func fieldSize(_ text: StaticString) -> Int {
        fieldSize(length: text.utf8CodeUnitCount)
    }

    /// Appends raw bytes.
    private mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        precondition(bytes.count <= buffer.count - position, "canonical buffer overflow")
        (buffer.baseAddress! + position).copyMemory(from: source, byteCount: bytes.count)
        position += bytes.count
    }

    /// Appends one byte.
    private mutating func write(_ byte: UInt8) {
        precondition(position < buffer.count, "canonical buffer overflow")
        buffer[position] = byte
        position += 1
    }

    /// Writes `value` in shortest decimal ASCII digits.
    private mutating func digits(_ value: Int) {
        if value < 10 {
            write(0x30 + UInt8(truncatingIfNeeded: value))
            return
        }
        let count = Self.decimalDigitCount(value)
        precondition(count <= buffer.count - position, "canonical buffer overflow")
        var rest = value
        for index in stride(from: position + count - 1, through: position, by: -1) {
            buffer[index] = 0x30 + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
        position += count
    }

    /// Writes a field's prefix: the decimal `length` and a 0x00 byte.
    ///
    /// - Parameter length: The byte count of the field's content.
    mutating func fieldPrefix(length: Int) {
        digits(length)
        write(0x00)
    }

    /// Writes a field's terminating 0x0A byte.
    mutating func fieldSuffix() {
        write(0x0A)
    }

    /// Writes a whole field holding `bytes`.
    ///
    /// - Parameter bytes: The field's content.
    mutating func field(_ bytes: UnsafeRawBufferPointer) {
        fieldPrefix(length: bytes.count)
        write(bytes)
        fieldSuffix()
    }

    /// Writes a whole field holding the UTF-8 bytes of `text`.
    ///
    /// - Parameter text: The field's content.
    mutating func field(_ text: String) {
        let written: Void? = text.utf8.withContiguousStorageIfAvailable { field(UnsafeRawBufferPointer($0)) }
        if written == nil {
            var copy = text
            copy.withUTF8 { field(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Writes a whole field holding the UTF-8 bytes of a constant label.
    ///
    /// - Parameter text: The field's content.
    mutating func field(_ text: StaticString) {
        text.withUTF8Buffer { field(UnsafeRawBufferPointer($0)) }
    }

    /// Writes a whole field holding `value` in shortest decimal ASCII digits.
    ///
    /// - Parameter value: A non-negative count.
    mutating func decimalField(_ value: Int) {
        fieldPrefix(length: Self.decimalDigitCount(value))
        digits(value)
        fieldSuffix()
    }
}

/// Reads canonical fields back, strictly: any deviation from the exact encoding fails.
struct CanonicalFieldReader {
    /// The whole input.
    let buffer: UnsafeBufferPointer<UInt8>
    /// The offset of the next unread byte.
    private(set) var position = 0

    /// Creates a reader at the start of `buffer`.
    ///
    /// - Parameter buffer: The canonical bytes; must stay valid while the reader is used.
    init(buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    /// Whether every byte has been read.
    var isAtEnd: Bool { position == buffer.count }

    /// The number of unread bytes.
    var remaining: Int { buffer.count - position }

    /// Reads the next field's content, or returns `nil` if it is malformed or truncated.
    ///
    /// The length must be shortest decimal (no leading zeros), followed by 0x00, the content, and 0x0A.
    ///
    /// - Returns: The field's content, pointing into ``buffer``.
    mutating func field() -> UnsafeBufferPointer<UInt8>? {
        var cursor = position
        var length = 0
        var digits = 0
        while cursor < buffer.count, buffer[cursor] != 0x00 {
            let byte = buffer[cursor]
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            guard digits == 0 || length != 0 else { return nil }  // no leading zeros
            digits += 1
            guard digits <= 18 else { return nil }  // cannot overflow, and no input is that long
            length = length * 10 + Int(byte - 0x30)
            cursor += 1
        }
        guard digits > 0, cursor < buffer.count else { return nil }
        cursor += 1  // the 0x00 separator
        guard length < buffer.count - cursor, buffer[cursor + length] == 0x0A else { return nil }
        let content = UnsafeBufferPointer(rebasing: buffer[cursor..<(cursor + length)])
        position = cursor + length + 1
        return content
    }

    /// Reads a field and checks that it holds exactly `label`.
    ///
    /// - Parameter label: The expected content.
    /// - Returns: Whether the field was present and matched.
    mutating func expect(_ label: StaticString) -> Bool {
        guard let content = field() else { return false }
        return label.withUTF8Buffer { expected in
            expected.count == content.count && expected.elementsEqual(content)
        }
    }

    /// Reads a field holding valid UTF-8 text.
    ///
    /// - Returns: The text, or `nil` if the field is malformed or not valid UTF-8.
    mutating func string() -> String? {
        guard let content = field() else { return nil }
        // Decoding repairs invalid UTF-8 with U+FFFD, so the input was valid exactly when the decoded
        // bytes are identical to it. (This avoids String(validating:as:), which is generic and slow.)
        var text = String(decoding: content, as: UTF8.self)
        let identical = text.withUTF8 { decoded in
            decoded.count == content.count
                && (decoded.isEmpty || memcmp(decoded.baseAddress!, content.baseAddress!, decoded.count) == 0)
        }
        return identical ? text : nil
    }

    /// Reads a field holding a count in shortest decimal ASCII digits.
    ///
    /// - Returns: The count, or `nil` if the field is malformed, has leading zeros or is too long.
    mutating func decimal() -> Int? {
        guard let content = field(), !content.isEmpty, content.count <= 18 else { return nil }
        guard content.count == 1 || content[0] != 0x30 else { return nil }
        var value = 0
        for byte in content {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }
}

// MARK: - UTF-8 byte comparison

/// Compares two strings' UTF-8 bytes lexicographically.
///
/// - Returns: A negative number, zero or a positive number as `lhs` sorts before, equal to or after `rhs`.
func compareUTF8(_ lhs: String, _ rhs: String) -> Int {
    var lhs = lhs
    var rhs = rhs
    return lhs.withUTF8 { left in
        rhs.withUTF8 { right in
            let common = min(left.count, right.count)
            if common > 0 {
                let result = memcmp(left.baseAddress!, right.baseAddress!, common)
                if result != 0 { return result < 0 ? -1 : 1 }
            }
            return left.count == right.count ? 0 : (left.count < right.count ? -1 : 1)
        }
    }
}

/// Feeds a string's UTF-8 bytes, then their count, into `hasher` (matching byte-wise equality).
func hashUTF8(_ text: String, into hasher: inout Hasher) {
    var text = text
    text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    hasher.combine(text.utf8.count)
}
