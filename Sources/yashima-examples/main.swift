// yashima-examples: the README's code samples as complete programs, built with the package so they keep
// compiling. `yashima-examples quickstart DIR` is the quick start; run it in two processes at once.

import Foundation
import YashimaShared

/// Stands in for expensive work: half a second, then some bytes.
func renderThumbnail(videoID: String, width: Int, height: Int) async throws -> Data {
    try await Task.sleep(for: .milliseconds(500))
    return Data("thumbnail of \(videoID) at \(width)x\(height)".utf8)
}

/// The README's quick start.
func quickStart(directory: String) async throws {
    let cache = YCache(storageDirectory: URL(fileURLWithPath: directory))

    let key = CacheKey(namespace: "thumbnail", identity: "video-42")
        .variant("size", "320x180")
        .variant("scale", 2)
        .version("renderer", 3)

    let resolution = try await cache.resolve(for: key, codec: DataCodec()) {
        try await renderThumbnail(videoID: "video-42", width: 320, height: 180)
    }
    print(resolution.source, resolution.wasSharedGeneration, resolution.value.count)
}

/// A codec of your own (README: Codecs).
struct Image: Sendable {
    var width: Int
    var height: Int
    var pixels: Data
}

struct RawImageCodec: CacheCodec {
    let identifier = "raw-image-v1"  // change it whenever the byte format changes

    func encode(_ value: Image) throws -> Data {
        var data = Data()
        withUnsafeBytes(of: UInt32(value.width).littleEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(value.height).littleEndian) { data.append(contentsOf: $0) }
        return data + value.pixels
    }

    func decode(_ data: Data) throws -> Image {
        guard data.count >= 8 else {
            throw CacheCodecError(codecIdentifier: identifier, reason: .invalidInput, message: "too short")
        }
        let bytes = [UInt8](data.prefix(8))
        let width = Int(bytes[0]) | Int(bytes[1]) << 8 | Int(bytes[2]) << 16 | Int(bytes[3]) << 24
        let height = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
        return Image(width: width, height: height, pixels: data.dropFirst(8))
    }

    func memoryCost(of value: Image, encodedByteCount: Int?) -> Int { value.width * value.height * 4 }
}

/// Stands in for an expensive fixture build.
func buildSeededDatabase() async throws -> Data {
    Data("seeded database".utf8)
}

/// The README's parallel-test-runner fixture.
func seededDatabase(buildDirectory: URL) async throws -> Data {
    let fixtures = YCache(
        storageDirectory: buildDirectory.appendingPathComponent("fixtures"),
        storageMaximumByteCount: 2 << 30)
    let key = CacheKey(namespace: "fixtures", identity: "seeded-db").version("schema", 14)
    return try await fixtures.data(for: key) { try await buildSeededDatabase() }
}

/// Group-shared mode, options, expiry and lifecycle (README: Guides).
func guides(directory: String) async throws {
    let shared = YCache(storageDirectory: URL(fileURLWithPath: directory), sharing: .groupShared)
    let images = shared.using(RawImageCodec())
    let key = CacheKey(namespace: "previews", identity: "doc-7").variant("page", 1).version("renderer", 2)
    let image = try await images.value(for: key, options: .uiLifecycle) {
        Image(width: 2, height: 1, pixels: Data([0, 0, 0, 255, 255, 255, 255, 255]))
    }
    print("image", image.width, image.height)

    var options = YCache.Options()
    options.expiry = .after(.seconds(3600))
    options.crossProcessWaitTimeout = .seconds(30)
    let summary: [String] = try await shared.codable(for: CacheKey("summary", namespace: "reports"), options: options) {
        ["pages: 12", "words: 3400"]
    }
    print("summary", summary)

    print("usage", try await shared.storageUsage())
    try await shared.removeAll(in: "previews")
    try await shared.trimStorageIfNeeded()
    print("statistics", shared.statistics)
    print("fixture", try await seededDatabase(buildDirectory: URL(fileURLWithPath: directory)).count)
}

let arguments = CommandLine.arguments
guard arguments.count == 3, ["quickstart", "guides"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: yashima-examples quickstart|guides DIRECTORY\n".utf8))
    exit(2)
}
if arguments[1] == "quickstart" {
    try await quickStart(directory: arguments[2])
} else {
    try await guides(directory: arguments[2])
}
