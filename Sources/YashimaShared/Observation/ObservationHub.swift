// The process-wide registry of observations: how many exist, the one watcher serving them (started with the
// first, stopped with the last), which directory each registration is for (shared by every `YCache` open
// on it, by device and inode), every watcher thread joined the moment it ends; and the errors of
// observation, naming the kernel limit they hit.

import Foundation
import Glibc
import Synchronization

/// A file's device and inode, to share one directory's watches among every `YCache` open on it.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
    }
}

/// The process-wide registry: how many observations exist, and the watcher serving them.
final class ObservationHub: Sendable {
    static let shared = ObservationHub()

    private struct State {
        var watcher: Watcher?
        var observers = 0
    }

    private let state = Mutex(State())

    /// Registers `observer` for `directory`: starts the watcher with the process's first observation,
    /// then has it add the observer's watches. Returns once they are in place.
    func register(_ observer: Observer, directory: Directory) async throws(YCache.Error) {
        let watcher = try state.withLock { (state: inout State) throws(YCache.Error) -> Watcher in
            if let watcher = state.watcher, watcher.ownerProcessID == Syscall.processID, !watcher.isStopped {
                state.observers += 1
                return watcher
            }
            // None yet, or it stopped, or this is a forked child (the parent's thread is not here).
            let watcher = try Watcher.start(path: directory.path)
            state.watcher = watcher
            state.observers = 1
            return watcher
        }
        observer.watcher = watcher
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Void, YCache.Error>, Never>) in
            let sent = watcher.send(
                .register(observer, directory) { result in continuation.resume(returning: result) })
            if !sent {
                continuation.resume(
                    returning: .failure(.observationUnavailable(path: directory.path, reason: "the watcher stopped")))
            }
        }
        if case .failure(let error) = result {
            observer.channel.finish()
            unregister(observer)
            throw error
        }
    }

    /// Ends `observer`'s registration (once); the last one stops the watcher.
    func unregister(_ observer: Observer) {
        guard observer.claimUnregistration(), let watcher = observer.watcher else { return }
        state.withLock { state in
            guard state.watcher === watcher else { return }  // that watcher already stopped
            watcher.send(.unregister(observer))
            state.observers -= 1
            if state.observers == 0 {
                watcher.send(.stop)
                state.watcher = nil
            }
        }
    }

    /// The number of inotify watches once the watcher handled everything sent before this call (0 when
    /// no watcher runs). For tests.
    func settledWatchCount() async -> Int {
        guard let watcher = state.withLock({ $0.watcher }) else { return 0 }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            if !watcher.send(.barrier({ continuation.resume(returning: $0) })) { continuation.resume(returning: 0) }
        }
    }

    // MARK: Threads: every watcher thread is joined as soon as it ends

    private struct Threads {
        var running: Set<ObjectIdentifier> = []
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let threads = Mutex(Threads())

    /// Records a watcher thread; `create` makes it (false when it could not) while the record is held, so
    /// its end cannot be reported before its start. Returns whether it was made.
    func threadStarted(_ watcher: ObjectIdentifier, create: () -> Bool) -> Bool {
        threads.withLock { threads in
            guard create() else { return false }
            threads.running.insert(watcher)
            return true
        }
    }

    /// A watcher's thread has ended and been joined: it no longer exists.
    func threadJoined(_ watcher: ObjectIdentifier) {
        let waiters = threads.withLock { threads -> [CheckedContinuation<Void, Never>] in
            threads.running.remove(watcher)
            guard threads.running.isEmpty else { return [] }
            defer { threads.waiters = [] }
            return threads.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Watcher threads in this process (0 or 1, briefly 2 while one stops as another starts).
    var runningThreads: Int { threads.withLock { $0.running.count } }

    /// Returns once no watcher thread exists in this process (each that ran has ended and been joined).
    /// For tests.
    func waitUntilNoWatcherThread() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = threads.withLock { threads -> Bool in
                if threads.running.isEmpty { return true }
                threads.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// The errors of observation, with the limits they hit named.
enum ObservationError {
    /// `inotify_init1` failed.
    static func instance(_ error: SystemCallError, path: String) -> YCache.Error {
        if error.errno == .tooManyOpenFiles {
            return .observationUnavailable(
                path: path,
                reason: "inotify_init1: this user has no inotify instance left (fs.inotify.max_user_instances = "
                    + "\(limit("max_user_instances"))), or this process has no file descriptor left; raise the "
                    + "sysctl, or observe from fewer processes (\(error))")
        }
        return .observationUnavailable(path: path, reason: "\(error)")
    }

    /// `inotify_add_watch` failed on `folder`.
    static func watch(_ error: SystemCallError, folder: String, path: String) -> YCache.Error {
        if error.errno == .noSpace {
            return .observationUnavailable(
                path: path,
                reason: "inotify_add_watch on \(folder): this user's inotify watch limit is reached "
                    + "(fs.inotify.max_user_watches = \(limit("max_user_watches"))); raise it with sysctl, or "
                    + "observe fewer directories (\(error))")
        }
        return .observationUnavailable(path: path, reason: "watching \(folder): \(error)")
    }

    /// The current value of `/proc/sys/fs/inotify/<name>`, or "?".
    static func limit(_ name: String) -> String {
        let text = try? String(contentsOfFile: "/proc/sys/fs/inotify/" + name, encoding: .utf8)
        return text?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
    }
}
