// Helpers for tests that look at or damage the storage directory from outside: where an entry lives,
// replacing a file the way a concurrent writer would (a new inode renamed over the path, never an
// in-place write to a file that might be mapped), and setting mtimes to build an LRU order.

import Foundation
import Synchronization
import Testing

@testable import YashimaShared

extension YCache {
    /// The opened storage context (opens the directory if needed).
    func storageContext() throws -> StorageContext {
        try engine.storageTier.context().get()
    }

    /// Where the entry of `key` encoded by `codec` lives.
    func entryURL<Codec: CacheCodec>(_ key: CacheKey, _ codec: Codec) throws -> URL {
        let path = try storageContext().directory.entryPath(
            for: EntryIdentity(key: key, codecIdentifier: codec.identifier))
        return storageDirectory.appendingPathComponent(path.relative)
    }
}

/// Creates `url` (which must not exist) holding `bytes`, and its folder (mode 0700) if missing: the
/// cache makes fan-out folders only when it first needs them. Plain open/write/close: Foundation's
/// `Data.write(to:)` calls fsync, and a few hundred fsyncs make the suite wait on the disk for seconds.
func writeFile(_ bytes: Data, to url: URL) throws {
    _ = mkdir(url.deletingLastPathComponent().path, 0o700)  // EEXIST is fine
    let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path]) }
    defer { close(fd) }
    try bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
            guard written > 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path]) }
            offset += written
        }
    }
}

/// Writes `bytes` to a sibling file and renames it over `url` (a new inode: mappings of the old file,
/// if any, are untouched, as I1 requires of everyone).
func replaceFile(at url: URL, with bytes: Data) throws {
    let staging = url.deletingLastPathComponent().appendingPathComponent(".replacement-\(UUID().uuidString)")
    try writeFile(bytes, to: staging)
    guard rename(staging.path, url.path) == 0 else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
    }
}

/// Sets the file's mtime to `secondsAgo` seconds before now.
func setModificationTime(_ url: URL, secondsAgo: Double) throws {
    try FileManager.default.setAttributes(
        [.modificationDate: Date(timeIntervalSinceNow: -secondsAgo)], ofItemAtPath: url.path)
}

/// The file's mtime.
func modificationTime(_ url: URL) throws -> Date {
    try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as! Date
}

/// Every `*.entry` file under `root/entries`.
func entryFiles(in root: URL) -> [URL] {
    let entries = root.appendingPathComponent(Directory.entriesFolder)
    guard let walker = FileManager.default.enumerator(at: entries, includingPropertiesForKeys: nil) else { return [] }
    return walker.compactMap { $0 as? URL }.filter { $0.lastPathComponent.hasSuffix(Directory.entrySuffix) }
}

func fileExists(_ url: URL) -> Bool {
    FileManager.default.fileExists(atPath: url.path)
}

// MARK: Codecs for tests

/// A string codec that counts encode and decode calls.
struct CountingCodec: CacheCodec {
    final class Calls: Sendable {
        let encodes = Counter()
        let decodes = Counter()
    }

    let calls = Calls()
    var identifier: String { "counting-v1" }

    func encode(_ value: String) throws -> Data {
        calls.encodes.increment()
        return Data(value.utf8)
    }

    func decode(_ data: Data) throws -> String {
        calls.decodes.increment()
        return String(decoding: data, as: UTF8.self)
    }
}

struct CodecFailure: Error, Equatable {}

/// A string codec whose encode always throws.
struct UnencodableCodec: CacheCodec {
    var identifier: String { "unencodable-v1" }
    func encode(_ value: String) throws -> Data { throw CodecFailure() }
    func decode(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}

/// A string codec whose decode always throws (its encode works).
struct UndecodableCodec: CacheCodec {
    var identifier: String { "undecodable-v1" }
    func encode(_ value: String) throws -> Data { Data(value.utf8) }
    func decode(_ data: Data) throws -> String { throw CodecFailure() }
}

struct GeneratorFailure: Error, Equatable {
    var label = "boom"
}

/// A cache over a fresh directory labelled `label` (removed when `dir` goes).
func makeCache(_ label: String) -> (dir: TemporaryDirectory, cache: YCache) {
    let dir = TemporaryDirectory(label)
    return (dir, YCache(storageDirectory: dir.url))
}

/// What a new instance over `dir` finds in storage for `key`: another process's view, empty memory.
func stored<Codec: CacheCodec>(in dir: TemporaryDirectory, _ key: CacheKey, _ codec: Codec) async throws
    -> Codec.Value?
{
    try await YCache(storageDirectory: dir.url).valueIfCached(for: key, codec: codec)
}

extension YCache {
    /// Stores `count` entries of `namespace` (identities `<prefix><index>`), each `payload(index)`.
    func storeEntries(
        _ count: Int, namespace: String, prefix: String, _ payload: (Int) -> Data = { _ in Data(count: 100) }
    ) async throws {
        for index in 0..<count {
            try await store(
                payload(index), for: CacheKey(namespace: namespace, identity: "\(prefix)\(index)"), codec: DataCodec())
        }
    }
}
