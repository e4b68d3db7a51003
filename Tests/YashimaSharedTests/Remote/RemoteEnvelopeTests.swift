// RemoteEnvelopeTests.swift: HMAC-SHA256 against the RFC 4231 vectors, constant-time comparison, and
// the remote envelope: golden bytes (computed by an independent Python implementation of the table in
// RemoteEnvelope.swift), round trips, and rejection of every damaged, truncated, foreign, misdirected,
// unsigned or wrongly signed value.

import Foundation
import Testing

@testable import YashimaShared

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("HMAC-SHA256")
struct HMACSHA256Tests {
    @Test("RFC 4231 test cases 1-7")
    func rfc4231() {
        let block131 = [UInt8](repeating: 0xAA, count: 131)
        let cases: [([UInt8], [UInt8], String)] = [
            (
                [UInt8](repeating: 0x0B, count: 20), Array("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                [UInt8](repeating: 0xAA, count: 20), [UInt8](repeating: 0xDD, count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            (
                Array(1...25), [UInt8](repeating: 0xCD, count: 50),
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
            ),
            (
                block131, Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
            (
                block131,
                Array(
                    ("This is a test using a larger than block-size key and a larger than block-size data. The key "
                        + "needs to be hashed before being used by the HMAC algorithm.").utf8),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
            ),
        ]
        for (key, message, expected) in cases {
            #expect(hex(HMACSHA256.authenticationCode(for: message, key: key)) == expected)
        }
        // Case 5: truncated to 128 bits.
        let truncated = HMACSHA256.authenticationCode(
            for: Array("Test With Truncation".utf8), key: [UInt8](repeating: 0x0C, count: 20))
        #expect(hex(Array(truncated.prefix(16))) == "a3b6167473100ee06e0c796c2955552b")
    }

    @Test("incremental updates in any split give the same code")
    func incremental() {
        let message = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let whole = HMACSHA256.authenticationCode(for: message, key: Array("key".utf8))
        for split in [0, 1, 63, 64, 65, 500, 999, 1000] {
            var mac = HMACSHA256(key: Array("key".utf8))
            mac.update(Array(message[..<split]))
            mac.update(Array(message[split...]))
            #expect(mac.finalize() == whole)
        }
    }

    @Test("constant-time comparison")
    func comparison() {
        #expect(constantTimeEqual([1, 2, 3] as [UInt8], [1, 2, 3] as [UInt8]))
        #expect(!constantTimeEqual([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        #expect(!constantTimeEqual([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        #expect(constantTimeEqual([] as [UInt8], [] as [UInt8]))
        #expect(RemoteSecret("") == nil && RemoteSecret(bytes: []) == nil)
        #expect(RemoteSecret.fromEnvironment([RemoteSecret.environmentVariable: "s"])?.bytes == Array("s".utf8))
        #expect(RemoteSecret.fromEnvironment([RemoteSecret.environmentVariable: ""]) == nil)
    }
}

@Suite("Remote envelope")
struct RemoteEnvelopeTests {
    let identity = SHA256.hash(Array("identity".utf8))
    let other = SHA256.hash(Array("another".utf8))
    let secret = RemoteSecret("k")!

    @Test("golden bytes, unsigned and signed (independent Python implementation of the format)")
    func golden() {
        let unsigned = RemoteEnvelope.seal(
            Data("hello".utf8), identity: identity, createdAt: 1_700_000_000_000_000_000, expiresAt: 0, secret: nil)
        #expect(
            hex(unsigned)
                == "59534852454d4f540100000000000000050000000000000000002a36fe9c97170000000000000000689f6a627384c7dc"
                + "b2dcc1487e540223e77bdf9dcd0d8be8a326eda65b0ce9a4a8c830340000000068656c6c6f")
        let signed = RemoteEnvelope.seal(
            Data("hello".utf8), identity: identity, createdAt: 1_700_000_000_000_000_000,
            expiresAt: 1_800_000_000_000_000_000, secret: secret)
        #expect(
            hex(signed)
                == "59534852454d4f540100010000000000050000000000000000002a36fe9c97170000b49376e2fa18689f6a627384c7dc"
                + "b2dcc1487e540223e77bdf9dcd0d8be8a326eda65b0ce9a4b712c6290000000068656c6c6fc25dfdde0f9e4d691c6f23e4"
                + "6930c87b806f2f035b3d846edaccf8fcc6822a6e")
    }

    @Test("round trips: empty and large payloads, signed and unsigned")
    func roundTrips() throws {
        for payload in [Data(), Data("x".utf8), Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0) })] {
            for key in [nil, secret] {
                let bytes = RemoteEnvelope.seal(payload, identity: identity, createdAt: 5, expiresAt: 9, secret: key)
                #expect(bytes.count == RemoteEnvelope.sealedSize(payloadCount: payload.count, signed: key != nil))
                let value = try RemoteEnvelope.open(bytes, identity: identity, secret: key).get()
                #expect(value == RemoteValue(payload: payload, createdAt: 5, expiresAt: 9))
            }
        }
        // Without a secret, a signed value is accepted on its checksum.
        let signed = RemoteEnvelope.seal(Data("v".utf8), identity: identity, createdAt: 1, expiresAt: 0, secret: secret)
        #expect(try RemoteEnvelope.open(signed, identity: identity, secret: nil).get().payload == Data("v".utf8))
    }

    @Test("misdirected, unsigned and wrongly signed values are rejected")
    func rejections() {
        let unsigned = RemoteEnvelope.seal(Data("v".utf8), identity: identity, createdAt: 1, expiresAt: 0, secret: nil)
        let signed = RemoteEnvelope.seal(Data("v".utf8), identity: identity, createdAt: 1, expiresAt: 0, secret: secret)
        #expect(RemoteEnvelope.open(unsigned, identity: other, secret: nil) == .failure(.wrongIdentity))
        #expect(RemoteEnvelope.open(signed, identity: other, secret: secret) == .failure(.wrongIdentity))
        #expect(RemoteEnvelope.open(unsigned, identity: identity, secret: secret) == .failure(.unsigned))
        #expect(RemoteEnvelope.open(signed, identity: identity, secret: RemoteSecret("K")) == .failure(.badSignature))
        var tag = signed
        tag[tag.count - 1] ^= 1
        #expect(RemoteEnvelope.open(tag, identity: identity, secret: secret) == .failure(.badSignature))
        #expect(RemoteEnvelope.open(Array("hello".utf8), identity: identity, secret: nil) == .failure(.foreign))
        #expect(RemoteEnvelope.open([], identity: identity, secret: nil) == .failure(.foreign))
        #expect(RemoteEnvelope.open(unsigned + [0], identity: identity, secret: nil) == .failure(.trailingBytes))
        var version = unsigned
        version[RemoteEnvelope.Offset.version] = 2
        #expect(RemoteEnvelope.open(version, identity: identity, secret: nil) == .failure(.unsupportedVersion(2)))
        for offset in [
            RemoteEnvelope.Offset.flags, RemoteEnvelope.Offset.reserved1, RemoteEnvelope.Offset.reserved2 + 3,
        ] {
            var bad = unsigned
            bad[offset] |= 0x02
            #expect(RemoteEnvelope.open(bad, identity: identity, secret: nil) == .failure(.malformedHeader))
        }
        // Claiming a signature that is not there: the bytes are then 32 short.
        var claimed = unsigned
        claimed[RemoteEnvelope.Offset.flags] = 1
        #expect(RemoteEnvelope.open(claimed, identity: identity, secret: nil) == .failure(.truncated))
        var huge = unsigned
        for index in 0..<8 { huge[RemoteEnvelope.Offset.payloadByteCount + index] = 0xFF }
        #expect(RemoteEnvelope.open(huge, identity: identity, secret: nil) == .failure(.truncated))
    }

    @Test("every truncation and every single-bit flip is rejected, never returned as a value")
    func damage() {
        let payload = Data((0..<40).map { UInt8($0) })
        for key in [nil, secret] {
            let bytes = RemoteEnvelope.seal(payload, identity: identity, createdAt: 77, expiresAt: 88, secret: key)
            for length in 0..<bytes.count {
                if case .success = RemoteEnvelope.open(Array(bytes[..<length]), identity: identity, secret: key) {
                    Issue.record("truncation to \(length) accepted")
                }
            }
            for index in bytes.indices {
                for bit in 0..<8 {
                    var damaged = bytes
                    damaged[index] ^= UInt8(1 << bit)
                    // Without a secret, flipping the signed flag off leaves 32 unexplained bytes, and flipping
                    // a tag bit is not detectable (the tag is not checked): those two are allowed.
                    let accepted: Bool
                    if case .success = RemoteEnvelope.open(damaged, identity: identity, secret: key) {
                        accepted = true
                    } else {
                        accepted = false
                    }
                    let tagByte = key != nil && index >= bytes.count - RemoteEnvelope.tagSize
                    #expect(!accepted || (key == nil && tagByte), "byte \(index) bit \(bit)")
                    if key != nil { #expect(!accepted, "byte \(index) bit \(bit) accepted with a secret") }
                }
            }
        }
    }
}
