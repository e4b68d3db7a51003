// HMACSHA256.swift: HMAC-SHA256 (RFC 2104, test vectors of RFC 4231) on top of the package's SHA256,
// the shared secret that signs remote values (`RemoteSecret`, never printed), and a constant-time
// comparison for signatures.

import Foundation

/// An incremental HMAC-SHA256. The key's inner and outer pad states are hashed once at init, so each
/// message costs the message plus two blocks.
struct HMACSHA256 {
    private var inner: SHA256
    private let outer: SHA256

    /// Prepares an HMAC with `key` (any length: keys longer than 64 bytes are hashed first).
    init(key: [UInt8]) {
        var block = key.count > 64 ? SHA256.hash(key).bytes : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        var outer = SHA256()
        outer.update(block.map { $0 ^ 0x5C })
        self.inner = inner
        self.outer = outer
    }

    /// Appends message bytes.
    mutating func update(_ bytes: UnsafeRawBufferPointer) { inner.update(bytes) }

    /// Appends message bytes.
    mutating func update(_ bytes: [UInt8]) { inner.update(bytes) }

    /// The 32-byte authentication code of everything passed to `update`.
    consuming func finalize() -> [UInt8] {
        let innerDigest = inner.finalize().bytes
        var outer = self.outer
        outer.update(innerDigest)
        return outer.finalize().bytes
    }

    /// The authentication code of one message.
    static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        var mac = HMACSHA256(key: key)
        mac.update(message)
        return mac.finalize()
    }
}

/// Compares two byte sequences in time that depends only on their lengths, never on where they first
/// differ, so a forger cannot learn a signature byte by byte from response times.
func constantTimeEqual(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (a, b) in zip(lhs, rhs) { difference |= a ^ b }
    return difference == 0
}

/// The shared secret that signs remote values (HMAC-SHA256), so whoever can write to Redis cannot feed
/// a host a forged value. Never printed: every textual form says "redacted".
struct RemoteSecret: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key bytes.
    let bytes: [UInt8]

    /// The environment variable read when no secret is configured in code (its UTF-8 bytes are the key).
    static let environmentVariable = "YASHIMA_REMOTE_SECRET"

    /// A secret from raw bytes; nil when empty.
    init?(bytes: [UInt8]) {
        guard !bytes.isEmpty else { return nil }
        self.bytes = bytes
    }

    /// A secret from text (its UTF-8 bytes); nil when empty.
    init?(_ text: String) {
        self.init(bytes: Array(text.utf8))
    }

    /// The secret in `YASHIMA_REMOTE_SECRET`, if set and not empty.
    static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> RemoteSecret?
    {
        environment[environmentVariable].flatMap { RemoteSecret($0) }
    }

    var description: String { "remote secret (redacted)" }
    var debugDescription: String { "RemoteSecret(redacted)" }
    var customMirror: Mirror { Mirror(self, children: ["redacted": "remote secret"]) }
}
