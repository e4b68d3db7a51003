// HTTPRemoteStore.swift: the remote tier on an HTTP cache server (nginx with WebDAV PUT, bazel-remote,
// a CDN or object store in front of them) as the engine will call it: lookups, stores and removals of
// one entry identity (RemoteValueStore), every call guarded (RemoteGuard) and never throwing. The
// design (URLs, values, streaming, coordination, failures) is documented on the type below.

import Foundation

/// The remote tier on an HTTP server: values shared across hosts, byte for byte the verified format
/// of the Redis backend (``RemoteEnvelope``). Every method is `async`, returns a value and never throws.
///
/// ## URLs (HTTPEndpoint)
/// `GET`, `PUT`, `DELETE` and `HEAD` at `<prefix>/<xx>/<entry identity hex>`, `xx` the first two hex
/// digits (the local storage's fan-out). Credentials (basic, or a bearer token) and custom headers go
/// with every request; redirects are not followed.
///
/// ## Values
/// The body is the envelope: magic, version, the entry identity, the payload length, created and expiry
/// times, a CRC32C and with a secret an HMAC-SHA256. A lookup returns a value only after verifying it
/// for the identity asked for (``RemoteEnvelopeReader``); anything else is a miss, and the caller's next
/// store overwrites it. The server's own expiry, if any, is its business: the envelope's expiry is
/// checked on every hit.
///
/// ## Streaming
/// Payloads of ``HTTPRemoteConfiguration/streamingThreshold`` bytes or more never sit in memory whole:
/// ``lookup(_:staging:)`` writes them into the caller's staging file as they arrive (verifying along the
/// way, checksum and signature at the end: ``RemoteLookup/hitInFile(_:)``), and stores stream them from
/// the local entry or from memory, with `Content-Length` (the envelope's size is known before its first
/// byte). Smaller payloads go through memory. The transfer runs on a RemoteIO thread that reads from the
/// socket only as fast as it writes the file, so a fast server never gets ahead of a slow disk; a lookup
/// still asks for the value in windows (``HTTPRemoteConfiguration/downloadWindow``, `Range` with
/// `If-Range`), and one whose value changes between windows reads as a miss. A server that ignores
/// `Range` sends the value whole.
///
/// ## Coordination
/// HTTP has no locks: hosts that miss the same key at once may each generate it (the last `PUT` wins,
/// and values of one key are interchangeable), while the local storage still makes generation exactly
/// once per host. Exactly-once across hosts needs leases (``RemoteLeaseStore``): Redis for leases with
/// the payloads here.
///
/// ## Failures
/// The first response byte must come within `operationTimeout` (connecting included), no transfer may
/// stall longer than that, and none may take longer than `transferTimeout`, each measured from the
/// call (a wait for an I/O thread counts). A timeout, a refused, reset
/// or closed connection, or a 5xx or 429 answer to a lookup opens the read and write breakers: calls are
/// bypassed for `breakerCooldown` (a throttle — 429, or 503 with `Retry-After` — to any request holds
/// both open for its `Retry-After`), then one probe decides. A store or removal refused with any status
/// but 413 (5xx, 401, 403, 405...) opens the write breaker only and is counted (`failedWrites`); 413
/// skips that value (`oversizedValues`). Any other non-2xx lookup is a miss: 404 and 410 plainly
/// (`absent`), others as ``RemoteMiss/refused(status:)`` (a wrong password reads as misses). Values
/// whose envelope exceeds `maximumValueBytes` stay local, and longer bodies are not read. In read-only
/// mode nothing is written.
final class HTTPRemoteStore: RemoteValueStore, CustomReflectable {
    /// The settings.
    let configuration: HTTPRemoteConfiguration
    /// The tier's counters.
    let statistics = RemoteStatistics()
    /// Timeouts, breakers, read-only mode, cap (one server: scope 0).
    let remoteGuard: RemoteGuard
    /// Signs stored values; only values signed with it are hits.
    var secret: RemoteSecret? { configuration.secret }
    private let transport: any HTTPTransport

    /// Creates the tier (no connection is made until the first call).
    ///
    /// - Parameter now: The breakers' monotonic clock (tests).
    /// - Throws: ``HTTPConfigurationError`` for an invalid configuration.
    init(
        configuration: HTTPRemoteConfiguration,
        now: @escaping @Sendable () -> Int64 = { Syscall.monotonicNanoseconds }
    ) throws(HTTPConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        transport = makeHTTPTransport(configuration)
        remoteGuard = RemoteGuard(
            policy: configuration.policy, scopes: 1, labels: [configuration.endpoint.baseURL], statistics: statistics,
            now: now)
    }

    /// The configuration's description only (never credentials or header values).
    var customMirror: Mirror { Mirror(self, children: ["configuration": configuration.description]) }

    /// Payloads of the configuration's streaming threshold or more stream through files.
    var fileStreamingThreshold: Int? { configuration.streamingThreshold }

    /// The URL of `identity`'s value.
    func url(for identity: EntryIdentity) -> URL { configuration.endpoint.url(for: identity.digest) }

    // MARK: Lookups

    /// Looks `identity` up, the payload in memory.
    func lookup(_ identity: EntryIdentity) async -> RemoteLookup {
        await lookup(identity, into: nil)
    }

    /// Looks `identity` up; payloads of at least the streaming threshold go into the slot's file, made
    /// once the value's header announces one.
    func lookup(_ identity: EntryIdentity, staging: RemoteStagingSlot) async -> RemoteLookup {
        await lookup(identity, into: staging)
    }

    /// A lookup in windows of `downloadWindow` bytes (`Range`), each asked for once the last is written.
    private func lookup(_ identity: EntryIdentity, into staging: RemoteStagingSlot?) async -> RemoteLookup {
        let (configuration, transport) = (configuration, transport)
        let path = configuration.endpoint.path(for: identity.digest)
        let transferDeadline = RemoteDeadline.after(configuration.transferTimeout)  // from the call, time queued too
        let attempt = await transfer(.read) { (deadline, cancellation) throws(RemoteError) -> RemoteLookup in
            let reader = RemoteEnvelopeReader(
                identity: identity.digest, secret: configuration.secret,
                maximumBytes: configuration.policy.maximumValueBytes, staging: staging,
                streamingThreshold: configuration.streamingThreshold)
            let sink = HTTPValueSink(reader: reader, maximumBytes: configuration.policy.maximumValueBytes)
            let stall = configuration.policy.operationTimeout
            var clock = HTTPTransferClock(deadline: deadline, stall: stall, transferDeadline: transferDeadline)
            while true {
                let window = sink.nextWindow(size: configuration.downloadWindow)
                let outcome = try transport.send(
                    HTTPRequest(method: "GET", path: path, headers: window), sink: sink, clock: &clock,
                    cancellation: cancellation)
                if let lookup = try sink.lookup(after: outcome) { return lookup }
                clock = HTTPTransferClock(
                    deadline: .after(stall), stall: stall, transferDeadline: clock.transferDeadline)
            }
        }
        return finishLookup(attempt)
    }

    /// Whether a value is stored for `identity` (`HEAD`; not verified). Nil when the tier is unavailable
    /// or the server refused to say.
    func exists(_ identity: EntryIdentity) async -> Bool? {
        let path = configuration.endpoint.path(for: identity.digest)
        let attempt = await request(.read, "HEAD", path) {
            (status) throws(RemoteError) -> Bool? in
            switch status {
            case 200..<300: return true
            case 404, 410: return false
            case 500..<600: throw .http(.serverStatus(status))
            default: return nil
            }
        }
        if case .completed(let exists) = attempt { return exists }
        return nil
    }

    // MARK: Stores

    /// Stores `payload` as `identity`'s value (streamed from memory at or above the threshold).
    func store(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async -> RemoteStoreOutcome
    {
        if let skip = skipReason(payloadCount: payload.count, expiresAt: expiresAt) { return .skipped(skip) }
        let secret = configuration.secret
        let streams = payload.count >= configuration.streamingThreshold
        return await put(identity) { () throws(RemoteError) in
            guard streams else {
                return .bytes(
                    RemoteEnvelope.seal(
                        payload, identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt, secret: secret))
            }
            return .stream(
                HTTPEnvelopeStream(
                    payload: .memory(payload), identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt,
                    secret: secret))
        }
    }

    /// Stores the payload in `file` (a local entry's) as `identity`'s value, streamed from the file at or
    /// above the threshold, else read whole first (on the same I/O thread). The caller keeps the
    /// descriptor open until this returns.
    func store(
        _ identity: EntryIdentity, payloadFile file: RemotePayloadFile, createdAt: Int64, expiresAt: Int64
    ) async -> RemoteStoreOutcome {
        if let skip = skipReason(payloadCount: file.byteCount, expiresAt: expiresAt) { return .skipped(skip) }
        let secret = configuration.secret
        let streams = file.byteCount >= configuration.streamingThreshold
        let outcome = await put(identity) { () throws(RemoteError) in
            guard streams else {
                var payload = Data(count: file.byteCount)
                let read = payload.withUnsafeMutableBytes { Syscall.read(file.descriptor, into: $0, at: file.offset) }
                switch read {
                case .failure(let error): throw .localFile(error)
                case .success(let count) where count != file.byteCount:
                    throw .localFile(
                        SystemCallError(operation: "pread (payload shorter than announced)", errno: .ioError))
                case .success: break
                }
                return .bytes(
                    RemoteEnvelope.seal(
                        payload, identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt, secret: secret))
            }
            return .stream(
                HTTPEnvelopeStream(
                    payload: .file(file), identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt,
                    secret: secret))
        }
        if outcome == .stored && streams { statistics.add(.storesFromFile) }
        return outcome
    }

    /// Deletes `identity`'s value: `.removed`, `.absent` (404, 410), or `.unavailable` when the server
    /// could not be asked, failed or refused.
    @discardableResult
    func remove(_ identity: EntryIdentity) async -> RemoteRemoval {
        let path = configuration.endpoint.path(for: identity.digest)
        let attempt = await request(.write, "DELETE", path) {
            (status) throws(RemoteError) -> Bool in
            switch status {
            case 200..<300: return true
            case 404, 410: return false
            default: throw .http(.writeRefused(status))
            }
        }
        return RemoteRemoval(attempt)
    }

    /// A guarded `PUT` of the body `makeBody` builds on the I/O thread (nothing is sealed or read when
    /// bypassed).
    private func put(
        _ identity: EntryIdentity, _ makeBody: @escaping @Sendable () throws(RemoteError) -> HTTPRequestBody
    ) async -> RemoteStoreOutcome {
        let (transport, stall) = (transport, configuration.policy.operationTimeout)
        let transferDeadline = RemoteDeadline.after(configuration.transferTimeout)
        let path = configuration.endpoint.path(for: identity.digest)
        let attempt = await transfer(.write) { (deadline, cancellation) throws(RemoteError) in
            var clock = HTTPTransferClock(deadline: deadline, stall: stall, transferDeadline: transferDeadline)
            let request = HTTPRequest(method: "PUT", path: path, body: try makeBody())
            let sink = HTTPStatusSink()
            let status = try transport.send(request, sink: sink, clock: &clock, cancellation: cancellation).status
            switch status {
            case 200..<300: return
            case 413: throw .payloadTooLarge
            default: throw sink.throttle(status) ?? .http(.writeRefused(status))
            }
        }
        return finishStore(attempt)
    }

    /// A guarded request without a body whose status `interpret` reads.
    private func request<Value: Sendable>(
        _ access: RemoteAccess, _ method: String, _ path: String,
        _ interpret: @escaping @Sendable (Int) throws(RemoteError) -> Value
    ) async -> RemoteAttempt<Value> {
        let (transport, stall) = (transport, configuration.policy.operationTimeout)
        let transferDeadline = RemoteDeadline.after(configuration.transferTimeout)
        return await transfer(access) { (deadline, cancellation) throws(RemoteError) in
            var clock = HTTPTransferClock(deadline: deadline, stall: stall, transferDeadline: transferDeadline)
            let request = HTTPRequest(method: method, path: path)
            let sink = HTTPStatusSink()
            let status = try transport.send(request, sink: sink, clock: &clock, cancellation: cancellation).status
            // A throttle, whatever the request: every process backs off for its Retry-After (I17).
            if let throttle = sink.throttle(status) { throw throttle }
            return try interpret(status)
        }
    }

    /// Runs a transfer on a RemoteIO thread, guarded (RemoteGuard.perform); the caller's cancellation
    /// cancels it at once (the socket it waits on is shut down).
    private func transfer<Value: Sendable>(
        _ access: RemoteAccess,
        _ operation: @escaping @Sendable (RemoteDeadline, HTTPCancellation) throws(RemoteError) -> Value
    ) async -> RemoteAttempt<Value> {
        let cancellation = HTTPCancellation()
        return await withTaskCancellationHandler {
            await remoteGuard.perform(scope: 0, access: access) { (deadline) throws(RemoteError) in
                try operation(deadline, cancellation)
            }
        } onCancel: {
            cancellation.cancel()
        }
    }
}
