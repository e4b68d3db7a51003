// HTTPHeaderValues.swift: the values of the response headers the HTTP and S3 backends read beyond framing:
// `Content-Range` (a lookup's windows) and `Retry-After` (how long a throttled server, 429 or 503, asks every
// client to stay away: the breaker's back-off, I17), and the sink of answers read for their status only, which
// tells a throttle from another refusal. Pure parsers: malformed values are nil, never a crash.

/// `Content-Range: bytes <first>-<last>/<total or *>`.
struct HTTPContentRange: Sendable, Equatable {
    /// The first byte's offset.
    let first: Int
    /// The last byte's offset.
    let last: Int
    /// The whole value's size, nil for `*`.
    let total: Int?

    /// Parses the header's value; nil when it is not a well-formed byte range.
    init?(_ text: String) {
        guard text.hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst(6).split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), first >= 0, last >= first
        else { return nil }
        if parts[1] == "*" {
            (self.first, self.last, total) = (first, last, nil)
            return
        }
        guard let total = Int(parts[1]), total > last else { return nil }
        (self.first, self.last, self.total) = (first, last, total)
    }
}

/// `Retry-After` (RFC 9110 §10.2.3): a number of seconds, or an HTTP date (IMF-fixdate,
/// `Sun, 06 Nov 1994 08:49:37 GMT`; the two obsolete date forms are not read).
enum HTTPRetryAfter: Sendable, Equatable {
    /// Wait this many seconds from the answer.
    case seconds(Int64)
    /// Wait until this time (seconds since 1970, UTC).
    case date(Int64)

    /// Parses the header's value; nil when it is neither form.
    init?(_ text: String) {
        let bytes = Array(text.utf8)
        if let seconds = HTTPResponseHead.decimal(bytes) {
            self = .seconds(seconds)
            return
        }
        guard let time = Self.fixdate(bytes) else { return nil }
        self = .date(time)
    }

    /// Nanoseconds to wait from `now` (nanoseconds since 1970): 0 for a date already passed; saturating.
    func nanoseconds(fromRealtime now: Int64) -> Int64 {
        let seconds: Int64
        switch self {
        case .seconds(let value): seconds = value
        case .date(let time): seconds = time - now / 1_000_000_000
        }
        guard seconds > 0 else { return 0 }
        return seconds >= Int64.max / 2_000_000_000 ? Int64.max / 2 : seconds * 1_000_000_000
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` as seconds since 1970; nil when malformed.
    private static func fixdate(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20,
            bytes[11] == 0x20, bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"),
            bytes[25] == 0x20, Array(bytes[26...]) == Array("GMT".utf8),
            let day = HTTPResponseHead.decimal(bytes[5..<7]), let year = HTTPResponseHead.decimal(bytes[12..<16]),
            let hour = HTTPResponseHead.decimal(bytes[17..<19]),
            let minute = HTTPResponseHead.decimal(bytes[20..<22]),
            let second = HTTPResponseHead.decimal(bytes[23..<25])
        else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(where: { Array($0.utf8) == Array(bytes[8..<11]) }),
            (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        return daysFromCivil(year: year, month: Int64(monthIndex + 1), day: day) * 86_400 + hour * 3_600 + minute
            * 60 + second
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse, exact for all years).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension RemoteError {
    /// The throttle an answer is, if it is one: 429, or 503 with `Retry-After` or S3's `SlowDown` code in the
    /// first bytes of its body; its `Retry-After` as nanoseconds from now.
    static func throttle(status: Int, retryAfter: HTTPRetryAfter?, body: [UInt8]) -> RemoteError? {
        guard status == 429 || status == 503 else { return nil }
        let slowDown = Array("<Code>SlowDown</Code>".utf8)
        let saysSlowDown =
            body.count >= slowDown.count
            && (0...(body.count - slowDown.count)).contains { body[$0..<($0 + slowDown.count)].elementsEqual(slowDown) }
        guard status == 429 || retryAfter != nil || saysSlowDown else { return nil }
        return .throttled(
            status: status, retryAfter: retryAfter?.nanoseconds(fromRealtime: Syscall.realtimeNanoseconds))
    }
}

/// The head and first body bytes of an answer read only for its status (a `PUT`'s, a `DELETE`'s, a
/// `HEAD`'s): enough to tell a throttle from another refusal. A body past `HTTPValueSink.discardLimit`
/// stops the transfer (the connection is then not kept).
final class HTTPStatusSink: HTTPResponseSink {
    private var retryAfter: HTTPRetryAfter?
    private var body: [UInt8] = []
    private var read = 0

    func begin(_ head: HTTPResponseHead) -> Bool {
        retryAfter = head.retryAfter
        return true
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if body.count < 1024 { body += bytes.prefix(1024 - body.count) }
        read += bytes.count
        return read <= HTTPValueSink.discardLimit
    }

    /// The throttle an answer of `status` is, with what was read of it, if it is one.
    func throttle(_ status: Int) -> RemoteError? {
        RemoteError.throttle(status: status, retryAfter: retryAfter, body: body)
    }
}
