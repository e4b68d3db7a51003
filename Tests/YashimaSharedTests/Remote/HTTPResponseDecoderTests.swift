// HTTPResponseDecoderTests.swift: the http:// client's response decoder over bytes split at every point:
// Content-Length, chunked (extensions, trailers), until close, no body (HEAD, 204, 304), interim 1xx answers,
// Connection: close and HTTP/1.0, two responses back to back on one connection; malformed heads and chunks
// and oversized heads are typed errors, never a crash or a loop. The libcurl loader's refusal of a missing
// library is a clear configuration error; kept connections are reused against a real nginx.

import Foundation
import Testing

@testable import YashimaShared

@Suite("HTTP response decoder and transports")
struct HTTPResponseDecoderTests {
    /// What decoding `bytes` fed in pieces of `split` bytes gave: heads, the body, ends, or the error.
    private struct Decoded: Equatable {
        var heads: [HTTPResponseHead] = []
        var body: [UInt8] = []
        var ends = 0
        var error: HTTPResponseError?
        var keepsConnection = true
    }

    private func decode(
        _ text: String, split: Int, isHead: Bool = false, closeAtEnd: Bool = false, responses: Int = 1
    ) -> Decoded {
        let bytes = Array(text.utf8)
        let decoder = HTTPResponseDecoder()
        decoder.expectResponse(toHead: isHead)
        var result = Decoded()
        var offset = 0
        while result.ends < responses && result.error == nil {
            do throws(HTTPResponseError) {
                switch try decoder.next() {
                case .head(let head)?: result.heads.append(head)
                case .body(let chunk)?: result.body += chunk
                case .end?:
                    result.ends += 1
                    decoder.expectResponse(toHead: isHead)
                case nil:
                    guard offset < bytes.count else {
                        guard closeAtEnd, !decoder.isComplete else { return result }
                        decoder.didReachEndOfStream()
                        if !decoder.readsUntilClose { return result }
                        continue
                    }
                    let space = decoder.writableSpace()
                    let count = min(split, bytes.count - offset, space.count)
                    for index in 0..<count { space[index] = bytes[offset + index] }
                    decoder.didReceive(count)
                    offset += count
                }
            } catch {
                result.error = error
            }
        }
        result.keepsConnection = decoder.keepsConnection
        return result
    }

    @Test("Content-Length, chunked with extensions and trailers, until close: the same body at every split")
    func framings() {
        let body = "hello, world: \(String(repeating: "x", count: 300))"
        let chunked =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n\(String(body.utf8.count - 5, radix: 16))\r\n\(body.dropFirst(5))\r\n"
            + "0\r\nX-Trailer: yes\r\n\r\n"
        let cases: [(String, String, Bool)] = [
            ("length", "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nETag: \"v1\"\r\n\r\n\(body)", true),
            ("chunked", chunked, true),
            ("close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n\(body)", false),
            ("1.0", "HTTP/1.0 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)", false),
        ]
        for (label, text, keeps) in cases {
            for split in [1, 2, 3, 7, 64, 100_000] {
                let decoded = decode(text, split: split, closeAtEnd: true)
                #expect(decoded.error == nil, "\(label) \(split)")
                #expect(decoded.heads.map(\.status) == [200], "\(label) \(split)")
                #expect(String(decoding: decoded.body, as: UTF8.self) == body, "\(label) \(split)")
                #expect(decoded.ends == 1 && decoded.keepsConnection == keeps, "\(label) \(split)")
            }
        }
        #expect(decode(cases[0].1, split: 5).heads.first?.entityTag == "\"v1\"")
    }

    @Test("no body for HEAD, 204 and 304; 1xx skipped; two responses back to back; ranges read")
    func headsAndInterims() {
        let head = decode("HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n", split: 3, isHead: true)
        #expect(head.heads.first?.expectedLength == 4096 && head.body.isEmpty && head.ends == 1)
        for status in [204, 304] {
            let empty = decode("HTTP/1.1 \(status) X\r\nContent-Length: 10\r\n\r\n", split: 4)
            #expect(empty.heads.map(\.status) == [status] && empty.body.isEmpty && empty.ends == 1)
        }
        let interim = decode(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Hints\r\nLink: x\r\n\r\nHTTP/1.1 404 Not Found\r\n"
                + "Content-Length: 3\r\n\r\nnot", split: 2)
        #expect(interim.heads.map(\.status) == [404] && interim.body == Array("not".utf8))
        let two = decode(
            "HTTP/1.1 206 Partial\r\nContent-Range: bytes 0-1/10\r\nContent-Length: 2\r\n\r\nabHTTP/1.1 200 OK\r\n"
                + "Content-Length: 1\r\n\r\nc", split: 5, responses: 2)
        #expect(two.heads.map(\.status) == [206, 200] && two.body == Array("abc".utf8) && two.ends == 2)
        #expect(two.heads.first?.range == HTTPContentRange("bytes 0-1/10"))
        #expect(HTTPContentRange("bytes 3-2/10") == nil && HTTPContentRange("bytes 0-9/*")?.total == nil)
    }

    @Test("malformed heads and chunks, conflicting lengths, an oversized head, an upgrade: typed errors")
    func malformed() {
        let cases: [(String, HTTPResponseError)] = [
            ("HTTP/2 200 OK\r\n\r\n", .malformedStatusLine),
            ("HTTP/1.1 20 OK\r\n\r\n", .malformedStatusLine),
            ("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\n folded: line\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", .invalidContentLength),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", .invalidContentLength),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .malformedChunk),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", .malformedChunk),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(String(repeating: "1", count: 5000))",
                .malformedChunk
            ),
            ("HTTP/1.1 101 Switching Protocols\r\n\r\n", .unexpectedUpgrade),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", .unsupportedTransferCoding),
            ("HTTP/1.1 200 OK\r\nX: \(String(repeating: "y", count: 70_000))", .headTooLarge),
        ]
        for (text, expected) in cases {
            for split in [1, 13, 100_000] {
                #expect(decode(text, split: split).error == expected, "\(text.prefix(60)) at \(split)")
            }
        }
        // Repeated equal lengths are one length.
        let repeated = decode("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok", split: 4)
        #expect(repeated.error == nil && repeated.body == Array("ok".utf8))
    }

    @Test("https:// without the system's libcurl is a configuration error naming libcurl4; with it, accepted")
    func libcurlMissing() throws {
        // Probed, not loaded: another test of this process may have loaded libcurl already.
        let failure = try #require(HTTPSecureTransport.openFailure(library: "libyashima-not-installed.so.4"))
        let message = HTTPConfigurationError.tlsUnavailable(failure).description
        #expect(message.contains("libcurl4") && message.contains("https://") && message.contains("libyashima-not"))
        // Here libcurl is installed (Debian's libcurl4): an https configuration validates.
        #expect(HTTPSecureTransport.loadFailure == nil)
        #expect(throws: Never.self) { try HTTPRemoteConfiguration(url: "https://127.0.0.1:8443/cache").validate() }
    }

    @Test("kept-alive connections: many requests to nginx over one connection", .nginxServer)
    func connectionsAreKept() async throws {
        let server = try await NginxServer.start()
        let store = try makeHTTPStore(server.url())
        let address = try HTTPEndpoint.parse(server.url()).address
        let id = entryIdentity("kept")
        #expect(await store.store(id, payload: payload(4096), createdAt: 1, expiresAt: 0) == .stored)
        let before = HTTPConnectionPool.shared(for: address).openedCount
        for _ in 0..<50 {
            #expect(await store.lookup(id) == .hit(RemoteValue(payload: payload(4096), createdAt: 1, expiresAt: 0)))
        }
        #expect(await store.exists(id) == true)
        #expect(HTTPConnectionPool.shared(for: address).openedCount - before <= 1)
        await server.stop()
    }
}
