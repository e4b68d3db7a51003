// `YCache.FreeSpaceFloor`: how much of its filesystem a cache leaves free (a byte count, a share of the
// filesystem, or the smaller of both). Plain data; Coordination/SpacePressure.swift enforces it (I9).

extension YCache {
    /// The free space a cache leaves on the storage directory's filesystem: when a write would leave less,
    /// the writer first trims the directory's least recently used entries until the floor is free again
    /// (plus a tenth of the directory's usage, so that the next writes do not trim again at once). So the
    /// cache shrinks when other data fills the filesystem, and grows again, up to its budget, when the
    /// filesystem empties.
    ///
    /// A floor is a bound on how far the cache fills the filesystem, not a reservation: a write is never
    /// refused for it. Other data filling the filesystem is noticed within about a second (each process
    /// reads the free space at most once a second, and estimates it from the directory's usage counter in
    /// between). A disk that fills anyway (`ENOSPC`, `EDQUOT`) is handled the same way, floor or not: the
    /// writer trims and writes once more.
    public struct FreeSpaceFloor: Sendable, Equatable, CustomStringConvertible {
        /// The bytes to keep free, when bounded by a byte count (the smaller bound applies).
        public let byteCount: Int64?
        /// The share of the filesystem's size to keep free (0…1), when bounded by a share (the smaller
        /// bound applies).
        public let fraction: Double?

        /// The default: 5 % of the filesystem or 1 GiB, whichever is smaller.
        public static let standard = FreeSpaceFloor(byteCount: 1 << 30, fraction: 0.05)

        /// Keeps `count` bytes free (a negative count is 0: no floor).
        /// - Parameter count: Bytes.
        /// - Returns: The floor.
        public static func bytes(_ count: Int64) -> FreeSpaceFloor {
            FreeSpaceFloor(byteCount: count, fraction: nil)
        }

        /// Keeps `share` of the filesystem's size free (clamped to 0…1; not a number is 0).
        /// - Parameter share: A fraction, `0.05` for 5 %.
        /// - Returns: The floor.
        public static func fraction(_ share: Double) -> FreeSpaceFloor {
            FreeSpaceFloor(byteCount: nil, fraction: share)
        }

        /// Keeps the smaller of `count` bytes and `share` of the filesystem free.
        /// - Parameters:
        ///   - count: Bytes (a negative count is 0).
        ///   - share: A fraction of the filesystem's size (clamped to 0…1).
        /// - Returns: The floor.
        public static func smallerOf(bytes count: Int64, fraction share: Double) -> FreeSpaceFloor {
            FreeSpaceFloor(byteCount: count, fraction: share)
        }

        private init(byteCount: Int64?, fraction: Double?) {
            self.byteCount = byteCount.map { max(0, $0) }
            self.fraction = fraction.map { $0.isNaN ? 0 : min(1, max(0, $0)) }
        }

        /// The bytes this floor keeps free on a filesystem of `filesystemBytes`: the smaller of its bounds.
        /// - Parameter filesystemBytes: The filesystem's size.
        /// - Returns: Bytes, at least 0.
        public func bytes(ofFilesystemBytes filesystemBytes: Int64) -> Int64 {
            let share = fraction.map { Int64((Double(max(0, filesystemBytes)) * $0).rounded(.down)) }
            switch (byteCount, share) {
            case (let count?, let share?): return min(count, share)
            case (let count?, nil): return count
            case (nil, let share?): return share
            case (nil, nil): return 0
            }
        }

        /// `1073741824 bytes`, `5%`, or `the smaller of 1073741824 bytes and 5%`.
        public var description: String {
            let share = fraction.map { share -> String in
                let percent = share * 100
                return percent == percent.rounded() ? "\(Int(percent))%" : "\(percent)%"
            }
            let count = byteCount.map { "\($0) bytes" }
            switch (count, share) {
            case (let count?, let share?): return "the smaller of \(count) and \(share)"
            case (let count?, nil): return count
            case (nil, let share?): return share
            case (nil, nil): return "none"
            }
        }
    }
}
