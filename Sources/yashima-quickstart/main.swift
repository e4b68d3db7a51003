// sample: quick-start
import Foundation
import YashimaShared

// One cache per process; every process that uses this directory shares its entries.
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("thumbnails")
let cache = YCache(storageDirectory: directory)

// Name everything the artifact depends on: what it is, which rendition, which renderer made it.
let key = CacheKey(namespace: "thumbnail", identity: "video-42")
    .variant("size", "320x180")
    .variant("scale", 2)
    .version("renderer", 3)

// Memory, then storage, then (in exactly one process at a time) the generator.
let resolution = try await cache.resolve(for: key, codec: DataCodec()) {
    try await renderThumbnail(videoID: "video-42", width: 320, height: 180)
}
print(resolution.source, resolution.wasSharedGeneration, resolution.value.count)

/// Stands in for your expensive work: half a second, then some bytes.
func renderThumbnail(videoID: String, width: Int, height: Int) async throws -> Data {
    try await Task.sleep(for: .milliseconds(500))
    return Data("thumbnail of \(videoID) at \(width)x\(height)".utf8)
}
// end sample
