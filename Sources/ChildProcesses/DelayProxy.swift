// A TCP proxy that delays every byte by a fixed one-way delay in each direction (the kernel here has no
// netem): bytes are forwarded as they arrive, each leaving exactly `delay` after it was read (never
// earlier, in order, never held for a whole message), end of stream and resets likewise. One thread, one
// poll loop with nanosecond timeouts (ppoll), in a network namespace of its choice (NetworkLab's wire).

import Foundation
import Glibc
import Synchronization

/// A delay-injecting TCP proxy (see the file's header). Listens on an IPv4 address and forwards each
/// connection to `upstream`; the delay can change while it runs (bytes read from then on get the new
/// one, and still leave after every earlier byte).
///
/// A new connection's handshake is played too (`emulatesHandshake`): the kernel completes a client's
/// `connect` at once, where a link with one-way delay `d` takes a round trip, so the first bytes of a
/// connection leave no earlier than `3d` after it was accepted towards the server (`4d` towards the
/// client), as on such a link. Without it, opening a connection costs nothing.
public final class DelayProxy: Sendable {
    /// What the proxy has done so far.
    public struct Statistics: Sendable {
        /// Connections accepted.
        public var connections = 0
        /// Bytes forwarded towards the upstream server.
        public var bytesUp = 0
        /// Bytes forwarded towards clients.
        public var bytesDown = 0
        /// Chunks (what one read returned) written.
        public var chunks = 0
        /// How late the latest chunk left (beyond its due time): the proxy's own error, which scheduling
        /// on a loaded machine adds to the delay.
        public var latenessMaximumNanoseconds: Int64 = 0
        /// The sum of every chunk's lateness (over `chunks`: the mean).
        public var latenessTotalNanoseconds: Int64 = 0
        /// Connections the upstream refused or reset.
        public var upstreamFailures = 0
    }

    /// The port it listens on.
    public let port: Int
    /// The address it listens on.
    public let address: String
    private let shared: ProxyState
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)

    /// Starts a proxy listening on `address`:`port` (0: any free port) that forwards to
    /// `upstreamAddress`:`upstreamPort`, in network namespace `namespace` (nil: this thread's).
    ///
    /// - Throws: ``ServerError`` when the namespace cannot be joined or the port cannot be listened on.
    public init(
        listeningOn address: String = "127.0.0.1", port: Int = 0, upstream upstreamAddress: String,
        upstreamPort: Int, delay: Duration, emulatesHandshake: Bool = true, namespace: String? = nil
    ) throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw ServerError("pipe: errno \(errno)") }
        for fd in ends { Self.makeNonBlocking(fd) }
        wakeWrite = ends[1]
        self.address = address
        let shared = ProxyState(delayNanoseconds: delay.nanosecondsClamped)
        self.shared = shared
        // The listening socket is made on the loop's thread, inside the namespace.
        let started = Mutex<Result<Int, any Error>?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let (wakeRead, finished) = (ends[0], finished)
        let upstream = (upstreamAddress, upstreamPort)
        NetworkNamespace.startThread(in: namespace) { joined in
            let loop: ProxyLoop
            do {
                try joined.get()
                let listener = try Self.listen(address, port: port)
                loop = ProxyLoop(
                    listener: listener.descriptor, wake: wakeRead, upstream: upstream, shared: shared,
                    handshake: emulatesHandshake)
                started.withLock { $0 = .success(listener.port) }
                ready.signal()
            } catch {
                close(wakeRead)
                started.withLock { $0 = .failure(error) }
                ready.signal()
                finished.signal()
                return
            }
            loop.run()
            finished.signal()
        }
        ready.wait()
        switch started.withLock({ $0! }) {
        case .success(let chosen): self.port = chosen
        case .failure(let error):
            close(ends[1])
            throw error
        }
    }

    /// The one-way delay added in each direction.
    public var delay: Duration {
        get { .nanoseconds(shared.delayNanoseconds.load(ordering: .relaxed)) }
        set { shared.delayNanoseconds.store(newValue.nanosecondsClamped, ordering: .relaxed) }
    }

    /// What it has done so far.
    public var statistics: Statistics { shared.counters.withLock { $0 } }

    /// Stops: closes the listener and every connection (clients see end of stream), and waits for the
    /// loop's thread to end (a few system calls). Idempotent.
    public func stop() {
        guard !shared.stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = write(wakeWrite, "x", 1)
        finished.wait()
        close(wakeWrite)
    }

    deinit { stop() }

    /// A non-blocking, close-on-exec TCP socket listening on `address`:`port`, and its port.
    private static func listen(_ address: String, port: Int) throws -> (descriptor: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError("socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var socketAddress = try ipv4(address, port: port)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 256) == 0 else {
            let error = errno
            close(fd)
            throw ServerError("listen on \(address):\(port): errno \(error)")
        }
        var chosen = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &chosen) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        makeNonBlocking(fd)
        return (fd, Int(UInt16(bigEndian: chosen.sin_port)))
    }

    /// `address`:`port` as a `sockaddr_in` (dotted IPv4 only).
    static func ipv4(_ address: String, port: Int) throws -> sockaddr_in {
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else {
            throw ServerError("not an IPv4 address: \(address)")
        }
        return socketAddress
    }

    static func makeNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
}

/// What the proxy and its loop's thread share.
private final class ProxyState: Sendable {
    let delayNanoseconds: Atomic<Int64>
    let stopping = Atomic<Bool>(false)
    let counters = Mutex(DelayProxy.Statistics())

    init(delayNanoseconds: Int64) { self.delayNanoseconds = Atomic(delayNanoseconds) }
}

/// One direction of a connection: bytes read from `source`, each due `delay` later, written to
/// `destination` in order; then the end of stream (a `shutdown` of the destination's writing side).
private final class Direction {
    struct Chunk {
        let due: Int64
        let bytes: [UInt8]
    }

    let source: Int32
    let destination: Int32
    private(set) var chunks: [Chunk] = []
    private var head = 0
    /// How much of the head chunk was written, and whether its lateness was counted.
    private var offset = 0
    private var counted = false
    private(set) var queuedBytes = 0
    /// Nothing leaves before this (the handshake's round trip, when played).
    let notBefore: Int64
    /// The latest due time given out: a later read's due time is never earlier (order).
    private var lastDue: Int64 = 0
    /// Whether the source is still read.
    private(set) var reading = true
    /// When the end of stream is due (the source ended), and whether it was passed on.
    private(set) var endDue: Int64?
    private(set) var ended = false
    /// Whether the last write would have blocked.
    var blocked = false

    init(from source: Int32, to destination: Int32, notBefore: Int64) {
        self.source = source
        self.destination = destination
        self.notBefore = notBefore
    }

    /// The due time of what is read now, with delay `delay`.
    private func due(now: Int64, delay: Int64) -> Int64 {
        lastDue = max(lastDue, now + delay, notBefore)
        return lastDue
    }

    func append(_ bytes: [UInt8], now: Int64, delay: Int64) {
        chunks.append(Chunk(due: due(now: now, delay: delay), bytes: bytes))
        queuedBytes += bytes.count
    }

    func sourceEnded(now: Int64, delay: Int64) {
        reading = false
        endDue = due(now: now, delay: delay)
    }

    /// The earliest time something is due, or nil when nothing waits.
    var nextDue: Int64? {
        if head < chunks.count { return chunks[head].due }
        if let endDue, !ended { return endDue }
        return nil
    }

    /// Writes what is due at `now`; false when the destination failed (the connection is over).
    func flush(now: Int64, counters: inout Statistics) -> Bool {
        blocked = false
        while head < chunks.count, chunks[head].due <= now {
            let chunk = chunks[head]
            if !counted {
                counted = true
                let late = now - chunk.due
                counters.chunks += 1
                counters.latenessTotalNanoseconds += late
                counters.latenessMaximumNanoseconds = max(counters.latenessMaximumNanoseconds, late)
            }
            let written = chunk.bytes.withUnsafeBytes {
                send($0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    blocked = true
                    return true
                }
                return false
            }
            offset += written
            if offset == chunk.bytes.count {
                queuedBytes -= chunk.bytes.count
                head += 1
                offset = 0
                counted = false
            }
        }
        if head == chunks.count && head > 0 {
            chunks.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
        if head == chunks.count, let endDue, !ended, endDue <= now {
            shutdown(destination, Int32(SHUT_WR))
            ended = true
        }
        return true
    }

    private func send(_ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
        Glibc.send(destination, bytes, count, flags)
    }
}

private typealias Statistics = DelayProxy.Statistics

/// One proxied connection: the client's socket, the upstream's, and a direction each way.
private final class Link {
    let client: Int32
    let upstream: Int32
    let up: Direction
    let down: Direction
    var connecting = true
    /// When a reset (a read error) is due: then both sockets close.
    var resetDue: Int64?

    init(client: Int32, upstream: Int32, accepted: Int64, handshake: Int64) {
        self.client = client
        self.upstream = upstream
        // On a link with one-way delay d the client's first bytes arrive 3d after its connect began, the
        // server's first bytes 4d after.
        up = Direction(from: client, to: upstream, notBefore: accepted + 3 * handshake)
        down = Direction(from: upstream, to: client, notBefore: accepted + 4 * handshake)
    }

    var isOver: Bool { (up.ended && down.ended) }

    /// Closes both sockets; with `reset`, each with a reset (RST), as the failure it passes on.
    func close(reset: Bool = false) {
        for fd in [client, upstream] {
            if reset {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            }
            Glibc.close(fd)
        }
    }
}

/// The proxy's loop and everything it owns; lives on the loop's thread only.
private final class ProxyLoop {
    private let listener: Int32
    private let wake: Int32
    private let upstream: (address: String, port: Int)
    private let shared: ProxyState
    private let handshake: Bool
    private var links: [Link] = []
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// A direction stops reading its source while this much waits in it.
    private static let queueLimit = 16 << 20

    init(listener: Int32, wake: Int32, upstream: (String, Int), shared: ProxyState, handshake: Bool) {
        self.listener = listener
        self.wake = wake
        self.upstream = upstream
        self.shared = shared
        self.handshake = handshake
    }

    private var delay: Int64 { shared.delayNanoseconds.load(ordering: .relaxed) }

    func run() {
        defer {
            for link in links { link.close() }
            close(listener)
            close(wake)
        }
        while !shared.stopping.load(ordering: .acquiring) {
            let now = monotonicNanoseconds()
            flushDue(now: now)
            var descriptors = [
                pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
            ]
            var earliest: Int64?
            for link in links {
                let client =
                    (link.up.reading && link.up.queuedBytes < Self.queueLimit ? POLLIN : 0)
                    | (link.down.blocked ? POLLOUT : 0)
                let upstream =
                    (link.connecting || link.up.blocked ? POLLOUT : 0)
                    | (!link.connecting && link.down.reading && link.down.queuedBytes < Self.queueLimit ? POLLIN : 0)
                // A socket with nothing to wait for is left out (a shut socket reports POLLHUP without end;
                // a failure shows in the next write), and so is a link being reset, which waits for its time.
                let watched = link.resetDue == nil
                descriptors.append(
                    pollfd(fd: watched && client != 0 ? link.client : -1, events: Int16(client), revents: 0))
                descriptors.append(
                    pollfd(fd: watched && upstream != 0 ? link.upstream : -1, events: Int16(upstream), revents: 0))
                for due in [
                    link.up.blocked || link.connecting ? nil : link.up.nextDue,
                    link.down.blocked ? nil : link.down.nextDue, link.resetDue,
                ] {
                    if let due { earliest = min(earliest ?? due, due) }
                }
            }
            let timeout = earliest.map { max(0, $0 - monotonicNanoseconds()) }
            guard Self.poll(&descriptors, timeoutNanoseconds: timeout) else { continue }
            let polled = links.count
            if descriptors[0].revents != 0 { acceptAll() }
            for (index, link) in links.prefix(polled).enumerated() {
                let (client, upstream) = (descriptors[2 + 2 * index].revents, descriptors[3 + 2 * index].revents)
                handle(link, client: client, upstream: upstream)
            }
            links.removeAll { link in
                let now = monotonicNanoseconds()
                let reset = link.resetDue.map { $0 <= now } ?? false
                if reset || link.isOver { link.close(reset: reset) }
                return reset || link.isOver
            }
        }
    }

    /// Writes whatever is due in every link; a link whose destination failed is reset at once.
    private func flushDue(now: Int64) {
        shared.counters.withLock { counters in
            for link in links where (link.resetDue ?? .max) > now {
                let up = link.connecting || link.up.flush(now: now, counters: &counters)
                let down = link.down.flush(now: now, counters: &counters)
                if !up || !down { link.resetDue = now }
            }
        }
    }

    private func handle(_ link: Link, client: Int16, upstream: Int16) {
        let now = monotonicNanoseconds()
        if link.connecting && upstream != 0 {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(link.upstream, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 || upstream & Int16(POLLERR | POLLHUP) != 0 && upstream & Int16(POLLOUT) == 0 {
                shared.counters.withLock { $0.upstreamFailures += 1 }
                link.resetDue = now
                return
            }
            if upstream & Int16(POLLOUT) != 0 { link.connecting = false }
        }
        let failed = Int16(POLLHUP | POLLERR)
        // An error on a socket whose reading side was done already (it waited to write): a reset.
        if (client & failed != 0 && !link.up.reading) || (upstream & failed != 0 && !link.down.reading) {
            link.resetDue = min(link.resetDue ?? .max, now + delay)
        }
        if client & (Int16(POLLIN) | failed) != 0 && link.up.reading { read(link.up, link) }
        if !link.connecting && upstream & (Int16(POLLIN) | failed) != 0 && link.down.reading {
            read(link.down, link)
        }
    }

    /// Reads what `direction`'s source has, each byte due `delay` from now.
    private func read(_ direction: Direction, _ link: Link) {
        let delay = delay
        while direction.queuedBytes < Self.queueLimit {
            let count = recv(direction.source, &buffer, buffer.count, 0)
            let now = monotonicNanoseconds()
            if count > 0 {
                direction.append(Array(buffer[0..<count]), now: now, delay: delay)
                shared.counters.withLock {
                    if direction === link.up { $0.bytesUp += count } else { $0.bytesDown += count }
                }
                if count < buffer.count { return }
                continue
            }
            if count == 0 {
                direction.sourceEnded(now: now, delay: delay)
                return
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            // A reset (or another error): passed on as a reset, `delay` later.
            direction.sourceEnded(now: now, delay: delay)
            link.resetDue = now + delay
            return
        }
    }

    private func acceptAll() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            DelayProxy.makeNonBlocking(client)
            shared.counters.withLock { $0.connections += 1 }
            guard let upstreamSocket = connectUpstream() else {
                shared.counters.withLock { $0.upstreamFailures += 1 }
                close(client)
                continue
            }
            for fd in [client, upstreamSocket] {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            let handshakeDelay = handshake ? delay : 0
            links.append(
                Link(
                    client: client, upstream: upstreamSocket, accepted: monotonicNanoseconds(),
                    handshake: handshakeDelay))
        }
    }

    /// A non-blocking socket connecting (or connected) to the upstream server, or nil.
    private func connectUpstream() -> Int32? {
        guard var address = try? DelayProxy.ipv4(upstream.address, port: upstream.port) else { return nil }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        DelayProxy.makeNonBlocking(fd)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 || errno == EINPROGRESS else {
            close(fd)
            return nil
        }
        return fd
    }

    private typealias PPoll =
        @convention(c) (UnsafeMutablePointer<pollfd>?, nfds_t, UnsafePointer<timespec>?, UnsafeRawPointer?) -> Int32

    /// `ppoll(2)` (nanosecond timeouts), looked up at run time: Swift's Glibc module leaves GNU
    /// extensions out. Nil: `poll` with the timeout rounded up to a millisecond.
    private static let ppoll: PPoll? = {
        guard let library = dlopen(nil, RTLD_LAZY), let symbol = dlsym(library, "ppoll") else { return nil }
        return unsafeBitCast(symbol, to: PPoll.self)
    }()

    /// Waits for `descriptors` at most `timeoutNanoseconds` (nil: until one is ready); false on EINTR.
    private static func poll(_ descriptors: inout [pollfd], timeoutNanoseconds: Int64?) -> Bool {
        let count = nfds_t(descriptors.count)
        let result: Int32
        if let ppoll {
            if let timeoutNanoseconds {
                var limit = timespec(
                    tv_sec: Int(timeoutNanoseconds / 1_000_000_000), tv_nsec: Int(timeoutNanoseconds % 1_000_000_000))
                result = ppoll(&descriptors, count, &limit, nil)
            } else {
                result = ppoll(&descriptors, count, nil, nil)
            }
        } else {
            let milliseconds = timeoutNanoseconds.map { Int32(min(60_000, ($0 + 999_999) / 1_000_000)) } ?? -1
            result = Glibc.poll(&descriptors, count, milliseconds)
        }
        return result >= 0
    }
}
