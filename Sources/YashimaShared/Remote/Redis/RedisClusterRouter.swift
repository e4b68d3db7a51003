// RedisClusterRouter.swift: one entry's pipeline on the Cluster node owning its slot: the slot map, MOVED
// (map reloaded at most once a second, as after a node that cannot be reached or CLUSTERDOWN: a failover),
// ASK (ASKING first), at most `maximumRedirects` rounds; only redirected commands are resent. Blocking.
// Also the key placement it routes by: the CRC16 (XMODEM) hash slot with the `{hash tag}` rule, as the Redis
// cluster specification defines them, and the slot map read from `CLUSTER SLOTS` (pure, no I/O).

import Synchronization

/// Routes pipelines to cluster nodes by hash slot. One breaker scope for the whole cluster.
final class RedisClusterRouter: RedisRouter {
    /// The nodes given in the configuration (any subset of the cluster).
    let seeds: [RedisEndpoint]
    /// Connection settings.
    let settings: RedisConnectionSettings
    /// The most redirect rounds of one call.
    static let maximumRedirects = 5
    /// The shortest time between two full map reloads caused by `MOVED`.
    static let refreshInterval: Int64 = 1_000_000_000

    private struct State {
        var map: ClusterSlotMap?
        var stale = false
        var lastRefresh: Int64 = 0
    }

    private let state = Mutex(State())

    /// A router over the cluster that `seeds` belong to (at least one).
    ///
    /// - Parameter map: A slot map to start from (tests); by default it is loaded on first use.
    init(seeds: [RedisEndpoint], settings: RedisConnectionSettings, map: ClusterSlotMap? = nil) {
        precondition(!seeds.isEmpty)
        self.seeds = seeds
        self.settings = settings
        if let map { state.withLock { $0.map = map } }
    }

    var scopeCount: Int { 1 }

    var scopeLabels: [String] { ["redis cluster " + seeds.map(\.shardName).joined(separator: ",")] }

    func scope(for routingKey: [UInt8]) -> Int { 0 }

    /// The slot map now (tests).
    var currentMap: ClusterSlotMap? { state.withLock { $0.map } }

    func execute(
        _ commands: [RESPCommand], routingKey: [UInt8], deadline: RemoteDeadline
    ) throws(RemoteError) -> [RESPValue] {
        let slot = ClusterSlot.slot(of: routingKey)
        var target = try node(for: slot, deadline: deadline)
        var results = [RESPValue?](repeating: nil, count: commands.count)
        var pending = Array(commands.indices)
        var asking = false
        for _ in 0...Self.maximumRedirects {
            let batch =
                asking ? pending.flatMap { [RESPCommand("ASKING"), commands[$0]] } : pending.map { commands[$0] }
            let replies: [RESPValue]
            do throws(RemoteError) {
                replies = try settings.pool(for: endpoint(at: target)).withConnection(deadline: deadline) {
                    (connection) throws(RemoteError) -> [RESPValue] in
                    try connection.pipeline(batch, deadline: deadline)
                }
            } catch {
                // A node that died never answers MOVED: reload the map on the next call (at most once a
                // second), so a failover's promoted replica is found.
                if error.failureKind == .connection { markStale() }
                throw error
            }
            if replies.contains(where: Self.isClusterDown) { markStale() }
            // After ASKING, every other reply is ASKING's own +OK.
            let own = asking ? stride(from: 1, to: replies.count, by: 2).map { replies[$0] } : replies
            var redirected: [Int] = []
            var redirect: RedisErrorReply.Kind?
            for (index, reply) in zip(pending, own) {
                if case .error(let error) = reply {
                    switch error.kind {
                    case .moved, .ask:
                        redirected.append(index)
                        redirect = redirect ?? error.kind
                        continue
                    default: break
                    }
                }
                results[index] = reply
            }
            guard let redirect, !redirected.isEmpty else { return results.map { $0! } }
            switch redirect {
            case .moved(let movedSlot, let host, let port):
                target = Self.address(host: host, port: port, relativeTo: target)
                let moved = target
                state.withLock { state in
                    if state.map == nil { state.map = ClusterSlotMap() }
                    state.map!.assign(movedSlot...movedSlot, to: moved)
                    state.stale = true
                }
                asking = false
            case .ask(_, let host, let port):
                target = Self.address(host: host, port: port, relativeTo: target)
                asking = true
            default:
                break
            }
            pending = redirected
        }
        throw .redis(.tooManyRedirects)
    }

    /// Every master of the map, loaded now. Blocking.
    func servers(deadline: RemoteDeadline) throws(RemoteError) -> [(endpoint: RedisEndpoint, scope: Int)] {
        try refresh(deadline: deadline)
        return (state.withLock { $0.map?.nodes } ?? []).map { (endpoint(at: $0), 0) }
    }

    /// Makes the next call reload the slot map (rate-limited by `refreshInterval`).
    private func markStale() { state.withLock { $0.stale = true } }

    /// `CLUSTERDOWN` or `TRYAGAIN`: the cluster is failing over or resharding.
    private static func isClusterDown(_ reply: RESPValue) -> Bool {
        guard case .error(let error) = reply else { return false }
        return error.kind == .clusterDown || error.kind == .tryAgain
    }

    func subscriptionEndpoint(for routingKey: [UInt8], deadline: RemoteDeadline) throws(RemoteError) -> RedisEndpoint {
        endpoint(at: try node(for: ClusterSlot.slot(of: routingKey), deadline: deadline))
    }

    /// Loads the slot map from the first node that answers. Blocking.
    func refresh(deadline: RemoteDeadline) throws(RemoteError) {
        let known = state.withLock { $0.map?.nodes ?? [] }
        var candidates = known
        for seed in seeds where !candidates.contains(seed.address) { candidates.append(seed.address) }
        var lastError = RemoteError.redis(.clusterMapUnavailable)
        for address in candidates {
            guard !deadline.hasPassed else { throw .timedOut }
            do throws(RemoteError) {
                let reply = try settings.pool(for: endpoint(at: address)).withConnection(deadline: deadline) {
                    (connection) throws(RemoteError) -> RESPValue in
                    try connection.execute(RESPCommand("CLUSTER", "SLOTS"), deadline: deadline)
                }
                if case .error(let error) = reply { throw RemoteError.redis(.server(error)) }
                let queriedHost: String
                if case .tcp(let host, _) = address { queriedHost = host } else { queriedHost = "127.0.0.1" }
                guard let map = ClusterSlotMap(slotsReply: reply, queriedHost: queriedHost) else {
                    throw RemoteError.redis(.clusterMapUnavailable)
                }
                let now = Syscall.monotonicNanoseconds
                state.withLock { state in
                    state.map = map
                    state.stale = false
                    state.lastRefresh = now
                }
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    private func node(for slot: Int, deadline: RemoteDeadline) throws(RemoteError) -> RemoteAddress {
        let now = Syscall.monotonicNanoseconds
        let (known, wantsRefresh) = state.withLock { state -> (RemoteAddress?, Bool) in
            let node = state.map?.node(for: slot)
            let due =
                state.map == nil
                || ((node == nil || state.stale) && now - state.lastRefresh >= Self.refreshInterval)
            return (node, due)
        }
        if wantsRefresh {
            do throws(RemoteError) {
                try refresh(deadline: deadline)
            } catch {
                // A stale map still routes (MOVED corrects it); no map at all cannot.
                guard let known else { throw error }
                state.withLock { $0.lastRefresh = now }
                return known
            }
        } else if let known {
            return known
        }
        if let address = state.withLock({ $0.map?.node(for: slot) }) { return address }
        throw .redis(.clusterMapUnavailable)
    }

    private func endpoint(at address: RemoteAddress) -> RedisEndpoint {
        seeds.first { $0.address == address } ?? seeds[0].moved(to: address)
    }

    /// The address a redirect names; an empty host means the node that sent it.
    private static func address(host: String, port: Int, relativeTo current: RemoteAddress) -> RemoteAddress {
        if !host.isEmpty { return .tcp(host: host, port: port) }
        if case .tcp(let currentHost, _) = current { return .tcp(host: currentHost, port: port) }
        return .tcp(host: "127.0.0.1", port: port)
    }
}

// MARK: - Key placement

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
