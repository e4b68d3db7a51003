// The guide to observing what the cache does (SharingAcrossProcesses.md).

import Foundation
import YashimaShared

// sample: observing
/// Where a value came from, what is stored, and what the cache has done in this process so far.
func observe(cache: YCache) async throws {
    let key = CacheKey(namespace: "thumbnail", identity: "video-7").variant("size", "160x90")
    let resolution = try await cache.resolve(for: key, codec: DataCodec()) { Data("tiny".utf8) }
    switch resolution.source {
    case .memory: print("from this process's memory")
    case .storage: print(resolution.wasSharedGeneration ? "made by another process while we waited" : "from storage")
    case .generated: print("generated here at", resolution.metadata?.createdAt ?? Date())
    }
    for entry in try await cache.entries(in: "thumbnail") {  // reads headers, not payloads
        print(entry.key.identity, entry.metadata.byteCount, "bytes,", entry.allocatedByteCount, "on disk")
    }
    let counts = cache.statistics
    print("hits: \(counts.memoryHits) memory, \(counts.storageHits) storage;", terminator: " ")
    print("generations: \(counts.generations), shared: \(counts.sharedGenerations);", terminator: " ")
    print("corrupt entries: \(counts.corruptEntries), write failures: \(counts.writeFailures)")
}
// end sample
