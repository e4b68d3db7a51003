// Comparing and hashing strings by their UTF-8 bytes, the order and equality of keys and components (not
// Unicode canonical equivalence: a precomposed and a decomposed "é" differ).

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Compares two strings' UTF-8 bytes lexicographically.
///
/// - Returns: A negative number, zero or a positive number as `lhs` sorts before, equal to or after `rhs`.
func compareUTF8(_ lhs: String, _ rhs: String) -> Int {
    // Two strings of the same representation (the same small-string bytes, or the same storage and count:
    // a key compared with its own copy, as a table's hit does) hold the same bytes.
    if MemoryLayout<String>.size == 16,
        unsafeBitCast(lhs, to: (UInt64, UInt64).self) == unsafeBitCast(rhs, to: (UInt64, UInt64).self)
    {
        return 0
    }
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
