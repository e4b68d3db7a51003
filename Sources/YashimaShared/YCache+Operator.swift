// The facade's door to the operator's surface (`@_spi(Operator)`, Operator/): the `yashima` tool opens a
// cache, then asks it for its storage directory's `StorageOperator`.

extension YCache {
    /// Opens the storage directory now, to report a problem with it before any work, without preparing
    /// a first lookup (`openStorage()`): for a process that makes one lookup, the `yashima` tool's.
    ///
    /// - Throws: The errors of `openStorage()`.
    @_spi(Operator)
    public func openStorageForOneLookup() throws(YCache.Error) {
        _ = try engine.storageTier.context(for: .read).get()
    }

    /// An operator's view of this cache's storage directory, opening it if needed.
    ///
    /// - Returns: A `StorageOperator` bound to the directory this cache uses.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`).
    @_spi(Operator)
    public func storageOperator() throws(YCache.Error) -> StorageOperator {
        StorageOperator(engine: engine, context: try engine.storageTier.context(for: .write).get())
    }
}
