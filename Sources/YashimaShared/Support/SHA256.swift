// SHA256.swift: SHA-256 (FIPS 180-4) and its 32-byte digest value. Owns the hash behind cache-key
// identifiers, entry identities and the remote tier's HMAC. Blocks go through the CPU's SHA extensions
// (CHashes/sha256.c) where it has them, else through Swift rounds reading them straight from raw
// buffers with big-endian loads, the state in locals and the schedule on the stack.

import CHashes
import Foundation

/// A SHA-256 digest: 32 bytes, stored as four big-endian 64-bit words for fast comparison and hashing.
///
/// Word `w0` holds digest bytes 0–7 with byte 0 in its most significant position, and so on, so the
/// words compare and hash exactly as the byte sequence would.
struct SHA256Digest: Hashable, Sendable {
    /// Digest bytes 0–7 as a big-endian integer.
    let w0: UInt64
    /// Digest bytes 8–15 as a big-endian integer.
    let w1: UInt64
    /// Digest bytes 16–23 as a big-endian integer.
    let w2: UInt64
    /// Digest bytes 24–31 as a big-endian integer.
    let w3: UInt64

    /// Creates a digest from its four big-endian words.
    ///
    /// - Parameters:
    ///   - w0: Digest bytes 0–7 as a big-endian integer.
    ///   - w1: Digest bytes 8–15 as a big-endian integer.
    ///   - w2: Digest bytes 16–23 as a big-endian integer.
    ///   - w3: Digest bytes 24–31 as a big-endian integer.
    init(w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64) {
        self.w0 = w0
        self.w1 = w1
        self.w2 = w2
        self.w3 = w3
    }

    /// Creates a digest from exactly 32 bytes.
    ///
    /// - Parameter bytes: The digest bytes, in order.
    /// - Returns: `nil` unless `bytes` holds exactly 32 bytes.
    init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var index = 0
        for byte in bytes {
            guard index < 32 else { return nil }  // a collection whose count lied
            let value = UInt64(byte) << UInt64(56 - 8 * (index & 7))
            switch index >> 3 {
            case 0: words.0 |= value
            case 1: words.1 |= value
            case 2: words.2 |= value
            default: words.3 |= value
            }
            index += 1
        }
        guard index == 32 else { return nil }
        self.init(w0: words.0, w1: words.1, w2: words.2, w3: words.3)
    }

    /// The 32 digest bytes, in order.
    var bytes: [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// The digest as 64 lowercase hexadecimal characters.
    var hex: String {
        String(unsafeUninitializedCapacity: 64) { output in
            writeHex(into: output)
            return 64
        }
    }

    /// Writes the 64 lowercase hexadecimal digits of ``hex`` at the start of `output`, without allocating.
    ///
    /// - Parameter output: Room for at least 64 bytes.
    func writeHex(into output: UnsafeMutableBufferPointer<UInt8>) {
        precondition(output.count >= 64, "hex buffer too small")
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { table in
            for wordIndex in 0..<4 {
                let word = wordIndex == 0 ? w0 : wordIndex == 1 ? w1 : wordIndex == 2 ? w2 : w3
                for byteIndex in 0..<8 {
                    let byte = Int((word >> UInt64(56 - 8 * byteIndex)) & 0xFF)
                    let index = 8 * wordIndex + byteIndex
                    output[2 * index] = table[byte >> 4]
                    output[2 * index + 1] = table[byte & 0x0F]
                }
            }
        }
    }

    /// Calls `body` with the 32 digest bytes, in order.
    ///
    /// The bytes are copied into an array first. Reading them back through `withUnsafeBytes(of:)` on a
    /// tuple of the words was miscompiled by Swift 6.3.1 at -O (the stores were dropped; see
    /// Benchmarks/repro/tuple-load-miscompile.swift), so no code here takes that shape.
    ///
    /// - Parameter body: A closure reading the bytes; the buffer is valid only during the call.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var bytes = [UInt8](repeating: 0, count: 32)
        for (wordIndex, word) in [w0, w1, w2, w3].enumerated() {
            for byteIndex in 0..<8 {
                bytes[8 * wordIndex + byteIndex] = UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * byteIndex))
            }
        }
        return try bytes.withUnsafeBytes(body)
    }

    /// The first 8 digest bytes read as a little-endian number: a well-mixed slot selector, the same in
    /// every process (computed from the words, not through memory: see `withUnsafeBytes`).
    var prefixWord: UInt64 { UInt64(littleEndian: w0.bigEndian) }
}

/// An incremental SHA-256 hasher (FIPS 180-4).
///
/// Feed bytes with the `update` methods in any split, then call ``finalize()`` once. For a single
/// buffer, ``hash(_:)`` is shorter.
struct SHA256 {
    /// The eight 32-bit working hash values H0–H7.
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a,
        0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
    )
    /// Bytes of a partial block waiting for more input (64 bytes of inline storage).
    private var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    /// How many bytes of `pending` are in use (0..<64).
    private var pendingCount = 0
    /// Total message length so far, in bytes.
    private var totalLength: UInt64 = 0
    /// Whether blocks go through the CPU's SHA extensions (CHashes/sha256.c) rather than the Swift rounds.
    private let usesHardware: Bool

    /// Whether this CPU has the x86 SHA extensions, which hashers use unless told not to.
    static let hardwareAvailable = ysh_sha256_is_hardware() != 0

    /// Creates a hasher for an empty message.
    init() { usesHardware = Self.hardwareAvailable }

    /// Creates a hasher for an empty message that runs the Swift rounds even where the CPU has the SHA
    /// extensions (tests: both give the same digests).
    init(swiftRoundsOnly: Bool) { usesHardware = Self.hardwareAvailable && !swiftRoundsOnly }

    /// Appends bytes to the message.
    ///
    /// - Parameter bytes: The bytes to hash; may be empty.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var base = bytes.baseAddress, bytes.count > 0 else { return }
        var remaining = bytes.count
        totalLength &+= UInt64(remaining)

        if pendingCount > 0 {
            let take = min(64 - pendingCount, remaining)
            let offset = pendingCount
            withUnsafeMutableBytes(of: &pending) { buffer in
                (buffer.baseAddress! + offset).copyMemory(from: base, byteCount: take)
            }
            pendingCount += take
            base += take
            remaining -= take
            guard pendingCount == 64 else { return }
            var block = pending
            Swift.withUnsafeBytes(of: &block) { buffer in
                compress(blocks: buffer.baseAddress!, count: 1)
            }
            pendingCount = 0
        }

        let wholeBlocks = remaining >> 6
        if wholeBlocks > 0 {
            compress(blocks: base, count: wholeBlocks)
            base += wholeBlocks << 6
            remaining -= wholeBlocks << 6
        }

        if remaining > 0 {
            withUnsafeMutableBytes(of: &pending) { buffer in
                buffer.baseAddress!.copyMemory(from: base, byteCount: remaining)
            }
            pendingCount = remaining
        }
    }

    /// Appends bytes to the message.
    ///
    /// - Parameter bytes: The bytes to hash; may be empty.
    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Appends the contents of `data` to the message.
    ///
    /// - Parameter data: The bytes to hash; may be empty.
    mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// Pads the message and returns its digest.
    ///
    /// - Returns: The SHA-256 digest of every byte passed to `update`.
    consuming func finalize() -> SHA256Digest {
        let bitLength = totalLength &* 8
        var padding:
            (
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        // 0x80, zeros up to 56 mod 64, then the bit length as a big-endian 64-bit integer.
        let paddingCount = (pendingCount < 56 ? 64 : 128) - pendingCount
        withUnsafeMutableBytes(of: &padding) { buffer in
            buffer[0] = 0x80
            buffer.storeBytes(of: bitLength.bigEndian, toByteOffset: paddingCount - 8, as: UInt64.self)
            update(UnsafeRawBufferPointer(rebasing: buffer[0..<paddingCount]))
        }
        return SHA256Digest(
            w0: UInt64(h.0) << 32 | UInt64(h.1),
            w1: UInt64(h.2) << 32 | UInt64(h.3),
            w2: UInt64(h.4) << 32 | UInt64(h.5),
            w3: UInt64(h.6) << 32 | UInt64(h.7)
        )
    }

    /// Hashes a whole message at once.
    ///
    /// - Parameter bytes: The message.
    /// - Returns: Its SHA-256 digest.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Hashes a whole message at once.
    ///
    /// - Parameter bytes: The message.
    /// - Returns: Its SHA-256 digest.
    static func hash(_ bytes: [UInt8]) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Hashes a whole message at once.
    ///
    /// - Parameter data: The message.
    /// - Returns: Its SHA-256 digest.
    static func hash(_ data: Data) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(data)
        return hasher.finalize()
    }

    // MARK: Compression

    /// Rotates `x` right by `n` bits.
    @inline(__always)
    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 {
        (x &>> n) | (x &<< (32 &- n))
    }

    /// One compression round; the caller rotates the roles of the eight variables between rounds.
    @inline(__always)
    private static func round(
        _ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32,
        _ e: UInt32, _ f: UInt32, _ g: UInt32, _ h: inout UInt32,
        _ kw: UInt32, _ bc: inout UInt32
    ) {
        let sigma1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
        let choose = ((f ^ g) & e) ^ g
        let t1 = h &+ sigma1 &+ choose &+ kw
        let sigma0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
        // Maj(a, b, c) = ((a ^ b) & (b ^ c)) ^ b; this round's a ^ b is the next round's b ^ c.
        let ab = a ^ b
        let majority = (ab & bc) ^ b
        bc = ab
        d = d &+ t1
        h = t1 &+ sigma0 &+ majority
    }

    /// Runs the compression function over `count` consecutive 64-byte blocks starting at `blocks`: the
    /// CPU's SHA extensions when this hasher uses them, else the Swift rounds.
    private mutating func compress(blocks: UnsafeRawPointer, count: Int) {
        guard usesHardware else { return Self.compress(&h, blocks: blocks, count: count) }
        // A tuple of eight UInt32 is laid out as eight contiguous words, H0 first.
        withUnsafeMutableBytes(of: &h) { words in
            ysh_sha256_blocks(words.baseAddress!.assumingMemoryBound(to: UInt32.self), blocks, count)
        }
    }

    /// Runs the Swift compression rounds over `count` consecutive 64-byte blocks starting at `blocks`.
    private static func compress(
        _ state: inout (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32),
        blocks: UnsafeRawPointer,
        count: Int
    ) {
        do {
            let k = ysh_sha256_round_constants()!  // FIPS 180-4's K0–K63, one copy (CHashes/sha256.c)
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
                let w = schedule.baseAddress!
                var (h0, h1, h2, h3, h4, h5, h6, h7) = state
                var block = blocks
                for _ in 0..<count {
                    for t in 0..<16 {
                        w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t &* 4, as: UInt32.self))
                    }
                    for t in 16..<64 {
                        let w15 = w[t &- 15]
                        let w2 = w[t &- 2]
                        let s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 &>> 3)
                        let s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 &>> 10)
                        w[t] = w[t &- 16] &+ s0 &+ w[t &- 7] &+ s1
                    }

                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    var bc = b ^ c
                    var t = 0
                    while t < 64 {
                        round(a, b, c, &d, e, f, g, &h, w[t] &+ k[t], &bc)
                        round(h, a, b, &c, d, e, f, &g, w[t &+ 1] &+ k[t &+ 1], &bc)
                        round(g, h, a, &b, c, d, e, &f, w[t &+ 2] &+ k[t &+ 2], &bc)
                        round(f, g, h, &a, b, c, d, &e, w[t &+ 3] &+ k[t &+ 3], &bc)
                        round(e, f, g, &h, a, b, c, &d, w[t &+ 4] &+ k[t &+ 4], &bc)
                        round(d, e, f, &g, h, a, b, &c, w[t &+ 5] &+ k[t &+ 5], &bc)
                        round(c, d, e, &f, g, h, a, &b, w[t &+ 6] &+ k[t &+ 6], &bc)
                        round(b, c, d, &e, f, g, h, &a, w[t &+ 7] &+ k[t &+ 7], &bc)
                        t &+= 8
                    }
                    h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d
                    h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
                    block += 64
                }
                state = (h0, h1, h2, h3, h4, h5, h6, h7)
            }
        }
    }
}
