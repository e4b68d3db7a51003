// The README's app-and-helper guide: two programs, run as two users of one group, share previews.

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

/// The app, running as another user: shows previews, reading what the helper made.
func runApp(directory: String, documents: [String]) async throws {
    let cache = sharedPreviewCache(directory: directory)
    for document in documents {
        let preview = try await cache.resolve(for: previewKey(document), codec: DataCodec()) {
            try await renderPreview(document)  // only if the helper has not made it yet
        }
        print("app shows \(document) from \(preview.source)")
    }
}
// end sample

/// Stands in for an expensive preview render.
func renderPreview(_ document: String) async throws -> Data {
    try await Task.sleep(for: .milliseconds(50))
    return Data("preview of \(document)".utf8)
}
