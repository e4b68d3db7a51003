// The `layout` file (I12): written once, by `linkat` of a complete staging file (first creator wins), and
// checked by every process that opens the directory: a layout version this build does not implement is
// refused before anything is created in the directory, and an unparsable file is never repaired (it may
// mean the directory is not a cache at all), only reported with what to do.

extension Directory {
    /// Writes `layout` once (first creator wins, I12) and checks the version found.
    static func ensureLayout(_ root: Int32, path: String, fileMode: UInt32) throws(YCache.Error) {
        for _ in 0..<Policy.nameRaceRetries {
            switch readSmallFile(layoutFile, in: root) {
            case .success(let text?):
                try requireSupportedLayout(text, path: path)
                return
            case .success(nil):
                let text = "yashima-shared layout \(CrossProcessProtocol.layoutVersion)\n"
                _ = try createOnce(layoutFile, in: root, bytes: Array(text.utf8), mode: fileMode, rootPath: path)
            case .failure(let error):
                throw .storageUnavailable(path: path, reason: "cannot read the layout file: \(error)")
            }
        }
        throw .storageUnavailable(path: path, reason: "the layout file keeps disappearing")
    }

    /// Throws unless `text` is a layout file of the version this code implements. Never repaired (I12,
    /// I14): an unparsable `layout` may mean the directory is not ours at all, so the error says what to do.
    static func requireSupportedLayout(_ text: [UInt8], path: String) throws(YCache.Error) {
        guard let version = parseLayoutVersion(text) else {
            throw .storageUnavailable(
                path: path,
                reason: "unreadable layout file: this is not a YashimaShared storage directory, or its layout file "
                    + "is damaged; if it is a cache directory, delete it (everything in it can be regenerated)")
        }
        if version != CrossProcessProtocol.layoutVersion {
            throw .unsupportedLayout(path: path, found: version, supported: CrossProcessProtocol.layoutVersion)
        }
    }

    /// Refuses a directory whose existing layout file this code cannot use, before anything is created
    /// in it. A missing layout file is fine: `ensureLayout` writes one. Returns whether a supported layout
    /// file was found: it is written once and never changed (I12), so the opener need not read it again.
    @discardableResult
    static func refuseUnsupportedLayout(_ root: Int32, path: String) throws(YCache.Error) -> Bool {
        guard case .success(let text?) = readSmallFile(layoutFile, in: root) else { return false }
        try requireSupportedLayout(text, path: path)
        return true
    }

    static func parseLayoutVersion(_ bytes: [UInt8]) -> Int? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let prefix = "yashima-shared layout "
        guard text.hasPrefix(prefix) else { return nil }
        return Int(text.dropFirst(prefix.count).trimmingWhitespace())
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var s = self
        while let last = s.last, last.isWhitespace { s = s.dropLast() }
        while let first = s.first, first.isWhitespace { s = s.dropFirst() }
        return s
    }
}
