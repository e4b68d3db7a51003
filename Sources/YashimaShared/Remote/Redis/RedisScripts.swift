// RedisScripts.swift: the Lua scripts of the lease protocol (renew, release, acquire-unless-stored) and how
// they are run: `EVALSHA` by the script's SHA-1, then `EVAL` of the source for any command the server
// answered `NOSCRIPT` (a restarted or new server, or a cluster node that never ran it). The SHA-1 digests are
// constants; a test checks them against `SCRIPT LOAD` on a real server, so no SHA-1 code is needed.

/// A Lua script run with `EVALSHA`, falling back to `EVAL`.
struct RedisScript: Equatable, Sendable {
    /// The Lua source.
    let source: String
    /// The SHA-1 of `source`, lowercase hex, as `SCRIPT LOAD` returns it.
    let sha1: String

    /// Renews a lease only for its holder: `KEYS[1]` lease key, `ARGV[1]` token, `ARGV[2]` TTL in
    /// milliseconds. Returns 1 when renewed, 0 when the lease is gone or someone else's.
    static let renew = RedisScript(
        source:
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
        sha1: "e50f848e374a94192aa6f2e444e7eb8acc16501d")

    /// Releases a lease only for its holder and then announces it: `KEYS[1]` lease key, `ARGV[1]`
    /// token, `ARGV[2]` release channel. Returns 1 when released (and published), 0 when the lease was
    /// gone or someone else's (then nothing is deleted or published).
    ///
    /// Plain `PUBLISH`, not `SPUBLISH`: in a cluster it reaches subscribers on every node (the cluster
    /// bus broadcasts it), works on every Redis version, and survives slot migrations; it costs one
    /// small broadcast per generated value. The channel still carries the entry's hash tag, so moving
    /// to sharded pub/sub later changes two command names.
    static let release = RedisScript(
        source:
            "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', ARGV[2], 'released') return 1 end return 0",
        sha1: "edf19d54dbc69250e4702f325b48d31d6442ab84")

    /// Stores a value unless a signed one is there (the trust rule of a host without a secret: it never
    /// replaces a value that hosts with the secret wrote): `KEYS[1]` value key, `ARGV[1]` the envelope,
    /// `ARGV[2]` TTL in milliseconds. A value counts as signed when it is a string starting with the
    /// envelope's magic whose flags (byte 10) have bit 0 set; only its first 12 bytes are read (`GETRANGE`
    /// under `pcall`: another type, or an ACL without `getrange`, reads as no signed value). Returns 1
    /// when stored, 0 when a signed value was kept.
    static let storeUnlessSigned = RedisScript(
        source:
            "local h = redis.pcall('GETRANGE', KEYS[1], 0, 11) if type(h) == 'string' and string.len(h) == 12 and string.sub(h, 1, 8) == 'YSHREMOT' and string.byte(h, 11) % 2 == 1 then return 0 end redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1",
        sha1: "f603f921e6a6bc3afc878a5f0923f84ad10d650b")

    /// Takes the lease unless a value is stored, so that a `GET` of the value pipelined before it makes a
    /// miss's lookup and lease one round trip, and a hit takes no lease (the value is never copied through
    /// Lua). `KEYS[1]` value key, `KEYS[2]` lease key, `ARGV[1]` token, `ARGV[2]` TTL in milliseconds.
    /// Returns 2 when a string is stored (a key of another type counts as none: the generator's `SET`
    /// replaces it), else 1 when the lease was taken, 0 when another holds it.
    static let acquireUnlessStored = RedisScript(
        source:
            "if redis.call('TYPE', KEYS[1])['ok'] == 'string' then return 2 end if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0",
        sha1: "dae3a4323bc89d6f9a69508348fbe28ba4155353")

    /// Every script, for the `NOSCRIPT` fallback.
    static let all: [RedisScript] = [renew, release, storeUnlessSigned, acquireUnlessStored]

    /// `EVALSHA sha1 numkeys keys... args...`.
    func command(keys: [[UInt8]], arguments: [[UInt8]]) -> RESPCommand {
        var all: [[UInt8]] = []
        all.reserveCapacity(3 + keys.count + arguments.count)
        all.append(Self.evalsha)
        all.append(Array(sha1.utf8))
        all.append(keys.count.respBytes)
        all.append(contentsOf: keys)
        all.append(contentsOf: arguments)
        return RESPCommand(arguments: all)
    }

    private static let evalsha = Array("EVALSHA".utf8)

    /// Runs `commands` through `router`, then sends again, as `EVAL` with the source, every `EVALSHA`
    /// the server did not know (`NOSCRIPT`), and splices those replies in. Blocking.
    static func execute(
        _ commands: [RESPCommand], on router: any RedisRouter, routingKey: [UInt8], deadline: RemoteDeadline
    ) throws(RemoteError) -> [RESPValue] {
        var replies = try router.execute(commands, routingKey: routingKey, deadline: deadline)
        var retried: [Int] = []
        var fallbacks: [RESPCommand] = []
        for (index, reply) in replies.enumerated() {
            guard case .error(let error) = reply, error.kind == .noScript,
                let fallback = evalFallback(for: commands[index])
            else { continue }
            retried.append(index)
            fallbacks.append(fallback)
        }
        guard !fallbacks.isEmpty else { return replies }
        let again = try router.execute(fallbacks, routingKey: routingKey, deadline: deadline)
        for (index, reply) in zip(retried, again) { replies[index] = reply }
        return replies
    }

    /// `EVAL source ...` for an `EVALSHA` command of a known script; nil for anything else.
    private static func evalFallback(for command: RESPCommand) -> RESPCommand? {
        guard command.arguments.count >= 3, command.name == "EVALSHA",
            let script = all.first(where: { Array($0.sha1.utf8) == command.arguments[1] })
        else { return nil }
        var arguments = command.arguments
        arguments[0] = Array("EVAL".utf8)
        arguments[1] = Array(script.source.utf8)
        return RESPCommand(arguments: arguments)
    }
}
