// Section "remote", HTTP part: a remote hit through YCache from nginx (WebDAV, started here on a free
// port with a configuration written here) at 4 KiB, 1 MiB and 16 MiB — lookup, verify, publish locally,
// large values streamed through a staging file — against `curl` fetching the same stored file from the
// same server in the same run (one `curl` process fetching it repeatedly over one kept-alive connection;
// the times are curl's own per transfer, `%{time_total}`).
// Skipped with a note when nginx or curl is not installed.

import Foundation
import Glibc
import YashimaShared

enum HTTPRemoteBench {
    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("remote: hit from nginx over HTTP (not in local storage) vs curl fetching the same file")
        let executable = { (paths: [String]) in paths.first { FileManager.default.isExecutableFile(atPath: $0) } }
        guard let nginx = executable(["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]),
            let curl = executable(["/usr/bin/curl", "/usr/local/bin/curl"])
        else {
            report.add(BenchRow(section: "remote", name: "http section", note: "skipped: nginx or curl not found"))
            return
        }
        guard let server = startNginx(nginx, in: context.base + "/bench-nginx") else {
            report.add(BenchRow(section: "remote", name: "http section", note: "skipped: nginx did not start"))
            return
        }
        defer {
            kill(server.process.processIdentifier, SIGKILL)
            server.process.waitUntilExit()
        }
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
            report.add(BenchRow(section: "remote", name: "curl GET \(label)", samples: curlSamples))
            // Another host (memory off) reads it, its local copy removed each time.
            let reader = YCache(
                storageDirectory: context.directory("http-reader"), remote: remote, memoryMaximumCost: 0,
                storageMaximumByteCount: nil)
            var hits = Samples()
            for round in 0..<(iterations + 3) {
                try await reader.removeAll(in: "bench-http")  // local only: the remote value stays
                let start = monotonicNanoseconds()
                let resolution = try await reader.resolve(for: key, codec: DataCodec()) { Data() }
                let elapsed = Double(monotonicNanoseconds() - start)
                guard resolution.origin == .remote, resolution.value.count == size else {
                    throw ArgumentError(description: "http bench: expected a remote hit, got \(resolution.origin)")
                }
                if round >= 3 { hits.append(elapsed) }
            }
            report.add(
                BenchRow(
                    section: "remote", name: "HTTP remote hit \(label) (YCache, then in local storage)", samples: hits),
                comparedTo: "curl GET \(label)")
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
    private static func fetch(_ curl: String, _ url: String, times count: Int) -> [Double]? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: curl)
        process.arguments =
            ["-s", "-f", "-w", "%{time_total}\\n"] + (0..<count).flatMap { _ in ["-o", "/dev/null", url] }
        let output = Pipe()
        process.standardOutput = output
        guard (try? process.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let times = String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { Double($0) }
        guard process.terminationStatus == 0, times.count == count else { return nil }
        return times.map { $0 * 1e9 }
    }

    /// nginx with WebDAV under `folder` on a free port, once it accepts connections.
    private static func startNginx(_ executable: String, in folder: String) -> (
        process: Process, port: Int, root: String
    )? {
        let root = folder + "/www"
        for sub in ["/www/cache", "/body"] {
            try? FileManager.default.createDirectory(atPath: folder + sub, withIntermediateDirectories: true)
        }
        guard let port = freePort() else { return nil }
        let configuration = """
            daemon off; master_process off; worker_processes 1;
            pid \(folder)/nginx.pid; error_log \(folder)/error.log;
            events { worker_connections 256; }
            http {
                access_log off;
                client_body_temp_path \(folder)/body;
                server {
                    listen 127.0.0.1:\(port);
                    root \(root);
                    location /cache/ {
                        dav_methods PUT DELETE; create_full_put_path on; client_max_body_size 64m;
                    }
                }
            }

            """
        guard (try? configuration.write(toFile: folder + "/nginx.conf", atomically: true, encoding: .utf8)) != nil
        else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-p", folder + "/", "-c", folder + "/nginx.conf", "-e", folder + "/error.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        for _ in 0..<500 {
            if connects(port) { return (process, port, root) }
            usleep(10_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return nil
    }

    /// A TCP port on 127.0.0.1 free a moment ago.
    private static func freePort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = loopback(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }

    /// Whether something accepts connections on 127.0.0.1:`port`.
    private static func connects(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
