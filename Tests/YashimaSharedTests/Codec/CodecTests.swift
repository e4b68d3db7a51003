// Tests for the codec layer: round-trips of every standard codec, identifier uniqueness,
// rejection of invalid and hostile input with typed errors, and decoding from externally
// owned (malloc'd and memory-mapped) buffers as the cache does.

import Foundation
import Synchronization
import Testing

@testable import YashimaShared

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Fixtures

private func randomData(count: Int, seed: UInt64 = 1) -> Data {
    var generator = SplitMix(seed: seed)
    let words = (0..<(count + 7) / 8).map { _ in generator.next() }
    return words.withUnsafeBytes { Data($0.prefix(count)) }
}

/// Text-like bytes: random words from a small vocabulary, with spaces and newlines.
private func textLikeData(count: Int, seed: UInt64 = 2) -> Data {
    let words = [
        "cache", "entry", "shared", "process", "mapping", "the", "of", "and", "regenerable",
        "artifact", "lock", "file", "a", "to", "in", "is", "compress", "value", "bytes", "codec",
    ].map { Array($0.utf8) }
    var generator = SplitMix(seed: seed)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + 16)
    var column = 0
    while bytes.count < count {
        let word = words[Int(generator.next() % UInt64(words.count))]
        bytes.append(contentsOf: word)
        column += word.count + 1
        if column > 72 {
            bytes.append(UInt8(ascii: "\n"))
            column = 0
        } else {
            bytes.append(UInt8(ascii: " "))
        }
    }
    return Data(bytes.prefix(count))
}

private let oneMiB = 1 << 20

private struct Inner: Codable, Equatable, Sendable {
    var name: String
    var weights: [Double]
    var tags: [String: Int]
    var note: String?
}

private struct Outer: Codable, Equatable, Sendable {
    enum Kind: String, Codable, Sendable { case object, archive }
    var id: Int64
    var kind: Kind
    var inners: [Inner]
    var nested: [[Inner]]
    var blob: Data
    var flag: Bool
}

private let sampleOuter = Outer(
    id: -42, kind: .archive,
    inners: [
        Inner(name: "héllo wörld 🌍", weights: [0, 1.5, -2.25, 1e300], tags: ["a": 1, "ü": -2], note: nil),
        Inner(name: "", weights: [], tags: [:], note: "∅ note"),
    ],
    nested: [[], [Inner(name: "deep", weights: [3], tags: ["x": 0], note: "n")]],
    blob: Data([0, 1, 2, 255]),
    flag: true)

/// Asserts that decoding throws a `CacheCodecError` with the given reason and identifier.
private func expectDecodeFailure<C: CacheCodec>(
    _ codec: C, _ data: Data, _ reason: CacheCodecError.Reason,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    do {
        _ = try codec.decode(data)
        Issue.record("decode of \(data.count) bytes unexpectedly succeeded", sourceLocation: sourceLocation)
    } catch let error as CacheCodecError {
        #expect(error.reason == reason, "\(error)", sourceLocation: sourceLocation)
        #expect(error.codecIdentifier == codec.identifier, sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error type: \(error)", sourceLocation: sourceLocation)
    }
}

/// Counts custom deallocations.
private final class DeallocationCounter: Sendable {
    let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// Copies `bytes` into a malloc'd buffer owned by the returned `Data`, freed by a custom
/// deallocator that also bumps `counter`: the shape of a cache file's mapping.
private func externallyOwnedData(_ bytes: Data, counter: DeallocationCounter) -> Data {
    let buffer = malloc(max(bytes.count, 1))!
    bytes.withUnsafeBytes { raw in
        if let base = raw.baseAddress { buffer.copyMemory(from: base, byteCount: raw.count) }
    }
    return Data(
        bytesNoCopy: buffer, count: bytes.count,
        deallocator: .custom { pointer, _ in
            free(pointer)
            counter.increment()
        })
}

// MARK: - Round-trips

@Suite("Codec round-trips")
struct CodecRoundTripTests {
    static let payloads: [Data] = [
        Data(), Data([0x5A]), randomData(count: oneMiB), textLikeData(count: oneMiB),
        Data(count: oneMiB),
    ]

    @Test("DataCodec is the identity", arguments: payloads)
    func dataCodec(payload: Data) throws {
        let codec = DataCodec()
        let encoded = try codec.encode(payload)
        #expect(encoded == payload)
        #expect(try codec.decode(encoded) == payload)
        #expect(codec.memoryCost(of: payload, encodedByteCount: encoded.count) == max(1, payload.count))
    }

    @Test("CompressedDataCodec round-trips", arguments: payloads)
    func compressedDataCodec(payload: Data) throws {
        let codec = CompressedDataCodec()
        let encoded = try codec.encode(payload)
        #expect(encoded.count >= 8)
        let declared = encoded.prefix(8).enumerated().reduce(UInt64(0)) {
            $0 | UInt64($1.element) << (8 * UInt64($1.offset))
        }
        #expect(declared == UInt64(payload.count))
        let decoded = try codec.decode(encoded)
        #expect(decoded == payload)
        #expect(codec.memoryCost(of: decoded, encodedByteCount: encoded.count) == max(1, payload.count))
    }

    @Test("CompressedDataCodec compresses text and zeros")
    func compressionRatio() throws {
        let codec = CompressedDataCodec(level: 1)
        let text = try codec.encode(textLikeData(count: oneMiB))
        #expect(text.count < oneMiB / 2)
        let zeros = try codec.encode(Data(count: oneMiB))
        #expect(zeros.count < 8 * 1024)
    }

    @Test("Every compression level decodes with any codec; the level is not part of the identity")
    func compressionLevels() throws {
        let payload = textLikeData(count: 64 * 1024, seed: 9)
        let reader = CompressedDataCodec(level: 1)
        for level: Int32 in [-1, 0, 1, 6, 9] {
            let codec = CompressedDataCodec(level: level)
            #expect(codec.identifier == reader.identifier)
            #expect(try reader.decode(codec.encode(payload)) == payload)
        }
    }

    @Test("An invalid compression level fails to encode", arguments: [Int32(-2), 10, 100])
    func invalidLevel(level: Int32) {
        let codec = CompressedDataCodec(level: level)
        #expect(
            throws: CacheCodecError(
                codecIdentifier: "zlib-data-v1", reason: .encodingFailed,
                message: "compression level \(level) is outside -1...9")
        ) {
            try codec.encode(Data([1, 2, 3]))
        }
    }

    @Test(
        "StringCodec round-trips",
        arguments: [
            "", "a", "é", "héllo wörld", "日本語のテキスト", "🏳️‍🌈👩‍👩‍👧‍👦🇯🇵", "e\u{301}\u{20DD}", "nul\0inside\0",
            "\u{FEFF}bom-first", "\u{10FFFF}\u{E000}\u{7F}",
        ])
    func stringCodec(string: String) throws {
        let codec = StringCodec()
        let encoded = try codec.encode(string)
        #expect(encoded == Data(string.utf8))
        let decoded = try codec.decode(encoded)
        #expect(decoded == string)
        #expect(Array(decoded.unicodeScalars) == Array(string.unicodeScalars))
        #expect(codec.memoryCost(of: decoded, encodedByteCount: nil) == max(1, encoded.count))
    }

    @Test("StringCodec round-trips 1 MiB of random scalars and of text")
    func largeStrings() throws {
        var generator = SplitMix(seed: 7)
        var scalars = String.UnicodeScalarView()
        var utf8Count = 0
        while utf8Count < oneMiB {
            let raw = UInt32(truncatingIfNeeded: generator.next() % 0x11_0000)
            guard let scalar = Unicode.Scalar(raw) else { continue }  // Skip surrogates.
            scalars.append(scalar)
            utf8Count += UTF8.width(scalar)
        }
        let codec = StringCodec()
        for string in [String(scalars), String(decoding: textLikeData(count: oneMiB), as: UTF8.self)] {
            #expect(try codec.decode(codec.encode(string)) == string)
        }
    }

    @Test("CodableCodec round-trips nested structs", arguments: ["json", "propertyList"])
    func codableNested(formatName: String) throws {
        let codec = CodableCodec(Outer.self, format: formatName == "json" ? .json : .propertyList)
        #expect(try codec.decode(codec.encode(sampleOuter)) == sampleOuter)
        var big = sampleOuter
        big.blob = randomData(count: 256 * 1024, seed: 3)
        big.inners = Array(repeating: sampleOuter.inners[0], count: 300)
        #expect(try codec.decode(codec.encode(big)) == big)
        let empty = Outer(id: 0, kind: .object, inners: [], nested: [], blob: Data(), flag: false)
        #expect(try codec.decode(codec.encode(empty)) == empty)
    }

    @Test("CodableCodec round-trips collections and JSON top-level scalars")
    func codableCollectionsAndScalars() throws {
        let array = CodableCodec([String].self, format: .propertyList)
        #expect(try array.decode(array.encode(["a", "ß", ""])) == ["a", "ß", ""])
        let dictionary = CodableCodec([String: [Int]].self)
        #expect(try dictionary.decode(dictionary.encode(["k": [1, 2], "": []])) == ["k": [1, 2], "": []])
        let integer = CodableCodec(Int.self)
        #expect(try integer.decode(integer.encode(Int.min)) == Int.min)
        let string = CodableCodec(String.self)
        #expect(try string.decode(string.encode("\"quoted\" \\ 🌍")) == "\"quoted\" \\ 🌍")
    }

    @Test("CodableCodec reports encoding failures with the encoder's own error, as Yashima's does")
    func codableEncodingFailures() throws {
        // Property lists cannot hold a top-level scalar; JSON cannot hold NaN by default.
        let plistScalar = CodableCodec(Int.self, format: .propertyList)
        let jsonNaN = CodableCodec(Double.self)
        for attempt in [{ _ = try plistScalar.encode(1) }, { _ = try jsonNaN.encode(.nan) }] {
            #expect(throws: EncodingError.self) { try attempt() }
        }
    }

    @Test("The default memory cost uses the encoded size, else the inline size, and is at least 1")
    func defaultMemoryCost() {
        let codec = CodableCodec(Outer.self)
        #expect(codec.memoryCost(of: sampleOuter, encodedByteCount: 1234) == 1234)
        #expect(codec.memoryCost(of: sampleOuter, encodedByteCount: 0) == 1)
        #expect(codec.memoryCost(of: sampleOuter, encodedByteCount: nil) == MemoryLayout<Outer>.size)
        #expect(DataCodec().memoryCost(of: Data(), encodedByteCount: 0) == 1)
    }
}

// MARK: - Identifiers

@Suite("Codec identifiers")
struct CodecIdentifierTests {
    @Test("Identifiers are distinct across codecs, types and formats")
    func distinct() {
        let identifiers = [
            DataCodec().identifier,
            StringCodec().identifier,
            CompressedDataCodec().identifier,
            CodableCodec(Outer.self).identifier,
            CodableCodec(Outer.self, format: .propertyList).identifier,
            CodableCodec(Inner.self).identifier,
            CodableCodec(Inner.self, format: .propertyList).identifier,
            CodableCodec([Int].self).identifier,
            CodableCodec([Int32].self).identifier,
            CodableCodec(Int.self).identifier,
            CodableCodec(String.self).identifier,
            CodableCodec(Data.self).identifier,
        ]
        #expect(Set(identifiers).count == identifiers.count, "\(identifiers)")
    }

    @Test("Identifiers have the documented shapes")
    func shapes() {
        #expect(DataCodec().identifier == "data-v1")
        #expect(StringCodec().identifier == "string-utf8-v1")
        #expect(CompressedDataCodec(level: 9).identifier == "zlib-data-v1")
        #expect(CodableCodec([Int].self).identifier == "codable-json-v1:Swift.Array<Swift.Int>")
        #expect(
            CodableCodec([Int].self, format: .propertyList).identifier
                == "codable-property-list-binary-v1:Swift.Array<Swift.Int>")
        #expect(CodableCodec(Outer.self).identifier == "codable-json-v1:" + String(reflecting: Outer.self))
        #expect(CodableCodec(Outer.self).format == .json)
    }
}

// MARK: - Invalid input

@Suite("Codec invalid input")
struct CodecInvalidInputTests {
    static let codec = CompressedDataCodec()
    static let smallPayload = textLikeData(count: 600, seed: 5)
    static let smallEncoded = try! codec.encode(smallPayload)

    /// Builds an encoding with an arbitrary header in front of an arbitrary body.
    static func framed(declared: UInt64, body: Data) -> Data {
        withUnsafeBytes(of: declared.littleEndian) { Data($0) } + body
    }

    @Test("Random bytes are rejected")
    func randomBytes() {
        for seed in UInt64(1)...200 {
            var generator = SplitMix(seed: seed)
            let count = Int(generator.next() % 300)
            expectDecodeFailure(Self.codec, randomData(count: count, seed: seed), .invalidInput)
        }
        // Random body behind a plausible header.
        for seed in UInt64(1)...200 {
            let body = randomData(count: 100, seed: seed &+ 1000)
            expectDecodeFailure(Self.codec, Self.framed(declared: 500, body: body), .invalidInput)
        }
    }

    @Test("Every truncation of a valid encoding is rejected")
    func truncations() {
        #expect(Self.smallEncoded.count > 16)
        for length in 0..<Self.smallEncoded.count {
            expectDecodeFailure(Self.codec, Self.smallEncoded.prefix(length), .invalidInput)
        }
        let empty = try! Self.codec.encode(Data())
        for length in 0..<empty.count {
            expectDecodeFailure(Self.codec, empty.prefix(length), .invalidInput)
        }
    }

    @Test("Bit flips are rejected or, in ignored padding bits, harmless")
    func bitFlips() {
        let encoded = Self.smallEncoded
        var harmless = 0
        for byteIndex in 0..<encoded.count {
            for bit in 0..<8 {
                var corrupted = encoded
                corrupted[byteIndex] ^= UInt8(1) << bit
                do {
                    let decoded = try Self.codec.decode(corrupted)
                    // Only the unused bits after the final deflate block may flip unnoticed.
                    #expect(decoded == Self.smallPayload, "flip \(byteIndex):\(bit) changed the data")
                    harmless += 1
                } catch let error as CacheCodecError {
                    #expect(error.reason == .invalidInput)
                } catch {
                    Issue.record("unexpected error type: \(error)")
                }
            }
        }
        #expect(harmless < 8, "\(harmless) of \(encoded.count * 8) flips went unnoticed")
    }

    @Test("Trailing bytes after the stream are rejected")
    func trailingGarbage() {
        let encoded = Self.smallEncoded
        expectDecodeFailure(Self.codec, encoded + Data([0]), .invalidInput)
        expectDecodeFailure(Self.codec, encoded + randomData(count: 100), .invalidInput)
        // A second complete zlib stream behind the first.
        expectDecodeFailure(Self.codec, encoded + encoded.dropFirst(8), .invalidInput)
    }

    @Test("A declared length different from the inflated size is rejected")
    func lengthMismatch() throws {
        let body = Self.smallEncoded.dropFirst(8)
        let actual = UInt64(Self.smallPayload.count)
        for declared in [0, 1, actual - 1, actual + 1, actual * 2] {
            expectDecodeFailure(Self.codec, Self.framed(declared: declared, body: Data(body)), .invalidInput)
        }
        #expect(try Self.codec.decode(Self.framed(declared: actual, body: Data(body))) == Self.smallPayload)
    }

    @Test(
        "Huge declared lengths are rejected before allocating",
        arguments: [
            UInt64(16 << 30) + 1, 1 << 40, UInt64.max, UInt64(Int.max), UInt64(1 << 32),
        ])
    func hugeDeclaredLength(declared: UInt64) {
        let body = Data(Self.smallEncoded.dropFirst(8))
        expectDecodeFailure(Self.codec, Self.framed(declared: declared, body: body), .invalidInput)
    }

    @Test("Declared lengths beyond deflate's 1032:1 ratio are rejected")
    func impossibleRatio() throws {
        let zeros = try Self.codec.encode(Data(count: oneMiB))
        let bodyCount = UInt64(zeros.count - 8)
        let body = Data(zeros.dropFirst(8))
        // Just past the bound: rejected without inflating.
        expectDecodeFailure(Self.codec, Self.framed(declared: bodyCount * 1032 + 65, body: body), .invalidInput)
        // Within the bound but wrong: rejected after inflating.
        expectDecodeFailure(Self.codec, Self.framed(declared: bodyCount * 1032 + 64, body: body), .invalidInput)
        #expect(try Self.codec.decode(zeros) == Data(count: oneMiB))
    }

    @Test("A zlib stream with a preset dictionary or a gzip wrapper is rejected")
    func foreignStreams() {
        // zlib header with FDICT set (0x78 0xBB passes the header check) and a dictionary id.
        expectDecodeFailure(
            Self.codec, Self.framed(declared: 3, body: Data([0x78, 0xBB, 0, 0, 0, 1, 0x4B, 0x04, 0])), .invalidInput)
        // A gzip member of "a\n" is not a zlib stream.
        let gzip = Data([
            0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 0x03, 0x4B, 0xE4, 0x02, 0, 0x07, 0xA1, 0xEA, 0xDD, 0x02, 0, 0, 0,
        ])
        expectDecodeFailure(Self.codec, Self.framed(declared: 2, body: gzip), .invalidInput)
    }

    @Test(
        "StringCodec rejects invalid UTF-8 instead of repairing it",
        arguments: [
            [0xFF], [0xC3], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x61, 0x80, 0x62],
            [0xE2, 0x82], [0xF0, 0x9F, 0x98],
        ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) {
        expectDecodeFailure(StringCodec(), Data(bytes), .invalidInput)
    }

    @Test("CodableCodec rejects garbage in both formats with the decoder's own error")
    func codableGarbage() throws {
        func expectDecodeFailure<V>(
            _ codec: CodableCodec<V>, _ data: Data, _: CacheCodecError.Reason,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(throws: DecodingError.self, sourceLocation: sourceLocation) { _ = try codec.decode(data) }
        }
        let json = CodableCodec(Outer.self)
        let plist = CodableCodec(Outer.self, format: .propertyList)
        let garbage: [Data] = [
            Data(), Data("garbage".utf8), randomData(count: 257, seed: 11), Data("{\"id\": 1}".utf8),
            Data("[1, 2, 3]".utf8), Data([0xFF, 0xFE, 0x00]),
        ]
        for data in garbage {
            expectDecodeFailure(json, data, .decodingFailed)
            expectDecodeFailure(plist, data, .decodingFailed)
        }
        // Truncated valid encodings, and each format's bytes fed to the other.
        let jsonBytes = try json.encode(sampleOuter)
        let plistBytes = try plist.encode(sampleOuter)
        expectDecodeFailure(json, jsonBytes.prefix(jsonBytes.count / 2), .decodingFailed)
        expectDecodeFailure(plist, plistBytes.prefix(plistBytes.count / 2), .decodingFailed)
        expectDecodeFailure(json, plistBytes, .decodingFailed)
        expectDecodeFailure(plist, jsonBytes, .decodingFailed)
    }

    @Test("CacheCodecError describes itself")
    func errorDescription() {
        let error = CacheCodecError(codecIdentifier: "x-v1", reason: .invalidInput, message: "bad")
        #expect(error.description.contains("x-v1"))
        #expect(error.description.contains("invalidInput"))
        #expect(error.description.contains("bad"))
        #expect(error != CacheCodecError(codecIdentifier: "x-v1", reason: .decodingFailed, message: "bad"))
    }
}

// MARK: - Externally owned buffers

@Suite("Codec decoding from externally owned buffers")
struct CodecExternalBufferTests {
    @Test("DataCodec keeps the buffer alive without copying; mutation is safe")
    func dataCodecKeepsBuffer() throws {
        let counter = DeallocationCounter()
        let payload = randomData(count: 4096, seed: 21)
        var decoded: Data
        do {
            let source = externallyOwnedData(payload, counter: counter)
            #expect(source.startIndex == 0)
            decoded = try DataCodec().decode(source)
        }
        // The source is gone but the decoded value still references its buffer.
        #expect(counter.value == 0)
        #expect(decoded == payload)
        decoded[0] ^= 0xFF
        decoded[4095] = 7
        decoded.append(contentsOf: [1, 2, 3])
        decoded.removeFirst(10)
        var expected = payload
        expected[0] ^= 0xFF
        expected[4095] = 7
        expected.append(contentsOf: [1, 2, 3])
        expected.removeFirst(10)
        #expect(decoded == expected)
        decoded = Data()
        #expect(counter.value == 1)
    }

    @Test("Decoded values outlive the source buffer for every codec")
    func valuesOutliveSource() throws {
        let counter = DeallocationCounter()
        let bytes = textLikeData(count: 100_000, seed: 22)
        let string = String(decoding: bytes, as: UTF8.self)

        var compressed = try CompressedDataCodec().decode(
            externallyOwnedData(try CompressedDataCodec().encode(bytes), counter: counter))
        var text = try StringCodec().decode(externallyOwnedData(Data(string.utf8), counter: counter))
        let json = try CodableCodec(Outer.self).decode(
            externallyOwnedData(try CodableCodec(Outer.self).encode(sampleOuter), counter: counter))
        let plistCodec = CodableCodec(Outer.self, format: .propertyList)
        let plist = try plistCodec.decode(externallyOwnedData(try plistCodec.encode(sampleOuter), counter: counter))
        let empty = try CompressedDataCodec().decode(
            externallyOwnedData(try CompressedDataCodec().encode(Data()), counter: counter))

        // Every source buffer has been released: nothing decoded references it.
        #expect(counter.value == 5)
        #expect(compressed == bytes)
        #expect(text == string)
        #expect(json == sampleOuter)
        #expect(plist == sampleOuter)
        #expect(empty.isEmpty)

        compressed[0] ^= 1
        compressed.append(contentsOf: randomData(count: 10_000))
        compressed.removeLast(20_000)
        #expect(compressed.count == bytes.count - 10_000)
        text.append("✓")
        #expect(text.hasSuffix("✓"))
    }

    @Test("Decoding from a private copy-on-write file mapping works and never writes the file")
    func privateFileMapping() throws {
        let directory = FileManager.default.temporaryDirectory
        let url = directory.appendingPathComponent("codec-test-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).bin")
        defer { try? FileManager.default.removeItem(at: url) }
        let payload = randomData(count: 3 * 4096 + 17, seed: 23)
        try payload.write(to: url)

        let fd = open(url.path, O_RDONLY)
        #expect(fd >= 0)
        guard fd >= 0 else { return }
        let mapping = mmap(nil, payload.count, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0)
        close(fd)
        guard let mapping, mapping != MAP_FAILED else {
            Issue.record("mmap failed: \(errno)")
            return
        }
        let counter = DeallocationCounter()
        var decoded: Data
        do {
            let mapped = Data(
                bytesNoCopy: mapping, count: payload.count,
                deallocator: .custom { pointer, count in
                    munmap(pointer, count)
                    counter.increment()
                })
            decoded = try DataCodec().decode(mapped)
        }
        try FileManager.default.removeItem(at: url)  // The mapping survives the file's removal.
        #expect(decoded == payload)
        for index in stride(from: 0, to: decoded.count, by: 1000) { decoded[index] = 0 }
        #expect(decoded != payload)
        decoded = Data()
        #expect(counter.value == 1)
    }

    @Test("Mapped data is not modified in the file by writes to the private mapping")
    func privateMappingDoesNotWriteThrough() throws {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("codec-test-cow-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).bin")
        defer { try? FileManager.default.removeItem(at: url) }
        let payload = randomData(count: 8192, seed: 24)
        try payload.write(to: url)
        let fd = open(url.path, O_RDONLY)
        #expect(fd >= 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard let mapping = mmap(nil, payload.count, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0),
            mapping != MAP_FAILED
        else {
            Issue.record("mmap failed: \(errno)")
            return
        }
        var decoded = try DataCodec().decode(
            Data(
                bytesNoCopy: mapping, count: payload.count,
                deallocator: .custom {
                    munmap($0, $1)
                }))
        decoded[0] ^= 0xFF
        decoded[8191] ^= 0xFF
        #expect(try Data(contentsOf: url) == payload)
    }
}
