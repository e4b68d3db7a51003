// HTTPEndpoint.swift: the HTTP server's address, path prefix and credentials, parsed from
// `http[s]://[user:password@]host[:port][/prefix]` and the environment (YASHIMA_HTTP_TOKEN, _USER, _PASSWORD),
// and each value's URL `<prefix>/<xx>/<identity hex>`. Never prints a credential (Docs/Internals.md).

import Foundation

/// How requests authenticate: the `Authorization` header. Never printed.
enum HTTPCredentials: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// HTTP basic authentication (RFC 7617).
    case basic(user: String, password: [UInt8])
    /// A bearer token (RFC 6750).
    case bearer(token: String)

    /// The `Authorization` header's value.
    var authorization: String {
        switch self {
        case .basic(let user, let password):
            return "Basic " + Data(Array(user.utf8) + [UInt8(ascii: ":")] + password).base64EncodedString()
        case .bearer(let token):
            return "Bearer " + token
        }
    }

    var description: String {
        switch self {
        case .basic: return "basic credentials (redacted)"
        case .bearer: return "bearer token (redacted)"
        }
    }
    var debugDescription: String { "HTTPCredentials(\(description))" }
    var customMirror: Mirror { Mirror(self, children: ["redacted": description]) }
}

/// An HTTP cache server: scheme, address, path prefix and credentials.
struct HTTPEndpoint: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// True for `https`.
    let isSecure: Bool
    /// The host and port.
    let address: RemoteAddress
    /// The path before the fan-out folders: empty, or `/a/b` (no trailing slash).
    let pathPrefix: String
    /// The `Authorization` header, or nil to send none.
    let credentials: HTTPCredentials?

    /// The environment variable holding a bearer token when the URL has no credentials.
    static let tokenVariable = "YASHIMA_HTTP_TOKEN"
    /// The environment variable holding the basic user when the URL has none.
    static let userVariable = "YASHIMA_HTTP_USER"
    /// The environment variable holding the basic password when the URL has none.
    static let passwordVariable = "YASHIMA_HTTP_PASSWORD"

    /// The scheme, host and port, without credentials.
    var origin: String { "\(isSecure ? "https" : "http")://\(address)" }

    /// The URL of the prefix, without credentials.
    var baseURL: String { origin + pathPrefix }

    /// The path of `identity`'s value: `<prefix>/<xx>/<identity hex>` (nothing to escape).
    func path(for identity: SHA256Digest) -> String {
        let hex = identity.hex
        return "\(pathPrefix)/\(hex.prefix(2))/\(hex)"
    }

    /// The URL of `identity`'s value.
    func url(for identity: SHA256Digest) -> URL { URL(string: origin + path(for: identity))! }

    /// The base URL, plus a note when credentials are configured.
    var description: String { credentials.map { "\(baseURL) (with \($0.description))" } ?? baseURL }
    var debugDescription: String { "HTTPEndpoint(\(description))" }
    var customMirror: Mirror { Mirror(self, children: ["endpoint": description]) }

    /// Parses a URL (see the file header for the form and the environment variables).
    ///
    /// - Throws: ``HTTPURLError`` naming the part that is wrong (never echoing it).
    static func parse(
        _ text: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(HTTPURLError) -> HTTPEndpoint {
        guard let schemeEnd = text.range(of: "://") else { throw .missingScheme }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else {
            // Only well-known schemes are named: anything else may be a password typed in the wrong place.
            let known = ["redis", "rediss", "redis+unix", "webdav", "dav", "davs", "ftp", "s3", "gs", "file"]
            throw .unsupportedScheme(known.contains(scheme) ? scheme : "?")
        }
        let isSecure = scheme == "https"
        let rest = text[schemeEnd.upperBound...]
        guard !rest.contains("#") else { throw .unsupportedFragment }
        guard !rest.contains("?") else { throw .unsupportedQuery }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let parts: RemoteURLSyntax.Authority
        let address: RemoteAddress
        do throws(RemoteURLError) {
            parts = try RemoteURLSyntax.authority(authority)
            address = try RemoteURLSyntax.hostAndPort(parts.host, defaultPort: isSecure ? 443 : 80)
        } catch {
            throw HTTPURLError(error)
        }
        let (urlUser, urlPassword) = (parts.user, parts.password)
        let pathPrefix = try parsePath(rest[authorityEnd...])
        let credentials = try credentials(user: urlUser, password: urlPassword, environment: environment)
        return HTTPEndpoint(isSecure: isSecure, address: address, pathPrefix: pathPrefix, credentials: credentials)
    }

    /// The prefix: empty or `/`-separated segments of unreserved characters (RFC 3986), no `.` or `..`.
    private static func parsePath(_ text: Substring) throws(HTTPURLError) -> String {
        var path = text
        while path.hasSuffix("/") { path = path.dropLast() }
        guard !path.isEmpty else { return "" }
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for segment in segments {
            guard !segment.isEmpty, segment != ".", segment != "..",
                segment.utf8.allSatisfy({ isAlphanumeric($0) || "-._~".utf8.contains($0) })
            else { throw .invalidPath }
        }
        return String(path)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func credentials(
        user urlUser: String?, password urlPassword: [UInt8]?, environment: [String: String]
    ) throws(HTTPURLError) -> HTTPCredentials? {
        if let urlUser, urlUser.contains(":") { throw .invalidUser }
        if let urlPassword { return .basic(user: urlUser ?? "", password: urlPassword) }
        let token = environment[tokenVariable].flatMap { $0.isEmpty ? nil : $0 }
        let password = environment[passwordVariable]
        if urlUser != nil {
            guard let password else { throw .missingPassword }
            return .basic(user: urlUser!, password: Array(password.utf8))
        }
        if token != nil && password != nil { throw .ambiguousCredentials }
        if let token {
            guard token.utf8.allSatisfy({ isAlphanumeric($0) || "-._~+/=".utf8.contains($0) }) else {
                throw .invalidToken
            }
            return .bearer(token: token)
        }
        if let password {
            guard let user = environment[userVariable], !user.isEmpty else { throw .missingUser }
            guard !user.contains(":") else { throw .invalidUser }
            return .basic(user: user, password: Array(password.utf8))
        }
        if environment[userVariable].map({ !$0.isEmpty }) == true { throw .missingPassword }
        return nil
    }
}

/// Why an HTTP remote URL was refused. Names the part, never repeats the text (it may hold a password).
enum HTTPURLError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No `scheme://` prefix.
    case missingScheme
    /// A scheme other than `http` and `https`, named when it is a well-known one, else "?".
    case unsupportedScheme(String)
    /// A `?query`.
    case unsupportedQuery
    /// A `#fragment`.
    case unsupportedFragment
    /// A `%` not followed by two hexadecimal digits, or a user name that is not UTF-8.
    case invalidPercentEncoding
    /// No host.
    case missingHost
    /// A host with characters outside names and IP literals, or a malformed `[IPv6]`.
    case invalidHost
    /// A port that is not a number in 1...65535.
    case invalidPort
    /// A path prefix with characters other than letters, digits, `-._~` and `/`, or `.`/`..` segments.
    case invalidPath
    /// A basic user name containing `:` (RFC 7617).
    case invalidUser
    /// `user@` with an empty user, or `YASHIMA_HTTP_PASSWORD` without a user.
    case missingUser
    /// A user (in the URL or `YASHIMA_HTTP_USER`) without a password.
    case missingPassword
    /// Both `YASHIMA_HTTP_TOKEN` and `YASHIMA_HTTP_PASSWORD` are set.
    case ambiguousCredentials
    /// `YASHIMA_HTTP_TOKEN` has characters a bearer token cannot have (RFC 6750).
    case invalidToken

    /// The HTTP form of a shared URL syntax error.
    init(_ error: RemoteURLError) {
        switch error {
        case .missingHost: self = .missingHost
        case .invalidHost: self = .invalidHost
        case .invalidPort: self = .invalidPort
        case .missingUser: self = .missingUser
        default: self = .invalidPercentEncoding
        }
    }

    var description: String {
        switch self {
        case .missingScheme: return "HTTP remote URL has no scheme (expected http:// or https://)"
        case .unsupportedScheme(let scheme):
            return "unsupported HTTP remote URL scheme \(scheme) (expected http:// or https://)"
        case .unsupportedQuery: return "HTTP remote URL must not have a ?query"
        case .unsupportedFragment: return "HTTP remote URL must not have a #fragment"
        case .invalidPercentEncoding: return "HTTP remote URL has an invalid percent escape or non-UTF-8 user name"
        case .missingHost: return "HTTP remote URL has no host"
        case .invalidHost: return "HTTP remote URL has an invalid host"
        case .invalidPort: return "HTTP remote URL has an invalid port (expected 1...65535)"
        case .invalidPath:
            return "HTTP remote URL path may hold only letters, digits, -._~ and / (no . or .. segments)"
        case .invalidUser: return "HTTP basic user name must not contain ':'"
        case .missingUser:
            return "HTTP basic credentials need a user (in the URL or \(HTTPEndpoint.userVariable))"
        case .missingPassword:
            return
                "HTTP remote URL names a user but no password is given (in the URL or \(HTTPEndpoint.passwordVariable))"
        case .ambiguousCredentials:
            return "both \(HTTPEndpoint.tokenVariable) and \(HTTPEndpoint.passwordVariable) are set: choose one"
        case .invalidToken: return "\(HTTPEndpoint.tokenVariable) is not a valid bearer token"
        }
    }
}
