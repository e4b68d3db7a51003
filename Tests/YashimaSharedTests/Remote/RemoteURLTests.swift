// RemoteURLTests.swift: both Redis URL forms, percent-decoding, credentials from the URL or the
// environment, typed errors for bad input, and that no textual form of an endpoint, credentials or an
// error ever contains a password or user name.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Remote URLs")
struct RemoteURLTests {
    /// The endpoint `text` parses to with `environment`, or the typed error.
    private func parsing(_ text: String, _ environment: [String: String]) -> Result<RedisEndpoint, RemoteURLError> {
        Result { () throws(RemoteURLError) in try RedisEndpoint.parse(text, environment: environment) }
    }

    private func parse(_ text: String, _ environment: [String: String] = [:]) throws -> RedisEndpoint {
        try parsing(text, environment).get()
    }

    private func failure(_ text: String, _ environment: [String: String] = [:]) -> RemoteURLError? {
        guard case .failure(let error) = parsing(text, environment) else { return nil }
        return error
    }

    @Test("TCP forms: host, port, database, IPv6")
    func tcpForms() throws {
        let plain = try parse("redis://localhost")
        #expect(plain.address == .tcp(host: "localhost", port: 6379))
        #expect(plain.database == 0)
        #expect(plain.credentials == nil)
        #expect(try parse("redis://cache.example.com:6380/3").address == .tcp(host: "cache.example.com", port: 6380))
        #expect(try parse("redis://cache.example.com:6380/3").database == 3)
        #expect(try parse("redis://10.0.0.7/").database == 0)
        #expect(try parse("REDIS://h:1").address == .tcp(host: "h", port: 1))
        let v6 = try parse("redis://[::1]:7000/1")
        #expect(v6.address == .tcp(host: "::1", port: 7000))
        #expect(v6.address.description == "[::1]:7000")
        #expect(try parse("redis://[fe80::1]").address == .tcp(host: "fe80::1", port: 6379))
    }

    @Test("user and password are percent-decoded; an empty user is the default user")
    func credentials() throws {
        let both = try parse("redis://al%69ce:p%40ss%3Aw%2Fo%25rd@h:1/2")
        #expect(both.credentials == RedisCredentials(user: "alice", password: Array("p@ss:w/o%rd".utf8)))
        let passwordOnly = try parse("redis://:s3cret@h")
        #expect(passwordOnly.credentials == RedisCredentials(user: nil, password: Array("s3cret".utf8)))
        let binary = try parse("redis://:%FF%00@h")
        #expect(binary.credentials?.password == [0xFF, 0x00])
    }

    @Test("credentials from the environment when the URL has no password")
    func environment() throws {
        let env = [RedisEndpoint.passwordVariable: "envpass", RedisEndpoint.userVariable: "bob"]
        #expect(
            try parse("redis://h", env).credentials == RedisCredentials(user: "bob", password: Array("envpass".utf8)))
        #expect(
            try parse("redis://alice@h", env).credentials
                == RedisCredentials(user: "alice", password: Array("envpass".utf8)))
        #expect(
            try parse("redis://:urlpass@h", env).credentials
                == RedisCredentials(user: nil, password: Array("urlpass".utf8)))
        #expect(
            try parse("redis://h", [RedisEndpoint.passwordVariable: "p"]).credentials
                == RedisCredentials(user: nil, password: Array("p".utf8)))
        #expect(try parse("redis://h", [RedisEndpoint.userVariable: "bob"]).credentials == nil)
        #expect(failure("redis://alice@h") == .missingPassword)
    }

    @Test("Unix socket forms")
    func unixForms() throws {
        let plain = try parse("redis+unix:///var/run/redis.sock")
        #expect(plain.address == .unix(path: "/var/run/redis.sock"))
        #expect(plain.database == 0)
        #expect(try parse("redis+unix:///tmp/r.sock?db=5").database == 5)
        let withPassword = try parse("redis+unix://:pw@/tmp/r%20s.sock?db=2")
        #expect(withPassword.address == .unix(path: "/tmp/r s.sock"))
        #expect(withPassword.database == 2)
        #expect(withPassword.credentials == RedisCredentials(user: nil, password: Array("pw".utf8)))
        #expect(
            try parse("redis+unix:///s", [RedisEndpoint.passwordVariable: "e"]).credentials?.password
                == Array("e".utf8))
    }

    @Test("bad input gets a typed error naming the part")
    func errors() {
        let cases: [(String, RemoteURLError)] = [
            ("localhost:6379", .missingScheme),
            ("rediss://h", .unsupportedScheme("rediss")),
            ("http://h", .unsupportedScheme("http")),
            ("pass word://h", .unsupportedScheme("?")), ("secret-ish://h", .unsupportedScheme("?")),
            ("redis://", .missingHost),
            ("redis://:6379", .missingHost),
            ("redis://h:0", .invalidPort),
            ("redis://h:65536", .invalidPort),
            ("redis://h:", .invalidPort),
            ("redis://h:12ab", .invalidPort),
            ("redis://h:+1", .invalidPort),
            ("redis://bad host", .invalidHost),
            ("redis://h\u{e9}", .invalidHost),
            ("redis://[::1", .invalidHost),
            ("redis://[::1]x", .invalidHost),
            ("redis://[]", .invalidHost),
            ("redis://[zz::1]", .invalidHost),
            ("redis://h/x", .invalidDatabase),
            ("redis://h/1/2", .invalidDatabase),
            ("redis://h/-1", .invalidDatabase),
            ("redis://h/9999999999", .invalidDatabase),
            ("redis://h?db=1", .unsupportedQuery),
            ("redis://h#f", .unsupportedFragment),
            ("redis://@h", .missingUser),
            ("redis://u:%zz@h", .invalidPercentEncoding),
            ("redis://u:%4@h", .invalidPercentEncoding),
            ("redis://%FF:p@h", .invalidPercentEncoding),
            ("redis+unix://host/tmp/s", .unixHostNotEmpty),
            ("redis+unix://", .invalidSocketPath),
            ("redis+unix:///", .invalidSocketPath),
            ("redis+unix://relative", .unixHostNotEmpty),
            ("redis+unix:///s?x=1", .unsupportedQuery),
            ("redis+unix:///s?db=x", .invalidDatabase),
            ("redis+unix:///a%00b", .invalidSocketPath),
        ]
        for (text, expected) in cases {
            #expect(failure(text) == expected, "\(text)")
        }
    }

    @Test("a list of shards: not empty, no server twice")
    func lists() throws {
        #expect(throws: RemoteURLError.noServers) { try RedisEndpoint.parseList([], environment: [:]) }
        #expect(throws: RemoteURLError.duplicateServer) {
            try RedisEndpoint.parseList(["redis://h:1/0", "redis://:pw@h:1"], environment: [:])
        }
        let two = try RedisEndpoint.parseList(["redis://h:1/0", "redis://h:1/1"], environment: [:])
        #expect(two.map(\.shardName) == ["h:1/0", "h:1/1"])
    }

    @Test("no description, mirror or error contains a password or user name")
    func redaction() throws {
        let password = "hunter2-password"
        let user = "alice-the-user"
        let endpoint = try parse("redis://\(user):\(password)@h:7000/4")
        let envEndpoint = try parse(
            "redis://h", [RedisEndpoint.passwordVariable: password, RedisEndpoint.userVariable: user])
        for value in [endpoint, envEndpoint] {
            let texts =
                textualForms(value, value.credentials!) + [value.debugDescription, value.shardName, "\(value.address)"]
            for text in texts {
                #expect(!text.contains(password) && !text.contains(user), "\(text)")
                #expect(!text.contains("hunter2"))
            }
        }
        #expect(endpoint.description == "redis://h:7000/4 (with user and password (redacted))")
        let badURLs = [
            "redis://\(user):\(password)@h:99999", "redis://\(user):\(password)@bad host",
            "redis://\(user):\(password)@h/x", "redis://\(user):%zz\(password)@h", "\(user):\(password)@h",
            "\(password)://h", "redis+unix://\(user):\(password)@h/s", "redis://\(user):\(password)@h?x",
        ]
        expectRefusedQuietly(badURLs, hiding: [password, user]) { failure($0) }
        let secret = try #require(RemoteSecret("top-secret-key"))
        for text in textualForms(secret) {
            #expect(!text.contains("top-secret"))
        }
    }
}
