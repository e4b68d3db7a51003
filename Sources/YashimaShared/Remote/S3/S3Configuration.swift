// S3Configuration.swift: the S3 backend's settings: bucket, key prefix, endpoint (path-style or
// virtual-hosted addressing), region and credentials, from `s3://BUCKET[/PREFIX][?endpoint=URL&region=R]`
// and the standard AWS environment, or given; the shared policy, streaming and lease settings. Never
// prints a secret (Docs/Internals.md).

import Foundation

/// The settings of an S3 remote backend.
struct S3Configuration: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The bucket.
    var bucket: String
    /// The key prefix before each value's name: empty or `a/b` (no leading or trailing slash).
    var keyPrefix: String
    /// The endpoint's scheme, host and port (AWS: `https://s3.<region>.amazonaws.com`).
    var endpoint: HTTPEndpoint
    /// True for virtual-hosted addressing (`bucket.host`), false for path-style (`host/bucket`).
    var virtualHosted: Bool
    /// The signing region.
    var region: String
    /// The signing credentials (never printed).
    var credentials: SigV4Credentials
    /// Timeouts, size cap, read-only mode and breaker (shared with every backend), as over HTTP.
    var policy = RemotePolicy()
    /// The most a whole transfer may take.
    var transferTimeout: Duration = .seconds(300)
    /// Payloads of this many bytes or more stream through files (as over HTTP).
    var streamingThreshold = HTTPRemoteConfiguration.defaultStreamingThreshold
    /// Lookups read values in windows of this many bytes (`Range`, `If-Range` on the ETag).
    var downloadWindow = 8 << 20
    /// Signs stored values and accepts only values signed with it.
    var secret: RemoteSecret?
    /// Leases as objects beside the values, taken with conditional writes (`If-None-Match: *`, `If-Match`).
    /// Off where the store lacks them (then leases come from Redis, or none).
    var conditionalLeases = true
    /// The lease TTL: the holder renews it every third of it.
    var leaseTimeToLive: Duration = .seconds(2)
    /// How often a waiter looks at another host's lease (S3 has no notifications).
    var leasePollInterval: Duration = .milliseconds(100)

    static let accessKeyVariable = "AWS_ACCESS_KEY_ID"
    static let secretKeyVariable = "AWS_SECRET_ACCESS_KEY"
    static let sessionTokenVariable = "AWS_SESSION_TOKEN"
    static let regionVariables = ["AWS_REGION", "AWS_DEFAULT_REGION"]
    static let endpointVariables = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]

    /// The bucket, prefix and endpoint, without credentials.
    var description: String {
        let prefix = keyPrefix.isEmpty ? "" : "/" + keyPrefix
        return
            "s3://\(bucket)\(prefix) at \(endpoint.origin) (\(region), \(virtualHosted ? "virtual-hosted" : "path-style"), \(credentials))"
    }

    /// The description only (a dump must not show the secret key or the shared secret).
    var customMirror: Mirror { Mirror(self, children: ["configuration": description]) }

    /// The host the requests go to (the bucket's own name in front for virtual-hosted addressing).
    var address: RemoteAddress {
        guard virtualHosted, case .tcp(let host, let port) = endpoint.address else { return endpoint.address }
        return .tcp(host: "\(bucket).\(host)", port: port)
    }

    /// The `Host` header: the address, without the scheme's default port.
    var hostHeader: String {
        guard case .tcp(let host, let port) = address else { return "\(address)" }
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (endpoint.isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// The path of an object key (below the bucket).
    func path(ofKey key: String) -> String { virtualHosted ? "/\(key)" : "/\(bucket)/\(key)" }

    /// The object key of `identity`'s value: `<prefix>/<xx>/<identity hex>`.
    func valueKey(_ identity: SHA256Digest) -> String {
        let hex = identity.hex
        return (keyPrefix.isEmpty ? "" : keyPrefix + "/") + "\(hex.prefix(2))/\(hex)"
    }

    /// The object key of `identity`'s lease: `<prefix>/leases/<identity hex>`.
    func leaseKey(_ identity: SHA256Digest) -> String {
        (keyPrefix.isEmpty ? "" : keyPrefix + "/") + "leases/\(identity.hex)"
    }

    /// A configuration from `s3://BUCKET[/PREFIX][?endpoint=URL&region=R&style=path|virtual]`, the rest
    /// from `environment`: credentials (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`),
    /// the region (`AWS_REGION`, `AWS_DEFAULT_REGION`), the endpoint (`AWS_ENDPOINT_URL_S3`,
    /// `AWS_ENDPOINT_URL`; else AWS's own for the region, virtual-hosted) and the secret.
    init(url: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(S3ConfigurationError)
    {
        guard url.lowercased().hasPrefix("s3://") else { throw .invalidURL("expected s3://BUCKET[/PREFIX]") }
        var rest = Substring(url.dropFirst(5))
        var parameters: [String: String] = [:]
        if let question = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: question)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, let value = String(parts[1]).removingPercentEncoding else {
                    throw .invalidURL("malformed query")
                }
                parameters[String(parts[0])] = value
            }
            rest = rest[..<question]
        }
        for name in parameters.keys where !["endpoint", "region", "style"].contains(name) {
            throw .invalidURL("unknown parameter (expected endpoint, region or style)")
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let bucket = String(rest[..<slash])
        var prefix = rest[slash...].drop { $0 == "/" }
        while prefix.hasSuffix("/") { prefix = prefix.dropLast() }
        let region =
            parameters["region"] ?? Self.regionVariables.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
            ?? "us-east-1"
        let endpointText =
            parameters["endpoint"] ?? Self.endpointVariables.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        let endpoint: HTTPEndpoint
        do throws(HTTPURLError) {
            endpoint = try HTTPEndpoint.parse(endpointText ?? "https://s3.\(region).amazonaws.com", environment: [:])
        } catch {
            throw .invalidEndpoint(error)
        }
        guard let access = environment[Self.accessKeyVariable], !access.isEmpty,
            let secretKey = environment[Self.secretKeyVariable], !secretKey.isEmpty
        else { throw .missingCredentials }
        let token = environment[Self.sessionTokenVariable].flatMap { $0.isEmpty ? nil : $0 }
        let style = parameters["style"] ?? (endpointText == nil ? "virtual" : "path")
        guard style == "path" || style == "virtual" else { throw .invalidURL("style must be path or virtual") }
        self.init(
            bucket: bucket, keyPrefix: String(prefix), endpoint: endpoint, virtualHosted: style == "virtual",
            region: region,
            credentials: SigV4Credentials(
                accessKeyID: access, secretAccessKey: Array(secretKey.utf8), sessionToken: token))
        secret = RemoteSecret.fromEnvironment(environment)
    }

    /// A configuration from its parts (the shared policy and the rest at their defaults).
    init(
        bucket: String, keyPrefix: String, endpoint: HTTPEndpoint, virtualHosted: Bool, region: String,
        credentials: SigV4Credentials
    ) {
        self.bucket = bucket
        self.keyPrefix = keyPrefix
        self.endpoint = endpoint
        self.virtualHosted = virtualHosted
        self.region = region
        self.credentials = credentials
    }

    /// Checks every setting; for `https://`, loads the system's libcurl (once per process).
    func validate() throws(S3ConfigurationError) {
        // Bucket names (AWS's rules, simplified): 3-63 lowercase letters, digits, dots and hyphens.
        guard (3...63).contains(bucket.utf8.count),
            bucket.utf8.allSatisfy({
                (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x2E
            })
        else { throw .invalidBucket }
        guard keyPrefix.utf8.count <= 256,
            keyPrefix.split(separator: "/", omittingEmptySubsequences: false).allSatisfy({ segment in
                !segment.isEmpty && segment != "." && segment != ".."
                    && segment.utf8.allSatisfy({
                        (0x61...0x7A).contains($0 | 0x20) || (0x30...0x39).contains($0) || "-._~".utf8.contains($0)
                    })
            }) || keyPrefix.isEmpty
        else { throw .invalidPrefix }
        guard !region.isEmpty,
            region.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D })
        else { throw .invalidRegion }
        guard endpoint.credentials == nil, endpoint.pathPrefix.isEmpty else {
            throw .invalidURL("the endpoint is scheme://host[:port] only")
        }
        if endpoint.isSecure, let failure = HTTPSecureTransport.loadFailure { throw .tlsUnavailable(failure) }
        switch policy.problem {
        case .invalidTimeout: throw .invalidTimeout
        case .invalidValueCap: throw .invalidValueCap
        case nil: break
        }
        guard transferTimeout.remoteMilliseconds >= 1, leaseTimeToLive.remoteMilliseconds >= 30,
            leasePollInterval.remoteMilliseconds >= 1
        else { throw .invalidTimeout }
        guard streamingThreshold >= 0, downloadWindow >= 64 << 10 else { throw .invalidTimeout }
    }
}

/// Why an S3 remote configuration was refused. Names the part, never a credential.
enum S3ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The URL is not `s3://BUCKET[/PREFIX][?endpoint=URL&region=R&style=path|virtual]` (what is wrong).
    case invalidURL(String)
    /// The endpoint URL is invalid.
    case invalidEndpoint(HTTPURLError)
    /// `AWS_ACCESS_KEY_ID` or `AWS_SECRET_ACCESS_KEY` is missing.
    case missingCredentials
    /// The bucket name is not 3-63 lowercase letters, digits, dots and hyphens.
    case invalidBucket
    /// The key prefix has characters other than letters, digits, `-._~` and `/`, or empty or dot segments.
    case invalidPrefix
    /// The region is empty or not lowercase letters, digits and hyphens.
    case invalidRegion
    /// A timeout, cooldown, window or TTL out of range.
    case invalidTimeout
    /// The value cap is negative or 2 GiB or more.
    case invalidValueCap
    /// An `https://` endpoint, and the system's libcurl could not be loaded.
    case tlsUnavailable(String)

    var description: String {
        switch self {
        case .invalidURL(let what): return "invalid S3 remote URL: \(what)"
        case .invalidEndpoint(let error): return "invalid S3 endpoint: \(error)"
        case .missingCredentials:
            return "S3 remotes need \(S3Configuration.accessKeyVariable) and \(S3Configuration.secretKeyVariable)"
        case .invalidBucket: return "S3 bucket names are 3-63 lowercase letters, digits, dots and hyphens"
        case .invalidPrefix:
            return "S3 key prefix may hold only letters, digits, -._~ and / (no empty, . or .. segments)"
        case .invalidRegion: return "S3 region must be lowercase letters, digits and hyphens"
        case .invalidTimeout: return "remote timeout, cooldown, window or lease TTL too short"
        case .invalidValueCap: return "remote value size cap out of range"
        case .tlsUnavailable(let reason):
            return "https:// S3 endpoints need the system's libcurl (\(HTTPSecureTransport.libraryName)): \(reason)"
        }
    }
}
