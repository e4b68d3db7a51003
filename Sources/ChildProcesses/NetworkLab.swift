// A network of "hosts" on one machine for the tests and the stress runner: network namespaces (`ip netns`)
// joined by veth pairs to one "wire" namespace, where a delay-injecting proxy (DelayProxy) runs, and a
// server namespace (Redis) reached over its veth address, never loopback. Created and removed by its owner
// (removal is idempotent and runs on deinit); a lab a killed process left behind is swept by the next one.

import Foundation
import Glibc
import Synchronization

/// Network namespaces joined by veth pairs (see the file's header): `hosts` each with one link to the
/// wire, the wire with a link to the server namespace and the service address the proxy listens on.
///
/// Addresses (each namespace has only its own links, so every lab uses the same ones):
/// host `i` is `10.0.<i+1>.2/24` behind the wire's `10.0.<i+1>.1`; the server is `10.0.100.2/24`
/// behind the wire's `10.0.100.1`; the wire's service address is `10.0.200.1/32` (on its loopback).
/// Every host's default route and the server's lead through the wire, which forwards: a host reaches
/// the server directly at ``serverAddress`` (no proxy) or through the proxy at ``serviceAddress``.
public final class NetworkLab: Sendable {
    /// The server namespace's address on its veth link.
    public static let serverAddress = "10.0.100.2"
    /// The wire namespace's service address: where a proxy in the wire listens for every host.
    public static let serviceAddress = "10.0.200.1"

    /// The `ip` executable (iproute2), if installed (`YASHIMA_IP` names another one; a path that does not
    /// exist plays a machine without it).
    public static let ipPath = serverExecutable(
        "ip", named: "YASHIMA_IP", candidates: ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"])

    /// True when CI requires network namespaces (`YASHIMA_REQUIRE_NETNS=1`: an unusable machine fails
    /// instead of skipping).
    public static var isRequired: Bool { serverRequired(by: "YASHIMA_REQUIRE_NETNS") }

    /// Why labs cannot be made here (not root, no `ip`, namespaces refused), or nil when they can. Checked
    /// once per process, by making and removing one namespace.
    public static var unavailableReason: String? { availability }

    private static let availability: String? = {
        guard geteuid() == 0 else {
            return "not root: network namespaces need CAP_SYS_ADMIN (run as root; CI does)"
        }
        guard let ip = ipPath else { return "ip (iproute2) not found" }
        let probe = "\(prefix)\(getpid())probe"
        do {
            try runIP(ip, ["netns", "add", probe])
            try runIP(ip, ["netns", "del", probe])
            return nil
        } catch {
            return "cannot create a network namespace: \(error)"
        }
    }()

    /// The prefix of every lab's namespace names: `ysl<pid>n<number>-<role>`.
    private static let prefix = "ysl"
    private static let counter = Atomic<Int>(0)

    /// The namespaces of the hosts, in order.
    public let hosts: [String]
    /// The wire namespace: links to every host and to the server; the proxy's place.
    public let wire: String
    /// The server namespace (Redis).
    public let server: String
    private let ip: String
    private let removed = Mutex(false)

    private init(ip: String, name: String, hosts count: Int) {
        self.ip = ip
        wire = name + "-w"
        server = name + "-r"
        hosts = (0..<count).map { name + "-h\($0)" }
    }

    /// The address of host `index` on its link.
    public func hostAddress(_ index: Int) -> String { "10.0.\(index + 1).2" }

    /// Every namespace of the lab.
    public var namespaces: [String] { [wire, server] + hosts }

    /// Creates a lab of `hosts` host namespaces (1...99), a wire and a server namespace, linked and
    /// addressed (see the type's documentation). Sweeps labs whose process is gone first. On any
    /// failure, whatever was created is removed and the error thrown.
    public static func create(hosts count: Int) throws -> NetworkLab {
        if let reason = unavailableReason { throw ServerError("network namespaces unavailable: \(reason)") }
        guard (1...99).contains(count), let ip = ipPath else { throw ServerError("a lab has 1...99 hosts") }
        removeStale()
        let name = "\(prefix)\(getpid())n\(counter.add(1, ordering: .relaxed).newValue)"
        let lab = NetworkLab(ip: ip, name: name, hosts: count)
        do {
            try lab.build()
        } catch {
            lab.remove()
            throw error
        }
        return lab
    }

    private func build() throws {
        // The namespaces and the veth pairs, each end created directly in its namespace.
        var root = namespaces.map { "netns add \($0)" }
        root.append("link add r netns \(wire) type veth peer name eth0 netns \(server)")
        for (index, host) in hosts.enumerated() {
            root.append("link add h\(index) netns \(wire) type veth peer name eth0 netns \(host)")
        }
        try Self.runIP(ip, ["-batch", "-"], input: root)
        var wireCommands = [
            "link set lo up", "addr add \(Self.serviceAddress)/32 dev lo", "addr add 10.0.100.1/24 dev r",
            "link set r up",
        ]
        for index in hosts.indices {
            wireCommands += ["addr add 10.0.\(index + 1).1/24 dev h\(index)", "link set h\(index) up"]
        }
        try Self.runIP(ip, ["-n", wire, "-batch", "-"], input: wireCommands)
        try Self.runIP(
            ip, ["-n", server, "-batch", "-"],
            input: [
                "link set lo up", "addr add \(Self.serverAddress)/24 dev eth0", "link set eth0 up",
                "route add default via 10.0.100.1",
            ])
        for (index, host) in hosts.enumerated() {
            try Self.runIP(
                ip, ["-n", host, "-batch", "-"],
                input: [
                    "link set lo up", "addr add \(hostAddress(index))/24 dev eth0", "link set eth0 up",
                    "route add default via 10.0.\(index + 1).1",
                ])
        }
        // The wire forwards between hosts and the server (the direct path, without the proxy). Its
        // /proc/sys/net is the one of the namespace the opening thread is in.
        try NetworkNamespace.run(in: wire) { () throws -> Void in
            let fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { throw ServerError("open ip_forward: errno \(errno)") }
            defer { close(fd) }
            guard write(fd, "1\n", 2) == 2 else { throw ServerError("write ip_forward: errno \(errno)") }
        }
    }

    /// Removes every namespace of the lab (their veth links go with them). Idempotent; processes still
    /// running inside keep their namespace alive, unnamed, until they exit.
    public func remove() {
        let first = removed.withLock { removed in
            defer { removed = true }
            return !removed
        }
        guard first else { return }
        try? Self.runIP(ip, ["-force", "-batch", "-"], input: namespaces.map { "netns del \($0)" })
    }

    deinit { remove() }

    /// The words that run a command inside namespace `name`: `ip netns exec <name>`, which then execs the
    /// command (the spawned pid is the command's).
    public func execPrefix(in name: String) -> [String] { [ip, "netns", "exec", name] }

    /// The program and arguments that run `program` with `arguments` inside namespace `name`.
    public func command(in name: String, _ program: String, _ arguments: [String]) -> (
        program: String, arguments: [String]
    ) {
        (ip, Array(execPrefix(in: name).dropFirst()) + [program] + arguments)
    }

    /// Starts `program` with `arguments` in host `index`'s namespace (see ``ChildProcess``'s initializer
    /// for `environment` and `standardError`).
    public func spawn(
        inHost index: Int, _ program: String, _ arguments: [String], environment: [String: String]? = nil,
        standardError: ChildProcess.StandardError = .inherit
    ) throws -> ChildProcess {
        let (launcher, words) = command(in: hosts[index], program, arguments)
        return try ChildProcess(launcher, words, environment: environment, standardError: standardError)
    }

    /// Removes the namespaces of labs whose process is gone (a test SIGKILLed mid-run).
    public static func removeStale() {
        guard let ip = ipPath, let names = try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")
        else { return }
        let stale = names.filter { name in
            guard name.hasPrefix(prefix) else { return false }
            let digits = name.dropFirst(prefix.count).prefix { $0.isNumber }
            guard let pid = Int32(digits), pid != getpid() else { return false }
            return kill(pid, 0) != 0 && errno == ESRCH
        }
        guard !stale.isEmpty else { return }
        try? runIP(ip, ["-force", "-batch", "-"], input: stale.map { "netns del \($0)" })
    }

    /// Runs `ip` with `arguments` (and `input` lines on its stdin, for `-batch -`), at most 30 s. Blocking.
    ///
    /// - Throws: ``ServerError`` with `ip`'s stderr when it fails.
    static func runIP(_ ip: String, _ arguments: [String], input: [String] = []) throws {
        let child = try ChildProcess(ip, arguments, standardError: .capture)
        child.sendAndClose(Data(input.map { $0 + "\n" }.joined().utf8))
        guard let exit = child.waitForExit(timeout: .seconds(30)) else {
            child.kill()
            throw ServerError("ip \(arguments.joined(separator: " ")) did not finish in 30 s")
        }
        guard exit == .exited(0) else {
            let reason = child.standardErrorText().trimmingCharacters(in: .whitespacesAndNewlines)
            throw ServerError("ip \(arguments.joined(separator: " ")) failed (\(exit)): \(reason)")
        }
    }
}

/// Threads in another network namespace: a thread that joins one (`setns`) stays there and creates its
/// sockets there; other threads of the process are unaffected.
public enum NetworkNamespace {
    /// Runs `body` on a new thread that has joined namespace `name` (`/run/netns/<name>`) and waits for it.
    /// Blocking (for a few system calls: use it off the cooperative pool for anything longer).
    public static func run<T: Sendable>(in name: String, _ body: @escaping @Sendable () throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        startThread(in: name) { joined in
            let outcome = Result { () throws -> T in
                try joined.get()
                return try body()
            }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Starts a thread that joins namespace `name` (nil: stays in this one) and then runs `body` with the
    /// outcome of joining (a failure: the thread is still where it started).
    public static func startThread(
        in name: String?, stackSize: Int = 512 * 1024, _ body: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        let thread = Thread {
            body(Result { () throws -> Void in if let name { try join(name) } })
        }
        thread.stackSize = stackSize
        thread.start()
    }

    /// Moves the calling thread into namespace `name`.
    private static func join(_ name: String) throws {
        let fd = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ServerError("open /run/netns/\(name): errno \(errno)") }
        defer { close(fd) }
        guard let setns = Self.setns else { throw ServerError("setns is not available") }
        guard setns(fd, cloneNewNet) == 0 else { throw ServerError("setns \(name): errno \(errno)") }
    }

    /// CLONE_NEWNET (sched.h; a GNU constant Swift's Glibc module leaves out).
    private static let cloneNewNet: Int32 = 0x4000_0000

    private typealias SetNS = @convention(c) (Int32, Int32) -> Int32

    /// `setns(2)`, looked up at run time: Swift's Glibc module leaves GNU extensions out.
    private static let setns: SetNS? = {
        guard let library = dlopen(nil, RTLD_LAZY), let symbol = dlsym(library, "setns") else { return nil }
        return unsafeBitCast(symbol, to: SetNS.self)
    }()
}
