// S3RemoteStore.swift: the remote tier on S3-compatible object storage (AWS S3, SeaweedFS, MinIO, ...): values
// in the shared envelope at `<prefix>/<xx>/<identity hex>`, looked up in windows and streamed as over HTTP,
// stored with one signed PUT, removed with HEAD and DELETE, listed for removeAll; every call guarded and never
// throwing. Leases with conditional writes are S3Leases.swift.

import Foundation

/// The remote tier on an S3 bucket: values shared across hosts, byte for byte the verified format of the
/// other backends (``RemoteEnvelope``). Every method is `async`, returns a value and never throws.
///
/// ## Objects
/// A value is the object `<prefix>/<xx>/<entry identity hex>` (`xx` its first two hex digits), its body the
/// envelope; a lease is `<prefix>/leases/<entry identity hex>` (S3Leases.swift). Requests are signed with
/// SigV4 (Remote/S3/SigV4.swift), addressed path-style (`host/bucket/key`) or virtual-hosted
/// (`bucket.host/key`), and sent over the library's HTTP/1.1 client (kept-alive; libcurl for `https://`).
///
/// ## Values, streaming, failures
/// As over HTTP (``HTTPRemoteStore``): a lookup returns a value only after verifying it; payloads at or above
/// the streaming threshold are written into the caller's staging file as they arrive (windows of
/// `downloadWindow` bytes with `If-Range` on the ETag) and streamed from the local entry on stores
/// (`UNSIGNED-PAYLOAD`: the envelope's checksum and signature protect the bytes). A 401 or 403 (a wrong
/// secret) opens the breakers as an authentication failure; 5xx opens them as a server error; a throttle (429,
/// or 503 with `Retry-After` or `SlowDown`) holds both open for its `Retry-After` on every process of the
/// machine (at most the longest cooldown; without one, the cooldown); a write refused otherwise opens the
/// write breaker; 404 is a miss.
final class S3RemoteStore: RemoteValueStore, CustomReflectable {
    /// The settings.
    let configuration: S3Configuration
    /// The tier's counters.
    let statistics = RemoteStatistics()
    /// Timeouts, breakers, read-only mode, cap (one endpoint: scope 0).
    let remoteGuard: RemoteGuard
    /// Signs stored values; only values signed with it are hits.
    var secret: RemoteSecret? { configuration.secret }
    let client: S3Client

    /// Creates the tier (no connection is made until the first call).
    init(
        configuration: S3Configuration, now: @escaping @Sendable () -> Int64 = { Syscall.monotonicNanoseconds }
    ) throws(S3ConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        client = S3Client(configuration: configuration)
        remoteGuard = RemoteGuard(
            policy: configuration.policy, scopes: 1,
            labels: ["s3 \(configuration.endpoint.origin)/\(configuration.bucket)"], statistics: statistics, now: now)
    }

    /// The configuration's description only (never the secret key or the shared secret).
    var customMirror: Mirror { Mirror(self, children: ["configuration": configuration.description]) }

    /// Payloads of the streaming threshold or more stream through files.
    var fileStreamingThreshold: Int? { configuration.streamingThreshold }

    // MARK: Lookups

    func lookup(_ identity: EntryIdentity) async -> RemoteLookup { await lookup(identity, into: nil) }

    func lookup(_ identity: EntryIdentity, staging: RemoteStagingSlot) async -> RemoteLookup {
        await lookup(identity, into: staging)
    }

    /// A lookup in windows of `downloadWindow` bytes (`Range`), each asked for once the last is written.
    private func lookup(_ identity: EntryIdentity, into staging: RemoteStagingSlot?) async -> RemoteLookup {
        let (configuration, client) = (configuration, client)
        let key = configuration.valueKey(identity.digest)
        let attempt = await transfer(.read) { (deadline, cancellation) throws(RemoteError) -> RemoteLookup in
            let reader = RemoteEnvelopeReader(
                identity: identity.digest, secret: configuration.secret,
                maximumBytes: configuration.policy.maximumValueBytes, staging: staging,
                streamingThreshold: configuration.streamingThreshold)
            let sink = HTTPValueSink(reader: reader, maximumBytes: configuration.policy.maximumValueBytes)
            let stall = configuration.policy.operationTimeout
            var clock = HTTPTransferClock(
                deadline: deadline, stall: stall, transferDeadline: .after(configuration.transferTimeout))
            while true {
                let window = sink.nextWindow(size: configuration.downloadWindow)
                let request = client.request("GET", key: key, headers: window)
                let outcome = try client.transport.send(request, sink: sink, clock: &clock, cancellation: cancellation)
                if outcome.status == 401 || outcome.status == 403 { throw .s3(.denied(status: outcome.status)) }
                // A range past the end: an empty object (S3 answers 416 to `bytes=0-`), which no envelope is.
                if outcome.status == 416 { return .miss(.rejected(.foreign)) }
                if let lookup = try sink.lookup(after: outcome) { return lookup }
                clock = HTTPTransferClock(
                    deadline: .after(stall), stall: stall, transferDeadline: clock.transferDeadline)
            }
        }
        return finishLookup(attempt)
    }

    // MARK: Stores

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

    func store(
        _ identity: EntryIdentity, payloadFile file: RemotePayloadFile, createdAt: Int64, expiresAt: Int64
    ) async -> RemoteStoreOutcome {
        if let skip = skipReason(payloadCount: file.byteCount, expiresAt: expiresAt) { return .skipped(skip) }
        guard file.byteCount >= configuration.streamingThreshold else {
            guard let payload = await file.readWhole() else {
                statistics.add(.failedWrites)
                return .unavailable
            }
            return await store(identity, payload: payload, createdAt: createdAt, expiresAt: expiresAt)
        }
        let secret = configuration.secret
        let outcome = await put(identity) { () throws(RemoteError) in
            .stream(
                HTTPEnvelopeStream(
                    payload: .file(file), identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt,
                    secret: secret))
        }
        if outcome == .stored { statistics.add(.storesFromFile) }
        return outcome
    }

    /// A guarded `PUT` of the body `makeBody` builds on the I/O thread.
    private func put(
        _ identity: EntryIdentity, _ makeBody: @escaping @Sendable () throws(RemoteError) -> HTTPRequestBody
    ) async -> RemoteStoreOutcome {
        let (client, key) = (client, configuration.valueKey(identity.digest))
        let attempt = await transfer(.write) { (deadline, cancellation) throws(RemoteError) in
            let answer = try client.exchange(
                client.request("PUT", key: key, body: try makeBody()), deadline: deadline, cancellation: cancellation)
            switch answer.status {
            case 200..<300: return
            case 413: throw .payloadTooLarge
            case 400 where String(decoding: answer.body, as: UTF8.self).contains("EntityTooLarge"):
                throw .payloadTooLarge
            default: throw .s3(.writeRefused(answer.status))
            }
        }
        return finishStore(attempt)
    }

    // MARK: Removals

    /// Deletes `identity`'s value: `HEAD` first (S3 answers 204 to a `DELETE` whether or not the object was
    /// there), then `DELETE`.
    @discardableResult
    func remove(_ identity: EntryIdentity) async -> RemoteRemoval {
        let (client, key) = (client, configuration.valueKey(identity.digest))
        let attempt = await transfer(.write) { (deadline, cancellation) throws(RemoteError) -> Bool in
            let head = try client.exchange(
                client.request("HEAD", key: key), deadline: deadline, cancellation: cancellation)
            switch head.status {
            case 404: return false
            case 200..<300: break
            case 429, 500..<600: throw .s3(.serverStatus(head.status))
            default: throw .s3(.writeRefused(head.status))
            }
            let delete = try client.exchange(
                client.request("DELETE", key: key), deadline: deadline, cancellation: cancellation)
            guard (200..<300).contains(delete.status) || delete.status == 404 else {
                throw .s3(.writeRefused(delete.status))
            }
            return delete.status != 404
        }
        return RemoteRemoval(attempt)
    }

    /// Deletes every value and lease under the prefix: `ListObjectsV2` pages of up to 1000 keys, each key
    /// deleted; each page a guarded call. The number of values deleted, or `.unavailable`.
    func removeAll() async -> RemoteBulkRemoval {
        guard !remoteGuard.policy.readOnly else { return .unavailable }
        var deleted = 0
        var token: String?
        repeat {
            guard let (keys, next) = await listPage(after: token) else { return .unavailable }
            for key in keys {
                let client = client
                let attempt = await transfer(.write) { (deadline, cancellation) throws(RemoteError) in
                    let answer = try client.exchange(
                        client.request("DELETE", key: key), deadline: deadline, cancellation: cancellation)
                    guard (200..<300).contains(answer.status) || answer.status == 404 else {
                        throw .s3(.writeRefused(answer.status))
                    }
                }
                guard case .completed = attempt else { return .unavailable }
                if !key.contains("/leases/") && !key.hasPrefix("leases/") { deleted += 1 }
            }
            token = next
        } while token != nil
        return .removed(deleted)
    }

    /// The keys of one list page under the prefix, and the next page's token; nil when unavailable.
    func listPage(after token: String?) async -> ([String], String?)? {
        let client = client
        let prefix = configuration.keyPrefix.isEmpty ? "" : configuration.keyPrefix + "/"
        let query: [(name: String, value: String)] =
            [("list-type", "2"), ("max-keys", "1000"), ("prefix", prefix)]
            + (token.map { [("continuation-token", $0)] } ?? [])
        let attempt = await transfer(.read) { (deadline, cancellation) throws(RemoteError) -> ([String], String?) in
            let answer = try client.exchange(
                client.request("GET", key: nil, query: query), deadline: deadline, cancellation: cancellation,
                limit: 4 << 20)
            guard (200..<300).contains(answer.status) else { throw .s3(.serverStatus(answer.status)) }
            return try S3ListParser.parse(answer.body)
        }
        if case .completed(let page) = attempt { return page }
        return nil
    }

    /// Runs a transfer on a RemoteIO thread, guarded; the caller's cancellation cancels it at once.
    func transfer<Value: Sendable>(
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

/// The keys and the continuation token of a `ListObjectsV2` answer (XML; only `<Key>`,
/// `<NextContinuationToken>` and `<IsTruncated>` are read, entities decoded).
enum S3ListParser {
    static func parse(_ body: [UInt8]) throws(RemoteError) -> ([String], String?) {
        let text = String(decoding: body, as: UTF8.self)
        guard text.contains("<ListBucketResult") else { throw .s3(.unexpectedAnswer("not a ListBucketResult")) }
        let keys = values(of: "Key", in: text)
        let truncated = values(of: "IsTruncated", in: text).first == "true"
        return (keys, truncated ? values(of: "NextContinuationToken", in: text).first : nil)
    }

    private static func values(of element: String, in text: String) -> [String] {
        var found: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(element)>"),
            let close = rest.range(of: "</\(element)>", range: open.upperBound..<rest.endIndex)
        {
            found.append(decodeEntities(String(rest[open.upperBound..<close.lowerBound])))
            rest = rest[close.upperBound...]
        }
        return found
    }

    private static func decodeEntities(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
