// RedisEntryCommands.swift: the Redis-level operations on one entry's keys (RemoteKeys): get, put with
// a TTL, delete, and the lease commands (acquire with SET NX PX and a random token, the value or else the
// lease with a script that takes it unless a value is stored, renew and release by script), each pipelined with what the next step needs so the
// common paths take one round trip. Blocking calls that throw `RemoteError`; RedisRemoteStore adds the
// envelope, breaker and statistics.

/// Redis commands on entries, through a router. Blocking.
struct RedisEntryCommands: Sendable {
    /// Where commands run.
    let router: any RedisRouter

    /// `GET value`: the stored bytes or nil. Blocking.
    ///
    /// - Throws: `.server(WRONGTYPE)` (scope `.key`) when the key holds another type, or any failure.
    func get(_ keys: RemoteKeys, deadline: RemoteDeadline) throws(RemoteError) -> [UInt8]? {
        try Self.bulk(
            router.execute([RESPCommand("GET", keys.value)], routingKey: keys.routingKey, deadline: deadline)[0])
    }

    /// `SET value bytes PX ttl` (replaces any type), or with `keepSigned` the script that keeps a signed
    /// value in place. Blocking.
    ///
    /// - Returns: False when a signed value was kept (`keepSigned` only).
    @discardableResult
    func put(
        _ keys: RemoteKeys, bytes: [UInt8], timeToLiveMilliseconds: Int64, keepSigned: Bool = false,
        deadline: RemoteDeadline
    ) throws(RemoteError) -> Bool {
        let reply = try RedisScript.execute(
            [storeCommand(keys, bytes: bytes, timeToLiveMilliseconds: timeToLiveMilliseconds, keepSigned: keepSigned)],
            on: router, routingKey: keys.routingKey, deadline: deadline)[0]
        return try Self.stored(reply, keepSigned: keepSigned)
    }

    /// The command that stores a value: `SET`, or the `storeUnlessSigned` script.
    private func storeCommand(_ keys: RemoteKeys, bytes: [UInt8], timeToLiveMilliseconds: Int64, keepSigned: Bool)
        -> RESPCommand
    {
        let ttl = max(1, timeToLiveMilliseconds)
        guard keepSigned else { return RESPCommand("SET", keys.value, bytes, "PX", ttl) }
        return RedisScript.storeUnlessSigned.command(keys: [keys.value], arguments: [bytes, ttl.respBytes])
    }

    /// A store command's reply: true when stored, false when the script kept a signed value.
    private static func stored(_ reply: RESPValue, keepSigned: Bool) throws(RemoteError) -> Bool {
        guard keepSigned else {
            try ok(reply)
            return true
        }
        return try integer(reply) == 1
    }

    /// `DEL value`: true when a value was deleted. Blocking.
    func delete(_ keys: RemoteKeys, deadline: RemoteDeadline) throws(RemoteError) -> Bool {
        try Self.integer(
            router.execute([RESPCommand("DEL", keys.value)], routingKey: keys.routingKey, deadline: deadline)[0]) > 0
    }

    /// What acquiring found: the lease (if this call got it) and the value (read in the same pipeline,
    /// so a value published between the caller's miss and this call is seen without another trip).
    struct Acquisition: Sendable {
        /// The lease, when `SET NX` succeeded.
        let lease: RedisLease?
        /// The value key's bytes (nil when absent or of another type).
        let value: [UInt8]?
    }

    /// `SET lease token NX PX ttl` and `GET value`, pipelined. Blocking.
    func acquire(_ keys: RemoteKeys, timeToLiveMilliseconds: Int64, deadline: RemoteDeadline) throws(RemoteError)
        -> Acquisition
    {
        let token = Self.newToken()
        let replies = try router.execute(
            [
                RESPCommand("SET", keys.lease, token, "NX", "PX", timeToLiveMilliseconds),
                RESPCommand("GET", keys.value),
            ],
            routingKey: keys.routingKey, deadline: deadline)
        let acquired: Bool
        switch replies[0] {
        case .null: acquired = false
        case .error(let error): throw .redis(.server(error))
        case let reply where reply.isOK: acquired = true
        case let reply: throw .redis(.unexpectedReply(reply.shape))
        }
        let value: [UInt8]?
        if case .error(let error) = replies[1], error.kind == .wrongType {
            value = nil  // a planted value of another type: a miss; the generator's SET replaces it
        } else {
            value = try Self.bulk(replies[1])
        }
        let lease =
            acquired ? RedisLease(keys: keys, token: token, timeToLiveMilliseconds: timeToLiveMilliseconds) : nil
        return Acquisition(lease: lease, value: value)
    }

    /// `GET value` and the script that takes the lease unless a value is stored, pipelined: a miss's
    /// lookup and lease in one round trip, a hit with no lease. `value` is the stored bytes (nil when
    /// absent or of another type); `lease` is set when this call took it (rarely with a value too: one
    /// stored meanwhile or deleted between the two commands). Blocking.
    func lookupOrAcquire(_ keys: RemoteKeys, timeToLiveMilliseconds: Int64, deadline: RemoteDeadline)
        throws(RemoteError) -> Acquisition
    {
        let token = Self.newToken()
        let replies = try RedisScript.execute(
            [
                RESPCommand("GET", keys.value),
                RedisScript.acquireUnlessStored.command(
                    keys: [keys.value, keys.lease], arguments: [token, timeToLiveMilliseconds.respBytes]),
            ], on: router, routingKey: keys.routingKey, deadline: deadline)
        let value: [UInt8]?
        if case .error(let error) = replies[0], error.kind == .wrongType {
            value = nil  // a planted value of another type: a miss; the generator's SET replaces it
        } else {
            value = try Self.bulk(replies[0])
        }
        let lease = RedisLease(keys: keys, token: token, timeToLiveMilliseconds: timeToLiveMilliseconds)
        switch replies[1] {
        case .integer(1): return Acquisition(lease: lease, value: value)
        case .integer(0): return Acquisition(lease: nil, value: value)
        case .integer(2):
            // Stored between the two commands: look again, taking the lease if it went meanwhile.
            guard value == nil else { return Acquisition(lease: nil, value: value) }
            return try acquire(keys, timeToLiveMilliseconds: timeToLiveMilliseconds, deadline: deadline)
        case .error(let error): throw .redis(.server(error))
        case let reply: throw .redis(.unexpectedReply(reply.shape))
        }
    }

    /// Extends `lease` by its TTL if this process still holds it (script). Blocking.
    ///
    /// - Returns: False when the lease expired, was evicted or belongs to someone else now.
    func renew(_ lease: RedisLease, deadline: RemoteDeadline) throws(RemoteError) -> Bool {
        let command = RedisScript.renew.command(
            keys: [lease.keys.lease], arguments: [lease.token, lease.timeToLiveMilliseconds.respBytes])
        let replies = try RedisScript.execute(
            [command], on: router, routingKey: lease.keys.routingKey, deadline: deadline)
        return try Self.integer(replies[0]) == 1
    }

    /// Deletes `lease` if this process still holds it and publishes the release (script). Blocking.
    ///
    /// - Returns: False when the lease was already gone or someone else's (nothing deleted).
    func release(_ lease: RedisLease, deadline: RemoteDeadline) throws(RemoteError) -> Bool {
        let replies = try RedisScript.execute(
            [releaseCommand(lease)], on: router, routingKey: lease.keys.routingKey, deadline: deadline)
        return try Self.integer(replies[0]) == 1
    }

    /// `SET value` (or, with `keepSigned`, the script that keeps a signed value) and the release script,
    /// pipelined: the generator's last step in one round trip. The lease is released even when the store
    /// fails (a full server). Blocking.
    ///
    /// - Returns: The store's outcome (a failure as a value) and whether the lease was released.
    func putAndRelease(
        _ lease: RedisLease, bytes: [UInt8], timeToLiveMilliseconds: Int64, keepSigned: Bool = false,
        deadline: RemoteDeadline
    ) throws(RemoteError) -> (stored: Result<Bool, RemoteError>, released: Bool) {
        let keys = lease.keys
        let store = storeCommand(
            keys, bytes: bytes, timeToLiveMilliseconds: timeToLiveMilliseconds, keepSigned: keepSigned)
        let replies = try RedisScript.execute(
            [store, releaseCommand(lease)], on: router, routingKey: keys.routingKey, deadline: deadline)
        let stored = Result { () throws(RemoteError) in try Self.stored(replies[0], keepSigned: keepSigned) }
        return (stored, (try? Self.integer(replies[1])) == 1)
    }

    /// What a waiter's re-check found.
    struct Check: Sendable {
        /// The value key's bytes (nil when absent or of another type).
        let value: [UInt8]?
        /// The lease's remaining TTL in milliseconds: -2 when there is no lease, -1 when the key has no
        /// TTL (not a lease this protocol wrote).
        let leaseMilliseconds: Int64
    }

    /// `GET value` and `PTTL lease`, pipelined. Blocking.
    func check(_ keys: RemoteKeys, deadline: RemoteDeadline) throws(RemoteError) -> Check {
        let replies = try router.execute(
            [RESPCommand("GET", keys.value), RESPCommand("PTTL", keys.lease)], routingKey: keys.routingKey,
            deadline: deadline)
        let value: [UInt8]?
        if case .error(let error) = replies[0], error.kind == .wrongType {
            value = nil
        } else {
            value = try Self.bulk(replies[0])
        }
        return Check(value: value, leaseMilliseconds: try Self.integer(replies[1]))
    }

    private func releaseCommand(_ lease: RedisLease) -> RESPCommand {
        RedisScript.release.command(keys: [lease.keys.lease], arguments: [lease.token, lease.keys.channel])
    }

    static func bulk(_ reply: RESPValue) throws(RemoteError) -> [UInt8]? {
        switch reply {
        case .bulkString(let bytes): return bytes
        case .null: return nil
        case .error(let error): throw .redis(.server(error))
        default: throw .redis(.unexpectedReply(reply.shape))
        }
    }

    static func integer(_ reply: RESPValue) throws(RemoteError) -> Int64 {
        switch reply {
        case .integer(let value): return value
        case .error(let error): throw .redis(.server(error))
        default: throw .redis(.unexpectedReply(reply.shape))
        }
    }

    static func ok(_ reply: RESPValue) throws(RemoteError) {
        switch reply {
        case let reply where reply.isOK: return
        case .error(let error): throw .redis(.server(error))
        default: throw .redis(.unexpectedReply(reply.shape))
        }
    }
}

extension RedisEntryCommands {
    /// A lease token: 16 bytes from getrandom as 32 lowercase hex digits (written through a table: the
    /// token is made on every remote lookup, a hit's included).
    static func newToken() -> [UInt8] {
        let random = Syscall.randomBytes(16)
        let digits: StaticString = "0123456789abcdef"
        return digits.withUTF8Buffer { table in
            [UInt8](unsafeUninitializedCapacity: 32) { output, count in
                for (index, byte) in random.enumerated() {
                    output[2 * index] = table[Int(byte >> 4)]
                    output[2 * index + 1] = table[Int(byte & 0x0F)]
                }
                count = 32
            }
        }
    }
}
