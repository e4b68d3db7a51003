// RedisEndpoint.swift: Redis server addresses and credentials, parsed from URLs, redacted in every
// textual form (tests check `description`, `debugDescription`, `dump` and every error). The URL forms:
//     redis://[user[:password]@]host[:port][/db]     redis+unix://[user[:password]@]/path/to.sock[?db=N]
// A URL without a password takes `YASHIMA_REDIS_PASSWORD` (and `YASHIMA_REDIS_USER`) from the environment.

import Foundation

/// The credentials sent with `AUTH`: a password, and an ACL user name or none (the default user).
/// Never printed: every textual form says only which parts are present.
struct RedisCredentials: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The ACL user, or nil for `AUTH <password>`.
    let user: String?
    /// The password bytes (after percent-decoding).
    let password: [UInt8]

    var description: String { user == nil ? "password (redacted)" : "user and password (redacted)" }
    var debugDescription: String { "RedisCredentials(\(description))" }
    var customMirror: Mirror { Mirror(self, children: ["redacted": description]) }
}

/// One Redis server: its address, database and credentials.
struct RedisEndpoint: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Where the server listens.
    let address: RemoteAddress
    /// The database selected after connecting (`SELECT`; skipped for 0).
    let database: Int
    /// Credentials for `AUTH`, or nil to send none.
    let credentials: RedisCredentials?

    /// The name that places keys on this server among shards (rendezvous hashing): address and
    /// database, never credentials, the same in every process given the same URL.
    var shardName: String { "\(address)/\(database)" }

    /// The URL without its credentials, plus a note when credentials are configured.
    var description: String {
        let base: String
        switch address {
        case .tcp: base = "redis://\(address)/\(database)"
        case .unix(let path): base = "redis+unix://\(path)?db=\(database)"
        }
        return credentials == nil ? base : "\(base) (with \(credentials!.description))"
    }
    var debugDescription: String { "RedisEndpoint(\(description))" }
    var customMirror: Mirror { Mirror(self, children: ["endpoint": description]) }

    /// The same server settings at another address (a cluster node learned from the slot map).
    func moved(to address: RemoteAddress) -> RedisEndpoint {
        RedisEndpoint(address: address, database: database, credentials: credentials)
    }

    /// The environment variable holding the password when a URL has none.
    static let passwordVariable = "YASHIMA_REDIS_PASSWORD"
    /// The environment variable holding the ACL user when a URL has none (used with the password).
    static let userVariable = "YASHIMA_REDIS_USER"

    /// Parses one URL (see the file header for the forms and the environment variables).
    ///
    /// - Parameters:
    ///   - text: The URL.
    ///   - environment: Where `YASHIMA_REDIS_PASSWORD` and `YASHIMA_REDIS_USER` are looked up.
    /// - Throws: ``RemoteURLError`` naming the part that is wrong (never echoing it).
    static func parse(
        _ text: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RemoteURLError) -> RedisEndpoint {
        guard let schemeEnd = text.range(of: "://") else { throw .missingScheme }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        let rest = text[schemeEnd.upperBound...]
        guard !rest.contains("#") else { throw .unsupportedFragment }
        let isUnix: Bool
        switch scheme {
        case "redis": isUnix = false
        case "redis+unix": isUnix = true
        default:
            // Only well-known schemes are named: anything else may be a password typed in the wrong place.
            let known = ["rediss", "redis+tls", "valkey", "valkeys", "unix", "tcp", "http", "https", "redis-sentinel"]
            throw .unsupportedScheme(known.contains(scheme) ? scheme : "?")
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let afterAuthority = rest[authorityEnd...]
        let parts = try RemoteURLSyntax.authority(authority)
        let hostPart = parts.host
        let urlUser = parts.user?.isEmpty == true ? nil : parts.user
        let urlPassword = parts.password
        let address: RemoteAddress
        let database: Int
        if isUnix {
            guard hostPart.isEmpty else { throw .unixHostNotEmpty }
            let pathEnd = afterAuthority.firstIndex(of: "?") ?? afterAuthority.endIndex
            let path = try RemoteURLSyntax.utf8(RemoteURLSyntax.percentDecoded(afterAuthority[..<pathEnd]))
            guard path.hasPrefix("/"), path.count > 1, !path.utf8.contains(0) else { throw .invalidSocketPath }
            address = .unix(path: path)
            database = try parseQuery(afterAuthority[pathEnd...])
        } else {
            address = try RemoteURLSyntax.hostAndPort(hostPart, defaultPort: 6379)
            guard !afterAuthority.contains("?") else { throw .unsupportedQuery }
            let dbText = afterAuthority.dropFirst()  // after the "/" (or empty)
            database = dbText.isEmpty ? 0 : try parseDatabase(dbText)
        }
        let credentials: RedisCredentials?
        if let urlPassword {
            credentials = RedisCredentials(user: urlUser, password: urlPassword)
        } else if let password = environment[passwordVariable] {
            let user = urlUser ?? environment[userVariable].flatMap { $0.isEmpty ? nil : $0 }
            credentials = RedisCredentials(user: user, password: Array(password.utf8))
        } else if urlUser != nil {
            throw .missingPassword
        } else {
            credentials = nil
        }
        return RedisEndpoint(address: address, database: database, credentials: credentials)
    }

    /// Parses a list of servers used as shards.
    ///
    /// - Throws: ``RemoteURLError/noServers`` for an empty list, ``RemoteURLError/duplicateServer`` when
    ///   two URLs name the same address and database (placement would then depend on list order), or
    ///   the first URL's error.
    static func parseList(
        _ texts: [String], environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RemoteURLError) -> [RedisEndpoint] {
        guard !texts.isEmpty else { throw .noServers }
        var endpoints: [RedisEndpoint] = []
        var names = Set<String>()
        for text in texts {
            let endpoint = try parse(text, environment: environment)
            guard names.insert(endpoint.shardName).inserted else { throw .duplicateServer }
            endpoints.append(endpoint)
        }
        return endpoints
    }

    private static func parseDatabase(_ text: Substring) throws(RemoteURLError) -> Int {
        guard !text.isEmpty, text.count <= 9, text.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(text)
        else { throw .invalidDatabase }
        return value
    }

    private static func parseQuery(_ text: Substring) throws(RemoteURLError) -> Int {
        guard text.hasPrefix("?") else { return 0 }
        var database = 0
        for item in text.dropFirst().split(separator: "&", omittingEmptySubsequences: true) {
            guard item.hasPrefix("db=") else { throw .unsupportedQuery }
            database = try parseDatabase(item.dropFirst(3))
        }
        return database
    }

}
