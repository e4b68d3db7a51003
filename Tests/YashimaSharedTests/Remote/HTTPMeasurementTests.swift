// HTTPMeasurementTests.swift: measurements, not assertions (run with YASHIMA_HTTP_MEASURE=1; skipped
// otherwise; for figures worth quoting build in release, see CONTRIBUTING), against one real nginx in
// one run so the figures compare: a remote hit through the whole tier at 4 KiB, 1 MiB and 16 MiB
// against `curl` fetching the same file from the same server (one curl process, the connection kept,
// its own per-transfer time) and against URLSession's own `data(for:)` (the floor of any URLSession
// client); and, for the streaming threshold, lookups into memory then written to a file (what the
// engine does with a small hit) against lookups streamed into the staging file. Peak memory of a
// large hit: HTTPLargeValueTests (a child process, so no other test's allocations count).

import Foundation
import Glibc
import Testing

@testable import YashimaShared

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(
    "HTTP measurements", .nginxServer,
    .enabled(if: ProcessInfo.processInfo.environment["YASHIMA_HTTP_MEASURE"] == "1", "set YASHIMA_HTTP_MEASURE=1"),
    .serialized)
struct HTTPMeasurementTests {
    private static func median(_ samples: [Int64]) -> Double { Double(samples.sorted()[samples.count / 2]) / 1000 }

    private static func report(_ label: String, _ samples: [Int64], against baseline: [Int64]? = nil) {
        let sorted = samples.sorted()
        let p90 = Double(sorted[sorted.count * 9 / 10]) / 1000
        let ratio = baseline.map { String(format: "   ×%.2f of curl", median(samples) / median($0)) } ?? ""
        let padded = label.padding(toLength: 58, withPad: " ", startingAt: 0)
        print(
            "MEASURE \(padded)"
                + String(format: "median %10.1f µs   p90 %10.1f µs   (n=%d)", median(samples), p90, samples.count)
                + ratio)
    }

    private static func time(_ count: Int, _ body: () async -> Void) async -> [Int64] {
        await timedRuns(count, warmUp: min(10, count), body)
    }

    /// One curl process fetching `url` `count` times over one kept connection: each transfer's own
    /// `time_total`, in nanoseconds.
    private static func curl(_ url: URL, count: Int) async throws -> [Int64] {
        try await offPool {
            let curl = try ChildProcess(
                "/usr/bin/curl",
                ["-s", "-w", "%{time_total}\\n"]
                    + Array(repeating: ["-o", "/dev/null", url.absoluteString], count: count + 10).flatMap { $0 },
                standardInputFromNullDevice: true)
            let data = curl.readToEnd(timeout: .seconds(600))
            _ = curl.waitForExit(timeout: .seconds(60))
            let times = String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { Double($0) }
            return times.dropFirst(10).map { Int64($0 * 1e9) }
        }
    }

    @Test("a remote hit through nginx at 4 KiB, 1 MiB and 16 MiB against curl of the same file")
    func hitsAgainstCurl() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else {
            print("MEASURE skipped: /usr/bin/curl not found")
            return
        }
        let server = try await NginxServer.start()
        let store = try makeHTTPStore(server.url())
        let directory = TemporaryDirectory("http-measure")
        let (staging, stagingFD) = try stagingFile(in: directory)
        defer { close(stagingFD) }
        let session = URLSession(configuration: .ephemeral)
        for (size, count) in [(4 << 10, 2000), (1 << 20, 300), (16 << 20, 40)] {
            let id = entryIdentity("measure-\(size)")
            _ = await store.store(id, payload: payload(size), createdAt: 1, expiresAt: 0)
            let label = size >= 1 << 20 ? "\(size >> 20) MiB" : "\(size >> 10) KiB"
            let curlSamples = try await Self.curl(store.url(for: id), count: count)
            Self.report("curl, same file, kept connection, \(label)", curlSamples)
            let request = URLRequest(url: store.url(for: id))
            Self.report(
                "URLSession.data(for:) alone, \(label)",
                await Self.time(count) { _ = try? await session.data(for: request) },
                against: curlSamples)
            Self.report(
                "store.lookup (payload in memory), \(label)", await Self.time(count) { _ = await store.lookup(id) },
                against: curlSamples)
            if size >= store.configuration.streamingThreshold {
                Self.report(
                    "store.lookup(staging:) (streamed to a file), \(label)",
                    await Self.time(count) { _ = await store.lookup(id, staging: staging) }, against: curlSamples)
            }
        }
        await server.stop()
    }

    @Test("the streaming threshold: into memory then a file, against streamed into the staging file")
    func threshold() async throws {
        let server = try await NginxServer.start()
        let inMemory = try makeHTTPStore(server.url())
        let streamed = try makeHTTPStore(server.url()) { $0.streamingThreshold = 0 }
        let directory = TemporaryDirectory("http-threshold")
        let (staging, stagingFD) = try stagingFile(in: directory)
        defer { close(stagingFD) }
        let (_, publishFD) = try stagingFile(in: directory, name: "published")
        defer { close(publishFD) }
        for size in [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20] {
            let id = entryIdentity("threshold-\(size)")
            _ = await inMemory.store(id, payload: payload(size), createdAt: 1, expiresAt: 0)
            let count = max(8, min(500, (256 << 20) / size))
            let label = size >= 1 << 20 ? "\(size >> 20) MiB" : "\(size >> 10) KiB"
            let memory = await Self.time(count) {
                // What the engine does with a small hit: the payload in memory, then its local entry.
                guard case .hit(let value) = await inMemory.lookup(id) else { return }
                _ = value.payload.withUnsafeBytes { Syscall.write(publishFD, $0, at: 200) }
            }
            let file = await Self.time(count) { _ = await streamed.lookup(id, staging: staging) }
            Self.report("\(label): in memory, then written", memory)
            Self.report("\(label): streamed into the staging file", file)
        }
        await server.stop()
    }
}
