// The per-process shared watcher: one inotify instance and one thread (`yashima-observe`) for every
// observation in the process, started with the first and stopped with the last (ObservationHub keeps
// the count). The thread blocks in poll(2) on the inotify descriptor and an eventfd, never on the
// cooperative pool; other threads talk to it only through a command inbox and that eventfd. Everything
// else it owns (the watches, the directories' state) is touched by that thread alone.

import Foundation
import Glibc
import Synchronization

/// Constants of observation, each with its reason.
enum ObservationPolicy {
    /// Keys remembered per directory to attribute removals (an unlinked file cannot be read). About
    /// 300–500 bytes each with typical keys: a few MiB at most.
    static let summaryCapacity = 16_384
    /// Canonical key bytes remembered per directory, so that huge keys cannot grow the table past this.
    static let summaryByteCapacity = 8 << 20
    /// Publications held back while a removal covering them runs (reported after it, unless it removed
    /// them); past this many, they are dropped and the observers get `.missedEvents` instead.
    static let deferredCapacity = 4096
    /// While a removal is in progress, how often the watcher checks that its process is still alive (a
    /// killed remover never ends its marker). Only while a removal runs: an idle watcher never wakes.
    static let removalProbeMilliseconds = 1000
    /// Headers read per scan step before the watcher looks at new events again, so a scan of a large
    /// directory delays other observers' events by one step at most.
    static let scanStep = 128
    /// Bytes read from the inotify descriptor at once (each event is 16 bytes plus a name under 100).
    static let readBufferSize = 64 * 1024
}

/// What other threads ask of the watcher thread.
enum WatcherCommand: Sendable {
    /// Adds the observer's watches, then calls `completion` (on the watcher thread).
    case register(Observer, Directory, completion: @Sendable (Result<Void, YCache.Error>) -> Void)
    /// Drops the observer and the watches only it needed.
    case unregister(Observer)
    /// An observer read its buffer below half: paused scans may go on.
    case resumeScans
    /// Removes every watch, closes the descriptors, ends the thread.
    case stop
    /// Calls back once every command sent before it was handled (tests order their checks with it).
    case barrier(@Sendable (_ watches: Int) -> Void)
}

/// The process's watcher: an inotify descriptor, an eventfd, and the thread serving both.
//
// `@unchecked Sendable`: `inotify`, `wake` and `ownerProcessID` are immutable; `inbox` is a Mutex; the
// mutable `directories` and `router` are touched only by the watcher thread (inside `run()` and what it
// calls), which other threads never enter: they only call `send(_:)` and read `isStopped`.
final class Watcher: @unchecked Sendable {
    let inotify: Int32
    let wake: Int32
    /// The process that made it: a forked child finds another pid and makes its own (no thread is copied).
    let ownerProcessID: Int32
    private let inbox = Mutex<(commands: [WatcherCommand], stopped: Bool)>(([], false))
    // Watcher thread only:
    private var router: WatchRouter
    private var directories: [FileIdentity: DirectoryWatch] = [:]

    private init(inotify: Int32, wake: Int32) {
        self.inotify = inotify
        self.wake = wake
        ownerProcessID = Syscall.processID
        router = WatchRouter(inotify: inotify)
    }

    /// Makes the inotify instance and the eventfd and starts the thread.
    /// - Throws: `observationUnavailable` naming `fs.inotify.max_user_instances` when the user has no
    ///   inotify instance left (EMFILE), or the failing call otherwise.
    static func start(path: String) throws(YCache.Error) -> Watcher {
        let inotify: Int32
        switch Inotify.initialize() {
        case .success(let fd): inotify = fd
        case .failure(let error): throw ObservationError.instance(error, path: path)
        }
        let wake: Int32
        switch WakeSignal.make() {
        case .success(let fd): wake = fd
        case .failure(let error):
            Syscall.close(inotify)
            throw .observationUnavailable(path: path, reason: "cannot make the watcher's wake-up descriptor: \(error)")
        }
        let watcher = Watcher(inotify: inotify, wake: wake)
        do throws(YCache.Error) {
            try WatcherThread.start(watcher, path: path)
        } catch {
            Syscall.close(inotify)
            Syscall.close(wake)
            throw error
        }
        return watcher
    }

    /// Queues `command` and wakes the thread. False when the thread has stopped (the command is dropped).
    @discardableResult
    func send(_ command: WatcherCommand) -> Bool {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopped else { return false }
            inbox.commands.append(command)
            // Signalled under the lock: the thread closes `wake` only after marking itself stopped here.
            WakeSignal.signal(wake)
            return true
        }
        return accepted
    }

    var isStopped: Bool { inbox.withLock { $0.stopped } }

    // MARK: The thread

    /// The thread's body (WatcherThread runs it); nothing else calls it.
    fileprivate func run() {
        Syscall.nameThread("yashima-observe")
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: ObservationPolicy.readBufferSize, alignment: 8)
        defer { buffer.deallocate() }
        var failure: YCache.Error?
        var unhandled: [WatcherCommand] = []
        var nextProbe: Int64 = 0
        loop: while true {
            let scanning = directories.values.contains { $0.hasRunnableScan }
            let probing = directories.values.contains { $0.hasOpenRemovals }
            var timeout: Int?
            if scanning {
                timeout = 0
            } else if probing {
                let now = Syscall.monotonicNanoseconds
                if nextProbe == 0 { nextProbe = now + Int64(ObservationPolicy.removalProbeMilliseconds) * 1_000_000 }
                timeout = max(0, Int((nextProbe - now) / 1_000_000))
            } else {
                nextProbe = 0
            }
            let ready: (events: Bool, woken: Bool)
            switch Inotify.wait(inotify, orWake: wake, timeoutMilliseconds: timeout) {
            case .success(let value): ready = value
            case .failure(let error):
                failure = .observationUnavailable(path: "", reason: "the watcher thread's \(error)")
                break loop
            }
            if ready.woken {
                WakeSignal.drain(wake)
                let commands = inbox.withLock { inbox -> [WatcherCommand] in
                    defer { inbox.commands.removeAll() }
                    return inbox.commands
                }
                for (index, command) in commands.enumerated() {
                    if case .stop = command {
                        unhandled = Array(commands[(index + 1)...])
                        break loop
                    }
                    handle(command)
                }
            }
            if ready.events {
                // Read what is queued (bounded, so commands and scans are not starved by a busy directory).
                for _ in 0..<16 {
                    let count: Int
                    switch Inotify.read(inotify, into: buffer) {
                    case .success(let value): count = value
                    case .failure(let error):
                        failure = .observationUnavailable(path: "", reason: "reading inotify events: \(error)")
                        break loop
                    }
                    if count == 0 { break }
                    for event in InotifyEvent.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                        dispatch(event)
                    }
                    if count < ObservationPolicy.readBufferSize / 2 { break }
                }
            }
            if scanning {
                for directory in directories.values where directory.hasRunnableScan { directory.scanStep() }
            }
            if probing, Syscall.monotonicNanoseconds >= nextProbe {
                nextProbe = 0
                for directory in directories.values { directory.probeRemovals() }
            }
            retireUnobservedDirectories()
        }
        shutDown(failure: failure, unhandled: unhandled)
    }

    private func handle(_ command: WatcherCommand) {
        switch command {
        case .register(let observer, let directory, let completion):
            let identity = FileIdentity(directory.rootIdentity)
            let watch: DirectoryWatch
            if let existing = directories[identity] {
                watch = existing
            } else {
                watch = DirectoryWatch(
                    directory: directory, router: router,
                    wake: { [weak self] in
                        self?.send(.resumeScans)
                    })
                directories[identity] = watch
            }
            watch.register(observer, completion: completion)
        case .unregister(let observer):
            for directory in directories.values where directory.contains(observer) {
                directory.unregister(observer)
            }
        case .resumeScans:
            for directory in directories.values { directory.resumePausedScans() }
        case .barrier(let done):
            done(router.watchCount)
        case .stop:
            break
        }
    }

    private func dispatch(_ event: InotifyEvent) {
        if event.mask.contains(.queueOverflow) {
            for directory in directories.values { directory.handleOverflow() }
            return
        }
        guard let owner = router.owner(of: event.watch) else { return }  // a watch just removed
        owner.handle(event)
    }

    private func retireUnobservedDirectories() {
        for (identity, directory) in directories where directory.isRetired {
            directory.removeAllWatches()
            directories[identity] = nil
        }
    }

    private func shutDown(failure: YCache.Error?, unhandled: [WatcherCommand]) {
        for directory in directories.values {
            if let failure { directory.failAll(failure) }
            directory.removeAllWatches()
        }
        directories = [:]
        let leftover = inbox.withLock { inbox -> [WatcherCommand] in
            inbox.stopped = true
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        for command in unhandled + leftover {
            switch command {
            case .register(_, _, let completion):
                completion(.failure(failure ?? .observationUnavailable(path: "", reason: "the watcher stopped")))
            case .barrier(let done): done(0)
            default: break
            }
        }
        Syscall.close(inotify)
        Syscall.close(wake)
        // Joined at once by a reaper (a detached thread), so an ended watcher never lingers unjoined.
        let me = pthread_self()
        let identifier = ObjectIdentifier(self)
        let reaper = Thread {
            pthread_join(me, nil)
            ObservationHub.shared.threadJoined(identifier)
        }
        reaper.stackSize = 64 * 1024
        reaper.start()
    }
}

/// The watcher's thread: a joinable pthread (512 KiB of stack), joined by a reaper the moment it ends,
/// so that "no watcher thread" means the thread is gone, not merely finishing.
enum WatcherThread {
    private final class Body {
        let watcher: Watcher
        init(_ watcher: Watcher) { self.watcher = watcher }
    }

    static func start(_ watcher: Watcher, path: String) throws(YCache.Error) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, 512 * 1024)
        let body = Unmanaged.passRetained(Body(watcher)).toOpaque()
        // Recorded while it is made, so that its end is never reported before its start.
        let started = ObservationHub.shared.threadStarted(ObjectIdentifier(watcher)) { () -> Bool in
            var thread = pthread_t()
            let created = pthread_create(
                &thread, &attributes,
                { raw in
                    guard let raw else { return nil }
                    Unmanaged<Body>.fromOpaque(raw).takeRetainedValue().watcher.run()
                    return nil
                }, body)
            return created == 0
        }
        if !started {
            Unmanaged<Body>.fromOpaque(body).release()
            throw .observationUnavailable(path: path, reason: "cannot start the watcher thread (pthread_create)")
        }
    }
}

/// Which directory owns each watch descriptor. Watcher thread only.
final class WatchRouter {
    let inotify: Int32
    private var owners: [Int32: DirectoryWatch] = [:]

    init(inotify: Int32) {
        self.inotify = inotify
    }

    func owner(of watch: Int32) -> DirectoryWatch? { owners[watch] }

    /// Adds a watch on `relative` in `directory` for `owner`.
    func add(_ relative: String, in directory: Directory, mask: InotifyMask, for owner: DirectoryWatch)
        -> Result<Int32, SystemCallError>
    {
        let added = Inotify.addWatch(inotify, relative, in: directory.descriptor, mask: mask)
        if case .success(let wd) = added { owners[wd] = owner }
        return added
    }

    func remove(_ watch: Int32) {
        guard owners.removeValue(forKey: watch) != nil else { return }
        Inotify.removeWatch(inotify, watch)
    }

    /// Forgets a watch the kernel already dropped (IN_IGNORED).
    func forget(_ watch: Int32) {
        owners[watch] = nil
    }

    var watchCount: Int { owners.count }
}

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
        if error.errno == Errno(rawValue: 24) {  // EMFILE
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
