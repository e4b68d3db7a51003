// RemotePlacementTests.swift: where keys go. Cluster hash slots (CRC16/XMODEM and the hash tag rules,
// with the Redis cluster specification's examples), the slot map parsed from CLUSTER SLOTS replies,
// rendezvous hashing over shards (stable, order-independent, minimal movement), and key names whose
// value, lease and channel share a slot.

import Testing

@testable import YashimaShared

@Suite("Remote placement")
struct RemotePlacementTests {
    private func slot(_ text: String) -> Int { ClusterSlot.slot(of: Array(text.utf8)) }

    @Test("CRC16/XMODEM and hash slots match the Redis cluster specification")
    func slots() {
        #expect(ClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(ClusterSlot.crc16([]) == 0)
        #expect(slot("123456789") == 0x31C3 % 16384)
        #expect(slot("foo") == 12182)
        #expect(slot("bar") == 5061)
        #expect(slot("{user1000}.following") == slot("{user1000}.followers"))
        #expect(slot("{user1000}.following") == slot("user1000"))
        #expect(slot("foo{}{bar}") == Int(ClusterSlot.crc16(Array("foo{}{bar}".utf8)) & 0x3FFF))
        #expect(slot("foo{{bar}}zap") == slot("{bar"))
        #expect(slot("foo{bar}{zap}") == slot("bar"))
        #expect(slot("{") == Int(ClusterSlot.crc16(Array("{".utf8)) & 0x3FFF))
        #expect(slot("}{") == Int(ClusterSlot.crc16(Array("}{".utf8)) & 0x3FFF))
    }

    @Test("an entry's value, lease and channel share a slot and routing bytes; prefixes are checked")
    func keyNames() {
        let identity = SHA256.hash(Array("entry".utf8))
        let keys = RemoteKeys(identity: identity, prefix: "app")
        let hex = identity.hex
        #expect(keys.value == Array("app:{\(hex)}:value".utf8))
        #expect(keys.lease == Array("app:{\(hex)}:lease".utf8))
        #expect(keys.channel == Array("app:{\(hex)}:released".utf8))
        #expect(keys.routingKey == Array(hex.utf8))
        let slots = [keys.value, keys.lease, keys.channel, keys.routingKey].map(ClusterSlot.slot(of:))
        #expect(Set(slots).count == 1)
        #expect(RemoteKeys.isValidPrefix("yashima") && RemoteKeys.isValidPrefix("a.b-c:d_1"))
        for bad in ["", "has space", "br{ace", "br}ace", "caf\u{e9}", String(repeating: "x", count: 65), "tab\t"] {
            #expect(!RemoteKeys.isValidPrefix(bad), "\(bad)")
        }
    }

    @Test("the slot map from CLUSTER SLOTS: ranges, empty host, unknown endpoint, malformed replies")
    func slotMap() throws {
        func node(_ host: String, _ port: Int64) -> RESPValue {
            .array([.bulkString(Array(host.utf8)), .integer(port), .bulkString(Array("id".utf8))])
        }
        let reply = RESPValue.array([
            .array([.integer(0), .integer(5460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)]),
            .array([.integer(5461), .integer(10922), node("", 7001)]),
            .array([.integer(10923), .integer(16383), node("?", 7002)]),
        ])
        let map = try #require(ClusterSlotMap(slotsReply: reply, queriedHost: "192.168.1.9"))
        #expect(map.node(for: 0) == .tcp(host: "10.0.0.1", port: 7000))
        #expect(map.node(for: 5460) == .tcp(host: "10.0.0.1", port: 7000))
        #expect(map.node(for: 5461) == .tcp(host: "192.168.1.9", port: 7001))
        #expect(map.node(for: 16383) == nil)
        #expect(!map.coversAllSlots)
        var moved = map
        moved.assign(16000...16383, to: .tcp(host: "10.0.0.1", port: 7000))
        #expect(moved.node(for: 16383) == .tcp(host: "10.0.0.1", port: 7000))
        #expect(moved.nodes.count == 2)
        let malformed: [RESPValue] = [
            .null, .array([]), .array([.integer(1)]),
            .array([.array([.integer(5), .integer(1), node("h", 1)])]),
            .array([.array([.integer(0), .integer(16384), node("h", 1)])]),
            .array([.array([.integer(0), .integer(1), node("h", 0)])]),
            .array([.array([.integer(0), .integer(1), .array([.integer(1)])])]),
            .array([.array([.integer(0), .integer(1), node("?", 1)])]),
        ]
        for bad in malformed { #expect(ClusterSlotMap(slotsReply: bad, queriedHost: "h") == nil, "\(bad)") }
    }

    @Test("rendezvous hashing: stable values, independent of order, only a removed server's keys move")
    func rendezvous() {
        // Fixed expectations: the same in every process and on every host.
        #expect(RendezvousHashing.score(name: "127.0.0.1:6379/0", routingKey: Array("abc".utf8)) == Self.goldenScore)
        let names = ["a:1/0", "b:1/0", "c:1/0", "unix:/s/0"]
        let hashing = RendezvousHashing(names: names)
        let keys = (0..<2000).map { Array("key-\($0)".utf8) }
        let placed = keys.map { names[hashing.shard(for: $0)] }
        var counts: [String: Int] = [:]
        for name in placed { counts[name, default: 0] += 1 }
        for name in names { #expect(counts[name, default: 0] > 350, "\(name): \(counts[name, default: 0])") }
        let reversed = RendezvousHashing(names: names.reversed())
        #expect(keys.map { reversed.names[reversed.shard(for: $0)] } == placed)
        let without = RendezvousHashing(names: names.filter { $0 != "b:1/0" })
        for (key, name) in zip(keys, placed) {
            let now = without.names[without.shard(for: key)]
            if name != "b:1/0" { #expect(now == name) }
        }
        #expect(RendezvousHashing(names: ["only"]).shard(for: [1]) == 0)
    }

    static let goldenScore: UInt64 = 0x8849_31e3_6a54_a158  // python3: sha256(label 0 name 0 key)[:8]
}
