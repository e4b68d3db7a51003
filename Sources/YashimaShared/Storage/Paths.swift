// Every path inside the storage root is made here, from the folder and suffix names below: entries by
// entry identity, lock files by key digest, staging files by unpredictable random names (I2). Paths are
// typed (`EntryPath`, `LockPath`) so a lock path can never be passed where an entry path is expected. No
// path contains key text.

/// A path of an entry file, relative to the root.
struct EntryPath: Hashable, Sendable {
    let fanOut: String  // "entries/ab"
    let relative: String  // "entries/ab/<hex>.entry"
}

/// A path of a key's lock file, relative to the root.
struct LockPath: Hashable, Sendable {
    let fanOut: String  // "locks/ab"
    let relative: String  // "locks/ab/<stableIdentifier>.lock"
}

extension Directory {
    static let entriesFolder = "entries"
    static let locksFolder = "locks"
    static let stagingFolder = "tmp"
    static let layoutFile = "layout"
    static let stateFile = "state"
    static let trimLockFile = "trim.lock"
    /// The removal markers' folder (I15), made by the first observer of a directory (Observation/RemovalSignal).
    static let signalsFolder = "signals"
    /// The records of remote deletes this directory owes (Engine/RemoteWriteWindow, I16), one empty file each.
    static let owedDeletesFolder = "remote-deletes"
    static let owedDeleteSuffix = ".owed"
    static let entrySuffix = ".entry"
    static let lockSuffix = ".lock"
    static let stagingSuffix = ".staging"
    /// The suffix of an entry a remover renamed aside into `tmp/` (EntryRemove.takeAside): it keeps the
    /// entry's old mtime, so the debris sweep goes by its ctime too (the rename's).
    static let asideSuffix = ".aside"

    /// Every name the cache itself puts in a storage root (folders being made aside, `folderStagingPrefix`,
    /// apart): anything else there is not the cache's.
    static let rootNames: [String] = [
        entriesFolder, locksFolder, stagingFolder, signalsFolder, owedDeletesFolder, layoutFile, stateFile,
        trimLockFile,
    ]

    func entryPath(for identity: EntryIdentity) -> EntryPath { Self.entryPath(for: identity) }

    /// The same for any root: an entry's relative path depends on its identity only.
    static func entryPath(for identity: EntryIdentity) -> EntryPath {
        let (fanOut, relative) = fannedOut(Directory.entriesFolder, identity.digest, Directory.entrySuffix)
        return EntryPath(fanOut: fanOut, relative: relative)
    }

    func lockPath(forKeyDigest digest: SHA256Digest) -> LockPath { Self.lockPath(forKeyDigest: digest) }

    /// The same for any root: a key's lock path depends on its digest only.
    static func lockPath(forKeyDigest digest: SHA256Digest) -> LockPath {
        let (fanOut, relative) = fannedOut(Directory.locksFolder, digest, Directory.lockSuffix)
        return LockPath(fanOut: fanOut, relative: relative)
    }

    /// `folder/ab/<hex><suffix>` and its fan-out folder `folder/ab` (`ab`: the hex's first two digits),
    /// written straight into the strings: a process makes both paths for every key it meets, and
    /// concatenating them took several allocations and copies.
    private static func fannedOut(_ folder: String, _ digest: SHA256Digest, _ suffix: String) -> (
        fanOut: String, relative: String
    ) {
        var (folder, suffix) = (folder, suffix)
        return folder.withUTF8 { folderBytes in
            suffix.withUTF8 { suffixBytes in
                let fanOutCount = folderBytes.count + 3  // "folder/ab"
                let hexStart = fanOutCount + 1
                var fanOut = ""
                let count = hexStart + 64 + suffixBytes.count
                let relative = String(unsafeUninitializedCapacity: count) { output in
                    _ = UnsafeMutableBufferPointer(rebasing: output[..<folderBytes.count]).initialize(
                        fromContentsOf: folderBytes)
                    digest.writeHex(into: UnsafeMutableBufferPointer(rebasing: output[hexStart...]))
                    output[folderBytes.count] = UInt8(ascii: "/")
                    output[folderBytes.count + 1] = output[hexStart]
                    output[folderBytes.count + 2] = output[hexStart + 1]
                    output[fanOutCount] = UInt8(ascii: "/")
                    _ = UnsafeMutableBufferPointer(rebasing: output[(hexStart + 64)..<count]).initialize(
                        fromContentsOf: suffixBytes)
                    fanOut = String(decoding: UnsafeBufferPointer(rebasing: output[..<fanOutCount]), as: UTF8.self)
                    return count
                }
                return (fanOut, relative)
            }
        }
    }

    /// A fresh, unpredictable name in `tmp/` for an entry taken aside (I4).
    func newAsidePath() -> String {
        Directory.stagingFolder + "/" + Directory.randomHex(byteCount: 12) + Directory.asideSuffix
    }

    /// A fresh, unpredictable staging-file path (I2).
    func newStagingPath() -> String {
        Directory.stagingFolder + "/" + Directory.randomHex(byteCount: 12) + Directory.stagingSuffix
    }

    /// `byteCount` random bytes as lowercase hex, two digits each: unpredictable names for staging files
    /// and folders (I2).
    static func randomHex(byteCount: Int) -> String {
        var name = ""
        for byte in Syscall.randomBytes(byteCount) {
            name.append(hexDigits[Int(byte >> 4)])
            name.append(hexDigits[Int(byte & 0xF)])
        }
        return name
    }
}

private let hexDigits: [Character] = Array("0123456789abcdef")
