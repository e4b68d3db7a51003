// ClusterSlots.swift: Redis Cluster key placement: the CRC16 (XMODEM) hash slot with the `{hash tag}`
// rule, exactly as the Redis cluster specification defines them, and the slot map read from
// `CLUSTER SLOTS`. Pure: no I/O (RedisClusterRouter asks the servers).

/// Hash slots of Redis Cluster keys.
enum ClusterSlot {
    /// The number of hash slots.
    static let count = 16384

    /// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection, no final XOR), the
    /// checksum Redis Cluster uses; `crc16("123456789")` is 0x31C3.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    /// The slot of `key`: CRC16 of the hash tag when the key has one, else of the whole key, modulo
    /// 16384. The hash tag is what lies between the first `{` and the first `}` after it, when that is
    /// not empty (so `{user1000}.following` and `{user1000}.followers` share a slot, and `foo{}{bar}`
    /// hashes whole).
    static func slot(of key: [UInt8]) -> Int {
        Int(crc16(hashTag(of: key)) & 0x3FFF)
    }

    /// The bytes of `key` that are hashed (the tag, or the whole key).
    static func hashTag(of key: [UInt8]) -> ArraySlice<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")),
            let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        else { return key[...] }
        return key[(open + 1)..<close]
    }

    private static let table: [UInt16] = (0..<256).map { index -> UInt16 in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}

/// Which node serves each slot, as `CLUSTER SLOTS` reported it (primaries only).
struct ClusterSlotMap: Equatable, Sendable {
    /// The primaries' addresses; `owners` indexes into it.
    private(set) var nodes: [RemoteAddress]
    /// For each slot, the index of its node in `nodes`, or -1 when no node serves it.
    private var owners: [Int16]

    /// An empty map (no slot served).
    init() {
        nodes = []
        owners = [Int16](repeating: -1, count: ClusterSlot.count)
    }

    /// The map from a `CLUSTER SLOTS` reply.
    ///
    /// - Parameters:
    ///   - reply: `[[start, end, [host, port, id, ...], replicas...], ...]`.
    ///   - queriedHost: The host the reply came from, used for nodes that report an empty host (a node
    ///     that does not know its own address reports `""`, meaning "the address you reached me at").
    /// - Returns: nil when the reply is not of that shape or covers no slot.
    init?(slotsReply reply: RESPValue, queriedHost: String) {
        self.init()
        guard case .array(let ranges) = reply else { return nil }
        for range in ranges {
            guard case .array(let fields) = range, fields.count >= 3,
                case .integer(let first) = fields[0], case .integer(let last) = fields[1],
                0 <= first, first <= last, last < ClusterSlot.count,
                case .array(let primary) = fields[2], primary.count >= 2,
                case .bulkString(let hostBytes) = primary[0], case .integer(let port) = primary[1],
                (1...65535).contains(port)
            else { return nil }
            var host = String(decoding: hostBytes, as: UTF8.self)
            if host == "?" { continue }  // the node's endpoint is unknown: leave those slots unserved
            if host.isEmpty { host = queriedHost }
            assign(Int(first)...Int(last), to: .tcp(host: host, port: Int(port)))
        }
        guard owners.contains(where: { $0 >= 0 }) else { return nil }
    }

    /// The node serving `slot`, if any.
    func node(for slot: Int) -> RemoteAddress? {
        let owner = owners[slot]
        return owner >= 0 ? nodes[Int(owner)] : nil
    }

    /// True when every slot has a node.
    var coversAllSlots: Bool { !owners.contains(-1) }

    /// Records that `slots` now live on `address` (after `MOVED`).
    mutating func assign(_ slots: ClosedRange<Int>, to address: RemoteAddress) {
        let index: Int
        if let existing = nodes.firstIndex(of: address) {
            index = existing
        } else {
            guard nodes.count < Int(Int16.max) else { return }
            nodes.append(address)
            index = nodes.count - 1
        }
        for slot in slots { owners[slot] = Int16(index) }
    }
}
