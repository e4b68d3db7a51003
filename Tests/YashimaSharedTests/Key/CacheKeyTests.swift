// CacheKeyTests.swift: checks CacheKey's canonical form against the golden vectors shared with the
// Yashima engine, its ordering, equality and hashing, odd key text, and the strict canonical parser.

import Foundation
import Testing

@testable import YashimaShared

@Suite("CacheKey")
struct CacheKeyTests {
    /// The golden key: namespace "thumbnail", identity "video-42", two variants and one version.
    static let golden = CacheKey(namespace: "thumbnail", identity: "video-42")
        .variant("size", "320x180")
        .variant("scale", 2)
        .version("renderer", 3)

    /// Encodes one field the slow, obvious way.
    static func field(_ bytes: [UInt8]) -> [UInt8] {
        Array(String(bytes.count).utf8) + [0x00] + bytes + [0x0A]
    }

    static func field(_ text: String) -> [UInt8] {
        field(Array(text.utf8))
    }

    @Test("golden stable identifier")
    func goldenStableIdentifier() {
        #expect(Self.golden.stableIdentifier == "a02bbdf6fd55ad4512872772211b170d6693e8e80faefb18344ca7a3b0bd7791")
        #expect(Self.golden.stableDigest == SHA256.hash(Self.golden.canonicalBytes))
    }

    @Test("golden entry identities of CodableCodec entries: Yashima's identifiers, so Yashima's identities")
    func goldenCodableEntryIdentities() {
        let plist = CodableCodec([String: Int].self, format: .propertyList)
        let json = CodableCodec([String: Int].self, format: .json)
        #expect(plist.identifier == "codable-property-list-binary-v1:Swift.Dictionary<Swift.String, Swift.Int>")
        #expect(json.identifier == "codable-json-v1:Swift.Dictionary<Swift.String, Swift.Int>")
        #expect(
            EntryIdentity(key: Self.golden, codecIdentifier: plist.identifier).hex
                == "c4d9bd50f4c74b9b21f4f732653e09295f216af33fe4025e945bf3266d64e1c6")
        #expect(
            EntryIdentity(key: Self.golden, codecIdentifier: json.identifier).hex
                == "c6106aeab7508c242253011beb2770390537cd631ad0a65eaa8dcb7e794f6025")
    }

    @Test("golden entry identity")
    func goldenEntryIdentity() {
        let entry = EntryIdentity(key: Self.golden, codecIdentifier: "data-v1")
        #expect(entry.hex == "5f3a3ae57d96bbf2e16e62da269509d4f1638e6650f243676087636fb8a6a0a4")
        // The streamed digest equals hashing the spelled-out fields.
        let spelled =
            Self.field("yashima.cache-entry-identity.v1") + Self.field("key")
            + Self.field(Self.golden.canonicalBytes) + Self.field("codec") + Self.field("data-v1")
        #expect(entry.digest == SHA256.hash(spelled))
        #expect(EntryIdentity(key: Self.golden, codecIdentifier: "data-v2") != entry)
        #expect(EntryIdentity(key: Self.golden.version("renderer", 4), codecIdentifier: "data-v1") != entry)
    }

    @Test("canonical bytes spelled out field by field")
    func canonicalBytesLayout() {
        var expected = ["yashima.cache-key.v1", "namespace", "thumbnail", "identity", "video-42", "variants", "2"]
            .flatMap { Self.field($0) }
        expected += ["component", "scale", "2", "component", "size", "320x180"].flatMap { Self.field($0) }
        expected += ["versions", "1", "component", "renderer", "3"].flatMap { Self.field($0) }
        #expect(Self.golden.canonicalBytes == expected)
    }

    @Test("components sort by UTF-8 bytes in the canonical form; insertion order does not matter")
    func ordering() {
        let a = CacheKey("x").variant("b", 1).variant("a", 2).variant("a", 1).version("z", "1").version("y", "9")
        let b = CacheKey("x").version("y", "9").variant("a", 1).variant("b", 1).version("z", "1").variant("a", 2)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.stableIdentifier == b.stableIdentifier)
        #expect(a.sortedVariants.map { "\($0.name)=\($0.value)" } == ["a=1", "a=2", "b=1"])
        #expect(a.sortedVersions.map(\.name) == ["y", "z"])
        // The public arrays keep the order the components were added in, as Yashima's do.
        #expect(a.variants.map { "\($0.name)=\($0.value)" } == ["b=1", "a=2", "a=1"])
        #expect(b.versions.map(\.name) == ["y", "z"])

        // UTF-8 byte order, not Unicode or locale order: "Z" (0x5A) < "a" (0x61) < "é" (0xC3 0xA9) < "😀".
        let c = CacheKey("x").variant("😀", 0).variant("é", 0).variant("a", 0).variant("Z", 0).variant("", 0)
        #expect(c.sortedVariants.map(\.name) == ["", "Z", "a", "é", "😀"])
        // U+FFFD (EF BF BD) sorts before U+10000 (F0 90 80 80) in UTF-8, but after it in UTF-16.
        let d = CacheKey("x").variant("\u{10000}", 0).variant("\u{FFFD}", 0)
        #expect(d.sortedVariants.map(\.name) == ["\u{FFFD}", "\u{10000}"])
        #expect(CacheKeyComponent(name: "a", value: "2") < CacheKeyComponent(name: "b", value: "1"))
        #expect(CacheKeyComponent(name: "a", value: "1") < CacheKeyComponent(name: "a", value: "2"))
        #expect(!(CacheKeyComponent(name: "a", value: "1") < CacheKeyComponent(name: "a", value: "1")))
    }

    @Test("a key changed in place or built in steps equals the same key built at once; its copy is unchanged")
    func changedKeysMatchFreshOnes() {
        let a = CacheKeyComponent("a", "1")
        let b = CacheKeyComponent("b", "2")
        let c = CacheKeyComponent("c", "3")
        // In canonical order, then out of it, then a duplicate: each step against a key made in one init.
        let steps: [[CacheKeyComponent]] = [[a], [a, c], [a, c, b], [a, c, b, a]]
        var key = CacheKey(namespace: "n", identity: "i")
        for components in steps {
            key = key.variant(components.last!.name, components.last!.value)
            let fresh = CacheKey(namespace: "n", identity: "i", variants: components)
            #expect(key.variants == components)
            #expect(key.sortedVariants == components.sorted())
            #expect(key == fresh && key.hashValue == fresh.hashValue)
            #expect(key.stableIdentifier == fresh.stableIdentifier)
        }
        var changed = key
        changed.namespace = "m"
        changed.versions = [c, a]
        let expected = CacheKey(namespace: "m", identity: "i", variants: key.variants, versions: [a, c])
        #expect(changed == expected && changed.hashValue == expected.hashValue)
        #expect(changed.versions == [c, a] && changed.sortedVersions == [a, c])
        #expect(changed != key && key.namespace == "n" && key.versions.isEmpty)
        changed.identity = "j"
        #expect(changed != expected && changed.stableIdentifier != expected.stableIdentifier)
    }

    @Test("duplicate components are kept")
    func duplicates() {
        let once = CacheKey("x").variant("size", 1)
        let twice = once.variant("size", 1)
        #expect(twice.variants.count == 2)
        #expect(once != twice)
        #expect(once.stableIdentifier != twice.stableIdentifier)
        #expect(CacheKey(canonicalBytes: twice.canonicalBytes) == twice)
    }

    @Test("equality is byte-wise, not Unicode canonical equivalence")
    func byteWiseEquality() {
        let precomposed = CacheKey("caf\u{E9}")
        let decomposed = CacheKey("cafe\u{301}")
        #expect(precomposed.identity == decomposed.identity)  // Swift's String equality says equal…
        #expect(precomposed != decomposed)  // …but the canonical bytes differ.
        #expect(precomposed.stableIdentifier != decomposed.stableIdentifier)
        #expect(Set([precomposed, decomposed]).count == 2)
        let c1 = CacheKeyComponent(name: "n", value: "caf\u{E9}")
        let c2 = CacheKeyComponent(name: "n", value: "cafe\u{301}")
        #expect(c1 != c2)
        #expect((c1 < c2) != (c2 < c1))
    }

    @Test("initializers and namespaces")
    func initializers() {
        #expect(CacheKey("id") == CacheKey(namespace: "default", identity: "id"))
        #expect(CacheKey("id", namespace: "n") == CacheKey(namespace: "n", identity: "id"))
        #expect(CacheKey(namespace: "a", identity: "b") != CacheKey(namespace: "b", identity: "a"))
        // Field boundaries are unambiguous: moving bytes between fields changes the key.
        #expect(CacheKey(namespace: "ab", identity: "c") != CacheKey(namespace: "a", identity: "bc"))
        #expect(
            CacheKey(namespace: "ab", identity: "c").stableIdentifier
                != CacheKey(namespace: "a", identity: "bc").stableIdentifier)
        #expect(CacheKey("x").variant("k", "v") != CacheKey("x").version("k", "v"))
        #expect(CacheKey("x").variant("k", "v").stableIdentifier != CacheKey("x").version("k", "v").stableIdentifier)
    }

    @Test("digest(of:) is SHA-256 in hex, whatever holds the bytes")
    func digestOfLargeInputs() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(CacheKey.digest(of: "abc") == abc)
        #expect(CacheKey.digest(of: Data("abc".utf8)) == abc)
        #expect(CacheKey.digest(of: Array("xabcx".utf8)[1..<4]) == abc)
        // Several regions (DispatchData made of two buffers) hash as their concatenation.
        var pieces = DispatchData.empty
        for piece in ["a", "bc"] {
            piece.utf8CString.withUnsafeBytes {
                pieces.append(DispatchData(bytes: UnsafeRawBufferPointer(rebasing: $0.dropLast())))
            }
        }
        #expect(pieces.regions.count == 2)
        #expect(CacheKey.digest(of: pieces) == abc)
        #expect(CacheKey.digest(of: "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("description never shows key text")
    func description() {
        let key = CacheKey(namespace: "secret-namespace", identity: "user@example.com").variant("token", "hunter2")
        let text = key.description
        #expect(text == "CacheKey(" + key.stableIdentifier.prefix(16) + "…)")
        #expect(!text.contains("secret"))
        #expect(!text.contains("example"))
        #expect(!text.contains("hunter2"))
        #expect("\(key)" == text)
        #expect(String(describing: Self.golden) == "CacheKey(a02bbdf6fd55ad45…)")
    }

    @Test("odd key text is just data: hashes, round-trips, stays distinct")
    func oddText() {
        let big = String(repeating: "x", count: 1_000_000)
        let keys: [CacheKey] = [
            CacheKey(namespace: "", identity: ""),
            CacheKey(namespace: "", identity: "").variant("", "").version("", ""),
            CacheKey(namespace: "/", identity: "../../etc/passwd"),
            CacheKey(namespace: "..", identity: "."),
            CacheKey(namespace: "a\0b", identity: "\0"),
            CacheKey(namespace: "a", identity: "\0b"),
            CacheKey(namespace: "😀", identity: "👩‍👩‍👧‍👦").variant("🏳️‍🌈", "é"),
            CacheKey(namespace: "new\nline", identity: "9\0x\n").variant("1\0", "\n"),
            CacheKey(namespace: "big", identity: big),
            CacheKey(namespace: "big", identity: "small").variant("payload", big),
            CacheKey(namespace: "big", identity: "small").variant("payload", big + "y"),
        ]
        var identifiers = Set<String>()
        for key in keys {
            let identifier = key.stableIdentifier
            #expect(identifier.count == 64)
            #expect(identifier.allSatisfy { "0123456789abcdef".contains($0) })
            identifiers.insert(identifier)
            let bytes = key.canonicalBytes
            let parsed = CacheKey(canonicalBytes: bytes)
            #expect(parsed == key)
            #expect(parsed?.canonicalBytes == bytes)  // so the identifier matches too
        }
        #expect(identifiers.count == keys.count)
        #expect(Set(keys).count == keys.count)
    }

    @Test("round-trips through init?(canonicalBytes:) from any collection")
    func roundTrip() {
        let bytes = Self.golden.canonicalBytes
        #expect(CacheKey(canonicalBytes: bytes) == Self.golden)
        #expect(CacheKey(canonicalBytes: bytes[...]) == Self.golden)
        #expect(CacheKey(canonicalBytes: ContiguousArray(bytes)) == Self.golden)
        // A collection without contiguous storage takes the copying path.
        #expect(CacheKey(canonicalBytes: bytes.lazy.map { $0 }) == Self.golden)
        let parsed = CacheKey(canonicalBytes: bytes)
        #expect(parsed?.variants == Self.golden.sortedVariants)
        #expect(parsed?.versions == Self.golden.sortedVersions)
        #expect(parsed?.namespace == "thumbnail")
        #expect(parsed?.identity == "video-42")
    }

    @Test("rejects malformed canonical forms")
    func rejectsMalformed() {
        let valid = Self.golden.canonicalBytes
        #expect(CacheKey(canonicalBytes: [UInt8]()) == nil)
        #expect(CacheKey(canonicalBytes: Array("garbage".utf8)) == nil)
        // Every truncation fails, and so does any trailing byte.
        for length in 0..<valid.count {
            #expect(CacheKey(canonicalBytes: valid[..<length]) == nil, "truncated to \(length)")
        }
        #expect(CacheKey(canonicalBytes: valid + [0x0A]) == nil)
        #expect(CacheKey(canonicalBytes: valid + Self.field("x")) == nil)

        let head = ["yashima.cache-key.v1", "namespace", "n", "identity", "i"].flatMap { Self.field($0) }
        let emptyVersions = ["versions", "0"].flatMap { Self.field($0) }
        #expect(
            CacheKey(canonicalBytes: head + ["variants", "0"].flatMap { Self.field($0) } + emptyVersions)
                == CacheKey(namespace: "n", identity: "i"))
        // Bad counts: too many, too few, leading zeros, signs, not digits, enormous.
        for count in ["1", "00", "01", "-0", "+0", "0x0", "", "99999999999999999999", "9223372036854775807"] {
            let form = head + ["variants", count].flatMap { Self.field($0) } + emptyVersions
            #expect(CacheKey(canonicalBytes: form) == nil, "variant count \(count)")
        }
        let oneVariant = ["component", "a", "1"].flatMap { Self.field($0) }
        #expect(
            CacheKey(
                canonicalBytes: head + ["variants", "0"].flatMap { Self.field($0) } + oneVariant
                    + emptyVersions) == nil)
        // Unsorted components are not canonical.
        let unsorted =
            head + ["variants", "2", "component", "b", "1", "component", "a", "1"].flatMap { Self.field($0) }
            + emptyVersions
        #expect(CacheKey(canonicalBytes: unsorted) == nil)
        // Leading zeros in a length prefix, a wrong separator, a wrong terminator, a wrong label.
        var leadingZero = valid
        leadingZero.insert(0x30, at: 0)
        #expect(CacheKey(canonicalBytes: leadingZero) == nil)
        var badSeparator = valid
        badSeparator[2] = 0x01
        #expect(CacheKey(canonicalBytes: badSeparator) == nil)
        var badTerminator = valid
        badTerminator[2 + 1 + 20] = 0x0D
        #expect(CacheKey(canonicalBytes: badTerminator) == nil)
        var badMagic = valid
        badMagic[3] = UInt8(ascii: "Y")
        #expect(CacheKey(canonicalBytes: badMagic) == nil)
        // Invalid UTF-8 in a text field.
        let invalidUTF8 =
            ["yashima.cache-key.v1", "namespace"].flatMap { Self.field($0) } + Self.field([0xC3, 0x28])
            + ["identity", "i", "variants", "0", "versions", "0"].flatMap { Self.field($0) }
        #expect(CacheKey(canonicalBytes: invalidUTF8) == nil)
        // A huge length prefix must not crash or overflow.
        let hugeLength = Array("999999999999999999".utf8) + [0x00, 0x41, 0x0A]
        #expect(CacheKey(canonicalBytes: hugeLength) == nil)
        let overflowLength = Array("9223372036854775807999".utf8) + [0x00, 0x41, 0x0A]
        #expect(CacheKey(canonicalBytes: overflowLength) == nil)
    }

    @Test("fuzz: random mutations never crash, and anything accepted round-trips exactly")
    func fuzzParser() {
        let seeds = [
            Self.golden.canonicalBytes,
            CacheKey(namespace: "", identity: "é\0").variant("a", 1).variant("a", 1).version("v", "😀").canonicalBytes,
        ]
        var generator = SplitMix(seed: 0xC0FFEE)
        var accepted = 0
        for iteration in 0..<4000 {
            var bytes = seeds[iteration % seeds.count]
            let mutations = 1 + Int(generator.next() % 4)
            for _ in 0..<mutations {
                let position = bytes.isEmpty ? 0 : Int(generator.next() % UInt64(bytes.count))
                switch generator.next() % 6 {
                case 0 where !bytes.isEmpty:  // flip bits
                    bytes[position] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
                case 1 where !bytes.isEmpty:  // interesting bytes
                    bytes[position] = [0x00, 0x0A, 0x30, 0x31, 0x39, 0xFF, 0xC3][Int(generator.next() % 7)]
                case 2 where !bytes.isEmpty:  // delete
                    bytes.remove(at: position)
                case 3:  // insert
                    bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                case 4:  // truncate
                    bytes.removeLast(bytes.isEmpty ? 0 : Int(generator.next() % UInt64(bytes.count)))
                default:  // swap two bytes
                    if !bytes.isEmpty {
                        bytes.swapAt(position, Int(generator.next() % UInt64(bytes.count)))
                    }
                }
            }
            if let key = CacheKey(canonicalBytes: bytes) {
                accepted += 1
                #expect(key.canonicalBytes == bytes, "iteration \(iteration)")
            }
        }
        // Some mutations (for example a changed text byte) legitimately stay valid.
        #expect(accepted < 4000)
    }
}
