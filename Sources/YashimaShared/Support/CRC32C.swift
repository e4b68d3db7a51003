// CRC32C.swift: the Swift face of the C CRC32C (Castagnoli) routine in CHashes.
// Owns checksum calls only; the SSE4.2 and table implementations live in CHashes/crc32c.c.

import CHashes

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) checksums, hardware-accelerated when the CPU allows.
///
/// The checksum is the standard one (initial value and final XOR both 0xFFFFFFFF), so
/// `checksum("123456789")` is 0xE3069283. Checksums chain: passing the result of one call as
/// `continuing` to the next gives the checksum of the concatenated input.
enum CRC32C {
    /// Computes the CRC32C of `buffer`, optionally continuing an earlier checksum.
    ///
    /// - Parameters:
    ///   - buffer: The bytes to checksum; may be empty.
    ///   - crc: 0 to start, or the result of a previous call to continue over more bytes.
    /// - Returns: The checksum of everything checksummed so far, including `buffer`.
    static func checksum(_ buffer: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return crc }
        return ysh_crc32c(crc, base, buffer.count)
    }

    /// Computes the CRC32C of a byte array.
    ///
    /// - Parameter bytes: The bytes to checksum; may be empty.
    /// - Returns: The checksum of `bytes`.
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// Whether checksums use the CPU's CRC32 instruction (SSE4.2) rather than the table fallback.
    static var isHardwareAccelerated: Bool {
        ysh_crc32c_is_hardware() != 0
    }
}
