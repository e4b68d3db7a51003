// S3Leases.swift: exactly once across hosts on S3 alone (I16), with conditional writes: a lease is an object
// created with `If-None-Match: *` (412: another host holds it) holding a random token and its expiry; an
// expired one is taken over by `If-Match` on its ETag; renewed by `If-Match` too, released by a DELETE with
// `If-Match`. Leases apart from the values (RemoteLeaseStore): a waiter polls the lease (no notifications).

import Foundation
import Synchronization

/// A lease object this host holds: its key and its ETag now (each renewal replaces the object).
final class S3LeaseTicket: RemoteLeaseTicket {
    let store: S3RemoteStore
    let key: String
    private let entityTag: Mutex<String>

    init(store: S3RemoteStore, key: String, entityTag: String) {
        self.store = store
        self.key = key
        self.entityTag = Mutex(entityTag)
    }

    var currentTag: String { entityTag.withLock { $0 } }

    func release() async -> Bool { await RemoteIO.shared.run { self.store.releaseBlocking(self) } }

    func startRenewal(onLost: @escaping @Sendable () -> Void) -> LeaseRenewal {
        let configuration = store.configuration
        return LeaseRenewal(
            timeToLive: configuration.leaseTimeToLive, interval: configuration.leaseTimeToLive / 3,
            renew: { self.store.renewBlocking(self) }, onLost: onLost)
    }

    /// After a renewal replaced the object.
    func replaced(by tag: String) { entityTag.withLock { $0 = tag } }
}

/// A lease object's body: `yashima-s3-lease 1 <token hex> <expiry, realtime ns>`.
struct S3LeaseBody: Equatable {
    let token: String
    let expiresAt: Int64

    var bytes: [UInt8] { Array("yashima-s3-lease 1 \(token) \(expiresAt)\n".utf8) }

    /// The first and the longest pause between two release attempts (as for Redis leases).
    static let firstReleaseRetry: Duration = .milliseconds(20)
    static let lastReleaseRetry: Duration = .milliseconds(200)

    init(token: String, expiresAt: Int64) {
        self.token = token
        self.expiresAt = expiresAt
    }

    init?(_ bytes: [UInt8]) {
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard parts.count == 4, parts[0] == "yashima-s3-lease", parts[1] == "1",
            let expiry = Int64(parts[3].trimmingCharacters(in: .whitespacesAndNewlines))
        else { return nil }
        token = String(parts[2])
        expiresAt = expiry
    }

    /// A new lease from now on, with a random token.
    static func fresh(timeToLive: Duration) -> S3LeaseBody {
        S3LeaseBody(
            token: SigV4Signer.hex(Syscall.randomBytes(16)),
            expiresAt: Syscall.realtimeNanoseconds + timeToLive.remoteNanoseconds)
    }
}

extension S3RemoteStore: RemoteLeaseStore {
    /// Takes `identity`'s lease: created when absent (`If-None-Match: *`), or taken over when the one there
    /// has expired (`If-Match` on the ETag read); otherwise another host holds it.
    func lease(for identity: EntryIdentity) async -> RemoteLeaseAcquisition {
        let (client, key, ttl) = (client, configuration.leaseKey(identity.digest), configuration.leaseTimeToLive)
        let attempt = await transfer(.write) { (deadline, cancellation) throws(RemoteError) -> (String?, Bool) in
            for _ in 0..<3 {
                let body = S3LeaseBody.fresh(timeToLive: ttl)
                let created = try client.exchange(
                    client.request("PUT", key: key, headers: [("If-None-Match", "*")], body: .bytes(body.bytes)),
                    deadline: deadline, cancellation: cancellation)
                switch created.status {
                case 200..<300: return (created.entityTag, false)
                case 412, 409: break
                default: throw .s3(.writeRefused(created.status))
                }
                let current = try client.exchange(
                    client.request("GET", key: key), deadline: deadline, cancellation: cancellation)
                if current.status == 404 { continue }  // released meanwhile: create again
                guard (200..<300).contains(current.status), let tag = current.entityTag else {
                    throw .s3(.serverStatus(current.status))
                }
                // A lease that is not one (planted) counts as expired: taken over.
                if let held = S3LeaseBody(current.body), held.expiresAt > Syscall.realtimeNanoseconds {
                    return (nil, false)
                }
                let takeover = try client.exchange(
                    client.request("PUT", key: key, headers: [("If-Match", tag)], body: .bytes(body.bytes)),
                    deadline: deadline, cancellation: cancellation)
                switch takeover.status {
                case 200..<300: return (takeover.entityTag, true)
                case 412, 404, 409: return (nil, false)  // another host took it over first
                default: throw .s3(.writeRefused(takeover.status))
                }
            }
            return (nil, false)
        }
        guard case .completed(let (tag, tookOver)) = attempt else { return .unavailable }
        guard let tag else { return .heldElsewhere }
        statistics.add(.leasesAcquired)
        if tookOver { statistics.add(.leaseTakeovers) }
        return .acquired(RemoteLease(S3LeaseTicket(store: self, key: key, entityTag: tag)))
    }

    /// Waits until `identity`'s lease is gone or expired (looked at every `leasePollInterval`, and exactly
    /// at its expiry), at most `timeout`. The value is apart: the caller looks it up after `.leaseFree`.
    func waitForRelease(
        _ identity: EntryIdentity, timeout: Duration, onWaiting: (@Sendable () -> Void)?
    ) async -> RemoteWaitOutcome {
        let (client, key) = (client, configuration.leaseKey(identity.digest))
        let limit = RemoteDeadline.after(timeout)
        let started = Syscall.monotonicNanoseconds
        statistics.add(.leaseWaits)
        defer { statistics.add(.leaseWaitNanoseconds, Int(Syscall.monotonicNanoseconds - started)) }
        var announced = false
        while true {
            let attempt = await transfer(.read) { (deadline, cancellation) throws(RemoteError) -> Int64? in
                let answer = try client.exchange(
                    client.request("GET", key: key), deadline: deadline, cancellation: cancellation)
                switch answer.status {
                case 404: return nil
                case 200..<300: return S3LeaseBody(answer.body)?.expiresAt ?? 0
                default: throw .s3(.serverStatus(answer.status))
                }
            }
            guard case .completed(let expiry) = attempt else { return .unavailable }
            let now = Syscall.realtimeNanoseconds
            guard let expiry, expiry > now else { return .leaseFree(notified: false) }
            if !announced {
                announced = true
                onWaiting?()
            }
            guard !limit.hasPassed else { return .timedOut }
            // The next look: the poll interval, or the lease's expiry (plus 3 ms) if sooner, within the limit.
            let pause = min(
                configuration.leasePollInterval.remoteNanoseconds, expiry - now + 3_000_000, limit.remainingNanoseconds)
            do {
                try await Task.sleep(for: .nanoseconds(max(1_000_000, pause)))
            } catch {
                return .cancelled
            }
        }
    }

    /// Extends the lease (`If-Match` on the ETag this host last wrote). Blocking.
    func renewBlocking(_ ticket: S3LeaseTicket) -> RemoteLeaseRenewal {
        let (client, ttl) = (client, configuration.leaseTimeToLive)
        let attempt = remoteGuard.performBlocking(scope: 0, access: .write) {
            (deadline) throws(RemoteError) -> String? in
            let body = S3LeaseBody.fresh(timeToLive: ttl)
            let answer = try client.exchange(
                client.request(
                    "PUT", key: ticket.key, headers: [("If-Match", ticket.currentTag)], body: .bytes(body.bytes)),
                deadline: deadline, cancellation: HTTPCancellation())
            switch answer.status {
            case 200..<300: return answer.entityTag
            case 412, 404, 409: return nil
            default: throw .s3(.writeRefused(answer.status))
            }
        }
        switch attempt {
        case .completed(let tag?):
            ticket.replaced(by: tag)
            return .renewed
        case .completed(nil), .keyFailure:
            statistics.add(.leasesLost)
            return .lost
        case .unavailable: return .unavailable
        }
    }

    /// Deletes the lease if it is still this host's (`If-Match`), retried for one operation timeout while
    /// the server fails (even with its breaker open, as for Redis). Blocking. True when released.
    func releaseBlocking(_ ticket: S3LeaseTicket) -> Bool {
        let client = client
        let deadline = RemoteDeadline.after(configuration.policy.operationTimeout)
        var pause = S3LeaseBody.firstReleaseRetry
        while true {
            let attempt = remoteGuard.performBlocking(
                scope: 0, access: .write, deadline: deadline, ignoringBreaker: true
            ) { (limit) throws(RemoteError) -> Bool in
                let answer = try client.exchange(
                    client.request("DELETE", key: ticket.key, headers: [("If-Match", ticket.currentTag)]),
                    deadline: limit, cancellation: HTTPCancellation())
                switch answer.status {
                case 200..<300: return true
                case 412, 404: return false
                default: throw .s3(.writeRefused(answer.status))
                }
            }
            switch attempt {
            case .completed(let released): return released
            case .keyFailure: return false
            case .unavailable:
                guard deadline.remainingNanoseconds > pause.remoteNanoseconds else { return false }
                Thread.sleep(forTimeInterval: Double(pause.remoteNanoseconds) / 1e9)
                pause = min(pause * 2, S3LeaseBody.lastReleaseRetry)
            }
        }
    }
}
