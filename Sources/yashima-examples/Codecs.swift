// The codec guide (KeysAndCodecs.md): the built-in codecs and one of your own.

import Foundation
import YashimaShared

// sample: codecs
/// An uncompressed image: a width, a height and 4 bytes per pixel.
struct Image: Sendable {
    var width: Int
    var height: Int
    var pixels: Data
}

/// Stores an `Image` as two little-endian 32-bit sizes followed by the pixels.
struct RawImageCodec: CacheCodec {
    let identifier = "raw-image-v1"  // change it whenever the byte format changes

    func encode(_ value: Image) throws -> Data {
        var data = Data()
        withUnsafeBytes(of: UInt32(value.width).littleEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(value.height).littleEndian) { data.append(contentsOf: $0) }
        return data + value.pixels
    }

    func decode(_ data: Data) throws -> Image {
        let bytes = [UInt8](data.prefix(8))
        guard bytes.count == 8 else {
            throw CacheCodecError(codecIdentifier: identifier, reason: .invalidInput, message: "too short")
        }
        let width = Int(bytes[0]) | Int(bytes[1]) << 8 | Int(bytes[2]) << 16 | Int(bytes[3]) << 24
        let height = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
        return Image(width: width, height: height, pixels: data.dropFirst(8))
    }

    /// What the memory layer charges for a decoded image.
    func memoryCost(of value: Image, encodedByteCount: Int?) -> Int { value.pixels.count }
}

/// The built-in codecs through their conveniences, and your own through `using(_:)`.
func useCodecs(cache: YCache) async throws {
    let greeting = try await cache.string(for: CacheKey("greeting")) { "hello" }  // StringCodec
    let summary = try await cache.codable(for: CacheKey("summary", namespace: "reports")) {
        ["pages": 12, "words": 3400]  // CodableCodec, JSON
    }
    let log = try await cache.value(for: CacheKey("build-log"), codec: CompressedDataCodec()) {
        Data(repeating: 0x41, count: 100_000)  // zlib: stored in a few hundred bytes
    }
    let images = cache.using(RawImageCodec())
    let image = try await images.value(for: CacheKey(namespace: "previews", identity: "doc-7")) {
        Image(width: 2, height: 1, pixels: Data([0, 0, 0, 255, 255, 255, 255, 255]))
    }
    print(greeting, summary["pages"] ?? 0, log.count, image.width, image.height)
}
// end sample
