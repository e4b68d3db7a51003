// RemoteKeys.swift: an entry's Redis names, `<prefix>:{<identity hex>}:value`, `:lease` and `:released`
// (its release channel), sharing one hash tag: one slot in a cluster, one server among shards. No key
// text reaches Redis.

/// The Redis names of one entry's value, lease and release channel.
struct RemoteKeys: Equatable, Sendable {
    /// The routing bytes: the hash tag's content (the identity in lowercase hex).
    let routingKey: [UInt8]
    /// The value key.
    let value: [UInt8]
    /// The lease key.
    let lease: [UInt8]
    /// The release channel.
    let channel: [UInt8]

    /// The default key prefix.
    static let defaultPrefix = "yashima"

    /// The names for `identity` under `prefix` (a valid prefix: see ``isValidPrefix(_:)``).
    init(identity: SHA256Digest, prefix: String) {
        // Assembled as bytes (made on every remote call, a hit's included).
        let hex = Array(identity.hex.utf8)
        var tagged = Array(prefix.utf8)
        tagged.reserveCapacity(tagged.count + hex.count + 12)
        tagged.append(contentsOf: Self.colonBrace)
        tagged.append(contentsOf: hex)
        tagged.append(contentsOf: Self.braceColon)
        routingKey = hex
        value = tagged + Self.valueSuffix
        lease = tagged + Self.leaseSuffix
        channel = tagged + Self.channelSuffix
    }

    private static let colonBrace = Array(":{".utf8)
    private static let braceColon = Array("}:".utf8)
    private static let valueSuffix = Array("value".utf8)
    private static let leaseSuffix = Array("lease".utf8)
    private static let channelSuffix = Array("released".utf8)

    /// The `SCAN MATCH` pattern of every value key under `prefix` (glob characters in it escaped).
    static func valuePattern(prefix: String) -> [UInt8] {
        var escaped: [UInt8] = []
        for byte in prefix.utf8 {
            if [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "\\")]
                .contains(byte)
            {
                escaped.append(UInt8(ascii: "\\"))
            }
            escaped.append(byte)
        }
        return escaped + Array(":{*}:value".utf8)
    }

    /// A prefix is 1–64 printable ASCII characters without spaces or braces (a brace would move the
    /// hash tag off the identity).
    static func isValidPrefix(_ prefix: String) -> Bool {
        !prefix.isEmpty && prefix.utf8.count <= 64
            && prefix.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "{") && $0 != UInt8(ascii: "}") }
    }
}
