// HTTPLargeValueTests.swift: a 256 MiB value through nginx, streamed both ways, in a child process (the
// test bundle itself, running only the child test below), so its peak resident memory is that round
// trip's and no other test's: the store streams from a file, the lookup into a staging file, and the
// child's VmHWM growth must stay far below the value's size. The child prints its figures; the parent
// checks them and the staged bytes.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("HTTP large values (nginx)", .nginxServer, .serialized)
struct HTTPLargeValueTests {
    static let childVariable = "YASHIMA_HTTP_LARGE_VALUE_CHILD"
    static let size = 256 << 20

    @Test("256 MiB streamed both ways in a child process: peak memory stays bounded")
    func boundedMemory() async throws {
        guard ProcessInfo.processInfo.environment[Self.childVariable] == nil else { return }
        let server = try await NginxServer.start()
        let directory = TemporaryDirectory("http-large")
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let (line, fields) = try await childTestReport(
            filter: "HTTPLargeValueTests/childRoundTrip", Self.childVariable, "\(server.url())|\(directory.path)",
            prefix: "LARGE-VALUE ")
        print("HTTP 256 MiB round trip (child): \(line ?? "no output")")
        let (baseline, storePeak, lookupPeak) = (
            fields["baseline"] ?? 0, fields["storePeak"] ?? 0, fields["lookupPeak"] ?? 0
        )
        #expect(fields["stored"] == 1 && fields["hit"] == 1, "\(line ?? "no output")")
        #expect(baseline > 0 && storePeak - baseline < 64 << 20, "store grew \((storePeak - baseline) >> 20) MiB")
        #expect(baseline > 0 && lookupPeak - baseline < 64 << 20, "lookup grew \((lookupPeak - baseline) >> 20) MiB")
        await server.stop()
    }

    /// Runs in the child only: the round trip, with the figures on one line.
    @Test("(child) 256 MiB round trip", .enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func childRoundTrip() async throws {
        let parts = (ProcessInfo.processInfo.environment[Self.childVariable] ?? "").split(separator: "|")
        let (url, folder) = (String(parts[0]), String(parts[1]))
        let store = try makeHTTPStore(url)
        let chunk = payload(1 << 20, seed: 9)
        let source = "\(folder)/source"
        _ = FileManager.default.createFile(atPath: source, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: source))
        var checksum: UInt32 = 0
        for _ in 0..<(Self.size >> 20) {
            handle.write(chunk)
            checksum = chunk.withUnsafeBytes { CRC32C.checksum($0, continuing: checksum) }
        }
        try handle.close()
        let input = open(source, O_RDONLY | O_CLOEXEC)
        defer { close(input) }
        let staging = open("\(folder)/staging", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(staging) }
        let id = entryIdentity("large-value")
        resetPeakMemory()
        let baseline = residentMemory().current
        let file = RemotePayloadFile(descriptor: input, offset: 0, byteCount: Self.size, checksum: checksum)
        let stored = await store.store(id, payloadFile: file, createdAt: 1, expiresAt: 0)
        let storePeak = residentMemory().peak
        resetPeakMemory()
        let lookup = await store.lookup(id, staging: RemoteStagingFile(descriptor: staging, payloadOffset: 0))
        let lookupPeak = residentMemory().peak
        let expected = RemoteFileValue(
            payloadByteCount: Self.size, payloadChecksum: checksum, createdAt: 1, expiresAt: 0)
        // The staged bytes are the source's (compared a chunk at a time, not held whole).
        var same = lookup == .hitInFile(expected)
        var buffer = Data(count: 1 << 20)
        for index in 0..<(Self.size >> 20) where same {
            let read = buffer.withUnsafeMutableBytes { Syscall.read(staging, into: $0, at: Int64(index) << 20) }
            same = (try? read.get()) == 1 << 20 && buffer == chunk
        }
        print(
            "LARGE-VALUE stored=\(stored == .stored ? 1 : 0) hit=\(same ? 1 : 0) baseline=\(baseline) "
                + "storePeak=\(storePeak) lookupPeak=\(lookupPeak)")
        fflush(nil)
    }
}
