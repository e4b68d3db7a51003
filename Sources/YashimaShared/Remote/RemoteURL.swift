// RemoteURL.swift: Redis server addresses and credentials, parsed from URLs.
// Owns the two URL forms, percent-decoding, the credential environment variables, and redaction:
// no description, debug description, mirror or error of these types ever contains a password or a
// user name (tests check `description`, `debugDescription`, `dump` and every error).
//
//     redis://[user[:password]@]host[:port][/db]      host: a name, an IPv4 literal or [IPv6]
//     redis+unix://[user[:password]@]/path/to.sock[?db=N]
//
// User and password are percent-decoded (write `@`, `:`, `/`, `?`, `#` and `%` as `%40` and so on).
// When the URL carries no password, the environment supplies them: `YASHIMA_REDIS_PASSWORD` and,
// optionally, `YASHIMA_REDIS_USER` (an ACL user; a user name in the URL wins over it). A URL with a
// password ignores both variables.

import Foundation

/// Where a Redis server listens.
enum RemoteAddress: Hashable, Sendable, CustomStringConvertible {
    /// A TCP host (name or IP literal, IPv6 without brackets) and port.
    case tcp(host: String, port: Int)
    /// An absolute Unix socket path.
    case unix(path: String)

    var description: String {
        switch self {
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): return "unix:\(path)"
        }
    }
}

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
        var hostPart = authority
        var urlUser: String?
        var urlPassword: [UInt8]?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPart = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                let user = try RemoteURLSyntax.percentDecoded(userInfo[..<colon])
                urlUser = user.isEmpty ? nil : try RemoteURLSyntax.utf8(user)
                urlPassword = try RemoteURLSyntax.percentDecoded(userInfo[userInfo.index(after: colon)...])
            } else {
                let user = try RemoteURLSyntax.percentDecoded(userInfo)
                guard !user.isEmpty else { throw .missingUser }
                urlUser = try RemoteURLSyntax.utf8(user)
            }
        }
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

/// URL syntax shared by the remote tier's URLs (Redis and HTTP).
enum RemoteURLSyntax {
    /// Parses `host[:port]`: a name, an IPv4 literal or `[IPv6]`, and a port in 1...65535.
    static func hostAndPort(_ text: Substring, defaultPort: Int) throws(RemoteURLError) -> RemoteAddress {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .invalidHost }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidHost }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw .invalidHost
            }
        } else {
            if let colon = text.lastIndex(of: ":") {
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            } else {
                host = text
            }
            guard !host.isEmpty else { throw .missingHost }
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._".contains($0)) }) else {
                throw .invalidHost
            }
        }
        var port = defaultPort
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = Int(portText), (1...65535).contains(value)
            else { throw .invalidPort }
            port = value
        }
        return .tcp(host: String(host), port: port)
    }

    /// The UTF-8 text of `bytes`.
    static func utf8(_ bytes: [UInt8]) throws(RemoteURLError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalidPercentEncoding }
        return text
    }

    /// `text` with `%XX` escapes decoded.
    static func percentDecoded(_ text: Substring) throws(RemoteURLError) -> [UInt8] {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw .invalidPercentEncoding
            }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Why a Redis URL was refused. Names the part, never repeats the text (it may hold a password).
enum RemoteURLError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No `scheme://` prefix.
    case missingScheme
    /// A scheme other than `redis` and `redis+unix` (TLS, `rediss`, is not supported), named when it is a
    /// well-known one, else "?" (the text might be a misplaced password).
    case unsupportedScheme(String)
    /// `user@` with an empty user.
    case missingUser
    /// A user name in the URL but no password in the URL or in `YASHIMA_REDIS_PASSWORD`.
    case missingPassword
    /// A `%` not followed by two hexadecimal digits, or a user name or path that is not UTF-8.
    case invalidPercentEncoding
    /// A TCP URL without a host.
    case missingHost
    /// A host with characters outside names and IP literals, or a malformed `[IPv6]`.
    case invalidHost
    /// A port that is not a number in 1...65535.
    case invalidPort
    /// A database that is not a non-negative number below one billion.
    case invalidDatabase
    /// A `redis+unix` URL with a host (write `redis+unix:///path`).
    case unixHostNotEmpty
    /// A `redis+unix` URL whose path is not absolute.
    case invalidSocketPath
    /// A query other than `?db=N` on a Unix URL, or any query on a TCP URL.
    case unsupportedQuery
    /// A `#fragment`.
    case unsupportedFragment
    /// An empty list of servers.
    case noServers
    /// Two URLs of one list name the same server and database.
    case duplicateServer

    var description: String {
        switch self {
        case .missingScheme: return "Redis URL has no scheme (expected redis:// or redis+unix://)"
        case .unsupportedScheme(let scheme):
            return "unsupported Redis URL scheme \(scheme) (expected redis:// or redis+unix://; TLS is not supported)"
        case .missingUser: return "Redis URL has an empty user name before @"
        case .missingPassword:
            return "Redis URL names a user but no password is given (in the URL or \(RedisEndpoint.passwordVariable))"
        case .invalidPercentEncoding: return "Redis URL has an invalid percent escape or non-UTF-8 text"
        case .missingHost: return "Redis URL has no host"
        case .invalidHost: return "Redis URL has an invalid host"
        case .invalidPort: return "Redis URL has an invalid port (expected 1...65535)"
        case .invalidDatabase: return "Redis URL has an invalid database number"
        case .unixHostNotEmpty: return "redis+unix URL must not name a host (redis+unix:///path/to.sock)"
        case .invalidSocketPath: return "redis+unix URL needs an absolute socket path"
        case .unsupportedQuery: return "Redis URL has an unsupported query (only ?db=N, on redis+unix URLs)"
        case .unsupportedFragment: return "Redis URL must not have a #fragment"
        case .noServers: return "no Redis servers given"
        case .duplicateServer: return "the same Redis server and database is listed twice"
        }
    }
}
