// The public metadata of an entry (`YCache.Metadata`): read from an entry file's header (a hit, a header read,
// a listing, an observed change), or made for a value stored now. No I/O.

import Foundation

extension CacheKey {
    /// The metadata of a stored entry, read from its header. `lastAccessedAt` is when it was last used:
    /// now for a hit, the file's mtime for a header read; `cost` is nil when no value was decoded.
    func metadata(header: EntryFormat.Header, codecIdentifier: String, cost: Int?, lastAccessedAt: Int64)
        -> YCache.Metadata
    {
        YCache.Metadata(
            byteCount: Int(header.payloadByteCount), cost: cost,
            createdAt: Date(nanosecondsSince1970: header.createdAtNanoseconds),
            lastAccessedAt: Date(nanosecondsSince1970: lastAccessedAt), codecIdentifier: codecIdentifier,
            keyDigest: header.keyStableDigest,
            expiresAtNanoseconds: header.expiresAtNanoseconds == 0 ? nil : header.expiresAtNanoseconds)
    }

    /// The metadata of a value stored (or kept in memory) now: created and last accessed at `createdAt`.
    func metadata(
        codecIdentifier: String, createdAt: Int64, expiresAt: Int64?, byteCount: Int, cost: Int?,
        keyDigest: SHA256Digest? = nil
    ) -> YCache.Metadata {
        let date = Date(nanosecondsSince1970: createdAt)
        return YCache.Metadata(
            byteCount: byteCount, cost: cost, createdAt: date, lastAccessedAt: date, codecIdentifier: codecIdentifier,
            keyDigest: keyDigest ?? stableDigest, expiresAtNanoseconds: expiresAt)
    }
}
