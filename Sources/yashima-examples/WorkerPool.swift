// The worker-pool guide (SharingAcrossProcesses.md): a launcher starts N copies of this program on one
// storage directory.

import Foundation
import YashimaShared

// sample: worker-pool
/// The pages every worker needs; each one takes a while to render.
let pages = 1...12

/// Starts `count` workers on one storage directory and waits for all of them.
func launchWorkers(count: Int, directory: String) throws {
    let workers = try (0..<count).map { index in
        let worker = Process()
        worker.executableURL = Bundle.main.executableURL  // this program, in worker mode
        worker.arguments = ["pool-worker", directory, String(index)]
        try worker.run()
        return worker
    }
    for worker in workers { worker.waitUntilExit() }
}

/// One worker: renders every page in its own order. Nothing is configured for sharing: the directory
/// is the only thing the workers have in common, and each page is rendered once in the whole pool.
func runWorker(index: Int, directory: String) async throws {
    let cache = YCache(storageDirectory: URL(fileURLWithPath: directory))
    var rendered = 0
    for page in pages.shuffled() {
        let key = CacheKey(namespace: "pages", identity: "annual-report").variant("page", page)
            .version("renderer", 1)
        let resolution = try await cache.resolve(for: key, codec: DataCodec()) {
            try await renderPage(page)
        }
        if resolution.source == .generated { rendered += 1 }
    }
    print("worker \(index) rendered \(rendered) of \(pages.count) pages")
}
// end sample

/// Stands in for an expensive page render.
func renderPage(_ page: Int) async throws -> Data {
    try await Task.sleep(for: .milliseconds(100))
    return Data("page \(page)".utf8)
}
