// A fresh directory per test, removed afterwards.

import Foundation

final class TemporaryDirectory: Sendable {
    let url: URL
    var path: String { url.path }

    init(_ label: String = "test") {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("yashima-tests", isDirectory: true)
        try? FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        url = base.appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
