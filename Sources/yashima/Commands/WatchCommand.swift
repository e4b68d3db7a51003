// `yashima watch [--namespace N] [--current] [--json]`: one line (or JSON object) per change any process
// makes to the directory, as it is seen, from the library's change observation (`YCache.observe`).
// Owns the command, the lines it prints, and `LineWriter`, the one thread that writes them (so the task
// reading changes never blocks the cooperative pool on a slow reader, and a signal never cuts a line).
// A signal (SIGINT, SIGTERM, SIGHUP) or the reader of standard output going away ends it with status 0.

import Foundation
import Glibc
import Synchronization
@_spi(Operator) import YashimaShared

enum WatchCommand {
    static let spec = CommandSpec(
        name: "watch", summary: "print each entry published or removed, as it happens",
        usage: "yashima watch [--namespace NAME] [--current] [--json] [--dir DIR]",
        description: """
            Prints a line for each change any process makes to the directory (or to one namespace), as
            soon as it is made: an entry published (stored, generated or replaced: namespace, identity,
            variants and versions, codec, size, created and expiry times); an entry removed (by trim,
            expiry, verify --repair or a program's remove: its key when this watcher saw the entry, else
            its entry id); a namespace or the whole directory cleared (one line, not one per entry); and
            "missed events" when changes were lost (the watcher fell 4,096 changes behind, or the kernel
            dropped events): re-read what you need, with yashima ls. With --namespace, clears of the
            whole directory are shown too. --current first prints a published line for every entry
            stored now (one published meanwhile may be printed twice). Nothing polls.

            Nothing is printed before the watch is in place; from the first line on, every change is
            reported. With --json, every line is one JSON object with an "event": the first is
            "watching" (directory, namespace, current, created), then "published", "removed",
            "removedAll" and "missedEvents"; without --json, the "watching" line goes to standard error.
            Each line is written as its change is seen (never held in a buffer).

            A directory that does not exist yet is created (as run and put create it), so a watcher can
            start before the first writer. The watch runs until stopped: Ctrl-C, SIGTERM or SIGHUP end it
            at once with status 0 (never in the middle of a line), and so does the reader of its output
            going away (yashima watch | head -n 1). Exit status 1 when the directory is removed or
            replaced while watched, or the user's inotify limits are reached; 2 for bad usage.
            """,
        options: [
            .option("namespace", "NAME", "only this namespace's entries (and clears of the whole directory)"),
            .flag("current", "first print a published line for every entry stored now"),
            .flag("json", "one JSON object per line, for scripts (the first is the \"watching\" event)"),
        ] + CommandSpec.storageOptions, signals: .takenByCommand, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        let namespace = try arguments.string("namespace")
        let json = arguments.flag("json")
        let current = arguments.flag("current")
        // A closed pipe is a failed write (EPIPE), not a signal that kills the process.
        signal(SIGPIPE, SIG_IGN)
        let writer = LineWriter()
        SignalControl.takeSignals { _ in writer.end(status: 0) }
        writer.endWhenReaderLeaves()

        let cache = try location.openCache(budget: nil)
        let start: YCache.ObservationStart = current ? .currentState : .now
        let changes: YCache.Changes
        do {
            if let namespace {
                changes = try await cache.observe(in: namespace, startingWith: start)
            } else {
                changes = try await cache.observe(startingWith: start)
            }
        } catch {
            throw CommandFailure.from(error)
        }
        if json {
            try await write(
                Output.jsonLine([
                    "event": "watching", "time": Format.iso(Date()), "directory": location.shown,
                    "namespace": namespace ?? NSNull(), "current": current, "created": !location.exists,
                ]), writer: writer)
        } else {
            let scope = namespace.map { "namespace \(Format.printable($0))" } ?? "every namespace"
            let created = location.exists ? "" : " (created it)"
            _ = await writer.write(
                Data("yashima: watching \(location.shown)\(created), \(scope); Ctrl-C stops\n".utf8), to: STDERR_FILENO)
        }
        do {
            for try await change in changes {
                try await write(json ? object(change) : Data((text(change) + "\n").utf8), writer: writer)
            }
        } catch let error as YCache.Error {
            throw CommandFailure.failed(error.description)
        } catch WatchEnd.readerLeft {
            return 0
        }
        withExtendedLifetime(cache) {}
        return 0
    }

    /// The reader of standard output went away (EPIPE): the watch is over.
    private enum WatchEnd: Error { case readerLeft }

    private static func write(_ line: Data, writer: LineWriter) async throws {
        let error = await writer.write(line, to: STDOUT_FILENO)
        if error == EPIPE { throw WatchEnd.readerLeft }
        if error != 0 {
            throw CommandFailure.failed("cannot write to standard output: \(String(cString: strerror(error)))")
        }
    }

    // MARK: Lines

    /// One change for people, prefixed with the local time it was seen.
    static func text(_ change: YCache.Change, now: Date = Date()) -> String {
        let time = Format.local(now)
        switch change {
        case .published(let entry):
            let metadata = entry.metadata
            let expires = metadata.expiresAt.map { "expires " + Format.local($0) } ?? "never expires"
            return "\(time)  published  \(name(entry.key, codec: metadata.codecIdentifier))  ("
                + "\(Format.printable(metadata.codecIdentifier)), \(Format.bytes(Int64(metadata.byteCount))), "
                + "created \(Format.local(metadata.createdAt)), \(expires))"
        case .removed(let entry):
            guard let key = entry.key else {
                return "\(time)  removed    entry \(entry.entryIdentifier) (key unknown: not seen by this watcher)"
            }
            let codec = entry.codecIdentifier.map { "  (\(Format.printable($0)))" } ?? ""
            return "\(time)  removed    \(name(key, codec: entry.codecIdentifier))\(codec)"
        case .removedAll(let namespace):
            guard let namespace else { return "\(time)  removed    every entry (the whole directory was cleared)" }
            return "\(time)  removed    every entry of namespace \(Format.printable(namespace))"
        case .missedEvents:
            return "\(time)  missed events: some changes were lost; re-read what you need (yashima ls)"
        }
    }

    /// `namespace: identity [variants, versions]`.
    private static func name(_ key: CacheKey, codec: String?) -> String {
        let components = EntryText.components(key)
        return Format.printable(key.namespace) + ": " + EntryText.displayIdentity(key, codec: codec)
            + (components.isEmpty ? "" : " [\(components)]")
    }

    /// One change as a line of JSON: `event`, `time`, and the entry's fields (as `ls --json` names them).
    static func object(_ change: YCache.Change, now: Date = Date()) -> Data {
        var object: [String: Any] = ["time": Format.iso(now)]
        switch change {
        case .published(let entry):
            let metadata = entry.metadata
            object.merge(EntryText.keyObject(entry.key, codec: metadata.codecIdentifier)) { $1 }
            object.merge([
                "event": "published", "entry": entry.entryIdentifier, "size": metadata.byteCount,
                "created": Format.iso(metadata.createdAt), "expires": metadata.expiresAt.map(Format.iso) ?? NSNull(),
            ]) { $1 }
        case .removed(let entry):
            if let key = entry.key {
                object.merge(EntryText.keyObject(key, codec: entry.codecIdentifier ?? "")) { $1 }
                object["codec"] = entry.codecIdentifier ?? NSNull()
            } else {
                for field in ["namespace", "identity", "variants", "versions", "codec", "stableIdentifier"] {
                    object[field] = NSNull()
                }
            }
            object.merge(["event": "removed", "entry": entry.entryIdentifier]) { $1 }
        case .removedAll(let namespace):
            object.merge(["event": "removedAll", "namespace": namespace ?? NSNull()]) { $1 }
        case .missedEvents:
            object["event"] = "missedEvents"
        }
        return Output.jsonLine(object)
    }
}

/// Writes `watch`'s lines on a thread of its own, one whole line per `write(2)` call, each as soon as it
/// is handed over (no buffer), and ends the process on request without cutting a line: a line being
/// written is finished first (for at most a second, in case the reader has stopped reading), and no new
/// one is started.
final class LineWriter: Sendable {
    private struct Line {
        let fd: Int32
        let bytes: Data
        let written: CheckedContinuation<Int32, Never>
    }

    private struct State {
        var lines: [Line] = []
        var writing = false
        /// Set by `end`: the writer starts no line, and ends the process after the one it is writing.
        var endStatus: Int32?
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in run() }
        thread.stackSize = 256 * 1024
        thread.start()
    }

    /// Writes `bytes` to `fd` and returns once they are written: 0, or the `errno` of the failed write.
    func write(_ bytes: Data, to fd: Int32) async -> Int32 {
        await withCheckedContinuation { continuation in
            state.withLock { $0.lines.append(Line(fd: fd, bytes: bytes, written: continuation)) }
            wake.signal()
        }
    }

    /// Ends the process with `status` now, or right after the line being written (at most a second).
    func end(status: Int32) -> Never {
        let writing = state.withLock { state in
            state.endStatus = state.endStatus ?? status
            return state.writing
        }
        // The writer ends the process itself once its write returns; this is for a reader that never reads.
        if writing { usleep(1_000_000) }
        _exit(status)
    }

    /// When standard output is a pipe or socket, ends the process as soon as its reader closes it, even
    /// with no change to report (poll reports POLLERR on a pipe without readers); otherwise does nothing.
    func endWhenReaderLeaves() {
        var status = stat()
        guard fstat(STDOUT_FILENO, &status) == 0,
            status.st_mode & S_IFMT == S_IFIFO || status.st_mode & S_IFMT == S_IFSOCK
        else { return }
        let thread = Thread { [self] in
            var descriptor = pollfd(fd: STDOUT_FILENO, events: 0, revents: 0)
            while poll(&descriptor, 1, -1) < 0 && errno == EINTR {}
            if descriptor.revents & Int16(POLLERR | POLLHUP) != 0 { end(status: 0) }
        }
        thread.stackSize = 64 * 1024
        thread.start()
    }

    private func run() {
        while true {
            wake.wait()
            let next = state.withLock { state -> Line? in
                guard state.endStatus == nil, !state.lines.isEmpty else { return nil }
                state.writing = true
                return state.lines.removeFirst()
            }
            guard let line = next else { continue }
            let error = Output.write(line.bytes, to: line.fd) ? 0 : max(errno, 1)
            if let status = state.withLock({ state -> Int32? in
                state.writing = false
                return state.endStatus
            }) {
                _exit(status)
            }
            line.written.resume(returning: error)
        }
    }
}
