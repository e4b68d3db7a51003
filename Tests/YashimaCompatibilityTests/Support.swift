// Helpers for the compatibility tests: a fresh storage directory per test, a call counter and two small
// codecs. This target imports YashimaShared the way an app ported from Yashima does (no @testable), so
// everything here uses the public API only.

import Foundation
import YashimaShared

/// A fresh directory per test (not created: the cache creates it), removed afterwards.
final class ScratchDirectory: Sendable {
    let url: URL

    init(_ label: String) {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "yashima-compat-\(label)-\(UUID().uuidString)", isDirectory: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    /// Every entry file under the directory.
    var entryFiles: [URL] {
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: nil) else { return [] }
        return walker.compactMap { $0 as? URL }.filter { $0.pathExtension == "entry" }
    }
}

/// Counts calls from concurrent tasks.
actor CallCounter {
    private(set) var count = 0

    /// Adds one and returns the new count.
    func next() -> Int {
        count += 1
        return count
    }
}

/// Text as UTF-8, with an identifier of its own (a codec an app might write).
struct PlainTextCodec: CacheCodec {
    var identifier = "compat-plain-text-v1"

    func encode(_ value: String) throws -> Data { Data(value.utf8) }
    func decode(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}

/// The errors the test codecs throw.
enum CodecFailure: Error, Equatable {
    case cannotEncode
    case cannotDecode
}

/// A codec whose encode or decode always fails, with its own error.
struct FailingCodec: CacheCodec {
    var identifier = "compat-failing-v1"
    var failsToEncode = false

    func encode(_ value: String) throws -> Data {
        if failsToEncode { throw CodecFailure.cannotEncode }
        return Data(value.utf8)
    }

    func decode(_ data: Data) throws -> String { throw CodecFailure.cannotDecode }
}

/// A key in the tests' namespace.
func compatKey(_ name: String) -> CacheKey {
    CacheKey(namespace: "compat", identity: name)
}

/// A one-way signal between tasks: `wait` returns once `open` was called.
actor Latch {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Waits, but gives up after `seconds` (a bound against hanging, not a timing claim). True when open.
    nonisolated func wait(within seconds: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.wait()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            if !first { await self.open() }  // lets the waiting child finish
            return first
        }
    }
}
