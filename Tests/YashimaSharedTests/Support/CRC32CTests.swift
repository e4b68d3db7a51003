// CRC32CTests.swift: checks CRC32C against known check values and a slow bitwise reference,
// across the hardware path's 3×8192-byte block boundaries and chained calls split anywhere.

import CHashes
import Testing

@testable import YashimaShared

@Suite("CRC32C")
struct CRC32CTests {
    /// The textbook bit-at-a-time CRC32C: reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
    ///
    /// Deliberately independent of the C tables and instructions. The eight bit steps are unrolled and
    /// branch-free only so that the unoptimized test build stays fast on a megabyte.
    static func reference(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        @inline(__always) func step(_ state: UInt32) -> UInt32 {
            (state >> 1) ^ (0x82F6_3B78 & (0 &- (state & 1)))
        }
        var state = ~crc
        bytes.withUnsafeBufferPointer { buffer in
            for byte in buffer {
                state ^= UInt32(byte)
                state = step(step(step(step(step(step(step(step(state))))))))
            }
        }
        return ~state
    }

    /// Deterministic pseudo-random bytes (SplitMix64), so failures reproduce.
    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed
        let words = (count + 7) / 8
        var bytes = [UInt8](repeating: 0, count: words * 8)
        bytes.withUnsafeMutableBytes { buffer in
            for index in 0..<words {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                buffer.storeBytes(of: z.littleEndian, toByteOffset: index * 8, as: UInt64.self)
            }
        }
        bytes.removeLast(words * 8 - count)
        return bytes
    }

    @Test("standard check values")
    func checkValues() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0x00, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum([]) == 0)
        #expect(Self.reference(Array("123456789".utf8)) == 0xE306_9283)
    }

    @Test("matches the bitwise reference for every length 0...100")
    func shortLengths() {
        let bytes = Self.randomBytes(100, seed: 1)
        for length in 0...100 {
            let slice = Array(bytes[..<length])
            #expect(CRC32C.checksum(slice) == Self.reference(slice), "length \(length)")
        }
    }

    @Test(
        "matches the reference around the 3×8192-byte hardware block",
        arguments: [
            24575, 24576, 24577, 49152 + 13, 3 * 24576, 1_048_576 + 7,
        ])
    func blockBoundaries(length: Int) {
        let bytes = Self.randomBytes(length, seed: UInt64(length))
        let expected = Self.reference(bytes)
        #expect(CRC32C.checksum(bytes) == expected)

        // Chained calls split at points on, near and away from block boundaries.
        let splits = [0, 1, 7, 8, 13, 8191, 8192, 8193, 24575, 24576, 24577, 40000, length / 2, length - 1, length]
        for split in splits where split <= length {
            bytes.withUnsafeBytes { buffer in
                let first = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[..<split]))
                let whole = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[split...]), continuing: first)
                #expect(whole == expected, "length \(length) split at \(split)")
            }
        }
        // Many uneven chunks in a row.
        var crc: UInt32 = 0
        var offset = 0
        var chunk = 1
        bytes.withUnsafeBytes { buffer in
            while offset < length {
                let end = min(length, offset + chunk)
                crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[offset..<end]), continuing: crc)
                offset = end
                chunk = chunk * 3 + 5
            }
        }
        #expect(crc == expected, "length \(length) in growing chunks")
    }

    @Test("special contents across block boundaries: zeros and 0xFF")
    func uniformContents() {
        for value: UInt8 in [0x00, 0xFF] {
            let bytes = [UInt8](repeating: value, count: 3 * 24576 + 5)
            #expect(CRC32C.checksum(bytes) == Self.reference(bytes), "byte \(value)")
        }
    }

    @Test("continuing from the reference agrees with the C routine")
    func continuingFromReference() {
        let head = Self.randomBytes(1000, seed: 7)
        let tail = Self.randomBytes(30000, seed: 8)
        let seed = Self.reference(head)
        #expect(CRC32C.checksum(tail.withUnsafeBytes { Array($0) }) == Self.reference(tail))
        let continued = tail.withUnsafeBytes { CRC32C.checksum($0, continuing: seed) }
        #expect(continued == Self.reference(head + tail))
        #expect(continued == Self.reference(tail, continuing: seed))
    }

    @Test("hardware flag matches the C layer")
    func hardwareFlag() {
        #expect(CRC32C.isHardwareAccelerated == (ysh_crc32c_is_hardware() != 0))
    }
}
