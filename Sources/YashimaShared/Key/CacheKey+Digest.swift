// CacheKey+Digest.swift: `CacheKey.digest(of:)`, a stable SHA-256 summary of a large input (a file, a
// blob) for a key component, the same in every process and on every host.

import Foundation

extension CacheKey {
    /// The lowercase hexadecimal SHA-256 of `bytes`: a stable summary of a large input for a key component.
    ///
    /// Use it when an artifact depends on more than fits in a key — a document's source, a dataset, a
    /// list of routes — and put the digest in a variant:
    ///
    /// ```swift
    /// let key = CacheKey(namespace: "charts", identity: "sales")
    ///     .variant("data", CacheKey.digest(of: csv))
    /// ```
    ///
    /// The result is the same in every process, on every machine and in every release, unlike
    /// `hashValue` or `Hasher`, which are seeded per process and must never name persisted data.
    ///
    /// - Parameter bytes: The input, such as `Data`, `[UInt8]` or a slice of either.
    /// - Returns: 64 lowercase hexadecimal characters.
    public static func digest(of bytes: some DataProtocol) -> String {
        var hasher = SHA256()
        for region in bytes.regions {
            region.withUnsafeBytes { hasher.update($0) }
        }
        return hasher.finalize().hex
    }

    /// The lowercase hexadecimal SHA-256 of `text`'s UTF-8 bytes.
    ///
    /// - Parameter text: The input text.
    /// - Returns: 64 lowercase hexadecimal characters; the same as `digest(of:)` of
    ///   `Data(text.utf8)`.
    public static func digest(of text: String) -> String {
        digest(of: Data(text.utf8))
    }
}
