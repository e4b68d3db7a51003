// The options guide (GettingStarted.md): per-call policies.

import Foundation
import YashimaShared

// sample: options
/// Options for a thumbnail in a scrolling list: cancel the render when the cell goes away, keep the
/// value in memory if the disk is full, wait at most 30 s for another process, expire after a day.
func listThumbnailOptions() -> YCache.Options {
    var options = YCache.Options.uiLifecycle  // .cancelWhenNoWaiters + .bestEffort
    options.crossProcessWaitTimeout = .seconds(30)
    options.expiry = .after(.seconds(24 * 3600))
    return options
}

/// The other ways to ask: never generate, or always generate.
func otherLookups(cache: YCache, key: CacheKey) async throws {
    let cached = try await cache.valueIfCached(for: key, codec: DataCodec())  // nil on a miss
    let inMemory = try await cache.peek(for: key, codec: DataCodec())  // this process's memory only
    let fresh = try await cache.refresh(for: key, codec: DataCodec()) { Data("re-rendered".utf8) }
    let maybe = try await cache.optionalValue(for: key.variant("page", 99), codec: DataCodec()) {
        nil  // "nothing to render": shared with concurrent callers, never stored
    }
    print(cached?.count ?? 0, inMemory?.count ?? 0, fresh.count, maybe == nil)
}
// end sample
