// RESP.swift: the RESP2 wire types of the Redis client: typed replies, error replies parsed into
// cases (`MOVED`, `ASK`, `NOAUTH`, `OOM`, ...), and the command encoder (arrays of bulk strings,
// binary-safe). The incremental decoder is in RESPDecoder.swift. The client never sends `HELLO 3`, so
// replies are RESP2 only.

/// One RESP2 reply.
enum RESPValue: Equatable, Sendable {
    /// `+text`
    case simpleString(String)
    /// `-CODE message`
    case error(RedisErrorReply)
    /// `:n`
    case integer(Int64)
    /// `$n` followed by n bytes.
    case bulkString([UInt8])
    /// `$-1` or `*-1`.
    case null
    /// `*n` followed by n replies.
    case array([RESPValue])

    /// The reply's shape, for error messages (never its content).
    var shape: String {
        switch self {
        case .simpleString: return "simple string"
        case .error(let reply): return "error \(reply.code)"
        case .integer: return "integer"
        case .bulkString(let bytes): return "bulk string of \(bytes.count) bytes"
        case .null: return "null"
        case .array(let items): return "array of \(items.count)"
        }
    }

    /// True for `+OK`.
    var isOK: Bool { self == .simpleString("OK") }
}

/// An error reply (`-CODE message`), its code parsed into a case.
struct RedisErrorReply: Equatable, Sendable, CustomStringConvertible {
    /// What the error code means to the client.
    enum Kind: Equatable, Sendable {
        /// `MOVED slot host:port`: the slot lives on another cluster node, for good.
        case moved(slot: Int, host: String, port: Int)
        /// `ASK slot host:port`: this one command goes to another node, after `ASKING`.
        case ask(slot: Int, host: String, port: Int)
        /// `NOAUTH`: the server needs `AUTH` first.
        case noAuthentication
        /// `WRONGPASS`: bad user name or password.
        case wrongPassword
        /// `NOPERM`: the ACL user may not run this command, key or channel.
        case noPermission
        /// `OOM`: `maxmemory` reached and the policy does not evict.
        case outOfMemory
        /// `WRONGTYPE`: the key holds another Redis type.
        case wrongType
        /// `READONLY`: a replica.
        case readOnly
        /// `LOADING`: the server is loading its dataset.
        case loading
        /// `NOSCRIPT`: `EVALSHA` of a script the server does not have.
        case noScript
        /// `BUSY`: a script is running too long.
        case busy
        /// `TRYAGAIN`: a multi-key command during a slot migration.
        case tryAgain
        /// `CROSSSLOT`: keys of one command in different slots.
        case crossSlot
        /// `CLUSTERDOWN`: the cluster is not serving.
        case clusterDown
        /// `MASTERDOWN`: a replica without its primary.
        case masterDown
        /// `MISCONF`: the server cannot persist and refuses writes.
        case misconfigured
        /// Anything else (`ERR` included), by code.
        case other
    }

    /// The parsed meaning of ``code``.
    let kind: Kind
    /// The first word of the error line, such as `ERR` or `WRONGTYPE`.
    let code: String
    /// The whole error line as the server sent it (without `-` and CRLF).
    let message: String

    /// Parses an error line (the text after `-`).
    init(line: String) {
        message = line
        let words = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        code = words.first.map(String.init) ?? ""
        switch code {
        case "MOVED", "ASK":
            if words.count >= 3, let slot = Int(words[1]), (0..<16384).contains(slot),
                let target = Self.hostAndPort(words[2])
            {
                kind =
                    code == "MOVED"
                    ? .moved(slot: slot, host: target.host, port: target.port)
                    : .ask(slot: slot, host: target.host, port: target.port)
            } else {
                kind = .other
            }
        case "NOAUTH": kind = .noAuthentication
        case "WRONGPASS": kind = .wrongPassword
        case "NOPERM": kind = .noPermission
        case "OOM": kind = .outOfMemory
        case "WRONGTYPE": kind = .wrongType
        case "READONLY": kind = .readOnly
        case "LOADING": kind = .loading
        case "NOSCRIPT": kind = .noScript
        case "BUSY": kind = .busy
        case "TRYAGAIN": kind = .tryAgain
        case "CROSSSLOT": kind = .crossSlot
        case "CLUSTERDOWN": kind = .clusterDown
        case "MASTERDOWN": kind = .masterDown
        case "MISCONF": kind = .misconfigured
        default: kind = .other
        }
    }

    var description: String { message }

    /// `host:port`, `[v6]:port` or `:port` (the host left empty: the node the client asked).
    private static func hostAndPort(_ text: Substring) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = text[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return (String(host), port)
    }
}

/// One command: an array of bulk strings. Binary-safe: arguments are bytes.
struct RESPCommand: Equatable, Sendable {
    /// The command name and its arguments, each sent as one bulk string.
    var arguments: [[UInt8]]

    /// A command from raw arguments (the name first).
    init(arguments: [[UInt8]]) {
        self.arguments = arguments
    }

    /// A command from a name and arguments of any supported kind.
    init(_ name: String, _ arguments: any RESPArgument...) {
        self.arguments = [Array(name.utf8)] + arguments.map(\.respBytes)
    }

    /// The command name, for statistics and tests (never logged with its arguments).
    var name: String { String(decoding: arguments.first ?? [], as: UTF8.self) }
}

/// A value that can be a command argument.
protocol RESPArgument: Sendable {
    /// The argument's bytes on the wire.
    var respBytes: [UInt8] { get }
}

extension [UInt8]: RESPArgument {
    var respBytes: [UInt8] { self }
}

extension String: RESPArgument {
    var respBytes: [UInt8] { Array(utf8) }
}

extension Int: RESPArgument {
    var respBytes: [UInt8] { Array(String(self).utf8) }
}

extension Int64: RESPArgument {
    var respBytes: [UInt8] { Array(String(self).utf8) }
}

/// Encodes commands into the bytes sent to the server.
enum RESPEncoder {
    /// Arguments at least this large are sent from their own storage instead of being copied into the
    /// framing buffer (a 64 MiB value is not copied again).
    static let separatePartThreshold = 16 * 1024

    /// The wire bytes of `commands`, as parts to send in order: framing and small arguments coalesced,
    /// large arguments referenced as they are.
    static func encode(_ commands: [RESPCommand]) -> [[UInt8]] {
        var parts: [[UInt8]] = []
        var current: [UInt8] = []
        current.reserveCapacity(256)
        for command in commands {
            appendHeader(UInt8(ascii: "*"), command.arguments.count, to: &current)
            for argument in command.arguments {
                appendHeader(UInt8(ascii: "$"), argument.count, to: &current)
                if argument.count >= separatePartThreshold {
                    parts.append(current)
                    parts.append(argument)
                    current = []
                } else {
                    current.append(contentsOf: argument)
                }
                current.append(13)
                current.append(10)
            }
        }
        if !current.isEmpty { parts.append(current) }
        return parts
    }

    /// The wire bytes of `commands` as one array (tests).
    static func encodeContiguous(_ commands: [RESPCommand]) -> [UInt8] {
        encode(commands).flatMap { $0 }
    }

    private static func appendHeader(_ marker: UInt8, _ count: Int, to buffer: inout [UInt8]) {
        buffer.append(marker)
        appendDecimal(count, to: &buffer)
        buffer.append(13)
        buffer.append(10)
    }

    /// The decimal digits of `count` (never negative), without making a String.
    private static func appendDecimal(_ count: Int, to buffer: inout [UInt8]) {
        var divisor = 1
        while divisor <= count / 10 { divisor *= 10 }
        var rest = max(0, count)
        while divisor > 0 {
            buffer.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}

/// A Redis failure, as ``RemoteError/backend(_:)`` carries it: bytes that are not RESP2, an error reply
/// where a result was needed, refused credentials, a reply of the wrong shape, a cluster that cannot be
/// routed. Names shapes and Redis's own error text only (which never echoes a password).
enum RedisFailure: RemoteBackendFailure, Equatable {
    /// The server sent bytes that are not a valid RESP2 reply (or exceed the decoder's limits).
    case protocolViolation(RESPProtocolError)
    /// The server answered with an error where the operation needed a result.
    case server(RedisErrorReply)
    /// `AUTH` (or the first command after connecting, when no credentials were given) was refused.
    case authenticationFailed(RedisErrorReply)
    /// A reply of the wrong shape for the command (names the shape only, never content).
    case unexpectedReply(String)
    /// A cluster kept redirecting (`MOVED`/`ASK`) past the bound.
    case tooManyRedirects
    /// No node of the cluster answered `CLUSTER SLOTS` with a usable map.
    case clusterMapUnavailable

    var scope: RemoteError.Scope {
        guard case .server(let reply) = self else { return .server }
        switch reply.kind {
        case .wrongType: return .key
        case .outOfMemory, .readOnly, .misconfigured: return .writes
        default: return .server
        }
    }

    var failureKind: RemoteFailureKind {
        switch self {
        case .authenticationFailed: return .authentication
        case .server, .clusterMapUnavailable, .tooManyRedirects: return scope == .writes ? .writesRefused : .serverError
        case .protocolViolation, .unexpectedReply: return .error
        }
    }

    /// A key-scoped Redis failure is a value of another type.
    var missReason: RemoteMiss { .wrongType }

    var description: String {
        switch self {
        case .protocolViolation(let error): return "invalid reply from the remote server: \(error)"
        case .server(let reply): return "remote server error: \(reply)"
        case .authenticationFailed(let reply): return "remote authentication failed: \(reply)"
        case .unexpectedReply(let shape): return "unexpected reply from the remote server: \(shape)"
        case .tooManyRedirects: return "too many cluster redirects"
        case .clusterMapUnavailable: return "no cluster node returned a slot map"
        }
    }
}

extension RemoteError {
    /// A Redis failure, wrapped.
    static func redis(_ failure: RedisFailure) -> RemoteError { .backend(failure) }

    /// The Redis failure this is, if it is one.
    var redisFailure: RedisFailure? {
        guard case .backend(let failure) = self else { return nil }
        return failure as? RedisFailure
    }
}
