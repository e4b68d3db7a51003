// HTTPRemoteConfiguration.swift: the HTTP backend's settings and their validation: server, shared policy,
// transfer limit, streaming threshold, download window, custom headers (never printed) and the shared
// secret (YASHIMA_REMOTE_SECRET when none is given).

import Foundation

/// The settings of an HTTP remote backend.
struct HTTPRemoteConfiguration: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The server.
    var endpoint: HTTPEndpoint
    /// Timeouts, size cap, read-only mode and breaker (shared with every backend). Over HTTP the
    /// operation timeout bounds the wait for the first response byte (connecting included) and any
    /// stall between bytes of a body; ``transferTimeout`` bounds a whole transfer.
    var policy = RemotePolicy()
    /// The most a whole transfer may take, from the call (a server trickling bytes is stopped by it).
    var transferTimeout: Duration = .seconds(300)
    /// Payloads of this many bytes or more stream through files (a caller's staging file on lookups,
    /// the local entry on stores); smaller ones go through memory. Measured in
    /// HTTPMeasurementTests: below it, memory is faster; above it, a value is never held whole.
    var streamingThreshold = HTTPRemoteConfiguration.defaultStreamingThreshold
    /// Lookups read values in windows of this many bytes (`Range` requests with `If-Range`, the next one
    /// asked for once the last has been written): a server replacing the value between two windows is
    /// caught by its `ETag`. Servers that ignore `Range` send the value whole.
    var downloadWindow = 8 << 20
    /// Headers sent with every request (say `X-Api-Key`). Values are never printed.
    var headers: [String: String] = [:]
    /// Signs stored values and accepts only values signed with it.
    var secret: RemoteSecret?

    /// The default ``streamingThreshold``: 1 MiB.
    static let defaultStreamingThreshold = 1 << 20

    /// Headers the transport sets itself (credentials come from the URL or the environment).
    static let reservedHeaders: Set<String> = [
        "accept-encoding", "authorization", "connection", "content-length", "content-type", "expect", "host",
        "if-range", "range", "te", "transfer-encoding", "upgrade",
    ]

    /// A configuration for `endpoint` with defaults, and the secret from the environment if set.
    init(endpoint: HTTPEndpoint, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.endpoint = endpoint
        secret = RemoteSecret.fromEnvironment(environment)
    }

    /// A configuration from a URL; credentials and the secret come from the URL or the environment.
    init(url: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(HTTPConfigurationError)
    {
        do throws(HTTPURLError) {
            self.init(endpoint: try HTTPEndpoint.parse(url, environment: environment), environment: environment)
        } catch {
            throw .invalidURL(error)
        }
    }

    /// The endpoint and the names of the custom headers (never their values).
    var description: String {
        let names = headers.keys.sorted()
        return names.isEmpty ? endpoint.description : "\(endpoint) (headers: \(names.joined(separator: ", ")))"
    }

    /// The description only (a dump must not show header values or the secret).
    var customMirror: Mirror { Mirror(self, children: ["configuration": description]) }

    /// Checks every setting; for `https://`, loads the system's libcurl (once per process).
    func validate() throws(HTTPConfigurationError) {
        if endpoint.isSecure, let failure = HTTPSecureTransport.loadFailure { throw .tlsUnavailable(failure) }
        switch policy.problem {
        case .invalidTimeout: throw .invalidTimeout
        case .invalidValueCap: throw .invalidValueCap
        case nil: break
        }
        guard transferTimeout.remoteMilliseconds >= 1 else { throw .invalidTimeout }
        guard streamingThreshold >= 0 else { throw .invalidStreamingThreshold }
        guard downloadWindow >= 64 << 10 else { throw .invalidDownloadWindow }
        for (name, value) in headers {
            // A token (RFC 9110 tchar) for the name; visible ASCII, spaces and tabs for the value.
            let tchar = "!#$%&'*+-.^_`|~"
            guard !name.isEmpty,
                name.utf8.allSatisfy({
                    (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                        || tchar.utf8.contains($0)
                }),
                value.utf8.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x09 })
            else { throw .invalidHeader }
            guard !Self.reservedHeaders.contains(name.lowercased()) else { throw .reservedHeader }
        }
    }
}

/// Why an HTTP remote configuration was refused.
enum HTTPConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The URL is invalid.
    case invalidURL(HTTPURLError)
    /// A timeout or cooldown is under 1 ms.
    case invalidTimeout
    /// The value cap is negative or 2 GiB or more.
    case invalidValueCap
    /// The streaming threshold is negative.
    case invalidStreamingThreshold
    /// The download window is under 64 KiB.
    case invalidDownloadWindow
    /// A custom header's name is not a token, or its value has control characters.
    case invalidHeader
    /// A custom header the transport sets itself (`Authorization`, `Content-Length`, `Host`, ...).
    case reservedHeader
    /// An `https://` URL, and the system's libcurl (which does TLS) could not be loaded: the loader's reason.
    case tlsUnavailable(String)

    var description: String {
        switch self {
        case .invalidURL(let error): return error.description
        case .invalidTimeout: return "remote timeout or cooldown too short"
        case .invalidValueCap: return "remote value size cap out of range"
        case .invalidStreamingThreshold: return "HTTP streaming threshold must not be negative"
        case .invalidDownloadWindow: return "HTTP download window must be at least 64 KiB"
        case .invalidHeader: return "custom HTTP header with an invalid name or value"
        case .reservedHeader:
            return "custom HTTP header the backend sets itself (credentials come from the URL or YASHIMA_HTTP_*)"
        case .tlsUnavailable(let reason):
            return
                "https:// remotes need the system's libcurl (\(HTTPSecureTransport.libraryName), Debian package libcurl4), which could not be loaded: \(reason)"
        }
    }
}
