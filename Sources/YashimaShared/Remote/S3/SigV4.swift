// SigV4.swift: AWS Signature Version 4 for the S3 backend, written here from the published algorithm: the
// canonical request (URI-encoded path, sorted query, trimmed lowercase headers, the payload's hash), the
// string to sign, the day's signing key (cached) and the `Authorization` header. Pure: no I/O, no clock
// (the caller gives the time). Checked against AWS's signature test-suite vectors (SigV4Tests).

import Glibc

/// An `x-amz-date` time: `yyyyMMdd'T'HHmmss'Z'` and its day.
struct SigV4Time: Equatable, Sendable {
    /// `20150830T123600Z`.
    let stamp: String

    /// The day, `20150830`.
    var day: Substring { stamp.prefix(8) }

    /// From a stamp as the test vectors give it.
    init(stamp: String) { self.stamp = stamp }

    /// The UTC time `realtimeNanoseconds` since the epoch.
    init(realtimeNanoseconds: Int64) {
        var seconds = time_t(realtimeNanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        stamp =
            "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }
}

/// Credentials that sign requests. Never printed: every textual form shows the access key id only.
struct SigV4Credentials: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The access key id (`AKIA…`), sent in every `Authorization` header (not a secret).
    let accessKeyID: String
    /// The secret access key.
    let secretAccessKey: [UInt8]
    /// A temporary credential's session token (`x-amz-security-token`), if any.
    let sessionToken: String?

    var description: String { "access key \(accessKeyID) (secret redacted)" }
    var debugDescription: String { "SigV4Credentials(\(description))" }
    var customMirror: Mirror { Mirror(self, children: ["credentials": description]) }
}

/// Signs requests for one region and service.
struct SigV4Signer: Sendable {
    /// The credentials.
    let credentials: SigV4Credentials
    /// `us-east-1`.
    let region: String
    /// `s3` (`service` in the test suite).
    let service: String

    /// The hash the payload is signed as when its bytes are not hashed (a streamed body).
    static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// The SHA-256 of no bytes, hex.
    static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The parts of one signature, for tests and for the request.
    struct Signature: Equatable, Sendable {
        let canonicalRequest: String
        let stringToSign: String
        /// The `Authorization` header's value.
        let authorization: String
    }

    /// Signs a request.
    ///
    /// - Parameters:
    ///   - path: The path as sent, before encoding (each byte but unreserved ones and `/` is encoded for the
    ///     canonical form, once, as S3 wants).
    ///   - query: The query's name and value pairs, not encoded.
    ///   - headers: Every header to sign (`Host` and `x-amz-date` among them; `x-amz-content-sha256` and
    ///     `x-amz-security-token` too for S3).
    ///   - payloadHash: The body's SHA-256 in hex, or ``unsignedPayload``.
    func sign(
        method: String, path: String, query: [(name: String, value: String)],
        headers: [(name: String, value: String)], payloadHash: String, time: SigV4Time
    ) -> Signature {
        var grouped: [String: [String]] = [:]
        for (name, value) in headers { grouped[name.lowercased(), default: []].append(Self.trimmed(value)) }
        let names = grouped.keys.sorted()
        let signedHeaders = names.joined(separator: ";")
        let canonicalHeaders = names.map { "\($0):\(grouped[$0]!.joined(separator: ","))\n" }.joined()
        let canonicalQuery = query.map {
            (Self.encode($0.name, keepingSlash: false), Self.encode($0.value, keepingSlash: false))
        }
        .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
        .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        let canonicalPath = path.isEmpty ? "/" : Self.encode(path, keepingSlash: true)
        let canonicalRequest = [
            method, canonicalPath, canonicalQuery, canonicalHeaders, signedHeaders, payloadHash,
        ].joined(separator: "\n")
        let scope = "\(time.day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", time.stamp, scope, SHA256.hash(Array(canonicalRequest.utf8)).hex,
        ].joined(separator: "\n")
        let signature = Self.hex(
            HMACSHA256.authenticationCode(for: Array(stringToSign.utf8), key: signingKey(day: time.day)))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), "
            + "Signature=\(signature)"
        return Signature(canonicalRequest: canonicalRequest, stringToSign: stringToSign, authorization: authorization)
    }

    /// The signing key of `day`: HMACs of the day, region, service and `aws4_request`.
    func signingKey(day: Substring) -> [UInt8] {
        var key = HMACSHA256.authenticationCode(
            for: Array(day.utf8), key: Array("AWS4".utf8) + credentials.secretAccessKey)
        for part in [region, service, "aws4_request"] {
            key = HMACSHA256.authenticationCode(for: Array(part.utf8), key: key)
        }
        return key
    }

    /// A header value as signed: outer spaces trimmed, inner runs of spaces made one.
    static func trimmed(_ value: String) -> String {
        var result = ""
        var lastWasSpace = false
        for character in value.trimmingSpaces() {
            let isSpace = character == " " || character == "\t"
            if isSpace && lastWasSpace { continue }
            result.append(isSpace ? " " : character)
            lastWasSpace = isSpace
        }
        return result
    }

    /// RFC 3986 encoding as SigV4 wants it: every byte but `A-Z a-z 0-9 - . _ ~` (and `/` when kept) as `%XX`.
    static func encode(_ text: String, keepingSlash: Bool) -> String {
        var result = ""
        let digits = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepingSlash:
                result.append("/")
            default:
                result += "%"
                result.unicodeScalars.append(Unicode.Scalar(digits[Int(byte >> 4)]))
                result.unicodeScalars.append(Unicode.Scalar(digits[Int(byte & 15)]))
            }
        }
        return result
    }

    /// Lowercase hex of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var result = ""
        result.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            result.unicodeScalars.append(Unicode.Scalar(digits[Int(byte >> 4)]))
            result.unicodeScalars.append(Unicode.Scalar(digits[Int(byte & 15)]))
        }
        return result
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmingSpaces() -> Substring {
        var view = self[...]
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return view
    }
}
