// The app-and-helper guide (SharingAcrossProcesses.md): two programs, run as two users of one group, share
// previews; the app waits for each preview by observing it.

import Foundation
import YashimaShared

// sample: app-and-helper
/// The key of a document's preview, shared by the app and its helper.
func previewKey(_ document: String) -> CacheKey {
    CacheKey(namespace: "previews", identity: document).version("renderer", 2)
}

/// Opens the cache both programs share: group-shared mode makes every folder setgid 2770 and every file
/// 0660, whatever each user's umask, so entries one user writes the other can read, replace and trim.
func sharedPreviewCache(directory: String) -> YCache {
    YCache(storageDirectory: URL(fileURLWithPath: directory), sharing: .groupShared)
}

/// The helper, running as its own user: renders previews ahead of time.
func runHelper(directory: String, documents: [String]) async throws {
    let cache = sharedPreviewCache(directory: directory)
    for document in documents {
        _ = try await cache.data(for: previewKey(document)) { try await renderPreview(document) }
    }
    print("helper rendered \(documents.count) previews")
}

/// The app, running as another user: shows each preview the moment the helper has published it.
func runApp(directory: String, documents: [String]) async throws {
    let cache = sharedPreviewCache(directory: directory)
    for document in documents {
        let key = previewKey(document)
        // Observe before looking, starting with what is stored: a preview published in between is not missed.
        let changes = try await cache.observe(for: key, codec: DataCodec(), startingWith: .currentState)
        print("app waits for \(document)")
        fflush(nil)  // shown now, not when the program ends (output to a pipe is buffered)
        for try await change in changes {
            guard case .published = change, let preview = try await cache.valueIfCached(for: key, codec: DataCodec())
            else { continue }  // removed, or gone again before it could be read: keep waiting
            print("app shows \(String(decoding: preview, as: UTF8.self))")
            break
        }
    }
}
// end sample

/// Stands in for an expensive preview render.
func renderPreview(_ document: String) async throws -> Data {
    try await Task.sleep(for: .milliseconds(50))
    return Data("preview of \(document)".utf8)
}
