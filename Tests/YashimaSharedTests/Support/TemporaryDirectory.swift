// A fresh directory per test, removed afterwards: renamed aside at once, then deleted on a thread of its
// own (a test's storage can hold thousands of files or a 256 MiB value, and the last reference is often
// dropped on a thread of the cooperative pool). What a run ended before deleting is swept by the next.

import Foundation
import Glibc

final class TemporaryDirectory: Sendable {
    let url: URL
    var path: String { url.path }

    private static let base = FileManager.default.temporaryDirectory.appendingPathComponent(
        "yashima-tests", isDirectory: true)

    /// Removals an earlier run left unfinished, swept once per process (off the pool, like every removal).
    private static let sweep: Void = {
        let base = TemporaryDirectory.base
        Thread {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? []
            for name in names where name.hasPrefix(".removing-") {
                try? FileManager.default.removeItem(at: base.appendingPathComponent(name))
            }
        }.start()
    }()

    init(_ label: String = "test") {
        try? FileManager.default.createDirectory(at: Self.base, withIntermediateDirectories: true)
        Self.sweep
        url = Self.base.appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
    }

    deinit {
        let aside = Self.base.appendingPathComponent(".removing-\(UUID().uuidString)", isDirectory: true)
        guard rename(url.path, aside.path) == 0 else {
            try? FileManager.default.removeItem(at: url)
            return
        }
        Thread { try? FileManager.default.removeItem(at: aside) }.start()
    }
}
