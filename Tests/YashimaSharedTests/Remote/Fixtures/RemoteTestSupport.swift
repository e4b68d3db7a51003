// Helpers for the Redis tier's tests: entry identities, a store over test servers with short
// timeouts, raw access to what a server holds, and a bounded wait for a condition that does not
// depend on ordering (a breaker cooldown, a lease TTL) — never a sleep that orders events.

import Foundation
import Testing

@testable import YashimaShared

/// The entry identity of a test key.
func entryIdentity(_ name: String, codec: String = "data-v1") -> EntryIdentity {
    EntryIdentity(key: CacheKey(name), codecIdentifier: codec)
}

/// A store over `urls` with test settings (short timeouts and cooldown), adjusted by `configure`.
func makeStore(
    _ urls: [String], cluster: Bool = false, environment: [String: String] = [:], clock: TestClock? = nil,
    _ configure: (inout RedisConfiguration) -> Void = { _ in }
) throws -> RedisRemoteStore {
    var configuration = try RedisConfiguration(urls: urls, cluster: cluster, environment: environment)
    // Deadlines far beyond any wait in a test unless the test sets its own: every suite runs at once in
    // one process whose cooperative pool has two threads (two cores), and under that load (worse under
    // ASan) a continuation can wait seconds for a thread. A 2 s operation timeout and the 10 s default
    // lease then failed tests that are not about timeouts (a lease expired before its release).
    configuration.policy.operationTimeout = .seconds(60)
    configuration.policy.connectTimeout = .seconds(10)
    configuration.leaseTimeToLive = .seconds(600)
    configuration.policy.breakerCooldown = .milliseconds(100)
    configuration.policy.maximumBreakerCooldown = .milliseconds(200)
    configure(&configuration)
    guard let clock else { return try RedisRemoteStore(configuration: configuration) }
    return try RedisRemoteStore(configuration: configuration, now: clock.function)
}

/// A store over one server, with its password if it has one.
func makeStore(
    _ server: RedisServer, clock: TestClock? = nil, _ configure: (inout RedisConfiguration) -> Void = { _ in }
) throws -> RedisRemoteStore {
    let environment = server.password.map { [RedisEndpoint.passwordVariable: $0] } ?? [:]
    return try makeStore([server.url], environment: environment, clock: clock, configure)
}

/// True when `body` throws `remoteRemovalIncomplete` (a removal that could not reach the remote tier).
func reportsIncomplete(_ body: () async throws -> Void) async -> Bool {
    do {
        try await body()
        return false
    } catch let error as YCache.Error {
        guard case .remoteRemovalIncomplete = error else { return false }
        return true
    } catch {
        return false
    }
}

/// Test payloads: deterministic bytes of any size (byte i is i × 31 + seed, mod 256).
func payload(_ count: Int, seed: UInt8 = 1) -> Data {
    periodicBytes(count) { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
}

/// `count` bytes whose byte i is `byte(i % 256)`: 256 computed, the rest copied. A byte-by-byte `map`
/// in a debug build held a pool thread for seconds per few MiB (and minutes for the 256 MiB values).
func periodicBytes(_ count: Int, _ byte: (Int) -> UInt8) -> Data {
    var data = Data((0..<min(count, 256)).map(byte))
    while data.count < count { data.append(data.prefix(count - data.count)) }
    return data
}

extension RedisServer {
    /// GET of a raw key (bytes as stored), nil when absent.
    func rawGet(_ key: [UInt8]) async throws -> [UInt8]? {
        let reply = try await run(RESPCommand("GET", key))
        if case .bulkString(let bytes) = reply { return bytes }
        return nil
    }

    /// SET of raw bytes (no TTL).
    func rawSet(_ key: [UInt8], _ value: [UInt8]) async throws {
        try await run(RESPCommand("SET", key, value))
    }

    /// EXISTS of a raw key.
    func exists(_ key: [UInt8]) async throws -> Bool {
        try await run(RESPCommand("EXISTS", key)) == .integer(1)
    }

    /// PTTL of a raw key.
    func pttl(_ key: [UInt8]) async throws -> Int64 {
        guard case .integer(let value) = try await run(RESPCommand("PTTL", key)) else { return -3 }
        return value
    }

    /// `used_memory` from INFO memory.
    func usedMemory() async throws -> Int {
        guard case .bulkString(let bytes) = try await run(["INFO", "memory"]) else { return 0 }
        let line = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n").first {
            $0.hasPrefix("used_memory:")
        }
        return Int(line?.dropFirst("used_memory:".count) ?? "") ?? 0
    }
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass (a HangGuard: the sleeps asked for, so
/// a loaded machine stretches it). True when it held.
func eventually(within seconds: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    var bound = HangGuard(seconds: seconds, firstStep: 0.02, longestStep: 0.02)
    while true {
        if try await condition() { return true }
        guard await bound.sleep() else { return false }
    }
}

/// Counts calls and opens gates when the count reaches given values.
final class CallGates: Sendable {
    private let counter = Counter()
    let first = Gate()
    let second = Gate()

    func called() {
        switch counter.increment() {
        case 1: first.open()
        case 2: second.open()
        default: break
        }
    }

    var count: Int { counter.value }
}

/// An HTTP store for `url` with test settings (short timeouts and cooldown), adjusted by `configure`.
func makeHTTPStore(
    _ url: String, environment: [String: String] = [:], clock: TestClock? = nil,
    _ configure: (inout HTTPRemoteConfiguration) -> Void = { _ in }
) throws -> HTTPRemoteStore {
    var configuration = try HTTPRemoteConfiguration(url: url, environment: environment)
    configuration.policy.operationTimeout = .seconds(5)
    configuration.policy.connectTimeout = .seconds(1)
    configuration.policy.breakerCooldown = .milliseconds(100)
    configuration.policy.maximumBreakerCooldown = .milliseconds(200)
    configuration.policy.maximumValueBytes = 300 << 20
    configure(&configuration)
    guard let clock else { return try HTTPRemoteStore(configuration: configuration) }
    return try HTTPRemoteStore(configuration: configuration, now: clock.function)
}

/// An S3 store on `server`'s test bucket (path-style, its identity's credentials) with test settings
/// (short cooldown, generous deadlines), adjusted by `configure`.
func makeS3Store(
    _ server: SeaweedServer, prefix: String = "t\(UInt32.random(in: 0...UInt32.max))",
    secretAccessKey: String = SeaweedServer.secretAccessKey, clock: TestClock? = nil,
    _ configure: (inout S3Configuration) -> Void = { _ in }
) throws -> S3RemoteStore {
    var configuration = try s3Configuration(server, prefix: prefix, secretAccessKey: secretAccessKey)
    configure(&configuration)
    guard let clock else { return try S3RemoteStore(configuration: configuration) }
    return try S3RemoteStore(configuration: configuration, now: clock.function)
}

/// The configuration of `makeS3Store`.
func s3Configuration(
    _ server: SeaweedServer, prefix: String, secretAccessKey: String = SeaweedServer.secretAccessKey
) throws -> S3Configuration {
    var configuration = try S3Configuration(
        url: "s3://\(SeaweedServer.bucket)/\(prefix)?endpoint=\(server.endpoint)&region=us-east-1",
        environment: [
            S3Configuration.accessKeyVariable: SeaweedServer.accessKeyID,
            S3Configuration.secretKeyVariable: secretAccessKey,
        ])
    configuration.policy.operationTimeout = .seconds(30)
    configuration.policy.connectTimeout = .seconds(5)
    configuration.policy.breakerCooldown = .milliseconds(100)
    configuration.policy.maximumBreakerCooldown = .milliseconds(200)
    configuration.policy.maximumValueBytes = 300 << 20
    configuration.leaseTimeToLive = .seconds(600)
    return configuration
}

/// This process's resident set (`VmRSS`) and its peak (`VmHWM`) in bytes, from /proc/self/status.
func residentMemory() -> (current: Int, peak: Int) {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int {
        let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
    return (field("VmRSS"), field("VmHWM"))
}

/// Resets this process's `VmHWM` to its current resident set (Linux: "5" to /proc/self/clear_refs).
func resetPeakMemory() {
    try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
}

extension YCache {
    /// The remote tier's value store, reached by the tests through the engine's tier list.
    var remoteValues: (any RemoteValueStore)? {
        engine.tiers.lazy.compactMap { $0 as? RemoteTier }.first?.values
    }
}

extension RedisLeaseAcquisition {
    /// The lease taken, or nil (for `try #require(await store.acquireLease(id).lease)`).
    var lease: RedisLease? {
        if case .acquired(let lease) = self { return lease }
        return nil
    }
}

extension RedisRemoteStore {
    /// A wait for another holder's lease on `identity`, in a task, returned once it waits (its first
    /// `onWaiting`), with the gates its later wake-ups open.
    func waiting(for identity: EntryIdentity, timeout: Duration = .seconds(60)) async
        -> (Task<RemoteWaitOutcome, Never>, CallGates)
    {
        let gates = CallGates()
        let waiting = Task { await waitForRelease(identity, timeout: timeout, onWaiting: gates.called) }
        #expect(await gates.first.wait(within: 30))
        return (waiting, gates)
    }
}
