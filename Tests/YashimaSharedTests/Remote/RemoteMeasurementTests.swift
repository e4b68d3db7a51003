// RemoteMeasurementTests.swift: measurements, not assertions (run with YASHIMA_REMOTE_MEASURE=1; skipped
// otherwise). Prints medians and 90th percentiles in one run, so the figures compare against each
// other: a PING round trip on a blocking thread over a Unix socket and over TCP loopback, the hop onto
// a RemoteIO thread and back, a thread started per call (BlockingWork), a PING through the hop, ten
// PINGs pipelined against ten in turn, and a 1 KiB lookup through the whole tier; what every guarded call
// adds (the breaker's words in this process or in the state file's slot, the counters' atomic add), and a
// 4 KiB store with and without a secret (the script that keeps a signed value) against a raw SET.

import Foundation
import Testing

@testable import YashimaShared

@Suite(
    "Remote measurements", .redisServer,
    .enabled(if: ProcessInfo.processInfo.environment["YASHIMA_REMOTE_MEASURE"] == "1", "set YASHIMA_REMOTE_MEASURE=1"),
    .serialized)
struct RemoteMeasurementTests {
    private static func report(_ label: String, _ samples: [Int64]) {
        let sorted = samples.sorted()
        let median = Double(sorted[sorted.count / 2]) / 1000
        let p90 = Double(sorted[sorted.count * 9 / 10]) / 1000
        let padded = label.padding(toLength: 52, withPad: " ", startingAt: 0)
        print(
            "MEASURE \(padded)" + String(format: "median %8.1f µs   p90 %8.1f µs   (n=%d)", median, p90, samples.count))
    }

    /// Times `count` runs of blocking `body` on one thread off the pool.
    private static func blocking(_ count: Int, _ body: @escaping @Sendable () -> Void) async -> [Int64] {
        await offPool {
            for _ in 0..<50 { body() }
            return (0..<count).map { _ in
                let start = Syscall.monotonicNanoseconds
                body()
                return Syscall.monotonicNanoseconds - start
            }
        }
    }

    /// Times `count` runs of async `body` from a task.
    private static func asynchronous(_ count: Int, _ body: @Sendable () async -> Void) async -> [Int64] {
        await timedRuns(count, warmUp: 50, body)
    }

    @Test("round trips against the thread hop")
    func roundTripsAndHops() async throws {
        let unix = try await RedisServer.start()
        let tcp = try await RedisServer.start(tcp: true)
        let limits = RESPLimits.forValues(upTo: 1 << 20)
        let pools = [unix, tcp].map {
            RedisConnectionPool(endpoint: $0.endpoint(), limits: limits, connectTimeout: .seconds(1))
        }
        let ping = { @Sendable (pool: RedisConnectionPool) in
            _ = try? pool.withConnection(deadline: .after(.seconds(5))) { (connection) throws(RemoteError) in
                try connection.execute(RESPCommand("PING"), deadline: .after(.seconds(5)))
            }
        }
        Self.report("PING, blocking, Unix socket", await Self.blocking(5000) { ping(pools[0]) })
        Self.report("PING, blocking, TCP loopback", await Self.blocking(5000) { ping(pools[1]) })
        Self.report("hop: RemoteIO.run { } and back", await Self.asynchronous(5000) { await RemoteIO.shared.run {} })
        Self.report(
            "hop: BlockingWork.run { } (thread per call)", await Self.asynchronous(1000) { await BlockingWork.run {} })
        Self.report(
            "PING through RemoteIO, Unix socket",
            await Self.asynchronous(5000) { await RemoteIO.shared.run { ping(pools[0]) } })
        Self.report(
            "PING through RemoteIO, TCP loopback",
            await Self.asynchronous(5000) { await RemoteIO.shared.run { ping(pools[1]) } })
        let ten = (0..<10).map { _ in RESPCommand("PING") }
        Self.report(
            "10 PINGs pipelined, Unix socket",
            await Self.blocking(2000) {
                _ = try? pools[0].withConnection(deadline: .after(.seconds(5))) { (connection) throws(RemoteError) in
                    try connection.pipeline(ten, deadline: .after(.seconds(5)))
                }
            })
        Self.report(
            "10 PINGs one after another, Unix socket", await Self.blocking(2000) { for _ in 0..<10 { ping(pools[0]) } })
        let store = try makeStore(unix)
        let id = entryIdentity("measure")
        _ = await store.store(id, payload: payload(1024), createdAt: 1, expiresAt: 0)
        Self.report(
            "store.lookup, 1 KiB hit, Unix socket (whole tier)",
            await Self.asynchronous(5000) { _ = await store.lookup(id) })
        await unix.stop()
        await tcp.stop()
    }

    @Test("what a guarded call adds (breaker words, shared counters), and a store with and without a secret")
    func guardAndStores() async throws {
        let folder = TemporaryDirectory("remote-measure")
        let directory = try Directory(path: folder.path, sharing: .privateToUser, allowNetworkFilesystem: false)
        let state = directory.state
        let board = DirectoryMachineBoard(state: { state })
        let local = RemoteCircuitBreaker(cooldown: .seconds(5), label: "measure local")
        let link = MachineBoardLink()
        link.attach(board)
        let shared = RemoteCircuitBreaker(cooldown: .seconds(5), label: "measure shared", board: link)
        for (label, breaker) in [("in this process", local), ("slot in the state file", shared)] {
            Self.report(
                "breaker admit + record, \(label)",
                await Self.blocking(20000) {
                    let admission = breaker.admit()
                    breaker.record(success: true, admission: admission)
                })
        }
        let counters = RemoteStatistics()
        let sharedCounters = RemoteStatistics()
        sharedCounters.board.attach(board)
        Self.report("statistics.add(.hits), this process only", await Self.blocking(20000) { counters.add(.hits) })
        Self.report(
            "statistics.add(.hits), and the machine's counter", await Self.blocking(20000) { sharedCounters.add(.hits) }
        )
        let server = try await RedisServer.start()
        let unsigned = try makeStore(server)
        let signed = try makeStore(server) { $0.secret = RemoteSecret("measure") }
        let value = payload(4096)
        let pool = RedisConnectionPool(
            endpoint: server.endpoint(), limits: RESPLimits.forValues(upTo: 1 << 20), connectTimeout: .seconds(1))
        let bytes = Array(value)
        Self.report(
            "raw SET 4 KiB through RemoteIO, Unix socket",
            await Self.asynchronous(3000) {
                await RemoteIO.shared.run {
                    _ = try? pool.withConnection(deadline: .after(.seconds(5))) { (connection) throws(RemoteError) in
                        try connection.execute(RESPCommand("SET", "measure-raw", bytes), deadline: .after(.seconds(5)))
                    }
                }
            })
        for (label, store) in [("with a secret (SET)", signed), ("without a secret (script)", unsigned)] {
            let id = entryIdentity("measure-store-\(label)")
            Self.report(
                "store.store 4 KiB \(label)",
                await Self.asynchronous(3000) { _ = await store.store(id, payload: value, createdAt: 1, expiresAt: 0) })
        }
        await server.stop()
    }
}
