// HTTPMeasurementTests.swift: measurements, not assertions (run with YASHIMA_HTTP_MEASURE=1; skipped
// otherwise), against a real nginx in one run so the figures compare: a remote hit through the whole
// tier at 4 KiB, 1 MiB and 16 MiB against `curl` fetching the same file from the same server; lookups
// into memory against lookups streamed into a staging file at sizes around the streaming threshold;
// and the peak resident memory of a 256 MiB store and hit, streamed.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite(
    "HTTP measurements", .nginxServer,
    .enabled(if: ProcessInfo.processInfo.environment["YASHIMA_HTTP_MEASURE"] == "1", "set YASHIMA_HTTP_MEASURE=1"),
    .serialized)
struct HTTPMeasurementTests {
    private static func report(_ label: String, _ samples: [Int64]) {
        let sorted = samples.sorted()
        let median = Double(sorted[sorted.count / 2]) / 1000
        let p90 = Double(sorted[sorted.count * 9 / 10]) / 1000
        let padded = label.padding(toLength: 56, withPad: " ", startingAt: 0)
        print(
            "MEASURE \(padded)" + String(format: "median %9.1f µs   p90 %9.1f µs   (n=%d)", median, p90, samples.count))
    }

    private static func time(_ count: Int, _ body: () async -> Void) async -> [Int64] {
        for _ in 0..<min(20, count) { await body() }
        var samples: [Int64] = []
        for _ in 0..<count {
            let start = Syscall.monotonicNanoseconds
            await body()
            samples.append(Syscall.monotonicNanoseconds - start)
        }
        return samples
    }

    @Test("peak resident memory of a 256 MiB store and hit, streamed through files")
    func largeValueMemory() async throws {
        let server = try await NginxServer.start()
        let store = try makeHTTPStore(server.url()) { $0.secret = RemoteSecret("measure") }
        let directory = TemporaryDirectory("http-rss")
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let count = 256 << 20
        let source = directory.path + "/source"
        let chunk = payload(1 << 20)
        _ = FileManager.default.createFile(atPath: source, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: source))
        var checksum: UInt32 = 0
        for _ in 0..<(count >> 20) {
            handle.write(chunk)
            checksum = chunk.withUnsafeBytes { CRC32C.checksum($0, continuing: checksum) }
        }
        try handle.close()
        let id = entryIdentity("rss-256")
        let input = open(source, O_RDONLY | O_CLOEXEC)
        defer { close(input) }
        resetPeakMemory()
        let before = residentMemory()
        let file = RemotePayloadFile(descriptor: input, offset: 0, byteCount: count, checksum: checksum)
        let stored = await store.store(id, payloadFile: file, createdAt: 1, expiresAt: 0)
        let afterStore = residentMemory()
        let staging = open(directory.path + "/staging", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(staging) }
        resetPeakMemory()
        let beforeLookup = residentMemory()
        let lookup = await store.lookup(id, staging: RemoteStagingFile(descriptor: staging, payloadOffset: 4096))
        let afterLookup = residentMemory()
        print(
            "MEASURE 256 MiB store: \(stored); RSS before \(before.current >> 20) MiB, peak \(afterStore.peak >> 20) MiB"
        )
        print(
            "MEASURE 256 MiB lookup: \(lookup == .unavailable ? "unavailable" : "done"); RSS before "
                + "\(beforeLookup.current >> 20) MiB, peak \(afterLookup.peak >> 20) MiB")
        #expect(stored == .stored)
        #expect(
            lookup
                == .hitInFile(
                    RemoteFileValue(payloadByteCount: count, payloadChecksum: checksum, createdAt: 1, expiresAt: 0)))
        await server.stop()
    }
}
