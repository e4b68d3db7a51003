// The storage directory's path as the engine opens it: `YCache.standardPath` skips Foundation's
// standardization for a path that is already standard (a `yashima` hit's start-up) and must give what
// `standardizedFileURL.path` gives, for every URL. And the paths inside it: an entry's and a key lock's,
// written straight into their strings (Storage/Paths.swift), against the spec's golden key and against the
// plain concatenation they replace.

import Foundation
import Testing

@testable import YashimaShared

@Suite struct StoragePathTests {
    @Test(
        "the storage path is standardizedFileURL.path, whether the fast path takes it or not",
        arguments: [
            "/", "/a", "/var/cache/yashima", "/a/b/", "/a//b", "/a/./b", "/a/../b", "/a/b/.", "/a/b/..", "/..",
            "/a/.b", "/a/..b", "/a/...", "/a/b c", "/a/%20", "/tmp/x/c", "relative/dir", "./here", "../up",
            "/a/é/日本", "//a",
        ])
    func matchesFoundation(_ path: String) {
        let url = URL(fileURLWithPath: path)
        #expect(YCache.standardPath(url) == url.standardizedFileURL.path)
    }

    @Test("a URL that is not a file URL is standardized by Foundation")
    func otherURLs() throws {
        let url = try #require(URL(string: "http://host/a/../b"))
        #expect(YCache.standardPath(url) == url.standardizedFileURL.path)
    }

    @Test("an entry's and a key lock's paths: folder, the digest's first two hex digits, the hex and suffix")
    func entryAndLockPaths() {
        let key = FormatSpecTests.goldenKey
        let entry = Directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: "data-v1"))
        let golden = FormatSpecTests.goldenEntryIdentity
        #expect(entry.fanOut == "entries/5f")
        #expect(entry.relative == "entries/5f/\(golden).entry")
        let lock = Directory.lockPath(forKeyDigest: key.stableDigest)
        #expect(lock.fanOut == "locks/a0")
        #expect(lock.relative == "locks/a0/\(FormatSpecTests.goldenStableIdentifier).lock")
        for round in 0..<200 {
            let identity = EntryIdentity(key: CacheKey(namespace: "paths", identity: "\(round)"), codecIdentifier: "")
            let digest = identity.digest
            let hex = digest.bytes.map { String(format: "%02x", $0) }.joined()
            #expect(digest.hex == hex)
            let entry = Directory.entryPath(for: identity)
            let fanOut = String(hex.prefix(2))
            #expect(entry == EntryPath(fanOut: "entries/" + fanOut, relative: "entries/\(fanOut)/\(hex).entry"))
            let lock = Directory.lockPath(forKeyDigest: digest)
            #expect(lock == LockPath(fanOut: "locks/" + fanOut, relative: "locks/\(fanOut)/\(hex).lock"))
        }
    }
}
