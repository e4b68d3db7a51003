// A real nginx with WebDAV for the tests and the benchmarks (Debian's `nginx`): a configuration in a fresh
// /tmp folder (`daemon off`, one worker, pid, logs and body files there), 127.0.0.1 on a free port, ready
// once it accepts. Locations: /cache/ (PUT, DELETE), /auth/ (basic), /token/ (bearer), /small/ (16k),
// /static/ (GET only), /broken/ (500), /moved/ (302); with `tls` /cache/ on a second port over TLS.

import Foundation
import Glibc

/// One nginx process.
public final class NginxServer: Sendable {
    /// The nginx executable, if installed (`YASHIMA_NGINX` names another one; a path that does not exist
    /// plays a machine without nginx).
    public static let executablePath = serverExecutable(
        "nginx", named: "YASHIMA_NGINX", candidates: ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"])

    /// True when CI requires nginx (`YASHIMA_REQUIRE_NGINX=1`: a missing server fails instead of skipping).
    public static var isRequired: Bool { serverRequired(by: "YASHIMA_REQUIRE_NGINX") }

    /// The basic user of /auth/.
    public static let user = "yashima"
    /// The basic password of /auth/ (characters a URL must percent-encode; no `:`, which ends an
    /// htpasswd password).
    public static let password = "p@ss/w%rd"
    /// The bearer token of /token/.
    public static let token = "test-token-0123456789"

    /// A private folder under /tmp: configuration, logs, body temp files, and `www/` (the root).
    public let directory: String
    /// The port on 127.0.0.1.
    public let port: Int
    /// The TLS port on 127.0.0.1 (0 without TLS).
    public let tlsPort: Int
    private let process = ServerProcess()

    private init(directory: String, port: Int, tlsPort: Int, accessLog: Bool) {
        self.directory = directory
        self.port = port
        self.tlsPort = tlsPort
        self.accessLog = accessLog
    }

    /// The self-signed certificate of the TLS port (PEM).
    public var certificate: String { "\(directory)/cert.pem" }

    /// The URL of a location (`/cache`, `/auth`, ...), without credentials.
    public func url(_ location: String = "/cache") -> String { "http://127.0.0.1:\(port)\(location)" }

    /// Where nginx keeps the file of `url` (a value's URL from this server).
    public func file(of url: URL) -> String { "\(directory)/www\(url.path)" }

    /// nginx's error log (for failure messages).
    public var errorLog: String { (try? String(contentsOfFile: "\(directory)/error.log", encoding: .utf8)) ?? "" }

    /// Whether requests are logged to `access.log` (the benchmarks turn it off).
    private let accessLog: Bool

    /// The folder nginx serves (`/cache/...` are files below it).
    public var root: String { "\(directory)/www" }

    /// Starts nginx on a free port (and with `tls` a second one over TLS) and waits until it accepts.
    /// - Parameter accessLog: Log every request to `access.log` (default), or nothing.
    public static func start(tls: Bool = false, accessLog: Bool = true) async throws -> NginxServer {
        guard let executable = executablePath else { throw ServerError("nginx not found") }
        let directory = try makeServerFolder("/tmp/ysn-XXXXXX")
        for folder in ["www/cache", "www/auth", "www/token", "www/small", "www/static", "body"] {
            try FileManager.default.createDirectory(
                atPath: "\(directory)/\(folder)", withIntermediateDirectories: true)
        }
        try "\(user):{PLAIN}\(password)\n".write(toFile: "\(directory)/htpasswd", atomically: true, encoding: .utf8)
        if tls { try makeCertificate(in: directory) }
        return try await startRetryingTakenPorts {
            let server = NginxServer(
                directory: directory, port: Loopback.freePort(), tlsPort: tls ? Loopback.freePort() : 0,
                accessLog: accessLog)
            try server.configuration.write(toFile: "\(directory)/nginx.conf", atomically: true, encoding: .utf8)
            let (port, tlsPort) = (server.port, server.tlsPort)
            // Ready once this nginx's master (`daemon off`: the process launched) holds its ports itself, not
            // when another test's server on one of them accepts (SeaweedServer's start says how that went wrong).
            let (process, ports) = (server.process, tlsPort == 0 ? [port] : [port, tlsPort])
            try await process.launch(
                executable, ["-p", directory + "/", "-c", "\(directory)/nginx.conf", "-e", "\(directory)/error.log"],
                every: 5_000,
                until: {
                    ports.allSatisfy(Loopback.accepts) && Loopback.isListening(processID: process.processID, on: ports)
                },
                log: { server.errorLog })
            return server
        }
    }

    /// A self-signed P-256 certificate for 127.0.0.1, valid for a day.
    private static func makeCertificate(in directory: String) throws {
        // A ChildProcess, not Foundation's Process: Process.run reads /proc/self/fd past its buffer when
        // many descriptors are open (AddressSanitizer stops the test run there).
        let openssl = try ChildProcess(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "\(directory)/key.pem",
                "-out", "\(directory)/cert.pem",
            ], standardError: .file("\(directory)/openssl.log"), standardInputFromNullDevice: true)
        _ = openssl.readToEnd()
        guard openssl.waitForExit(timeout: .seconds(60)) == .exited(0) else { throw ServerError("openssl req failed") }
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
                access_log \(accessLog ? "\(directory)/access.log" : "off");
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

    /// Stops nginx (SIGTERM, up to 3 s, then SIGKILL) and removes the folder.
    public func stop() async {
        await process.terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit {
        process.killNow()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
