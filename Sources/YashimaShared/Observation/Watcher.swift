// The per-process watcher: one inotify instance and one thread (`yashima-observe`) for every observation,
// started with the first and stopped with the last; it blocks in poll(2), never on the cooperative pool,
// and other threads reach it only through its command inbox and an eventfd.

import Foundation
import Glibc
import Synchronization

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
            byteCount: Policy.Observation.readBufferSize, alignment: 8)
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
                if nextProbe == 0 { nextProbe = now + Policy.Observation.removalProbeInterval.nanoseconds }
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
                for _ in 0..<Policy.Observation.readsPerWake {
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
                    if count < Policy.Observation.readBufferSize / 2 { break }
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
        reaper.stackSize = Policy.Observation.reaperThreadStackSize
        reaper.start()
    }
}

/// The watcher's thread: a joinable pthread, joined by a reaper the moment it ends,
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
        pthread_attr_setstacksize(&attributes, Policy.Observation.watcherThreadStackSize)
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
