// CRC32C+Combine.swift: the checksum of two concatenated inputs from the checksums of each (zlib's
// crc32_combine, for the Castagnoli polynomial). A streamed remote upload needs the CRC32C of its
// envelope header continued over the payload before it sends a payload byte; the local entry already
// holds the payload's own CRC32C, so combining costs a few hundred word operations instead of a pass
// over the payload.

extension CRC32C {
    /// The reflected Castagnoli polynomial.
    private static let polynomial: UInt32 = 0x82F6_3B78

    /// The CRC32C of A followed by B, given the CRC32C of A, the CRC32C of B and B's length.
    ///
    /// - Parameters:
    ///   - first: `checksum(A)`.
    ///   - second: `checksum(B)`.
    ///   - secondLength: B's byte count.
    /// - Returns: `checksum(A + B)`, equal to `checksum(B, continuing: checksum(A))`.
    static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int) -> UInt32 {
        guard secondLength > 0 else { return first }
        // odd: the operator for one zero bit; squaring it gives two, four, ... zero bits.
        var odd = [UInt32](repeating: 0, count: 32)
        var even = [UInt32](repeating: 0, count: 32)
        odd[0] = polynomial
        var row: UInt32 = 1
        for index in 1..<32 {
            odd[index] = row
            row <<= 1
        }
        square(into: &even, odd)  // two zero bits
        square(into: &odd, even)  // four zero bits
        var crc = first
        var remaining = UInt64(secondLength)
        // Apply len(B) zero bytes to `first`, one bit of the length per squaring (the first is 8 bits).
        repeat {
            square(into: &even, odd)
            if remaining & 1 != 0 { crc = times(even, crc) }
            remaining >>= 1
            if remaining == 0 { break }
            square(into: &odd, even)
            if remaining & 1 != 0 { crc = times(odd, crc) }
            remaining >>= 1
        } while remaining != 0
        return crc ^ second
    }

    private static func times(_ matrix: [UInt32], _ vector: UInt32) -> UInt32 {
        var sum: UInt32 = 0
        var vector = vector
        var index = 0
        while vector != 0 {
            if vector & 1 != 0 { sum ^= matrix[index] }
            vector >>= 1
            index += 1
        }
        return sum
    }

    private static func square(into result: inout [UInt32], _ matrix: [UInt32]) {
        for index in 0..<32 { result[index] = times(matrix, matrix[index]) }
    }
}
