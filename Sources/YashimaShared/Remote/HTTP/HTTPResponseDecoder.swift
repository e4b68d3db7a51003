// HTTPResponseDecoder.swift: HTTP/1.1 responses read incrementally (the http:// client's, HTTPConnection): the
// head (status, the headers the backend reads, their values in HTTPHeaderValues.swift), the body's framing
// (Content-Length, chunked, until close; none for HEAD, 1xx, 204, 304), interim 1xx answers skipped, whether
// the connection may be kept. Bounded (head, chunk lines, trailers) and pure: no I/O; bad bytes are a typed
// error, never a crash or a loop.

/// What a response head says that the backend uses.
struct HTTPResponseHead: Sendable, Equatable {
    /// The status.
    let status: Int
    /// `Content-Length`, when given.
    let expectedLength: Int64?
    /// `Content-Range: bytes <first>-<last>/<total>` of a 206, when given and well formed (`total` nil
    /// for `*`).
    let range: HTTPContentRange?
    /// A strong `ETag` (for `If-Range`), when given.
    let entityTag: String?
    /// `Retry-After` (seconds, or a date), when given and well formed: how long a throttled client waits.
    var retryAfter: HTTPRetryAfter? = nil
    /// The body is chunked (`Transfer-Encoding` ending in `chunked`).
    let isChunked: Bool
    /// `Transfer-Encoding` is given (then `Content-Length` is ignored, RFC 9112 §6.3).
    let hasTransferEncoding: Bool
    /// The server keeps the connection (HTTP/1.1 without `Connection: close`).
    let keepsConnection: Bool

    /// The most bytes a head may have (status line, headers, the empty line).
    static let maximumBytes = 64 << 10

    /// Parses a head: the status line and header lines, each ending in CRLF (or LF), up to and without
    /// the empty line.
    ///
    /// - Throws: ``HTTPResponseError`` for a malformed status line or header, or conflicting lengths.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTPResponseError) -> HTTPResponseHead {
        var lines = HTTPLines(bytes)
        guard let statusLine = lines.next() else { throw .malformedStatusLine }
        // HTTP/1.x SP 3DIGIT [SP reason]
        guard statusLine.count >= 12, Array(statusLine[0..<7]) == Array("HTTP/1.".utf8),
            statusLine[7] == UInt8(ascii: "0") || statusLine[7] == UInt8(ascii: "1"), statusLine[8] == 0x20,
            statusLine.count == 12 || statusLine[12] == 0x20,
            let code = decimal(statusLine[9..<12]), code >= 100
        else { throw .malformedStatusLine }
        let status = Int(code)
        var keeps = statusLine[7] == UInt8(ascii: "1")
        var length: Int64?
        var transferEncoding: [UInt8]?
        var range: HTTPContentRange?
        var entityTag: String?
        var retryAfter: HTTPRetryAfter?
        while let line = lines.next() {
            // No obsolete line folding; a name is a token, then a colon.
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
                line.prefix(upTo: colon).allSatisfy(isTokenByte)
            else { throw .malformedHeader }
            let value = trimmed(line[(colon + 1)...])
            switch lowercased(line.prefix(upTo: colon)) {
            case "content-length":
                // Repeated (or a list of) equal values are one length; different ones are an attack or a bug.
                for item in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                    guard let parsed = decimal(trimmed(item)), length == nil || length == parsed else {
                        throw .invalidContentLength
                    }
                    length = parsed
                }
            case "transfer-encoding":
                transferEncoding = (transferEncoding.map { $0 + [UInt8(ascii: ",")] } ?? []) + value
            case "connection":
                for token in value.split(separator: UInt8(ascii: ",")) {
                    switch lowercased(trimmed(token)) {
                    case "close": keeps = false
                    case "keep-alive": break
                    default: break
                    }
                }
            case "content-range":
                range = HTTPContentRange(String(decoding: value, as: UTF8.self))
            case "etag":
                entityTag = value.first == UInt8(ascii: "\"") ? String(decoding: value, as: UTF8.self) : nil
            case "retry-after":
                retryAfter = HTTPRetryAfter(String(decoding: value, as: UTF8.self))
            default:
                break
            }
        }
        // Nothing asked for a transfer coding but chunked (no `TE`): another one could not be decoded.
        let codings = (transferEncoding ?? []).split(separator: UInt8(ascii: ",")).map { lowercased(trimmed($0)) }
        guard codings.allSatisfy({ $0 == "chunked" }) else { throw .unsupportedTransferCoding }
        let chunked = !codings.isEmpty
        return HTTPResponseHead(
            status: status, expectedLength: length, range: range, entityTag: entityTag, retryAfter: retryAfter,
            isChunked: chunked,
            hasTransferEncoding: transferEncoding != nil, keepsConnection: keeps)
    }

    /// RFC 9110 tchar.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static func trimmed<C: BidirectionalCollection<UInt8>>(_ bytes: C) -> C.SubSequence {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }) else { return bytes[bytes.endIndex...] }
        let last = bytes.lastIndex(where: { !isSpace($0) })!
        return bytes[first...last]
    }

    private static func lowercased<C: Collection<UInt8>>(_ bytes: C) -> String {
        String(decoding: bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Decimal digits only (no sign, no spaces), at most 18 of them.
    static func decimal<C: Collection<UInt8>>(_ digits: C) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard (0x30...0x39).contains(digit) else { return nil }
            value = value * 10 + Int64(digit - 0x30)
        }
        return value
    }
}

/// The lines of a head (CRLF or LF endings), without their endings.
private struct HTTPLines: IteratorProtocol {
    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func next() -> ArraySlice<UInt8>? {
        guard position < bytes.count else { return nil }
        let rest = bytes[position...]
        let end = rest.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
        var line = Array(bytes[position..<end])[...]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        position = end + 1
        return line
    }
}

/// Why a response could not be read. Names the part, never the bytes.
enum HTTPResponseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The status line is not `HTTP/1.x NNN ...`.
    case malformedStatusLine
    /// A header line is not `name: value`.
    case malformedHeader
    /// The head is longer than ``HTTPResponseHead/maximumBytes``.
    case headTooLarge
    /// `Content-Length` is not a number, or given twice with different values.
    case invalidContentLength
    /// A chunk's size line or its ending is malformed, or the trailers are too long.
    case malformedChunk
    /// A `101 Switching Protocols` (never asked for).
    case unexpectedUpgrade
    /// A transfer coding other than `chunked` (never asked for: it could not be decoded).
    case unsupportedTransferCoding
    /// The connection ended before the response did.
    case truncated

    var description: String {
        switch self {
        case .malformedStatusLine: return "malformed status line"
        case .malformedHeader: return "malformed header line"
        case .headTooLarge: return "response head too large"
        case .invalidContentLength: return "invalid Content-Length"
        case .malformedChunk: return "malformed chunked body"
        case .unexpectedUpgrade: return "unexpected 101 Switching Protocols"
        case .unsupportedTransferCoding: return "unsupported transfer coding"
        case .truncated: return "response ended early"
        }
    }
}

/// Reads one response at a time from bytes received into its buffer (``writableSpace()``,
/// ``didReceive(_:)``). Not thread-safe: its connection's owner uses it.
final class HTTPResponseDecoder {
    /// What ``next()`` found.
    enum Event {
        /// The head (interim 1xx answers are skipped).
        case head(HTTPResponseHead)
        /// Body bytes (decoded from chunks), valid until the next call.
        case body(UnsafeRawBufferPointer)
        /// The response is complete.
        case end
    }

    private enum State: Equatable {
        case head(scanned: Int)
        case fixed(remaining: Int64)
        case chunkSize
        case chunkData(remaining: Int64)
        case chunkEnd
        case trailers(consumed: Int)
        case untilClose
        case done
    }

    private let storage: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0
    private var state = State.head(scanned: 0)
    private var noBody = false
    private var endOfStream = false
    /// False once a response says the connection ends with it (or its body runs until close).
    private(set) var keepsConnection = true

    /// The longest chunk size line (with extensions) accepted.
    static let maximumChunkLine = 4096

    /// A decoder with a buffer of `capacity` bytes (at least a head's maximum).
    init(capacity: Int = HTTPResponseHead.maximumBytes) {
        storage = .allocate(byteCount: max(capacity, HTTPResponseHead.maximumBytes), alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Prepares for the response to the next request (`isHead`: a `HEAD` request's, which has no body).
    /// Bytes already buffered (none on a healthy connection) stay.
    func expectResponse(toHead isHead: Bool) {
        state = .head(scanned: 0)
        noBody = isHead
    }

    /// Bytes received and not consumed yet.
    var bufferedByteCount: Int { end - start }

    /// True once the response in progress is complete.
    var isComplete: Bool { state == .done }

    /// True while the body runs until the connection closes (the end of stream ends it).
    var readsUntilClose: Bool { state == .untilClose }

    /// Free space to receive into (never empty: a full buffer holding an incomplete head is an error
    /// ``next()`` reports first).
    func writableSpace() -> UnsafeMutableRawBufferPointer {
        if start == end {
            start = 0
            end = 0
        } else if end == storage.count || start >= storage.count / 2 {
            let count = end - start
            storage.baseAddress!.copyMemory(from: storage.baseAddress! + start, byteCount: count)
            start = 0
            end = count
        }
        return UnsafeMutableRawBufferPointer(rebasing: storage[end...])
    }

    /// `count` bytes were written at the start of the last ``writableSpace()``.
    func didReceive(_ count: Int) { end += count }

    /// The server closed its end: a body read until close is complete.
    func didReachEndOfStream() { endOfStream = true }

    /// The next event, or nil when more bytes are needed.
    ///
    /// - Throws: ``HTTPResponseError`` (the connection must then be dropped).
    func next() throws(HTTPResponseError) -> Event? {
        while true {
            switch state {
            case .head(let scanned):
                guard let head = try readHead(scanned: scanned) else { return nil }
                if head.status == 101 { throw .unexpectedUpgrade }
                if head.status < 200 { continue }  // 100 Continue, 103 Early Hints: the answer follows
                keepsConnection = keepsConnection && head.keepsConnection
                if noBody || head.status == 204 || head.status == 304 {
                    state = .done
                } else if head.hasTransferEncoding {
                    // Content-Length is ignored; a server mixing both is not reused.
                    if head.expectedLength != nil { keepsConnection = false }
                    state = head.isChunked ? .chunkSize : .untilClose
                } else if let length = head.expectedLength {
                    state = .fixed(remaining: length)
                } else {
                    state = .untilClose
                }
                if state == .untilClose { keepsConnection = false }
                return .head(head)
            case .fixed(let remaining):
                guard remaining > 0 else {
                    state = .done
                    continue
                }
                guard let bytes = take(upTo: remaining) else { return nil }
                state = .fixed(remaining: remaining - Int64(bytes.count))
                return .body(bytes)
            case .chunkSize:
                guard let line = try readLine(limit: Self.maximumChunkLine) else { return nil }
                let digits = line.prefix { $0 != UInt8(ascii: ";") && $0 != 0x20 && $0 != 0x09 }
                guard let size = Self.hexadecimal(digits) else { throw .malformedChunk }
                state = size == 0 ? .trailers(consumed: 0) : .chunkData(remaining: size)
            case .chunkData(let remaining):
                guard let bytes = take(upTo: remaining) else { return nil }
                let left = remaining - Int64(bytes.count)
                state = left == 0 ? .chunkEnd : .chunkData(remaining: left)
                return .body(bytes)
            case .chunkEnd:
                guard let line = try readLine(limit: 2) else { return nil }
                guard line.count == 0 else { throw .malformedChunk }
                state = .chunkSize
            case .trailers(let consumed):
                guard let line = try readLine(limit: HTTPResponseHead.maximumBytes) else { return nil }
                let total = consumed + line.count + 2
                guard total <= HTTPResponseHead.maximumBytes else { throw .malformedChunk }
                state = line.count == 0 ? .done : .trailers(consumed: total)
            case .untilClose:
                if start < end { return .body(take(upTo: Int64.max)!) }
                guard endOfStream else { return nil }
                state = .done
            case .done:
                return .end
            }
        }
    }

    /// The head once its empty line is in (searching only bytes not searched before).
    private func readHead(scanned: Int) throws(HTTPResponseError) -> HTTPResponseHead? {
        let available = UnsafeRawBufferPointer(rebasing: storage[start..<end])
        var index = max(0, scanned - 3)
        while index < available.count {
            guard let newline = available[index...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            // The head ends at an empty line: "\n\n" or "\n\r\n".
            let next = newline + 1
            let headEnd: Int? =
                next < available.count && available[next] == UInt8(ascii: "\n")
                ? next + 1
                : (next + 1 < available.count && available[next] == UInt8(ascii: "\r")
                    && available[next + 1] == UInt8(ascii: "\n") ? next + 2 : nil)
            if let headEnd {
                let head = try HTTPResponseHead.parse(UnsafeRawBufferPointer(rebasing: available[0..<(newline + 1)]))
                start += headEnd
                return head
            }
            index = next
        }
        guard available.count < HTTPResponseHead.maximumBytes else { throw .headTooLarge }
        state = .head(scanned: available.count)
        return nil
    }

    /// The next line without its CRLF (or LF), once complete; longer than `limit`: an error.
    private func readLine(limit: Int) throws(HTTPResponseError) -> ArraySlice<UInt8>? {
        let available = UnsafeRawBufferPointer(rebasing: storage[start..<end])
        guard let newline = available.firstIndex(of: UInt8(ascii: "\n")) else {
            guard available.count <= limit else { throw .malformedChunk }
            return nil
        }
        guard newline <= limit else { throw .malformedChunk }
        var line = Array(available[0..<newline])[...]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        start += newline + 1
        return line
    }

    /// Up to `limit` buffered bytes, consumed; nil when none are buffered.
    private func take(upTo limit: Int64) -> UnsafeRawBufferPointer? {
        guard start < end else { return nil }
        let count = Int(min(Int64(end - start), limit))
        defer { start += count }
        return UnsafeRawBufferPointer(rebasing: storage[start..<(start + count)])
    }

    /// Hexadecimal digits only, at most 15 of them (sizes below 2^60).
    private static func hexadecimal<C: Collection<UInt8>>(_ digits: C) -> Int64? {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var value: Int64 = 0
        for digit in digits {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = digit - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | Int64(nibble)
        }
        return value
    }
}
