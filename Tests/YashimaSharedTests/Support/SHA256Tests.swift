// SHA256Tests.swift: checks SHA-256 against the NIST FIPS 180-4 example vectors (through the CPU's SHA
// extensions where it has them and through the Swift rounds), the two against each other on messages of
// every length up to 300 bytes and on a large one, incremental updates split at every offset, and the
// digest value type's conversions.

import Foundation
import Testing

@testable import YashimaShared

@Suite("SHA-256")
struct SHA256Tests {
    /// The NIST example messages and their official digests (the 448-bit one is 56 bytes).
    static let vectors: [(message: String, hex: String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        ),
    ]

    @Test("NIST vectors", arguments: 0..<4)
    func nistVector(index: Int) {
        let (message, hex) = Self.vectors[index]
        #expect(SHA256.hash(Array(message.utf8)).hex == hex)
        #expect(SHA256.hash(Data(message.utf8)).hex == hex)
    }

    @Test("NIST vectors through the Swift rounds", arguments: 0..<4)
    func nistVectorSwiftRounds(index: Int) {
        var hasher = SHA256(swiftRoundsOnly: true)
        hasher.update(Array(Self.vectors[index].message.utf8))
        #expect(hasher.finalize().hex == Self.vectors[index].hex)
    }

    @Test("the SHA extensions and the Swift rounds agree on every length up to 300 bytes and on 1 MiB + 7")
    func hardwareAgreesWithSwiftRounds() {
        let seed = UInt8.random(in: 0...255)
        for length in Array(0...300) + [(1 << 20) + 7] {
            let message =
                length <= 300
                ? (0..<length).map { _ in UInt8.random(in: 0...255) }
                : (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ ($0 >> 9)) &+ seed }
            var swift = SHA256(swiftRoundsOnly: true)
            swift.update(message)
            #expect(SHA256.hash(message) == swift.finalize(), "length \(length)")
        }
    }

    @Test("the SHA extensions are used exactly where /proc/cpuinfo lists them")
    func hardwareDetection() throws {
        let cpuinfo = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let flags = cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") }?.split(separator: " ") ?? []
        #expect(SHA256.hardwareAvailable == (flags.contains("sha_ni") && flags.contains("sse4_1")))
    }

    @Test("one million 'a'")
    func millionA() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hash(message).hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("incremental updates split at every offset equal one-shot hashing")
    func incrementalSplits() {
        let message = (0..<130).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let expected = SHA256.hash(message)
        for split in 0...130 {
            var hasher = SHA256()
            hasher.update(Array(message[..<split]))
            hasher.update(Data(message[split...]))
            #expect(hasher.finalize() == expected, "split at \(split)")
        }
        // Byte-at-a-time and three-way splits exercise the partial-block buffer further.
        var bytewise = SHA256()
        for byte in message { bytewise.update([byte]) }
        #expect(bytewise.finalize() == expected)
        for first in stride(from: 0, through: 130, by: 7) {
            for second in stride(from: first, through: 130, by: 11) {
                var hasher = SHA256()
                message.withUnsafeBytes { buffer in
                    hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<first]))
                    hasher.update(UnsafeRawBufferPointer(rebasing: buffer[first..<second]))
                    hasher.update(UnsafeRawBufferPointer(rebasing: buffer[second...]))
                }
                #expect(hasher.finalize() == expected, "splits at \(first), \(second)")
            }
        }
    }

    @Test("padding boundaries around 55, 56 and 64 bytes")
    func paddingBoundaries() {
        // Known digests of n 'a' bytes (from an independent implementation).
        let known: [Int: String] = [
            55: "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318",
            56: "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a",
            63: "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34",
            64: "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb",
        ]
        for (count, hex) in known {
            #expect(SHA256.hash([UInt8](repeating: 0x61, count: count)).hex == hex, "\(count) bytes")
        }
    }

    @Test("digest bytes, hex and init(bytes:) agree")
    func digestConversions() {
        let digest = SHA256.hash(Array("abc".utf8))
        let bytes = digest.bytes
        #expect(bytes.count == 32)
        #expect(bytes.prefix(4) == [0xba, 0x78, 0x16, 0xbf])
        #expect(
            bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
                .joined() == digest.hex)
        #expect(SHA256Digest(bytes: bytes) == digest)
        #expect(SHA256Digest(bytes: bytes[...]) == digest)
        #expect(SHA256Digest(bytes: bytes.dropLast()) == nil)
        #expect(SHA256Digest(bytes: bytes + [0]) == nil)
        #expect(SHA256Digest(bytes: [UInt8]()) == nil)
        digest.withUnsafeBytes { #expect(Array($0) == bytes) }
        #expect(SHA256.hash(Array("abd".utf8)) != digest)
        #expect(Set([digest, SHA256Digest(bytes: bytes)!]).count == 1)
    }
}

@Suite struct SHA256DigestWordTests {
    /// The epoch slot selector must be the first 8 bytes read little-endian, in every build mode
    /// (Swift 6.3.1 -O once turned it into 0 through a tuple round trip).
    @Test func prefixWordIsTheFirstEightBytesLittleEndian() {
        let digest = SHA256.hash(Array("abc".utf8))
        let bytes = digest.bytes
        var expected: UInt64 = 0
        for index in (0..<8).reversed() { expected = expected << 8 | UInt64(bytes[index]) }
        #expect(digest.prefixWord == expected)
        #expect(digest.prefixWord % 4096 != 0)
        #expect(digest.hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(bytes.count == 32 && bytes[0] == 0xBA && bytes[31] == 0xAD)
    }
}
