// RedisConnectionPool.swift: the process-wide pool of idle connections per server: the most recently used
// healthy one, or a new one; only reusable connections go back, at most `maximumIdle`. Blocking.

import Synchronization

/// Idle connections to one server, shared by the process (see ``shared(for:limits:connectTimeout:)``).
final class RedisConnectionPool: Sendable {
    /// The server.
    let endpoint: RedisEndpoint
    /// The reply limits of connections opened here.
    let limits: RESPLimits
    /// The most connecting may take.
    let connectTimeout: Duration
    /// The most idle connections kept.
    let maximumIdle: Int
    private let idle = Mutex<[RedisConnection]>([])
    private let opened = Atomic<Int>(0)

    /// The default number of idle connections kept per server.
    static let defaultMaximumIdle = 6
    /// Idle connections older than this are closed at checkout instead of reused (a server or a
    /// middlebox may have dropped them silently).
    static let maximumIdleNanoseconds: Int64 = 60 * 1_000_000_000

    /// Creates a pool (tests; the tier uses ``shared(for:limits:connectTimeout:)``).
    init(endpoint: RedisEndpoint, limits: RESPLimits, connectTimeout: Duration, maximumIdle: Int = defaultMaximumIdle) {
        self.endpoint = endpoint
        self.limits = limits
        self.connectTimeout = connectTimeout
        self.maximumIdle = maximumIdle
    }

    private struct RegistryKey: Hashable {
        let endpoint: RedisEndpoint
        let limits: RESPLimits
        let connectTimeout: Duration
    }

    private static let registry = Mutex<[RegistryKey: RedisConnectionPool]>([:])

    /// The process's pool for `endpoint` with these settings (created on first use).
    static func shared(for endpoint: RedisEndpoint, limits: RESPLimits, connectTimeout: Duration) -> RedisConnectionPool
    {
        let key = RegistryKey(endpoint: endpoint, limits: limits, connectTimeout: connectTimeout)
        return registry.withLock { pools in
            if let pool = pools[key] { return pool }
            let pool = RedisConnectionPool(endpoint: endpoint, limits: limits, connectTimeout: connectTimeout)
            pools[key] = pool
            return pool
        }
    }

    /// How many connections this pool has opened so far (tests: a dropped connection is not reused).
    var openedCount: Int { opened.load(ordering: .relaxed) }

    /// How many idle connections the pool holds now.
    var idleCount: Int { idle.withLock { $0.count } }

    /// Runs `body` with a connection, then pools it again if it is still reusable. Blocking.
    ///
    /// - Throws: What opening a connection throws, or what `body` throws.
    func withConnection<T>(
        deadline: RemoteDeadline, _ body: (RedisConnection) throws(RemoteError) -> T
    ) throws(RemoteError) -> T {
        let connection = try checkOut(deadline: deadline)
        do throws(RemoteError) {
            let result = try body(connection)
            checkIn(connection)
            return result
        } catch {
            connection.close()
            throw error
        }
    }

    /// Closes every idle connection (tests, and a server known to be gone).
    func drain() {
        let dropped = idle.withLock { connections in
            defer { connections.removeAll() }
            return connections
        }
        for connection in dropped { connection.close() }
    }

    private func checkOut(deadline: RemoteDeadline) throws(RemoteError) -> RedisConnection {
        let now = Syscall.monotonicNanoseconds
        while let candidate = idle.withLock({ $0.popLast() }) {
            if now - candidate.idleSince < Self.maximumIdleNanoseconds, candidate.isReusable { return candidate }
            candidate.close()
        }
        guard !deadline.hasPassed else { throw .timedOut }
        let connection = try RedisConnection.open(
            to: endpoint, limits: limits, connectTimeout: connectTimeout, deadline: deadline)
        opened.add(1, ordering: .relaxed)
        return connection
    }

    private func checkIn(_ connection: RedisConnection) {
        guard connection.isReusable else {
            connection.close()
            return
        }
        connection.idleSince = Syscall.monotonicNanoseconds
        let kept = idle.withLock { connections -> Bool in
            guard connections.count < maximumIdle else { return false }
            connections.append(connection)
            return true
        }
        if !kept { connection.close() }
    }
}
