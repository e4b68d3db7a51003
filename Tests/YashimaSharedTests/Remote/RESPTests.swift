// RESPTests.swift: the RESP2 encoder (exact bytes, binary-safe, large arguments not copied) and the
// incremental decoder: every reply type, error codes parsed into cases, valid streams cut at random
// points, every truncation, random garbage (never a crash, a hang or a wrong reply), and the limits.

import Testing

@testable import YashimaShared

@Suite("RESP2")
struct RESPTests {
    /// A reference encoder for replies, written independently of the decoder.
    static func wire(_ value: RESPValue) -> [UInt8] {
        switch value {
        case .simpleString(let text): return Array("+\(text)\r\n".utf8)
        case .error(let reply): return Array("-\(reply.message)\r\n".utf8)
        case .integer(let number): return Array(":\(number)\r\n".utf8)
        case .bulkString(let bytes): return Array("$\(bytes.count)\r\n".utf8) + bytes + [13, 10]
        case .null: return Array("$-1\r\n".utf8)
        case .array(let items): return Array("*\(items.count)\r\n".utf8) + items.flatMap(wire)
        }
    }

    static func decodeAll(_ bytes: [UInt8], limits: RESPLimits = .forValues(upTo: 1 << 20)) throws -> [RESPValue] {
        let decoder = RESPDecoder(limits: limits)
        decoder.append(bytes)
        var values: [RESPValue] = []
        while let value = try decoder.next() { values.append(value) }
        return values
    }

    static let samples: [RESPValue] = [
        .simpleString("OK"), .simpleString(""), .integer(0), .integer(-42), .integer(Int64.max),
        .integer(Int64.min + 1),
        .bulkString([]), .bulkString(Array("hello".utf8)), .bulkString([0, 13, 10, 255, 36, 42]), .null,
        .array([]), .array([.integer(1), .bulkString(Array("x".utf8)), .null, .array([.simpleString("nested")])]),
        .error(RedisErrorReply(line: "ERR unknown command")),
        .error(RedisErrorReply(line: "MOVED 3999 127.0.0.1:6381")),
        .bulkString((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) }),
    ]

    @Test("commands encode as arrays of bulk strings, binary-safe")
    func encoder() {
        let command = RESPCommand("SET", "k", [0, 13, 10, 255] as [UInt8], "PX", 1500)
        #expect(
            RESPEncoder.encodeContiguous([command])
                == Array("*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n".utf8) + [0, 13, 10, 255]
                + Array("\r\n$2\r\nPX\r\n$4\r\n1500\r\n".utf8))
        #expect(
            RESPEncoder.encodeContiguous([RESPCommand("PING"), RESPCommand("PING")]) == Array(
                "*1\r\n$4\r\nPING\r\n".utf8) + Array("*1\r\n$4\r\nPING\r\n".utf8))
        let large = [UInt8](repeating: 7, count: RESPEncoder.separatePartThreshold)
        let parts = RESPEncoder.encode([RESPCommand("SET", "k", large)])
        #expect(parts.count == 3)
        #expect(parts[1] == large)
        #expect(parts.flatMap { $0 } == Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16384\r\n".utf8) + large + [13, 10])
    }

    @Test("every reply type decodes")
    func types() throws {
        let stream = Self.samples.flatMap(Self.wire)
        #expect(try Self.decodeAll(stream) == Self.samples)
        #expect(try Self.decodeAll(Array("*-1\r\n".utf8)) == [.null])
    }

    @Test("error codes are parsed into cases")
    func errorCodes() {
        let cases: [(String, RedisErrorReply.Kind)] = [
            ("MOVED 3999 127.0.0.1:6381", .moved(slot: 3999, host: "127.0.0.1", port: 6381)),
            ("ASK 1 10.0.0.2:7000", .ask(slot: 1, host: "10.0.0.2", port: 7000)),
            ("MOVED 16383 ::1:7001", .moved(slot: 16383, host: "::1", port: 7001)),
            ("MOVED 5 [::1]:7001", .moved(slot: 5, host: "::1", port: 7001)),
            ("MOVED 12 :6380", .moved(slot: 12, host: "", port: 6380)),
            ("MOVED 16384 h:1", .other), ("MOVED x h:1", .other), ("MOVED 1", .other), ("ASK 1 h:0", .other),
            ("NOAUTH Authentication required.", .noAuthentication),
            ("WRONGPASS invalid username-password pair or user is disabled.", .wrongPassword),
            ("NOPERM this user has no permissions", .noPermission),
            ("OOM command not allowed when used memory > 'maxmemory'.", .outOfMemory),
            ("WRONGTYPE Operation against a key holding the wrong kind of value", .wrongType),
            ("READONLY You can't write against a read only replica.", .readOnly),
            ("LOADING Redis is loading the dataset in memory", .loading),
            ("NOSCRIPT No matching script.", .noScript), ("BUSY Redis is busy", .busy),
            ("TRYAGAIN Multiple keys request during rehashing of slot", .tryAgain),
            ("CROSSSLOT Keys in request don't hash to the same slot", .crossSlot),
            ("CLUSTERDOWN The cluster is down", .clusterDown), ("MASTERDOWN Link with MASTER is down", .masterDown),
            ("MISCONF Redis is configured to save RDB snapshots", .misconfigured),
            ("ERR unknown command", .other), ("", .other),
        ]
        for (line, kind) in cases {
            let reply = RedisErrorReply(line: line)
            #expect(reply.kind == kind, "\(line)")
            #expect(reply.message == line)
        }
        #expect(RedisErrorReply(line: "WRONGTYPE x").code == "WRONGTYPE")
    }

    @Test("valid streams cut at random points decode to the same replies")
    func randomSplits() throws {
        var generator = SplitMix(seed: 7)
        let stream = (0..<20).flatMap { _ in Self.samples }.flatMap(Self.wire)
        let expected = (0..<20).flatMap { _ in Self.samples }
        for _ in 0..<200 {
            let decoder = RESPDecoder(limits: .forValues(upTo: 1 << 20))
            var values: [RESPValue] = []
            var offset = 0
            while offset < stream.count {
                let size = Int(generator.next() % 64) + 1
                let end = min(stream.count, offset + (generator.next() % 8 == 0 ? size * 100 : size))
                if generator.next() % 2 == 0 {
                    decoder.append(stream[offset..<end])
                } else {
                    _ = decoder.withWritableSpace(minimum: end - offset) { buffer in
                        for (index, byte) in stream[offset..<end].enumerated() { buffer[index] = byte }
                        return end - offset
                    }
                }
                offset = end
                while let value = try decoder.next() { values.append(value) }
            }
            #expect(values == expected)
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test("every truncation of a valid stream asks for more, never errs or returns a partial reply")
    func truncations() throws {
        let stream = Self.samples.flatMap(Self.wire)
        var boundaries = Set<Int>()
        var position = 0
        for sample in Self.samples {
            position += Self.wire(sample).count
            boundaries.insert(position)
        }
        for length in 0..<stream.count {
            let values = try Self.decodeAll(Array(stream[0..<length]))
            #expect(values == Array(Self.samples.prefix(values.count)))
            let complete = boundaries.filter { $0 <= length }.count
            #expect(values.count == complete, "\(length)")
        }
    }

    @Test("random garbage never crashes or hangs: replies, need-more or a typed error")
    func garbage() {
        var generator = SplitMix(seed: 99)
        let alphabet = Array("+-:$*\r\n0123456789-abc%_>#".utf8)
        for round in 0..<3000 {
            let count = Int(generator.next() % 200)
            let bytes = (0..<count).map { _ in
                round % 2 == 0
                    ? alphabet[Int(generator.next() % UInt64(alphabet.count))]
                    : UInt8(truncatingIfNeeded: generator.next())
            }
            let limits = RESPLimits(
                maximumBulkLength: 64, maximumArrayLength: 8, maximumDepth: 3, maximumLineLength: 32)
            let decoder = RESPDecoder(limits: limits)
            decoder.append(bytes)
            var steps = 0
            do {
                while try decoder.next() != nil {
                    steps += 1
                    #expect(steps <= count)
                }
            } catch {
                _ = error.description
            }
        }
    }

    @Test("limits and malformed input give typed errors")
    func limits() {
        let limits = RESPLimits(maximumBulkLength: 10, maximumArrayLength: 3, maximumDepth: 2, maximumLineLength: 24)
        let cases: [(String, RESPProtocolError)] = [
            ("$11\r\n", .bulkTooLong(11)), ("$99999999999999\r\n", .bulkTooLong(99_999_999_999_999)),
            ("*4\r\n", .arrayTooLong(4)), ("*1\r\n*1\r\n*1\r\n:1\r\n", .tooDeep),
            ("+" + String(repeating: "x", count: 40), .lineTooLong),
            ("-" + String(repeating: "x", count: 27), .lineTooLong),
            ("$-2\r\n", .invalidNumber), ("*-5\r\n", .invalidNumber), (":12a\r\n", .invalidNumber),
            (":\r\n", .invalidNumber), (":-\r\n", .invalidNumber), (":12345678901234567890\r\n", .invalidNumber),
            (":9223372036854775808\r\n", .invalidNumber), ("$ 1\r\n", .invalidNumber),
            ("+OK\n", .missingTerminator), ("$2\r\nabXY", .missingTerminator), ("\n", .unknownType(10)),
            ("%1\r\n", .unknownType(UInt8(ascii: "%"))), ("_\r\n", .unknownType(UInt8(ascii: "_"))),
            (">2\r\n", .unknownType(UInt8(ascii: ">"))), ("*1\r\n!x\r\n", .unknownType(UInt8(ascii: "!"))),
        ]
        for (text, expected) in cases {
            #expect(throws: expected, "\(text.prefix(20))") { _ = try Self.decodeAll(Array(text.utf8), limits: limits) }
        }
        #expect(throws: Never.self) { _ = try Self.decodeAll(Array("$10\r\n0123456789\r\n".utf8), limits: limits) }
        #expect(throws: Never.self) { _ = try Self.decodeAll(Array("*1\r\n*1\r\n:1\r\n".utf8), limits: limits) }
    }

    @Test("a large bulk string read in small chunks is parsed once it is complete")
    func largeBulk() throws {
        let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 >> 3) }
        let stream = Self.wire(.bulkString(payload)) + Self.wire(.simpleString("OK"))
        let decoder = RESPDecoder(limits: .forValues(upTo: 2 << 20))
        var values: [RESPValue] = []
        var offset = 0
        while offset < stream.count {
            let wrote = decoder.withWritableSpace { buffer in
                let count = min(4096, buffer.count, stream.count - offset)
                for index in 0..<count { buffer[index] = stream[offset + index] }
                return count
            }
            offset += wrote
            while let value = try decoder.next() { values.append(value) }
        }
        #expect(values == [.bulkString(payload), .simpleString("OK")])
    }
}
