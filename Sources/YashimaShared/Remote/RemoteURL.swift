// RemoteURL.swift: the URL syntax the remote tier's URLs share (Redis and HTTP): the authority
// (user, password, host and port, percent-decoded), addresses, and the error that names a bad part
// without repeating it (it may hold a password).

import Foundation

/// Where a remote server listens.
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

/// URL syntax shared by the remote tier's URLs (Redis and HTTP).
enum RemoteURLSyntax {
    /// An authority split at its last `@`: the user and password percent-decoded, the host part as
    /// written (for ``hostAndPort(_:defaultPort:)``).
    struct Authority {
        /// The user before `@` (possibly empty when a password follows), or nil without `@`.
        let user: String?
        /// The password after the user's `:`, or nil without one.
        let password: [UInt8]?
        /// What follows `@` (the whole authority without `@`).
        let host: Substring
    }

    /// Splits `[user[:password]@]host` (the one authority parser of Redis and HTTP URLs).
    /// - Throws: ``RemoteURLError/invalidPercentEncoding`` for a bad escape or a user that is not UTF-8,
    ///   ``RemoteURLError/missingUser`` for `@` with an empty user and no password.
    static func authority(_ text: Substring) throws(RemoteURLError) -> Authority {
        guard let at = text.lastIndex(of: "@") else { return Authority(user: nil, password: nil, host: text) }
        let userInfo = text[..<at]
        let colon = userInfo.firstIndex(of: ":")
        let user = try utf8(percentDecoded(userInfo[..<(colon ?? userInfo.endIndex)]))
        let password = try colon.map { colon throws(RemoteURLError) in
            try percentDecoded(userInfo[userInfo.index(after: colon)...])
        }
        if password == nil && user.isEmpty { throw .missingUser }
        return Authority(user: user, password: password, host: text[text.index(after: at)...])
    }

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
