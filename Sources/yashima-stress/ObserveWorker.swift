// Worker commands for observation: `worker observe` (a process observing a key, a namespace or the whole
// directory, printing one JSON line per change) and `worker cycle` (stores keys, then removes them). Used
// by the observation tests and the latency bench. Lines on stdin steer an observer: DRAIN starts reading
// (with --pause), STOP (or the end of stdin) cancels the observation.

import CFileLock
import Foundation
import Glibc
import Synchronization
import YashimaShared

enum ObserveWorker {
    /// `worker observe --directory D (--key K [--namespace N] | --namespace N | --all) [--current]
    /// [--buffer-limit N] [--read --seed S --size Z] [--pause] [--exhaust-inotify-instances]`.
    ///
    /// Prints READY once `observe` returned (every later change is reported), then one JSON object per
    /// change: `event` (published, removed, removedAll, missed), `namespace`, `identity`, `codec`,
    /// `entry`, `keyKnown`, `monotonicNs` (when the change was received); with `--read`, a published
    /// entry's value is read (`valueIfCached`) and `correct` says whether it has the bytes a worker with
    /// that seed and size generates. On STOP it cancels and prints `{"ended": true}`. An error from
    /// `observe` or from the sequence is printed as `{"error": case, "description": text}`, status 3.
    static func observe(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let namespace = arguments.string("namespace")
        let identity = arguments.string("key")
        let everything = arguments.flag("all")
        let start: YCache.ObservationStart = arguments.flag("current") ? .currentState : .now
        let bufferLimit = try arguments.int(
            "buffer-limit", default: YCache.defaultObservationBufferLimit, range: 2...10_000_000)!
        let read = arguments.flag("read")
        let size = try arguments.int("size", default: 4096, range: 0...(1 << 30))!
        let pause = arguments.flag("pause")
        let exhaust = arguments.flag("exhaust-inotify-instances")
        try arguments.rejectUnknown()
        guard everything || namespace != nil || identity != nil else {
            throw ArgumentError(description: "worker observe needs --key, --namespace or --all")
        }
        if exhaust {
            // Takes every inotify instance this user may have, so that observe meets the real limit.
            var taken = 0
            var err: Int32 = 0
            while ysh_inotify_init(&err) >= 0 { taken += 1 }
            emit(jsonLine(["exhausted": taken, "errno": Int(err)]))
        }
        let cache = setup.makeCache()
        let changes: YCache.Changes
        do {
            if let identity {
                let key = CacheKey(namespace: namespace ?? "stress", identity: identity)
                changes = try await cache.observe(
                    for: key, codec: DataCodec(), startingWith: start, bufferLimit: bufferLimit)
            } else if let namespace {
                changes = try await cache.observe(in: namespace, startingWith: start, bufferLimit: bufferLimit)
            } else {
                changes = try await cache.observe(startingWith: start, bufferLimit: bufferLimit)
            }
        } catch {
            emitError(error)
            return 3
        }
        let control = StandardInputControl()
        emit("READY")
        let seed = setup.seed
        let consumer = Task { () -> Int32 in
            if pause { await control.drained() }
            do {
                for try await change in changes {
                    emit(jsonLine(try await describe(change, cache: cache, read: read, seed: seed, size: size)))
                }
                return 0
            } catch let error as YCache.Error {
                emitError(error)
                return 3
            } catch {
                emit(jsonLine(["error": "other", "description": "\(error)"]))
                return 3
            }
        }
        control.onStop { consumer.cancel() }
        let status = await consumer.value
        // Cancelled, or ended: the observation's watcher thread must go too. Checked here, in the process
        // that observed (up to 10 s for it to finish its exit).
        emit(jsonLine(["ended": true, "watcherThreadGone": await watcherThreadGone()]))
        return status
    }

    /// Whether this process has no thread named `yashima-observe` left (a dead one, state Z or X, does
    /// not count), waiting up to 10 s for the one that is stopping.
    private static func watcherThreadGone() async -> Bool {
        for _ in 0..<1000 {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            let alive = tasks.contains { task in
                let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
                guard comm?.hasPrefix("yashima-observe") == true,
                    let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                    let close = stat.lastIndex(of: ")")
                else { return false }
                let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).prefix(1)
                return state != "Z" && state != "X"
            }
            if !alive { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    private static func describe(
        _ change: YCache.Change, cache: YCache, read: Bool, seed: UInt64, size: Int
    ) async throws -> [String: Any] {
        var line: [String: Any] = ["monotonicNs": Int(monotonicNanoseconds())]
        switch change {
        case .published(let entry):
            line["event"] = "published"
            line["namespace"] = entry.key.namespace
            line["identity"] = entry.key.identity
            line["codec"] = entry.metadata.codecIdentifier
            line["entry"] = entry.entryIdentifier
            line["payloadByteCount"] = entry.metadata.byteCount
            line["keyKnown"] = true
            if read {
                let value = try await cache.valueIfCached(for: entry.key, codec: DataCodec())
                line["correct"] = value == Payload.bytes(seed, key: entry.key, kind: .data, size: size)
                line["found"] = value != nil
            }
        case .removed(let entry):
            line["event"] = "removed"
            line["entry"] = entry.entryIdentifier
            line["keyKnown"] = entry.key != nil
            if let key = entry.key {
                line["namespace"] = key.namespace
                line["identity"] = key.identity
            }
            if let codec = entry.codecIdentifier { line["codec"] = codec }
        case .removedAll(let namespace):
            line["event"] = "removedAll"
            line["namespace"] = namespace ?? NSNull()
        case .missedEvents:
            line["event"] = "missed"
        }
        return line
    }

    private static func emitError(_ error: YCache.Error) {
        let name = Mirror(reflecting: error).children.first?.label ?? error.description
        emit(jsonLine(["error": name, "description": error.description]))
    }

    /// `worker inotify-wait --folder F`: the bench's baseline, a bare inotify reader in C calls. Watches F
    /// for names renamed into it, prints READY, then the CLOCK_MONOTONIC time each one was read.
    static func inotifyWait(_ arguments: inout Arguments) throws -> Int32 {
        guard let folder = arguments.string("folder") else { throw ArgumentError(description: "--folder is required") }
        try arguments.rejectUnknown()
        var err: Int32 = 0
        let fd = ysh_inotify_init(&err)
        guard fd >= 0, ysh_inotify_add_watch_at(fd, ysh_AT_FDCWD, folder, ysh_IN_MOVED_TO, &err) >= 0 else { return 1 }
        emit("READY")
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var ready: Int32 = 0
            guard ysh_poll2(fd, fd, -1, &ready, nil, &err) >= 0 else { return 1 }
            let count = buffer.withUnsafeMutableBytes { ysh_read_some(fd, $0.baseAddress, $0.count, &err) }
            if count <= 0 { continue }
            let now = monotonicNanoseconds()
            var offset = 0
            while offset + 16 <= count {
                emit("\(now)")
                offset +=
                    16 + buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
            }
        }
    }

    /// `worker cycle --namespace N --prefix P --count C [--go] [--pause]`: stores keys P-0 … P-(C-1)
    /// (4 KiB each), then removes them in the same order; prints `{"stored": C, "removed": C}`. With
    /// `--pause` it prints STORED between the two and waits for a line on stdin.
    static func cycle(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let namespace = arguments.string("namespace") ?? "stress"
        let prefix = arguments.string("prefix") ?? "k"
        let count = try arguments.int("count", default: 10, range: 1...1_000_000)!
        let go = arguments.flag("go")
        let pause = arguments.flag("pause")
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        try cache.openStorage()
        if go { awaitGo() }
        let keys = (0..<count).map { CacheKey(namespace: namespace, identity: "\(prefix)-\($0)") }
        for key in keys {
            try await cache.store(
                Payload.bytes(setup.seed, key: key, kind: .data, size: 4096), for: key, codec: DataCodec())
        }
        if pause {
            emit("STORED")
            _ = readLine()
        }
        for key in keys { try await cache.remove(for: key, codec: DataCodec()) }
        emit(jsonLine(["stored": count, "removed": count]))
        return 0
    }
}

/// Lines on stdin, read by a thread of their own: DRAIN opens the drain gate; STOP or the end of input
/// calls the stop handler.
final class StandardInputControl: Sendable {
    private struct State {
        var drained = false
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var stopped = false
        var onStop: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    init() {
        let thread = Thread { [self] in
            // read(2), not readLine(): readLine blocks holding stdin's FILE lock, and `emit`'s
            // fflush(nil) takes every FILE's lock, so printing would wait for the next input line.
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 256)
            reading: while true {
                let count = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                pending += chunk[0..<count]
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    if line == "DRAIN" { self.openDrain() }
                    if line == "STOP" { break reading }
                }
            }
            self.openDrain()
            self.stop()
        }
        thread.start()
    }

    /// Returns once DRAIN (or STOP, or the end of input) was read.
    func drained() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.drained { return true }
                state.drainWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Calls `body` once STOP (or the end of input) is read, or now if it was.
    func onStop(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.stopped { return true }
            state.onStop = body
            return false
        }
        if now { body() }
    }

    private func openDrain() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.drained = true
            defer { state.drainWaiters = [] }
            return state.drainWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func stop() {
        let body = state.withLock { state -> (@Sendable () -> Void)? in
            state.stopped = true
            defer { state.onStop = nil }
            return state.onStop
        }
        body?()
    }
}
