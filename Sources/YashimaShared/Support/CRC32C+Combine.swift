// CRC32C+Combine.swift: the checksum of two concatenated inputs from each one's (zlib's crc32_combine), so
// a streamed upload's envelope checksum continues over a payload whose CRC32C the local entry holds.

extension CRC32C {
    /// The reflected Castagnoli polynomial.
    private static let polynomial: UInt32 = 0x82F6_3B78

    /// `x^(2^k)` modulo the polynomial, for k in 0..<32.
    private static let powers: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 32)
        var power: UInt32 = 1 << 30  // x^1
        for index in 0..<32 {
            table[index] = power
            power = multiply(power, power)
        }
        return table
    }()

    /// The CRC32C of A followed by B, given the CRC32C of A, the CRC32C of B and B's length.
    ///
    /// - Parameters:
    ///   - first: `checksum(A)`.
    ///   - second: `checksum(B)`.
    ///   - secondLength: B's byte count.
    /// - Returns: `checksum(A + B)`, equal to `checksum(B, continuing: checksum(A))`.
    static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int) -> UInt32 {
        guard secondLength > 0 else { return first }
        // x^(8 * secondLength): the bits of the length, from k = 3 (8 = 2^3).
        var shift: UInt32 = 1 << 31  // x^0
        var remaining = UInt64(secondLength)
        var index = 3
        while remaining != 0 {
            if remaining & 1 != 0 { shift = multiply(powers[index & 31], shift) }
            remaining >>= 1
            index += 1
        }
        return multiply(shift, first) ^ second
    }

    /// `a * b` modulo the polynomial (reflected: bit 31 is x^0).
    private static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var mask: UInt32 = 1 << 31
        var product: UInt32 = 0
        var b = b
        while mask != 0 {
            if a & mask != 0 {
                product ^= b
                if a & (mask - 1) == 0 { break }
            }
            mask >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
        }
        return product
    }
}
