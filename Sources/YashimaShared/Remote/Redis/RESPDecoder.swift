// RESPDecoder.swift: the incremental RESP2 reply decoder: a complete reply or "need more", never a partial
// one, and a typed error for bytes that are not RESP2 or exceed the limits, so nothing a server sends makes
// it crash, loop or grow without bound. No I/O.

/// Bounds on what a reply may be. A reply beyond them is a protocol error and drops the connection.
struct RESPLimits: Hashable, Sendable {
    /// The longest bulk string accepted: the value cap plus the envelope and some slack.
    var maximumBulkLength: Int
    /// The most elements of one array.
    var maximumArrayLength: Int
    /// The deepest nesting of arrays (`CLUSTER SLOTS` needs 3).
    var maximumDepth: Int
    /// The longest simple string, error or integer line.
    var maximumLineLength: Int

    /// Limits for a client whose values are at most `valueCap` bytes.
    static func forValues(upTo valueCap: Int) -> RESPLimits {
        RESPLimits(
            maximumBulkLength: valueCap + RemoteEnvelope.maximumOverhead, maximumArrayLength: 1 << 20,
            maximumDepth: 8, maximumLineLength: 64 * 1024)
    }
}

/// Why bytes from the server are not a valid reply.
enum RESPProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A type byte other than `+ - : $ *` (RESP3 types included: the client never asks for RESP3).
    case unknownType(UInt8)
    /// A length or integer that is not a decimal number in range.
    case invalidNumber
    /// A line without CRLF within the line limit.
    case lineTooLong
    /// A bulk string longer than the limit (its announced length).
    case bulkTooLong(Int)
    /// An array longer than the limit.
    case arrayTooLong(Int)
    /// Arrays nested deeper than the limit.
    case tooDeep
    /// A bulk string not followed by CRLF, or a line ended by a bare LF.
    case missingTerminator

    var description: String {
        switch self {
        case .unknownType(let byte): return "unknown reply type byte 0x\(String(byte, radix: 16))"
        case .invalidNumber: return "invalid length or integer"
        case .lineTooLong: return "reply line too long"
        case .bulkTooLong(let length): return "bulk reply of \(length) bytes exceeds the limit"
        case .arrayTooLong(let length): return "array reply of \(length) elements exceeds the limit"
        case .tooDeep: return "reply nested too deeply"
        case .missingTerminator: return "missing CRLF terminator"
        }
    }
}

/// An incremental RESP2 decoder over a growable buffer. Owned by one connection (one thread at a time).
final class RESPDecoder {
    /// The limits replies are checked against.
    let limits: RESPLimits
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    private var start = 0
    private var end = 0
    /// Buffered bytes the next reply needs at least (from the last incomplete parse): `next()` does not
    /// re-parse before that many are buffered, so a large bulk string is parsed once, not per read.
    private var needed = 0

    private static let initialCapacity = 16 * 1024
    private static let retainedCapacity = 1 << 20

    /// Creates an empty decoder.
    init(limits: RESPLimits) {
        self.limits = limits
        capacity = Self.initialCapacity
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Bytes received but not yet returned as part of a reply. Nonzero between replies means a partial
    /// reply: the connection must not be reused.
    var bufferedByteCount: Int { end - start }

    /// Lets `body` write received bytes straight into the buffer (at least `minimum` bytes of room, more
    /// when the reply being read is known to need more); `body` returns how many it wrote.
    func withWritableSpace<E: Error>(
        minimum: Int = 16 * 1024, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> Int
    ) throws(E) -> Int {
        reserve(max(minimum, needed - bufferedByteCount))
        let written = try body(UnsafeMutableRawBufferPointer(start: storage + end, count: capacity - end))
        precondition(written >= 0 && written <= capacity - end)
        end += written
        return written
    }

    /// Appends bytes (tests and fixtures; connections use `withWritableSpace`).
    func append(_ bytes: some Collection<UInt8>) {
        reserve(bytes.count)
        let buffer = UnsafeMutableRawBufferPointer(start: storage + end, count: bytes.count)
        _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        end += bytes.count
    }

    /// The next complete reply, or nil when more bytes are needed.
    ///
    /// - Throws: ``RESPProtocolError`` when the buffered bytes cannot begin a valid reply within the
    ///   limits. The decoder is then unusable (its connection is dropped).
    func next() throws(RESPProtocolError) -> RESPValue? {
        guard bufferedByteCount > 0, bufferedByteCount >= needed else { return nil }
        let bytes = UnsafeRawBufferPointer(start: storage + start, count: bufferedByteCount)
        var cursor = 0
        var required = 0
        guard let value = try parse(bytes, at: &cursor, depth: 0, required: &required) else {
            needed = required
            return nil
        }
        start += cursor
        needed = 0
        if start == end {
            start = 0
            end = 0
            if capacity > Self.retainedCapacity { shrink() }
        }
        return value
    }

    private func reserve(_ count: Int) {
        if capacity - end >= count { return }
        if start > 0 {
            (storage).copyMemory(from: storage + start, byteCount: end - start)
            end -= start
            start = 0
            if capacity - end >= count { return }
        }
        var newCapacity = capacity
        while newCapacity - end < count { newCapacity *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage, byteCount: end)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    private func shrink() {
        storage.deallocate()
        capacity = Self.initialCapacity
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    /// Parses one reply at `cursor`; nil when incomplete, with `required` set to a lower bound of the
    /// bytes needed from the start of the buffer.
    private func parse(
        _ bytes: UnsafeRawBufferPointer, at cursor: inout Int, depth: Int, required: inout Int
    ) throws(RESPProtocolError) -> RESPValue? {
        guard cursor < bytes.count else {
            required = cursor + 1
            return nil
        }
        let type = bytes[cursor]
        switch type {
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "$"), UInt8(ascii: "*"): break
        default: throw .unknownType(type)
        }
        guard let line = try line(bytes, from: cursor + 1, required: &required) else { return nil }
        let lineBytes = UnsafeRawBufferPointer(rebasing: bytes[(cursor + 1)..<line])
        let afterLine = line + 2
        switch type {
        case UInt8(ascii: "+"):
            cursor = afterLine
            return .simpleString(String(decoding: lineBytes, as: UTF8.self))
        case UInt8(ascii: "-"):
            cursor = afterLine
            return .error(RedisErrorReply(line: String(decoding: lineBytes, as: UTF8.self)))
        case UInt8(ascii: ":"):
            cursor = afterLine
            return .integer(try Self.integer(lineBytes))
        case UInt8(ascii: "$"):
            let length = try Self.integer(lineBytes)
            if length == -1 {
                cursor = afterLine
                return .null
            }
            guard length >= 0 else { throw .invalidNumber }
            guard length <= limits.maximumBulkLength else { throw .bulkTooLong(Int(clamping: length)) }
            let count = Int(length)
            let total = afterLine + count + 2
            guard total <= bytes.count else {
                required = total
                return nil
            }
            guard bytes[afterLine + count] == 13, bytes[afterLine + count + 1] == 10 else { throw .missingTerminator }
            cursor = total
            return .bulkString(Array(UnsafeRawBufferPointer(rebasing: bytes[afterLine..<(afterLine + count)])))
        default:
            let length = try Self.integer(lineBytes)
            if length == -1 {
                cursor = afterLine
                return .null
            }
            guard length >= 0 else { throw .invalidNumber }
            guard length <= limits.maximumArrayLength else { throw .arrayTooLong(Int(clamping: length)) }
            guard depth < limits.maximumDepth else { throw .tooDeep }
            var position = afterLine
            var items: [RESPValue] = []
            items.reserveCapacity(min(Int(length), 1024))
            for _ in 0..<Int(length) {
                guard let item = try parse(bytes, at: &position, depth: depth + 1, required: &required) else {
                    return nil
                }
                items.append(item)
            }
            cursor = position
            return .array(items)
        }
    }

    /// The index of the CR ending the line that starts at `from`; nil when incomplete.
    private func line(
        _ bytes: UnsafeRawBufferPointer, from: Int, required: inout Int
    ) throws(RESPProtocolError) -> Int? {
        let limit = min(bytes.count, from + limits.maximumLineLength + 2)
        var index = from
        while index < limit {
            if bytes[index] == 10 {
                guard index > from, bytes[index - 1] == 13 else { throw .missingTerminator }
                return index - 1
            }
            index += 1
        }
        if bytes.count >= from + limits.maximumLineLength + 2 { throw .lineTooLong }
        required = bytes.count + 1
        return nil
    }

    /// A decimal integer: an optional `-` and 1 to 19 digits, nothing else.
    private static func integer(_ bytes: UnsafeRawBufferPointer) throws(RESPProtocolError) -> Int64 {
        var index = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { index = 1 }
        let digits = bytes.count - index
        guard digits >= 1, digits <= 19 else { throw .invalidNumber }
        var value: Int64 = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte >= 48, byte <= 57 else { throw .invalidNumber }
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = shifted.addingReportingOverflow(Int64(byte - 48))
            guard !overflowA, !overflowB else { throw .invalidNumber }
            value = sum
            index += 1
        }
        return negative ? -value : value
    }
}
