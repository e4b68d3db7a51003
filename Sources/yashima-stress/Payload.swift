// Deterministic payloads: the right bytes for (seed, key, codec) are a pure function, so any process can
// check any value it receives. Also the O_APPEND generation ledger shared by all workers.

import Foundation
import Glibc
import YashimaShared

/// A small, fast, deterministic generator (SplitMix64).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The codecs the stress runner exercises.
enum PayloadKind: String, CaseIterable, Sendable {
    case data, compressed, json, plist, string
}

/// A Codable value for the JSON and property-list codecs.
struct Artifact: Codable, Sendable, Equatable {
    var identity: String
    var numbers: [Int64]
    var label: String
}

enum Payload {
    /// A seed for `key` under the run's `seed`: FNV-1a over the key's stable identifier, mixed with the seed.
    static func seed(_ seed: UInt64, key: CacheKey, kind: PayloadKind) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in (key.stableIdentifier + "/" + kind.rawValue).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0100_0000_01B3
        }
        var mix = SplitMix64(seed: hash ^ seed)
        return mix.next()
    }

    /// The expected bytes of a `.data`/`.compressed` value of `size` bytes.
    static func bytes(_ seed: UInt64, key: CacheKey, kind: PayloadKind, size: Int) -> Data {
        var generator = SplitMix64(seed: Payload.seed(seed, key: key, kind: kind))
        var data = Data(count: size)
        data.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset + 8 <= size {
                raw.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
                offset += 8
            }
            while offset < size {
                raw[offset] = UInt8(truncatingIfNeeded: generator.next())
                offset += 1
            }
        }
        if kind == .compressed {
            // Compressible: keep only every 8th byte random.
            for i in data.indices where i % 8 != 0 { data[i] = UInt8(i & 0x0F) }
        }
        return data
    }

    static func artifact(_ seed: UInt64, key: CacheKey, kind: PayloadKind, count: Int) -> Artifact {
        var generator = SplitMix64(seed: Payload.seed(seed, key: key, kind: kind))
        return Artifact(
            identity: key.identity, numbers: (0..<count).map { _ in Int64(bitPattern: generator.next() >> 1) },
            label: "artifact-\(generator.next() % 1_000_000)")
    }

    static func string(_ seed: UInt64, key: CacheKey, size: Int) -> String {
        var generator = SplitMix64(seed: Payload.seed(seed, key: key, kind: .string))
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzäöü→✓ 0123456789")
        return String((0..<size).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }
}

/// An append-only file where every generation writes one line (< PIPE_BUF, so appends never interleave).
struct Ledger: Sendable {
    let path: String

    /// Appends `line`. A line that cannot be written ends the process: a ledger missing a generation
    /// would let the judge pass a run it cannot see.
    func record(_ line: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { fatalError("cannot open the ledger \(path): errno \(errno)") }
        let text = line + "\n"
        let written = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        guard written == text.utf8.count else { fatalError("cannot append to the ledger \(path): errno \(errno)") }
    }

    /// Lines recorded so far.
    func lines() -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }
}
