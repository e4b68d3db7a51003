// Section "remote", HTTP part: a remote hit through YCache from nginx (WebDAV, started here on a free
// port with a configuration written here) at 4 KiB, 1 MiB and 16 MiB — lookup, verify, publish locally,
// large values streamed through a staging file — against its floor: `curl` (a C program) fetching the same
// stored file from the same server in the same run (one `curl` process fetching it repeatedly over one
// kept-alive connection; the times are curl's own per transfer, `%{time_total}`) plus the C floor's miss
// and publish of the value (Benchmarks/floors/publish.c) next to each hit; the library's own local
// miss-and-publish beside them. S3 part (S3RemoteBench): a hit from SeaweedFS's S3 gateway (SigV4 signed)
// at 4 KiB and 1 MiB against `curl --aws-sigv4` fetching the same object from the same server, plus the C
// publish. Skipped with a note when nginx, weed or curl is not installed.

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum HTTPRemoteBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("remote: hit from nginx over HTTP (not in local storage) vs curl fetching the same file")
        guard NginxServer.executablePath != nil,
            let curl = ["/usr/bin/curl", "/usr/local/bin/curl"].first(where: FileManager.default.isExecutableFile)
        else {
            report.add(BenchRow(section: "remote", name: "http section", note: "skipped: nginx or curl not found"))
            return
        }
        // The tests' nginx (ChildProcesses), requests not logged; stopped at the end of the section.
        guard let server = try? await NginxServer.start(accessLog: false) else {
            report.add(BenchRow(section: "remote", name: "http section", note: "skipped: nginx did not start"))
            return
        }
        defer { withExtendedLifetime(server) {} }
        let base = "http://127.0.0.1:\(server.port)/cache"
        let remote = try YCache.Remote.http(base, options: .init(operationTimeout: .seconds(10)))
        let iterations = context.quick ? 30 : 100
        for (label, size) in [("4 KiB", 4096), ("1 MiB", 1 << 20), ("16 MiB", 16 << 20)] {
            let value = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let key = CacheKey(namespace: "bench-http", identity: label)
            let before = storedFiles(server.root)
            let writer = YCache(
                storageDirectory: context.directory("http-writer"), remote: remote, storageMaximumByteCount: nil)
            try await writer.store(value, for: key, codec: DataCodec())
            guard let stored = storedFiles(server.root).subtracting(before).first else {
                throw ArgumentError(description: "http bench: the store left no file on nginx")
            }
            let fileURL = "http://127.0.0.1:\(server.port)/" + stored
            guard let times = fetch(curl, fileURL, times: iterations + 3) else {
                throw ArgumentError(description: "curl failed on \(fileURL)")
            }
            var curlSamples = Samples()
            for time in times.dropFirst(3) { curlSamples.append(time) }
            report.add(BenchRow(section: "remote", name: floorName("curl GET \(label)"), samples: curlSamples))
            // Another host (memory off) reads it, its local copy removed each time, each hit right after a
            // local miss-and-publish of the same value (what the hit shares with a generation).
            let reader = YCache(
                storageDirectory: context.directory("http-reader"), remote: remote, memoryMaximumCost: 0,
                storageMaximumByteCount: nil)
            // The C floor's GET over one kept-alive connection, measured in the hit's place (after the same
            // local work, so it finds the server as idle as the hit does).
            let get = try FloorServer(
                context, "http",
                ["--host", "127.0.0.1", "--port", "\(server.port)", "--path", "/" + stored, "--size", "\(size)"])
            let paired = try await RemoteBench.hitsPairedWithLocalMisses(
                context, value: value, key: key, rounds: iterations + 3, warmUp: 3, folder: "http-local",
                floor: {
                    try await reader.removeAll(in: "bench-http")  // as before a hit
                    return try get.run("G 1")
                }
            ) {
                try await reader.removeAll(in: "bench-http")  // local only: the remote value stays
                let start = monotonicNanoseconds()
                let resolution = try await reader.resolve(for: key, codec: DataCodec()) { Data() }
                let elapsed = Double(monotonicNanoseconds() - start)
                guard resolution.origin == .remote, resolution.value.count == size else {
                    throw ArgumentError(description: "http bench: expected a remote hit, got \(resolution.origin)")
                }
                return elapsed
            }
            let (hits, misses) = (paired.hits, paired.misses)
            report.add(
                BenchRow(
                    section: "remote", name: floorName("HTTP GET \(label), in the hit's place"), samples: paired.floors)
            )
            report.add(
                BenchRow(section: "remote", name: RemoteBench.rawPublishRow(label), samples: paired.rawPublishes))
            report.add(
                BenchRow(
                    section: "remote", name: "local miss+publish \(label) (next to the HTTP hits)", samples: misses),
                comparedTo: RemoteBench.rawPublishRow(label))
            // The floor: the faster of the C GET in the hit's place and curl, plus the C publish.
            let transfer = paired.floors.median <= curlSamples.median ? paired.floors : curlSamples
            let floor = floorName(
                (transfer.median == curlSamples.median ? "curl" : "HTTP") + " GET \(label) + miss+publish")
            report.add(
                BenchRow(
                    section: "remote", name: floor,
                    samples: RemoteBench.sumOfOrderStatistics(transfer, paired.rawPublishes)))
            let curlFloor = RemoteBench.sumOfOrderStatistics(curlSamples, paired.rawPublishes)
            let withLocalMiss = RemoteBench.sumOfOrderStatistics(transfer, misses)
            let limit = size <= 4096 ? 1.5 : (size <= 1 << 20 ? 1.2 : nil)
            report.add(
                BenchRow(
                    section: "remote", name: "HTTP remote hit \(label) (YCache, then in local storage)", samples: hits,
                    note: String(
                        format: "%.2fx curl + the C publish; %.2fx that GET + the library's own local miss+publish; "
                            + "load %@",
                        hits.median / curlFloor.median, hits.median / withLocalMiss.median, loadAverage())),
                comparedTo: floor, limit: limit, targetText: limit.map { String(format: "≤ %.1fx the C floor", $0) })
        }
    }

    /// The files under nginx's root, relative to it.
    private static func storedFiles(_ root: String) -> Set<String> {
        let paths = (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []
        return Set(
            paths.filter { path in
                var status = stat()
                return stat(root + "/" + path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
            })
    }

    /// `count` fetches of `url` by one `curl` process (one connection, kept alive), each into /dev/null:
    /// the transfer times curl measured, in nanoseconds; nil when it failed.
    static func fetch(_ curl: String, _ url: String, times count: Int, options: [String] = []) -> [Double]? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: curl)
        process.arguments =
            ["-s", "-f", "-w", "%{time_total}\\n"] + options
            + (0..<count).flatMap { _ in ["-o", "/dev/null", url] }
        let output = Pipe()
        process.standardOutput = output
        guard (try? process.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let times = String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { Double($0) }
        guard process.terminationStatus == 0, times.count == count else { return nil }
        return times.map { $0 * 1e9 }
    }
}

/// The S3 part of section "remote": SeaweedFS (the tests' `weed server -s3`, started here) against
/// `curl --aws-sigv4`.
enum S3RemoteBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("remote: hit from SeaweedFS over S3 (SigV4) vs curl --aws-sigv4 fetching the same object")
        guard SeaweedServer.executablePath != nil,
            let curl = ["/usr/bin/curl", "/usr/local/bin/curl"].first(where: FileManager.default.isExecutableFile)
        else {
            report.add(BenchRow(section: "remote", name: "s3 section", note: "skipped: weed or curl not found"))
            return
        }
        guard let server = try? await SeaweedServer.start() else {
            report.add(BenchRow(section: "remote", name: "s3 section", note: "skipped: weed did not start"))
            return
        }
        do {
            try await measure(context, server: server, curl: curl)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    private static func measure(_ context: BenchContext, server: SeaweedServer, curl: String) async throws {
        let report = context.report
        let prefix = "bench-\(UInt32.random(in: 0...UInt32.max))"
        let remote = try YCache.Remote.s3(
            "s3://\(SeaweedServer.bucket)/\(prefix)?endpoint=\(server.endpoint)&region=us-east-1",
            accessKeyID: SeaweedServer.accessKeyID, secretAccessKey: SeaweedServer.secretAccessKey,
            options: .init(operationTimeout: .seconds(10)))
        let signing = [
            "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
            "\(SeaweedServer.accessKeyID):\(SeaweedServer.secretAccessKey)",
        ]
        let iterations = context.quick ? 30 : 100
        var seen: Set<String> = []
        for (label, size) in [("4 KiB", 4096), ("1 MiB", 1 << 20)] {
            let value = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let key = CacheKey(namespace: "bench-s3", identity: label)
            let writer = YCache(
                storageDirectory: context.directory("s3-writer"), remote: remote, storageMaximumByteCount: nil)
            try await writer.store(value, for: key, codec: DataCodec())
            let objects = try list(curl, server, prefix: prefix, signing: signing)
            guard let stored = objects.subtracting(seen).first, objects.subtracting(seen).count == 1 else {
                throw ArgumentError(description: "s3 bench: the store left \(objects.subtracting(seen)) objects")
            }
            seen = objects
            let objectURL = "\(server.endpoint)/\(SeaweedServer.bucket)/\(stored)"
            guard let times = HTTPRemoteBench.fetch(curl, objectURL, times: iterations + 3, options: signing) else {
                throw ArgumentError(description: "curl --aws-sigv4 failed on \(objectURL)")
            }
            var curlSamples = Samples()
            for time in times.dropFirst(3) { curlSamples.append(time) }
            report.add(
                BenchRow(section: "remote", name: floorName("curl --aws-sigv4 GET \(label)"), samples: curlSamples))
            let reader = YCache(
                storageDirectory: context.directory("s3-reader"), remote: remote, memoryMaximumCost: 0,
                storageMaximumByteCount: nil)
            let paired = try await RemoteBench.hitsPairedWithLocalMisses(
                context, value: value, key: key, rounds: iterations + 3, warmUp: 3, folder: "s3-local"
            ) {
                try await reader.removeAll(in: "bench-s3")  // local only: the remote value stays
                let start = monotonicNanoseconds()
                let resolution = try await reader.resolve(for: key, codec: DataCodec()) { Data() }
                let elapsed = Double(monotonicNanoseconds() - start)
                guard resolution.origin == .remote, resolution.value.count == size else {
                    throw ArgumentError(description: "s3 bench: expected a remote hit, got \(resolution.origin)")
                }
                return elapsed
            }
            let rawRow = RemoteBench.rawPublishRow(label) + " (next to the S3 hits)"
            report.add(BenchRow(section: "remote", name: rawRow, samples: paired.rawPublishes))
            let floor = floorName("curl --aws-sigv4 GET \(label) + miss+publish")
            report.add(
                BenchRow(
                    section: "remote", name: floor,
                    samples: RemoteBench.sumOfOrderStatistics(curlSamples, paired.rawPublishes)))
            let withLocalMiss = RemoteBench.sumOfOrderStatistics(curlSamples, paired.misses)
            report.add(
                BenchRow(
                    section: "remote", name: "S3 remote hit \(label) (YCache, then in local storage)",
                    samples: paired.hits,
                    note: String(
                        format: "%.2fx curl's GET + the library's own local miss+publish; load %@",
                        paired.hits.median / withLocalMiss.median, loadAverage())),
                comparedTo: floor)
        }
    }

    /// The object keys under `prefix/` (one ListObjectsV2 page, signed by curl).
    private static func list(_ curl: String, _ server: SeaweedServer, prefix: String, signing: [String]) throws
        -> Set<String>
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: curl)
        process.arguments =
            ["-s", "-f"] + signing + ["\(server.endpoint)/\(SeaweedServer.bucket)?list-type=2&prefix=\(prefix)%2F"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ArgumentError(description: "curl --aws-sigv4 could not list the bucket")
        }
        let text = String(decoding: data, as: UTF8.self)
        var keys: Set<String> = []
        for part in text.components(separatedBy: "<Key>").dropFirst() {
            if let end = part.range(of: "</Key>") { keys.insert(String(part[..<end.lowerBound])) }
        }
        return keys
    }
}
