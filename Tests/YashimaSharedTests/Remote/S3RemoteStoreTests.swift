// S3RemoteStoreTests.swift: what only the S3 backend does, against a real SeaweedFS (`weed server -s3`):
// the server's conditional writes (checked first: If-None-Match: * and If-Match on PUT and DELETE); leases
// as objects (held elsewhere, released, an expired one taken over, renewed, lost); a wrong secret (403:
// bypassed, counted, never printed); values streamed both ways; removeAll by listing; the URL and the
// environment; through YCache, two hosts on S3 alone generate a key once.

import Foundation
import Testing

@testable import YashimaShared

/// Suites that need SeaweedFS: skipped without it unless CI requires it.
extension Trait where Self == ConditionTrait {
    static var seaweedServer: Self {
        .enabled(if: SeaweedServer.executablePath != nil || SeaweedServer.isRequired, "SeaweedFS (weed) not installed")
    }
}

@Suite("S3 backend (SeaweedFS)", .seaweedServer)
struct S3RemoteStoreTests {
    /// A raw signed request through `store`'s client: its status and ETag.
    private func raw(
        _ store: S3RemoteStore, _ method: String, _ key: String, headers: [(name: String, value: String)] = [],
        body: [UInt8]? = nil
    ) async throws -> S3Answer {
        try await offPool {
            try store.client.exchange(
                store.client.request(method, key: key, headers: headers, body: body.map { .bytes($0) } ?? .none),
                deadline: .after(.seconds(30)), cancellation: HTTPCancellation())
        }
    }

    @Test("this SeaweedFS supports conditional writes: If-None-Match: * and If-Match on PUT and DELETE")
    func conditionalWrites() async throws {
        let server = try await SeaweedServer.start()
        let store = try makeS3Store(server)
        let key = store.configuration.leaseKey(SHA256.hash([7]))
        let created = try await raw(store, "PUT", key, headers: [("If-None-Match", "*")], body: Array("one".utf8))
        #expect(created.status == 200)
        let tag = try #require(created.entityTag)
        #expect(
            try await raw(store, "PUT", key, headers: [("If-None-Match", "*")], body: Array("two".utf8)).status == 412)
        #expect(
            try await raw(store, "PUT", key, headers: [("If-Match", "\"0000\"")], body: Array("two".utf8)).status == 412
        )
        let replaced = try await raw(store, "PUT", key, headers: [("If-Match", tag)], body: Array("two".utf8))
        #expect(replaced.status == 200)
        let newTag = try #require(replaced.entityTag)
        #expect(newTag != tag)
        #expect(try await raw(store, "DELETE", key, headers: [("If-Match", tag)]).status == 412)
        #expect(try await raw(store, "DELETE", key, headers: [("If-Match", newTag)]).status == 204)
        #expect(try await raw(store, "GET", key).status == 404)
        await server.stop()
    }

    @Test("leases: held elsewhere, released (a waiter sees it free), an expired one taken over, renewal, loss")
    func leases() async throws {
        let server = try await SeaweedServer.start()
        let prefix = "leases-\(UInt32.random(in: 0...UInt32.max))"
        let holder = try makeS3Store(server, prefix: prefix)
        let other = try makeS3Store(server, prefix: prefix)
        let id = entryIdentity("s3-lease")
        guard let lease = acquired(await holder.lease(for: id)) else {
            Issue.record("the first host did not take the lease")
            return
        }
        #expect(heldElsewhere(await other.lease(for: id)), "a second host took a held lease")
        let waiting = Gate()
        let wait = Task { await other.waitForRelease(id, timeout: .seconds(120), onWaiting: { waiting.open() }) }
        #expect(await waiting.wait(within: 60))
        #expect(await lease.release())
        #expect(await wait.value == .leaseFree(notified: false))
        // An expired lease (its holder died: TTL passed, no renewal) is taken over by If-Match.
        let short = try makeS3Store(server, prefix: prefix) { $0.leaseTimeToLive = .milliseconds(300) }
        guard let dying = acquired(await short.lease(for: id)) else {
            Issue.record("no lease")
            return
        }
        #expect(await other.waitForRelease(id, timeout: .seconds(120), onWaiting: nil) == .leaseFree(notified: false))
        guard let takenOver = acquired(await other.lease(for: id)) else {
            Issue.record("an expired lease was not taken over")
            return
        }
        #expect(other.statistics.snapshot[.leaseTakeovers] == 1)
        #expect(await dying.release() == false)  // no longer its holder's: the ETag changed
        // Renewal keeps it (a new ETag each time; the release uses the latest).
        let renewal = takenOver.startRenewal()
        let ticket = try #require(s3Ticket(await other.lease(for: entryIdentity("renewed"))))
        #expect(other.renewBlocking(ticket) == .renewed)
        #expect(other.renewBlocking(ticket) == .renewed)
        #expect(other.releaseBlocking(ticket))
        #expect(other.renewBlocking(ticket) == .lost)
        renewal.stopNow()
        #expect(await takenOver.release())
        await server.stop()
    }

    @Test("a wrong secret: 403, the tier bypassed and counted, the secret never printed")
    func wrongSecret() async throws {
        let server = try await SeaweedServer.start()
        let wrong = "not-the-secret-9876543210"
        let store = try makeS3Store(server, secretAccessKey: wrong) { $0.policy.breakerCooldown = .seconds(600) }
        let id = entryIdentity("denied")
        #expect(await store.lookup(id) == .unavailable)
        #expect(await store.store(id, payload: payload(10), createdAt: 1, expiresAt: 0) == .unavailable)
        let counts = store.statistics.snapshot
        #expect(counts[.authenticationFailures] == 1 && counts[.bypassed] == 1)
        let texts = [
            "\(store.configuration)", String(reflecting: store.configuration),
            "\(Mirror(reflecting: store).children.map(\.value))",
            "\(RemoteError.s3(.denied(status: 403)))", "\(store.configuration.credentials)",
        ]
        for text in texts { #expect(!text.contains(wrong), "\(text)") }
        await server.stop()
    }

    @Test("killed, then hung (SIGSTOP) longer than the timeout: unavailable by the deadline, then bypassed")
    func faults() async throws {
        let server = try await SeaweedServer.start()
        let prefix = "faults-\(UInt32.random(in: 0...UInt32.max))"
        let id = entryIdentity("fault")
        let writer = try makeS3Store(server, prefix: prefix)
        #expect(await writer.store(id, payload: payload(50), createdAt: 1, expiresAt: 0) == .stored)
        // Hung: every call ends by its operation timeout, then the breaker bypasses the tier at no cost.
        let hung = try makeS3Store(server, prefix: prefix) {
            $0.policy.operationTimeout = .milliseconds(400)
            $0.policy.breakerCooldown = .seconds(600)
            $0.policy.maximumBreakerCooldown = .seconds(600)
        }
        await server.pause()
        let start = Syscall.monotonicNanoseconds
        let lookup = await hung.lookup(id)
        #expect(lookup == .unavailable, "after \(Double(Syscall.monotonicNanoseconds - start) / 1e9) s")
        #expect(await hung.store(id, payload: payload(1), createdAt: 1, expiresAt: 0) == .unavailable)
        #expect(heldElsewhere(await hung.lease(for: id)) == false)
        let elapsed = Double(Syscall.monotonicNanoseconds - start) / 1e9
        #expect(elapsed < 180, "no hang beyond the timeout (\(elapsed) s)")
        #expect(hung.statistics.snapshot[.timeouts] == 1 && hung.statistics.snapshot[.bypassed] == 2)
        server.resume()
        #expect(await writer.lookup(id) == .hit(RemoteValue(payload: payload(50), createdAt: 1, expiresAt: 0)))
        // Killed: a refused connection, counted as a connection failure, then bypassed.
        await server.kill()
        let killed = try makeS3Store(server, prefix: prefix) { $0.policy.breakerCooldown = .seconds(600) }
        #expect(await killed.lookup(id) == .unavailable)
        #expect(await killed.lookup(id) == .unavailable)
        #expect(killed.statistics.snapshot[.connectionFailures] == 1 && killed.statistics.snapshot[.bypassed] == 1)
        await server.stop()
    }

    @Test("large values stream both ways (UNSIGNED-PAYLOAD up, windows down); removeAll lists and deletes")
    func streamingAndRemoveAll() async throws {
        let server = try await SeaweedServer.start()
        let store = try makeS3Store(server) {
            $0.streamingThreshold = 64 << 10
            $0.downloadWindow = 256 << 10
        }
        let big = entryIdentity("big")
        #expect(await store.store(big, payload: payload(1_500_000), createdAt: 5, expiresAt: 0) == .stored)
        #expect(await store.lookup(big) == .hit(RemoteValue(payload: payload(1_500_000), createdAt: 5, expiresAt: 0)))
        for index in 0..<3 {
            #expect(
                await store.store(entryIdentity("many-\(index)"), payload: payload(9), createdAt: 1, expiresAt: 0)
                    == .stored)
        }
        #expect(await store.removeAll() == .removed(4))
        #expect(await store.lookup(big) == .miss(.absent))
        await server.stop()
    }

    @Test("the URL and the environment: endpoint, region, style, credentials; path-style and virtual-hosted")
    func configuration() throws {
        let environment = [
            "AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "shh-secret", "AWS_REGION": "eu-west-3",
        ]
        let aws = try S3Configuration(url: "s3://my-bucket/a/b", environment: environment)
        #expect(aws.virtualHosted && aws.region == "eu-west-3" && aws.keyPrefix == "a/b")
        #expect(aws.hostHeader == "my-bucket.s3.eu-west-3.amazonaws.com" && aws.endpoint.isSecure)
        #expect(aws.path(ofKey: "a/b/xx/k") == "/a/b/xx/k")
        let local = try S3Configuration(
            url: "s3://my-bucket?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=r1", environment: environment)
        #expect(!local.virtualHosted && local.hostHeader == "127.0.0.1:9000" && local.region == "r1")
        #expect(local.path(ofKey: "xx/k") == "/my-bucket/xx/k")
        let fromEnvironment = try S3Configuration(
            url: "s3://my-bucket", environment: environment.merging(["AWS_ENDPOINT_URL_S3": "http://minio:9000"]) { $1 }
        )
        #expect(fromEnvironment.hostHeader == "minio:9000" && !fromEnvironment.virtualHosted)
        #expect(throws: S3ConfigurationError.missingCredentials) {
            try S3Configuration(url: "s3://my-bucket", environment: [:])
        }
        var bad = aws
        bad.bucket = "No_Such"
        #expect(throws: S3ConfigurationError.invalidBucket) { try bad.validate() }
        #expect(!"\(aws)".contains("shh-secret") && "\(aws)".contains("AKIA1"))
        let remote = try YCache.Remote.s3("s3://my-bucket", accessKeyID: "AKIA2", secretAccessKey: "shh-2")
        #expect(!"\(remote)".contains("shh-2") && !String(reflecting: remote).contains("shh-2"))
    }

    @Test("through YCache: two hosts on S3 alone generate a key once, the other's is a .remote hit")
    func hostsOnS3() async throws {
        let server = try await SeaweedServer.start()
        let prefix = "hosts-\(UInt32.random(in: 0...UInt32.max))"
        // Generous bounds: not a test of a timeout. In CI, beside a busy loop and six other SeaweedFS servers,
        // one call here took over 30 s, and the second host then generated too.
        let options = YCache.Remote.Options(
            operationTimeout: .seconds(120), connectTimeout: .seconds(60), breakerCooldown: .milliseconds(100),
            leaseTimeToLive: .seconds(600), leaseRecheckInterval: .milliseconds(50))
        let remote = try YCache.Remote.s3(
            "s3://\(SeaweedServer.bucket)/\(prefix)?endpoint=\(server.endpoint)",
            accessKeyID: SeaweedServer.accessKeyID,
            secretAccessKey: SeaweedServer.secretAccessKey, options: options)
        let (one, two) = (TemporaryDirectory("s3-host-one"), TemporaryDirectory("s3-host-two"))
        let first = YCache(storageDirectory: one.url, remote: remote)
        let second = YCache(storageDirectory: two.url, remote: remote)
        let generations = Counter()
        let inGenerator = Gate()
        let release = Gate()
        let key = CacheKey(namespace: "s3", identity: "once")
        let firstCall = Task {
            try await first.resolve(for: key, codec: DataCodec()) {
                generations.increment()
                inGenerator.open()
                _ = await release.wait(within: 120)
                return payload(700)
            }
        }
        #expect(await inGenerator.wait(within: 60))
        let secondCall = Task {
            try await second.resolve(for: key, codec: DataCodec()) {
                generations.increment()
                return payload(701)
            }
        }
        // The second host waits on the first host's lease object (polling): let the first finish.
        release.open()
        let made = try await firstCall.value
        let fetched = try await secondCall.value
        #expect(made.origin == .generated && fetched.value == payload(700))
        #expect(generations.value == 1)
        await server.stop()
    }
}

/// The lease taken, or nil.
private func acquired(_ acquisition: consuming RemoteLeaseAcquisition) -> RemoteLease? {
    switch consume acquisition {
    case .acquired(let lease): return lease
    default: return nil
    }
}

/// True when another host holds the lease.
private func heldElsewhere(_ acquisition: consuming RemoteLeaseAcquisition) -> Bool {
    switch consume acquisition {
    case .heldElsewhere: return true
    default: return false
    }
}

/// The S3 ticket of an acquired lease (the lease itself then released by the ticket's own calls).
private func s3Ticket(_ acquisition: consuming RemoteLeaseAcquisition) -> S3LeaseTicket? {
    switch consume acquisition {
    case .acquired(let lease): return lease.surrender() as? S3LeaseTicket
    default: return nil
    }
}
