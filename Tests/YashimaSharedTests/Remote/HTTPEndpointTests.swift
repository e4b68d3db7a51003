// HTTPEndpointTests.swift: HTTP remote URLs (schemes, hosts, ports, path prefixes, every malformed
// part), the value URLs (`<prefix>/<xx>/<identity hex>`), credentials from the URL (percent-decoded) or
// the environment (basic, bearer, the ambiguous and incomplete cases), the configuration's validation
// (custom headers, reserved names, windows), and redaction: no description, mirror, dump or error ever
// contains a password, a token, a user name or a custom header's value.

import Foundation
import Testing

@testable import YashimaShared

@Suite("HTTP endpoint and configuration")
struct HTTPEndpointTests {
    private func parse(_ text: String, _ environment: [String: String] = [:]) throws -> HTTPEndpoint {
        try HTTPEndpoint.parse(text, environment: environment)
    }

    private func failure(_ text: String, _ environment: [String: String] = [:]) -> HTTPURLError? {
        thrownError { () throws(HTTPURLError) in _ = try HTTPEndpoint.parse(text, environment: environment) }
    }

    @Test("schemes, hosts, ports and path prefixes; the value URLs")
    func forms() throws {
        let plain = try parse("http://cache.example:8080/builds/yashima/")
        #expect(!plain.isSecure && plain.address == .tcp(host: "cache.example", port: 8080))
        #expect(plain.pathPrefix == "/builds/yashima" && plain.credentials == nil)
        #expect(plain.baseURL == "http://cache.example:8080/builds/yashima")
        let identity = entryIdentity("url").digest
        let hex = identity.hex
        #expect(
            plain.url(for: identity).absoluteString
                == "http://cache.example:8080/builds/yashima/\(hex.prefix(2))/\(hex)")
        let secure = try parse("HTTPS://[::1]")
        #expect(secure.isSecure && secure.address == .tcp(host: "::1", port: 443) && secure.pathPrefix == "")
        #expect(secure.url(for: identity).absoluteString == "https://[::1]:443/\(hex.prefix(2))/\(hex)")
        #expect(try parse("http://10.0.0.7").address == .tcp(host: "10.0.0.7", port: 80))
        let cases: [(String, HTTPURLError)] = [
            ("cache.example", .missingScheme), ("ftp://h", .unsupportedScheme("ftp")),
            ("hunter2://h", .unsupportedScheme("?")),
            ("http://h/p?x=1", .unsupportedQuery), ("http://h/p#f", .unsupportedFragment), ("http:///p", .missingHost),
            ("http://bad host", .invalidHost), ("http://h:0", .invalidPort), ("http://h:65536", .invalidPort),
            ("http://h/a//b", .invalidPath), ("http://h/a/../b", .invalidPath), ("http://h/a%20b", .invalidPath),
            ("http://h/a b", .invalidPath), ("http://@h", .missingUser), ("http://u:%zz@h", .invalidPercentEncoding),
        ]
        for (text, expected) in cases { #expect(failure(text) == expected, "\(text)") }
    }

    @Test("credentials: URL first (percent-decoded), else a bearer token or a basic user and password")
    func credentials() throws {
        #expect(
            try parse("http://alice:p%40ss%3Aw@h").credentials == .basic(user: "alice", password: Array("p@ss:w".utf8)))
        #expect(try parse("http://:pw@h").credentials == .basic(user: "", password: Array("pw".utf8)))
        let environment = [HTTPEndpoint.tokenVariable: "abc.DEF-123_~+/=", HTTPEndpoint.passwordVariable: "x"]
        #expect(try parse("http://u:pw@h", environment).credentials == .basic(user: "u", password: Array("pw".utf8)))
        #expect(
            try parse("http://u@h", [HTTPEndpoint.passwordVariable: "env"]).credentials
                == .basic(user: "u", password: Array("env".utf8)))
        #expect(try parse("http://h", [HTTPEndpoint.tokenVariable: "t0k"]).credentials == .bearer(token: "t0k"))
        #expect(
            try parse("http://h", [HTTPEndpoint.userVariable: "bob", HTTPEndpoint.passwordVariable: "pw"]).credentials
                == .basic(user: "bob", password: Array("pw".utf8)))
        #expect(try parse("http://h", [HTTPEndpoint.tokenVariable: ""]).credentials == nil)
        #expect(failure("http://h", environment) == .ambiguousCredentials)
        #expect(failure("http://h", [HTTPEndpoint.passwordVariable: "pw"]) == .missingUser)
        #expect(failure("http://h", [HTTPEndpoint.userVariable: "bob"]) == .missingPassword)
        #expect(failure("http://u@h") == .missingPassword)
        #expect(failure("http://a%3Ab:pw@h") == .invalidUser)
        #expect(failure("http://h", [HTTPEndpoint.tokenVariable: "two words"]) == .invalidToken)
        #expect(
            HTTPCredentials.basic(user: "Aladdin", password: Array("open sesame".utf8)).authorization
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(HTTPCredentials.bearer(token: "t").authorization == "Bearer t")
    }

    @Test("configuration: custom headers are tokens with visible values; reserved names and bad settings refused")
    func configuration() throws {
        var configuration = try HTTPRemoteConfiguration(url: "http://h/c", environment: [:])
        configuration.headers = ["X-Api-Key": "k 1\tv", "X-Team": "builds"]
        try configuration.validate()
        let refusals: [(inout HTTPRemoteConfiguration) -> Void] = [
            { $0.headers = ["Bad Name": "v"] }, { $0.headers = ["X-A": "line\r\nInjected: 1"] },
            { $0.headers = ["": "v"] },
        ]
        for change in refusals {
            var changed = configuration
            change(&changed)
            #expect(throws: HTTPConfigurationError.invalidHeader) { try changed.validate() }
        }
        for name in ["Authorization", "content-length", "Host", "Range", "Transfer-Encoding"] {
            var changed = configuration
            changed.headers = [name: "v"]
            #expect(throws: HTTPConfigurationError.reservedHeader) { try changed.validate() }
        }
        var window = configuration
        window.downloadWindow = 1000
        #expect(throws: HTTPConfigurationError.invalidDownloadWindow) { try window.validate() }
        var timeout = configuration
        timeout.transferTimeout = .zero
        #expect(throws: HTTPConfigurationError.invalidTimeout) { try timeout.validate() }
        var cap = configuration
        cap.policy.maximumValueBytes = -1
        #expect(throws: HTTPConfigurationError.invalidValueCap) { try cap.validate() }
        #expect(throws: HTTPConfigurationError.invalidURL(.missingScheme)) {
            try HTTPRemoteConfiguration(url: "h", environment: [:])
        }
        #expect(
            try HTTPRemoteConfiguration(url: "http://h", environment: [RemoteSecret.environmentVariable: "s"]).secret
                == RemoteSecret("s"))
    }

    @Test("no description, mirror, dump or error contains a password, token, user or header value")
    func redaction() throws {
        let password = "hunter2-password"
        let user = "alice-the-user"
        let token = "tok-sekrit-123"
        var configurations = [
            try HTTPRemoteConfiguration(url: "http://\(user):\(password)@h:81/c", environment: [:]),
            try HTTPRemoteConfiguration(url: "https://h/c", environment: [HTTPEndpoint.tokenVariable: token]),
            try HTTPRemoteConfiguration(
                url: "http://h",
                environment: [HTTPEndpoint.userVariable: user, HTTPEndpoint.passwordVariable: password]),
        ]
        configurations[0].headers = ["X-Api-Key": "header-sekrit"]
        for configuration in configurations {
            let endpoint = configuration.endpoint
            let store = try HTTPRemoteStore(configuration: configuration)
            var texts = textualForms(configuration, endpoint, store) + [endpoint.debugDescription, endpoint.baseURL]
            if let credentials = endpoint.credentials { texts += textualForms(credentials) }
            for text in texts {
                let encoded = Data("\(user):\(password)".utf8).base64EncodedString()
                for secret in [password, user, token, "header-sekrit", "hunter2", "sekrit", encoded] {
                    #expect(!text.contains(secret), "\(text)")
                }
            }
        }
        #expect(
            configurations[0].description == "http://h:81/c (with basic credentials (redacted)) (headers: X-Api-Key)")
        #expect(configurations[1].endpoint.description == "https://h:443/c (with bearer token (redacted))")
        let badURLs = [
            "http://\(user):\(password)@h:99999", "http://\(user):\(password)@bad host",
            "http://\(user):%zz\(password)@h",
            "\(user):\(password)@h", "\(password)://h", "http://\(user):\(password)@h/x?y",
            "http://\(user):\(password)@h/a b",
        ]
        expectRefusedQuietly(badURLs, hiding: [password, user]) { failure($0) }
        #expect(
            failure("http://h", [HTTPEndpoint.tokenVariable: "bad \(token)"]).map { "\($0)" }?.contains(token) == false)
    }
}
