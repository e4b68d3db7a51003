// yashima-examples: the guides (the articles of Sources/YashimaShared/YashimaShared.docc) as one program,
// built with the package so the samples keep compiling; ExamplesTests runs each mode and checks what the
// guides say it prints. Every sample sits between `// sample: NAME` and `// end sample`, and every block of
// that name in the README and the guides must match it (ReadmeSamplesTests).

import Foundation
import YashimaShared

let usage = """
    usage: yashima-examples MODE DIRECTORY [ARGUMENTS]
      pool DIRECTORY COUNT          start COUNT workers on DIRECTORY (worker pools)
      pool-worker DIRECTORY INDEX   one worker
      helper DIRECTORY DOCUMENT...  render previews into a group-shared DIRECTORY
      app DIRECTORY DOCUMENT...     wait for previews in a group-shared DIRECTORY and show them
      fixture DIRECTORY             get the seeded-database fixture (parallel test runners)
      keys DIRECTORY                key design
      codecs DIRECTORY              the built-in codecs and a codec of your own
      options DIRECTORY             options and the other lookups
      lifecycle DIRECTORY           expiry, removal, usage and trimming
      observe DIRECTORY             sources, stored entries and counters
      remote DIRECTORY              configure the remote tiers of "Sharing across machines" (no server is
                                    contacted: the URLs, options and chains are checked)

    """

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
let (mode, directory, rest) = (arguments[0], arguments[1], Array(arguments.dropFirst(2)))
let cache = YCache(storageDirectory: URL(fileURLWithPath: directory))
switch mode {
case "pool": try launchWorkers(count: Int(rest.first ?? "") ?? 4, directory: directory)
case "pool-worker": try await runWorker(index: Int(rest.first ?? "") ?? 0, directory: directory)
case "helper": try await runHelper(directory: directory, documents: rest)
case "app": try await runApp(directory: directory, documents: rest)
case "fixture":
    let fixture = try await seededDatabase(buildDirectory: URL(fileURLWithPath: directory))
    print("fixture \(fixture.count) bytes")
case "keys": showKeys()
case "codecs": try await useCodecs(cache: cache)
case "options":
    let key = CacheKey(namespace: "thumbnail", identity: "video-9")
    _ = try await cache.value(for: key, codec: DataCodec(), options: listThumbnailOptions()) { Data("t".utf8) }
    try await otherLookups(cache: cache, key: key)
case "lifecycle": try await manageReports(directory: directory)
case "observe":
    try await observe(cache: cache)
    try await observe(cache: cache)
case "remote":
    let url = URL(fileURLWithPath: directory)
    let http = try artifactCaches(directory: url)
    let s3 = try bucketCaches(directory: url)
    let caches =
        [try renderCache(), http.valuesOnly, http.withLeases, s3.aws, s3.selfHosted]
        + [try chainedCache(directory: url, developerMachine: true)]
    print("configured \(caches.count) caches with a remote tier")
default:
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
