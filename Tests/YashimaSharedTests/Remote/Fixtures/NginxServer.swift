// A real nginx per test (Debian's `nginx` package): a configuration written into a fresh /tmp folder
// (`daemon off`, `master_process off`, pid file, logs and body temp files in that folder, one server
// on 127.0.0.1 and a free port), started as a child, ready once it accepts connections, stopped with
// SIGTERM then SIGKILL (the process, the folder and the port retry are ServerProcess.swift's). Locations:
//
//     /cache/   WebDAV PUT and DELETE, create_full_put_path, client_max_body_size 300m (the README's)
//     /auth/    the same behind basic authentication (an htpasswd file with a {PLAIN} password)
//     /token/   the same, only for `Authorization: Bearer <NginxServer.token>`
//     /small/   client_max_body_size 16k (413 for larger values)
//     /static/  GET only (PUT and DELETE answer 405)
//     /broken/  every request answers 500
//     /moved/   every request answers 302 to /cache/
//
// With `tls`, the same locations on a second port over TLS, with a self-signed certificate made by
// `openssl` in the folder (`tlsPort`, `certificate`).
//
// When nginx is missing the suites skip, unless YASHIMA_REQUIRE_NGINX=1 (CI), where starting one fails.

import Foundation
import Glibc
import Synchronization
import Testing

@testable import YashimaShared

enum NginxAvailability {
    /// The nginx executable, if installed (`YASHIMA_NGINX` names another one; a path that does not exist
    /// plays a machine without nginx).
    static let path = serverExecutable(
        "nginx", named: "YASHIMA_NGINX", candidates: ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"])

    /// True when CI requires nginx (a missing server then fails instead of skipping).
    static var required: Bool { serverRequired(by: "YASHIMA_REQUIRE_NGINX") }

    /// Whether nginx suites run: always when required (and then fail without a server).
    static var enabled: Bool { path != nil || required }
}

/// The trait of every suite that starts nginx.
extension Trait where Self == ConditionTrait {
    static var nginxServer: Self {
        .enabled(
            if: NginxAvailability.enabled,
            "nginx not found: skipped (install it, or set YASHIMA_REQUIRE_NGINX=1 to fail instead)")
    }
}

/// One nginx process.
final class NginxServer: Sendable {
    /// The basic user of /auth/.
    static let user = "yashima"
    /// The basic password of /auth/ (characters a URL must percent-encode; no `:`, which ends an
    /// htpasswd password).
    static let password = "p@ss/w%rd"
    /// The bearer token of /token/.
    static let token = "test-token-0123456789"

    /// A private folder under /tmp: configuration, logs, body temp files, and `www/` (the root).
    let directory: String
    /// The port on 127.0.0.1.
    let port: Int
    /// The TLS port on 127.0.0.1 (0 without TLS).
    let tlsPort: Int
    private let process = ServerProcess()

    private init(directory: String, port: Int, tlsPort: Int) {
        self.directory = directory
        self.port = port
        self.tlsPort = tlsPort
    }

    /// The self-signed certificate of the TLS port (PEM).
    var certificate: String { "\(directory)/cert.pem" }

    /// The URL of a location (`/cache`, `/auth`, ...), without credentials.
    func url(_ location: String = "/cache") -> String { "http://127.0.0.1:\(port)\(location)" }

    /// Where nginx keeps the file of `url` (a value's URL from this server).
    func file(of url: URL) -> String { "\(directory)/www\(url.path)" }

    /// nginx's error log (for failure messages).
    var errorLog: String { (try? String(contentsOfFile: "\(directory)/error.log", encoding: .utf8)) ?? "" }

    /// Starts nginx on a free port (and with `tls` a second one over TLS) and waits until it accepts.
    static func start(tls: Bool = false) async throws -> NginxServer {
        guard let executable = NginxAvailability.path else {
            throw RedisFixtureError(description: "nginx not found and YASHIMA_REQUIRE_NGINX=1")
        }
        let directory = try makeServerFolder("/tmp/ysn-XXXXXX")
        for folder in ["www/cache", "www/auth", "www/token", "www/small", "www/static", "body"] {
            try FileManager.default.createDirectory(
                atPath: "\(directory)/\(folder)", withIntermediateDirectories: true)
        }
        try "\(user):{PLAIN}\(password)\n".write(toFile: "\(directory)/htpasswd", atomically: true, encoding: .utf8)
        if tls { try makeCertificate(in: directory) }
        return try await startRetryingTakenPorts {
            let server = NginxServer(
                directory: directory, port: RedisServer.freePort(), tlsPort: tls ? RedisServer.freePort() : 0)
            try server.configuration.write(toFile: "\(directory)/nginx.conf", atomically: true, encoding: .utf8)
            try await server.launch(executable)
            return server
        }
    }

    /// A self-signed P-256 certificate for 127.0.0.1, valid for a day.
    private static func makeCertificate(in directory: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "\(directory)/key.pem",
            "-out", "\(directory)/cert.pem",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw RedisFixtureError(description: "openssl req failed") }
    }

    private var configuration: String {
        let dav = "dav_methods PUT DELETE; create_full_put_path on; dav_access user:rw;"
        let tls =
            tlsPort == 0
            ? ""
            : """
                server {
                    listen 127.0.0.1:\(tlsPort) ssl;
                    ssl_certificate \(directory)/cert.pem;
                    ssl_certificate_key \(directory)/key.pem;
                    root \(directory)/www;
                    location /cache/ { \(dav) client_max_body_size 300m; }
                }
            """
        return """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log info;
            events { worker_connections 512; }
            http {
                access_log \(directory)/access.log;
                client_body_temp_path \(directory)/body;
                proxy_temp_path \(directory)/body;
                fastcgi_temp_path \(directory)/body;
                uwsgi_temp_path \(directory)/body;
                scgi_temp_path \(directory)/body;
                server {
                    listen 127.0.0.1:\(port);
                    root \(directory)/www;
                    location /cache/ { \(dav) client_max_body_size 300m; }
                    location /auth/ {
                        auth_basic "cache"; auth_basic_user_file \(directory)/htpasswd;
                        \(dav) client_max_body_size 300m;
                    }
                    location /token/ {
                        if ($http_authorization != "Bearer \(Self.token)") { return 401; }
                        \(dav) client_max_body_size 300m;
                    }
                    location /small/ { \(dav) client_max_body_size 16k; }
                    location /static/ { }
                    location /broken/ { return 500; }
                    location /moved/ { return 302 http://127.0.0.1:\(port)/cache/; }
                }
            \(tls)
            }

            """
    }

    private func launch(_ executable: String) async throws {
        let exit = try await process.launch(
            executable, ["-p", directory + "/", "-c", "\(directory)/nginx.conf", "-e", "\(directory)/error.log"])
        let (port, tlsPort) = (port, tlsPort)
        let ready = await process.waitUntilReady(exit, every: 5_000) {
            NginxServer.accepts(port) && (tlsPort == 0 || NginxServer.accepts(tlsPort))
        }
        guard ready else {
            await process.terminate()
            throw RedisFixtureError(description: "nginx not ready (\(exit.statusDescription)): \(errorLog.suffix(500))")
        }
    }

    /// True when something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(_ port: Int) -> Bool {
        loopbackSocket(port: port, { connect($0, $1, $2) }, flags: Int32(SOCK_CLOEXEC.rawValue))
    }

    /// Stops nginx (SIGTERM, up to 3 s, then SIGKILL) and removes the folder.
    func stop() async {
        await process.terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit {
        process.killNow()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
