// The public cache key: namespace, identity, variant and version components, equality and hashing by the
// canonical form (UTF-8 bytes, components sorted), Yashima's `Codable` shape, and the stable identifier.
// The canonical byte form is in CacheKey+Canonical.swift, the field encoding in CanonicalEncoding.swift,
// the entry identity in EntryIdentity.swift. Key text is data: it never appears in descriptions.

import Synchronization

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
    public var namespace: String {
        get { fields.namespace }
        set { fields = fields.with(namespace: newValue) }
    }
    /// The identity of the cached thing within its namespace, such as `video-42`.
    public var identity: String {
        get { fields.identity }
        set { fields = fields.with(identity: newValue) }
    }
    /// The key's variant components, in the order they were added; duplicates are kept.
    public var variants: [CacheKeyComponent] {
        get { fields.variants.added }
        set { fields = fields.with(variants: Components(newValue)) }
    }
    /// The key's version components, in the order they were added; duplicates are kept.
    public var versions: [CacheKeyComponent] {
        get { fields.versions.added }
        set { fields = fields.with(versions: Components(newValue)) }
    }

    /// A component list as added (what `variants`/`versions` show) and in canonical order (what the
    /// canonical form, equality and hashing use, sorted here once so that hashing a key never sorts): one
    /// array when the components were added in canonical order, as they most often are.
    private struct Components: Sendable {
        let added: [CacheKeyComponent]
        let sorted: [CacheKeyComponent]
        /// Whether `added` is in canonical order (then `sorted` is the same array).
        let inOrder: Bool

        init(_ added: [CacheKeyComponent]) {
            self.added = added
            inOrder = zip(added, added.dropFirst()).allSatisfy { CacheKeyComponent.order($0, $1) <= 0 }
            // Equal components are equal byte for byte, so an added list in order is its sorted list.
            sorted = inOrder ? added : added.sorted()
        }

        private init(added: [CacheKeyComponent], sorted: [CacheKeyComponent], inOrder: Bool) {
            self.added = added
            self.sorted = sorted
            self.inOrder = inOrder
        }

        /// The list with `component` added last.
        func appending(_ component: CacheKeyComponent) -> Components {
            let added = self.added + CollectionOfOne(component)
            if inOrder, sorted.last.map({ CacheKeyComponent.order($0, component) <= 0 }) ?? true {
                return Components(added: added, sorted: added, inOrder: true)
            }
            var sorted = self.sorted
            CacheKey.insertSorted(component, into: &sorted)
            return Components(added: added, sorted: sorted, inOrder: false)
        }
    }

    /// The key's parts, never changed once made: a key is one reference to them, so a copy of a key (a
    /// lookup copies it into its tier lookup, the memory table, its flight) retains one object instead of
    /// two strings and four arrays. A change to a key makes new fields.
    private final class Fields: Sendable {
        let namespace: String
        let identity: String
        let variants: Components
        let versions: Components
        /// The canonical content's hash once asked for, 0 until then (`canonicalHash`).
        private let hashOnceAsked = Atomic<Int>(0)

        init(namespace: String, identity: String, variants: Components, versions: Components) {
            self.namespace = namespace
            self.identity = identity
            self.variants = variants
            self.versions = versions
        }

        /// The canonical content's hash (this process's seeded `Hasher`, never stored or sent): its
        /// namespace's and identity's UTF-8 bytes, then each sorted component list with its count. The
        /// memory, expectation and verified-inode tables hash a key once per lookup each, and this makes
        /// each of those one combine of a word instead of a pass over every field's bytes; made when first
        /// asked for, so a key built in steps (`variant`, `version`) is hashed once. Equal keys have equal
        /// hashes (both come from the same canonical bytes), so `==` rejects on it first. Two threads that
        /// ask at once both compute the same value: the relaxed store publishes nothing else.
        var canonicalHash: Int {
            let known = hashOnceAsked.load(ordering: .relaxed)
            if known != 0 { return known }
            var hasher = Hasher()
            hashUTF8(namespace, into: &hasher)
            hashUTF8(identity, into: &hasher)
            hasher.combine(variants.sorted.count)
            for component in variants.sorted { component.hash(into: &hasher) }
            hasher.combine(versions.sorted.count)
            for component in versions.sorted { component.hash(into: &hasher) }
            let hash = hasher.finalize()
            let stored = hash == 0 ? 1 : hash  // 0 means "not yet"
            hashOnceAsked.store(stored, ordering: .relaxed)
            return stored
        }

        /// These fields with the parts given replaced.
        func with(
            namespace: String? = nil, identity: String? = nil, variants: Components? = nil,
            versions: Components? = nil
        ) -> Fields {
            Fields(
                namespace: namespace ?? self.namespace, identity: identity ?? self.identity,
                variants: variants ?? self.variants, versions: versions ?? self.versions)
        }
    }

    private var fields: Fields

    /// The variant components in canonical order (the canonical form's).
    var sortedVariants: [CacheKeyComponent] { fields.variants.sorted }
    /// The version components in canonical order (the canonical form's).
    var sortedVersions: [CacheKeyComponent] { fields.versions.sorted }

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
        fields = Fields(
            namespace: namespace, identity: identity, variants: Components(variants), versions: Components(versions))
    }

    /// Creates a key with no variants or versions, in the `default` namespace unless told otherwise.
    ///
    /// - Parameters:
    ///   - identity: The identity within the namespace; any text, including the empty string.
    ///   - namespace: The namespace the key belongs to; `"default"` when omitted.
    public init(_ identity: String, namespace: String = "default") {
        self.init(namespace: namespace, identity: identity)
    }

    /// A key whose components are already in canonical order (the canonical-form parser's): they are kept
    /// as added and as sorted alike.
    init(namespace: String, identity: String, sortedVariants: [CacheKeyComponent], sortedVersions: [CacheKeyComponent])
    {
        fields = Fields(
            namespace: namespace, identity: identity, variants: Components(sortedVariants),
            versions: Components(sortedVersions))
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
        try container.encode(variants, forKey: .variants)
        try container.encode(versions, forKey: .versions)
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
        copy.fields = fields.with(
            variants: fields.variants.appending(CacheKeyComponent(name: name, value: String(describing: value))))
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
        copy.fields = fields.with(
            versions: fields.versions.appending(CacheKeyComponent(name: name, value: String(describing: value))))
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
        // The same fields (a key and its copies) are equal without a look at their bytes.
        if lhs.fields === rhs.fields { return true }
        return lhs.fields.canonicalHash == rhs.fields.canonicalHash
            && compareUTF8(lhs.namespace, rhs.namespace) == 0
            && compareUTF8(lhs.identity, rhs.identity) == 0
            && lhs.sortedVariants == rhs.sortedVariants
            && lhs.sortedVersions == rhs.sortedVersions
    }

    /// Feeds the key's canonical content into `hasher`.
    ///
    /// - Parameter hasher: The hasher to feed.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fields.canonicalHash)
    }

    /// The canonical content's hash, made once per key (this process's seeded `Hasher`: never stored or
    /// sent). Equal keys have equal ones.
    var canonicalHash: Int { fields.canonicalHash }

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
