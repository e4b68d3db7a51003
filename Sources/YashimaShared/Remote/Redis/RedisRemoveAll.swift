// RedisRemoveAll.swift: `removeAll` on the remote tier, an opt-in (`YCache.Remote.Options.removeAllRemotely`):
// every value key under the key prefix deleted on every server (each shard, each cluster master) by `SCAN
// MATCH` and pipelined `UNLINK`s, each round guarded like any call. Leases are left to expire (I16).

extension RedisRemoteStore {
    /// Deletes every value under the key prefix on every server; the number deleted, or nil when a server
    /// could not be asked (what was deleted before stays deleted). Nothing in read-only mode.
    func removeAll() async -> Int? {
        guard !remoteGuard.policy.readOnly else { return nil }
        return await RemoteIO.shared.run { self.removeAllBlocking() }
    }

    /// The rounds of `removeAll`, on a RemoteIO thread. Blocking: one operation timeout per round at most.
    private func removeAllBlocking() -> Int? {
        let router = router
        guard
            case .completed(let servers) = remoteGuard.performBlocking(
                scope: 0, access: .write, { (deadline) throws(RemoteError) in try router.servers(deadline: deadline) })
        else { return nil }
        let pattern = RemoteKeys.valuePattern(prefix: configuration.keyPrefix)
        var deleted = 0
        for (endpoint, scope) in servers {
            var cursor: [UInt8] = Array("0".utf8)
            repeat {
                let pool = settings.pool(for: endpoint)
                let attempt = remoteGuard.performBlocking(scope: scope, access: .write) {
                    (deadline) throws(RemoteError) -> ([UInt8], Int) in
                    try pool.withConnection(deadline: deadline) { (connection) throws(RemoteError) -> ([UInt8], Int) in
                        let reply = try connection.execute(
                            RESPCommand("SCAN", cursor, "MATCH", pattern, "COUNT", "1000"), deadline: deadline)
                        guard case .array(let parts) = reply, parts.count == 2, case .bulkString(let next) = parts[0],
                            case .array(let names) = parts[1]
                        else {
                            if case .error(let error) = reply { throw .server(error) }
                            throw .unexpectedReply(reply.shape)
                        }
                        let keys = names.compactMap { name -> [UInt8]? in
                            if case .bulkString(let bytes) = name { return bytes }
                            return nil
                        }
                        // One key per UNLINK: in a cluster, keys of different slots cannot share a command.
                        let replies =
                            keys.isEmpty
                            ? [] : try connection.pipeline(keys.map { RESPCommand("UNLINK", $0) }, deadline: deadline)
                        var count = 0
                        for reply in replies { count += Int((try? RedisEntryCommands.integer(reply)) ?? 0) }
                        return (next, count)
                    }
                }
                guard case .completed(let (next, count)) = attempt else { return nil }
                deleted += count
                cursor = next
            } while cursor != Array("0".utf8)
        }
        return deleted
    }
}
