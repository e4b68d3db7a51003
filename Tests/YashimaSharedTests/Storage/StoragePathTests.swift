// The storage directory's path as the engine opens it: `YCache.standardPath` skips Foundation's
// standardization for a path that is already standard (a `yashima` hit's start-up) and must give what
// `standardizedFileURL.path` gives, for every URL.

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
}
