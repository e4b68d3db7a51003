// `YCache.Configuration`: Yashima's fields and default budgets, then YashimaShared's (who shares the
// directory, whether a network filesystem may be used, the remote tier). Plain data; YCache hands it to
// CacheEngine.

import Foundation

extension YCache {
    /// Where a cache keeps its entries and how much each layer may hold.
    ///
    /// The first four fields and the three `default…` constants are Yashima's; the rest are
    /// YashimaShared's and default to a private, local directory. The initializer clamps negative budgets
    /// to 0 (that layer keeps nothing); `nil` means unbounded.
    public struct Configuration: Sendable, Equatable {
        /// The default in-memory budget: 64 MiB of cost (bytes for the standard codecs).
        public static let defaultMemoryMaximumCost = 64 * 1024 * 1024
        /// The default bound on in-memory entries: none.
        public static let defaultMemoryMaximumEntryCount: Int? = nil
        /// The default storage budget: 128 MiB of payload bytes for the whole directory.
        public static let defaultStorageMaximumByteCount = 128 * 1024 * 1024

        /// The shared directory. Every process using it should pass the same path.
        public var storageDirectory: URL
        /// The in-memory budget of this instance, in cost units; `nil` for unbounded; 0 keeps nothing.
        public var memoryMaximumCost: Int?
        /// An optional bound on this instance's in-memory entries; `nil` for none; 0 keeps nothing.
        public var memoryMaximumEntryCount: Int?
        /// The storage budget in payload bytes (the sum of `YCache.Metadata.byteCount` over the directory's
        /// entries, as Yashima counts it), enforced by this instance after each of its writes: a write that
        /// takes the directory over it trims least-recently-used entries down to 90 % of it. `nil` for unbounded (never trimmed
        /// on write); 0 stores nothing. A value larger than the whole budget is never stored. Processes with
        /// different budgets each enforce their own when they write. Each entry also takes a header (128
        /// bytes, the key's canonical form and the codec identifier) and its file's block rounding on disk:
        /// bound that with `storageMaximumAllocatedByteCount`.
        public var storageMaximumByteCount: Int?
        /// An optional second storage bound, in allocated bytes (`st_blocks × 512` of every entry file: on
        /// ext4 at least 4 KiB per entry), for a disk cap (YashimaShared). Enforced like
        /// `storageMaximumByteCount`, which stays in force; default `nil` (no disk cap).
        public var storageMaximumAllocatedByteCount: Int?
        /// The free space this cache leaves on the storage directory's filesystem (YashimaShared): a write
        /// that would leave less first trims least-recently-used entries, so the cache shrinks when other
        /// data fills the filesystem and grows again, up to its budget, when it empties (see
        /// `FreeSpaceFloor`). Default `.standard`: 5 % of the filesystem or 1 GiB, whichever is smaller;
        /// `nil` for none. Floor or not, a write that finds the disk full (`ENOSPC`, `EDQUOT`) trims the
        /// directory's own entries and writes once more; only when nothing can be evicted does it fail
        /// (`YCache.Error.storageFull`, or memory only under `.bestEffort`).
        public var storageFreeSpaceFloor: FreeSpaceFloor?
        /// Who may use the directory (YashimaShared): `.privateToUser` (the default) or `.groupShared`.
        public var sharing: StorageSharingMode
        /// Use a directory on NFS, SMB, FUSE or 9p anyway, without mmap and without cross-process
        /// deduplication (YashimaShared). Default `false`: such a directory is refused.
        public var allowNetworkFilesystem: Bool
        /// The remote tier behind the storage directory, shared with other hosts (YashimaShared; see
        /// `YCache.Remote`). Default `nil`: none. Each cache made with it has its own connections and
        /// counters.
        public var remote: Remote?

        /// Creates a configuration; negative budgets become 0.
        /// - Parameters:
        ///   - storageDirectory: The shared directory (created on first use if missing: mode 0700, or
        ///     setgid 2770 with `.groupShared`).
        ///   - memoryMaximumCost: The in-memory budget; default 64 MiB, `nil` for unbounded.
        ///   - memoryMaximumEntryCount: A bound on in-memory entries; default none.
        ///   - storageMaximumByteCount: The storage budget in payload bytes; default 128 MiB, `nil` for
        ///     unbounded.
        ///   - storageMaximumAllocatedByteCount: A disk cap in allocated bytes; default none.
        ///   - storageFreeSpaceFloor: The free space left on the filesystem; default the smaller of 5 % and
        ///     1 GiB, `nil` for none.
        ///   - sharing: Who may use the directory.
        ///   - allowNetworkFilesystem: Whether a network filesystem is used anyway.
        ///   - remote: The remote tier, or `nil` for none.
        public init(
            storageDirectory: URL,
            memoryMaximumCost: Int? = Self.defaultMemoryMaximumCost,
            memoryMaximumEntryCount: Int? = Self.defaultMemoryMaximumEntryCount,
            storageMaximumByteCount: Int? = Self.defaultStorageMaximumByteCount,
            storageMaximumAllocatedByteCount: Int? = nil,
            storageFreeSpaceFloor: FreeSpaceFloor? = .standard,
            sharing: StorageSharingMode = .privateToUser,
            allowNetworkFilesystem: Bool = false,
            remote: Remote? = nil
        ) {
            self.storageDirectory = storageDirectory
            self.memoryMaximumCost = memoryMaximumCost.map { max(0, $0) }
            self.memoryMaximumEntryCount = memoryMaximumEntryCount.map { max(0, $0) }
            self.storageMaximumByteCount = storageMaximumByteCount.map { max(0, $0) }
            self.storageMaximumAllocatedByteCount = storageMaximumAllocatedByteCount.map { max(0, $0) }
            self.storageFreeSpaceFloor = storageFreeSpaceFloor
            self.sharing = sharing
            self.allowNetworkFilesystem = allowNetworkFilesystem
            self.remote = remote
        }

        /// The same configuration with every budget at least 0 (fields set after `init` are not clamped).
        var clamped: Configuration {
            var copy = self
            copy.memoryMaximumCost = memoryMaximumCost.map { max(0, $0) }
            copy.memoryMaximumEntryCount = memoryMaximumEntryCount.map { max(0, $0) }
            copy.storageMaximumByteCount = storageMaximumByteCount.map { max(0, $0) }
            copy.storageMaximumAllocatedByteCount = storageMaximumAllocatedByteCount.map { max(0, $0) }
            return copy
        }
    }
}
