// The guide to expiry, removal and the byte budget (GettingStarted.md).

import Foundation
import YashimaShared

// sample: lifecycle
/// Daily reports: they expire after a day, the directory holds 512 MiB of reports (and 1 GiB of disk) at
/// most, and removals reach every process that uses the directory.
func manageReports(directory: String) async throws {
    let reports = YCache(
        configuration: YCache.Configuration(
            storageDirectory: URL(fileURLWithPath: directory),
            memoryMaximumCost: 16 << 20,  // 16 MiB in this process
            storageMaximumByteCount: 512 << 20,  // 512 MiB of payload for the whole directory, whoever writes
            storageMaximumAllocatedByteCount: 1 << 30))  // and at most 1 GiB of disk blocks
    var daily = YCache.Options()
    daily.expiry = .after(.seconds(24 * 3600))  // a miss after a day: never returned once expired
    let today = CacheKey(namespace: "reports", identity: "daily").variant("date", "2026-11-30")
    _ = try await reports.string(for: today, options: daily) { "12 pages, 3400 words" }

    let usage = try await reports.storageUsage()
    print("stored \(usage.entryCount) entries in \(usage.byteCount) bytes (\(usage.allocatedByteCount) on disk)")
    let expired = try await reports.removeExpired()  // deletes entries that can no longer be returned
    let removed = try await reports.remove(for: today, codec: StringCodec())  // one entry, for every process
    try await reports.removeAll(in: "reports")  // one namespace, for every process
    try await reports.trimStorageIfNeeded()  // recount the usage and trim to the budget now
    print("removed \(expired) expired entries; removed today's: \(removed)")
}
// end sample
