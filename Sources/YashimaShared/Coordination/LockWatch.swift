// The process's one thread for lock waits (I5, I8), `yashima-wait`: one inotify watch per `locks/<xx>/`
// folder, a close means "probe now", an unlink or rename away "released"; every wait re-probed at least
// once a second; polled without inotify.
// The bounds and why: Docs/Internals.md (Coordination/LockWatch.swift).

import Glibc
import Synchronization

/// The process-wide lock-wait thread and its table of waits (see the file's header).
final class LockWatch: Sendable {
    /// The inotify descriptor; -1 when none could be had (every wait is then polled).
    let inotify: Int32
    /// The eventfd that wakes the thread when a new wait is due before the thread's planned wake-up.
    let wake: Int32
    /// The process that made it: a forked child finds another pid and makes its own (no thread is copied).
    let ownerProcessID: Int32
    private let table = Mutex(WaitTable())
    private let identifiers = Atomic<UInt64>(0)
    /// Whether a wait has rehearsed the thread's wake path yet (`rehearse`).
    private let rehearsed = Atomic<Bool>(false)

    private static let instance = Mutex<LockWatch?>(nil)

    private init(inotify: Int32, wake: Int32) {
        self.inotify = inotify
        self.wake = wake
        ownerProcessID = Syscall.processID
    }

    /// The process's watch, started with its thread on first use. A failure (no descriptor or thread
    /// could be made) is not remembered: the next wait tries again.
    static func current() -> Result<LockWatch, SystemCallError> {
        instance.withLock { existing -> Result<LockWatch, SystemCallError> in
            if let existing, existing.ownerProcessID == Syscall.processID { return .success(existing) }
            let wake: Int32
            switch WakeSignal.make() {
            case .success(let fd): wake = fd
            case .failure(let error): return .failure(error)
            }
            // Without an inotify instance (`fs.inotify.max_user_instances` reached) waits are polled.
            let inotify = (try? Inotify.initialize().get()) ?? -1
            let watch = LockWatch(inotify: inotify, wake: wake)
            guard LockWatchThread.start(watch) else {
                if inotify >= 0 { Syscall.close(inotify) }
                Syscall.close(wake)
                // pthread_create failed: EAGAIN, reported as such.
                return .failure(SystemCallError(operation: "pthread_create", errno: .wouldBlock))
            }
            existing = watch
            return .success(watch)
        }
    }

    /// The inotify descriptor of this process's watch if it was started (tests that count the process's
    /// inotify instances leave it out); nil otherwise. Never starts one.
    static var startedInotifyDescriptor: Int32? {
        instance.withLock { existing in
            guard let existing, existing.ownerProcessID == Syscall.processID, existing.inotify >= 0 else { return nil }
            return existing.inotify
        }
    }

    func newIdentifier() -> UInt64 {
        identifiers.wrappingAdd(1, ordering: .relaxed).newValue
    }

    // MARK: Waits (any thread)

    /// Adds a wait: watches its folder first, then probes it once on the caller's thread (a release
    /// before the watch was added is seen by that probe, one after it by the watch). Calls `resume` at once
    /// when the lock is already free, the probe fails, or (`checkingCancellation`) the task was cancelled;
    /// otherwise calls `observer` and leaves the wait to the thread, which calls `resume` exactly once.
    func register(
        _ identifier: UInt64, path: LockPath, in directory: Directory, deadline: Int64?, recheck: Int64? = nil,
        checkingCancellation: Bool = true,
        resume: @escaping @Sendable (Result<LockWait.Outcome, any Error>) -> Void,
        announcing observer: (@Sendable (LockPath) -> Void)?
    ) {
        let now = Syscall.monotonicNanoseconds
        let inotify = inotify
        let due = table.withLock { table -> Int64 in
            let watch = inotify >= 0 ? table.addWatch(for: path, in: directory, inotify: inotify) : nil
            let interval = recheck ?? recheckInterval
            let waiter = Waiter(
                path: path, directory: directory, watch: watch, deadline: deadline, recheckInterval: interval,
                nextProbe: now + (watch == nil ? pollFirst : interval), pollStep: pollFirst, resume: resume)
            table.insert(identifier, waiter)
            return waiter.due
        }
        // Cancelled before the handler could find the wait in the table: resume it here (exactly once).
        if checkingCancellation, Task.isCancelled {
            finish(identifier, with: .failure(CancellationError()))
            return
        }
        switch LockWait.probe(path, in: directory) {
        case .released:
            finish(identifier, with: .success(.released))
            return
        case .failed(let error):
            finish(identifier, with: .failure(error))
            return
        case .busy:
            break
        }
        observer?(path)
        if !rehearsed.exchange(true, ordering: .relaxed) { rehearse(path, in: directory) }
        let wakeThread = table.withLock { table -> Bool in
            guard due < table.plannedWake else { return false }
            table.plannedWake = due
            return true
        }
        if wakeThread { WakeSignal.signal(wake) }
    }

    /// Runs the thread's wake path once (the process's first wait that found its lock held, on the
    /// registering thread) for a wait id never registered, so nothing is resumed or rescheduled: what that
    /// path makes on its first run in a process (type metadata of its tables, the runtime's scan of every
    /// conformance record for a key's `Hashable`) is made now, while the process waits anyway, rather than
    /// after the holder's release (issue 25: about a third of a waiter's wake-up at 64 processes). It
    /// probes the lock file once more; a release it sees is the real wait's too, which the thread probes.
    private func rehearse(_ path: LockPath, in directory: Directory) {
        let unregistered = newIdentifier()
        var scratch = WaitTable()
        scratch.insert(
            unregistered,
            Waiter(
                path: path, directory: directory, watch: nil, deadline: nil, recheckInterval: 0, nextProbe: 0,
                pollStep: 0, resume: { _ in }))
        let (due, _) = scratch.collect([], dueAt: 0, inotify: -1)
        _ = scratch.remove(unregistered, inotify: -1)
        probe(due, now: Syscall.monotonicNanoseconds)
    }

    /// Ends a wait with `result`; nothing when it has already ended.
    func finish(_ identifier: UInt64, with result: Result<LockWait.Outcome, any Error>) {
        let inotify = inotify
        guard let waiter = table.withLock({ $0.remove(identifier, inotify: inotify) }) else { return }
        waiter.resume(result)
    }

    /// How many waits are in progress (tests).
    var waitCount: Int { table.withLock { $0.waiters.count } }

    /// How many folders are watched now, idle ones included (tests).
    var watchCount: Int { table.withLock { $0.folders.count } }

    // MARK: The thread

    /// The thread's body (LockWatchThread runs it); nothing else calls it.
    fileprivate func run() {
        Syscall.nameThread("yashima-wait")
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Policy.LockWaiting.readBufferSize, alignment: 8)
        defer { buffer.deallocate() }
        let inotify = inotify
        var idleExpiry: Int64?
        while true {
            let timeout = table.withLock {
                $0.plannedTimeout(now: Syscall.monotonicNanoseconds, idleExpiry: idleExpiry)
            }
            let ready: (events: Bool, woken: Bool)
            switch Inotify.wait(inotify, orWake: wake, timeoutMilliseconds: timeout) {
            case .success(let value): ready = value
            case .failure:
                // poll(2) fails only for want of kernel memory: try again shortly.
                usleep(1000)
                continue
            }
            if ready.woken { WakeSignal.drain(wake) }
            var events: [InotifyEvent] = []
            if ready.events {
                for _ in 0..<Policy.LockWaiting.readsPerWake {
                    guard case .success(let count) = Inotify.read(inotify, into: buffer), count > 0 else { break }
                    events += InotifyEvent.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                    if count < buffer.count / 2 { break }
                }
            }
            let now = Syscall.monotonicNanoseconds
            let (due, timedOut) = table.withLock { table in
                table.collect(events, dueAt: now, inotify: inotify)
            }
            for identifier in timedOut { finish(identifier, with: .success(.timedOut)) }
            probe(due, now: now)
            idleExpiry = table.withLock { $0.removeIdleWatches(now: Syscall.monotonicNanoseconds, inotify: inotify) }
        }
    }

    /// Probes each lock file concerned once (several waits of one key share a probe), resumes the waits
    /// whose holder is gone, and schedules the next probe of the others.
    private func probe(_ due: [DueProbe], now: Int64) {
        guard !due.isEmpty else { return }
        var results: [ProbeKey: LockWait.Probe] = [:]
        var outcomes: [(UInt64, LockWait.Probe)] = []
        outcomes.reserveCapacity(due.count)
        for probe in due {
            let key = ProbeKey(root: probe.directory.descriptor, relative: probe.path.relative)
            let result: LockWait.Probe
            if probe.nameGone {
                // The event said the lock file's name was unlinked or moved away (a publish, I6): its holder
                // is gone, as the probe would find (an open that fails with ENOENT), without the open.
                result = .released
            } else if let known = results[key] {
                result = known
            } else {
                result = LockWait.probe(probe.path, in: probe.directory)
                results[key] = result
            }
            outcomes.append((probe.identifier, result))
        }
        var busy: [(UInt64, Bool)] = []
        for ((identifier, result), probe) in zip(outcomes, due) {
            switch result {
            case .released: finish(identifier, with: .success(.released))
            case .failed(let error): finish(identifier, with: .failure(error))
            case .busy: busy.append((identifier, probe.afterEvent))
            }
        }
        guard !busy.isEmpty else { return }
        let inotify = inotify
        let after = Syscall.monotonicNanoseconds
        table.withLock { table in
            for (identifier, afterEvent) in busy {
                table.reschedule(identifier, afterEvent: afterEvent, now: after, inotify: inotify)
            }
        }
    }
}

/// One lock file in one open root, to probe it once for all its waits.
private struct ProbeKey: Hashable {
    let root: Int32
    let relative: String
}

/// A wait the thread is to probe now.
private struct DueProbe {
    let identifier: UInt64
    let path: LockPath
    let directory: Directory
    /// Probed because an event named its lock file (then a busy lock is probed again soon: see the header).
    let afterEvent: Bool
    /// That event was the lock file's name being unlinked or moved away: released, without a probe. (A new
    /// lock file made at the name since is another holder's: the flight's step finds it busy and waits.)
    var nameGone = false
}

/// Why a wait is probed (`WaitTable.collect`), in increasing order of what it tells.
private enum DueReason: Int8, Comparable {
    case timer, event, nameGone

    static func < (lhs: DueReason, rhs: DueReason) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One wait in the table.
private struct Waiter {
    let path: LockPath
    let directory: Directory
    /// The watch of its folder; nil when polled (no inotify, a watch refused, or its folder went away).
    var watch: Int32?
    let deadline: Int64?
    /// `Policy.LockWaiting.recheckInterval` (tests set another).
    let recheckInterval: Int64
    var nextProbe: Int64
    /// How many of the short rechecks after an event have run (0: none pending).
    var rechecksAfterEvent = 0
    /// A polled wait's current interval (doubling).
    var pollStep: Int64
    /// Called once when the wait ends (LockWait's continuation, or a flight's next step).
    let resume: @Sendable (Result<LockWait.Outcome, any Error>) -> Void

    /// When the thread must look at it next: its next probe or its deadline.
    var due: Int64 { min(deadline ?? .max, nextProbe) }

    /// The lock file's name in its folder, as inotify reports it.
    var name: Substring { path.relative.dropFirst(path.fanOut.utf8.count + 1) }
}

/// The waits of one lock file. Usually one (a process has one flight per key), kept inline: no array
/// per key waited on.
private enum FileWaits {
    case one(UInt64)
    case many([UInt64])

    func adding(_ identifier: UInt64) -> FileWaits {
        switch self {
        case .one(let first): .many([first, identifier])
        case .many(let list): .many(list + [identifier])
        }
    }

    /// Without `identifier`: nil when none is left; unchanged when it was not there.
    func removing(_ identifier: UInt64) -> FileWaits? {
        switch self {
        case .one(let only): return only == identifier ? nil : self
        case .many(var list):
            list.removeAll { $0 == identifier }
            if list.count == 1 { return .one(list[0]) }
            return list.isEmpty ? nil : .many(list)
        }
    }

    var count: Int {
        switch self {
        case .one: 1
        case .many(let list): list.count
        }
    }

    func forEach(_ body: (UInt64) -> Void) {
        switch self {
        case .one(let only): body(only)
        case .many(let list): list.forEach(body)
        }
    }
}

/// A watched `locks/<xx>/` folder: its waits by lock-file name.
private struct WatchedFolder {
    var waits: [Substring: FileWaits] = [:]
    var count = 0
    /// When its last wait ended (nil while it has waits): an idle watch stays for
    /// `Policy.LockWaiting.idleWatchLifetime`, so that a wait ending does not pay `inotify_rm_watch`
    /// before its task resumes, nor the next wait in the folder a new watch.
    var idleSince: Int64?
}

/// Everything the watch keeps, behind one mutex: the waits, the watched folders, the timers.
private struct WaitTable {
    var waiters: [UInt64: Waiter] = [:]
    var folders: [Int32: WatchedFolder] = [:]
    var timers = TimerHeap()
    /// When the thread will wake by itself (`Int64.max`: never); a new wait due earlier wakes it.
    var plannedWake: Int64 = .max

    /// Watches `path`'s folder (adding a watch for a folder already watched returns its descriptor); nil
    /// when the kernel refuses (no watches left, the folder gone): the wait is then polled.
    mutating func addWatch(for path: LockPath, in directory: Directory, inotify: Int32) -> Int32? {
        guard
            case .success(let watch) = Inotify.addWatch(
                inotify, path.fanOut, in: directory.descriptor, mask: lockEvents)
        else { return nil }
        return watch
    }

    mutating func insert(_ identifier: UInt64, _ waiter: Waiter) {
        if let watch = waiter.watch, folders[watch]?.idleSince != nil { idleWatches -= 1 }
        waiters[identifier] = waiter
        if let watch = waiter.watch { attach(identifier, name: waiter.name, to: watch) }
        timers.push(waiter.due, identifier)
    }

    /// Files a wait under its folder's watch.
    private mutating func attach(_ identifier: UInt64, name: Substring, to watch: Int32) {
        // Changed in place (a copy of the folder would copy its table of waits).
        folders[watch, default: WatchedFolder()].count += 1
        folders[watch]!.idleSince = nil
        let waits = folders[watch]!.waits[name]
        folders[watch]!.waits[name] = waits?.adding(identifier) ?? .one(identifier)
    }

    /// Takes a wait out (its folder's watch goes with its last wait); nil when it already ended.
    mutating func remove(_ identifier: UInt64, inotify: Int32) -> Waiter? {
        guard let waiter = waiters.removeValue(forKey: identifier) else { return nil }
        detach(identifier, waiter, inotify: inotify)
        return waiter
    }

    /// Takes a wait out of its folder's list; a folder left without waits becomes idle (its watch is
    /// removed later by `removeIdleWatches`).
    private mutating func detach(_ identifier: UInt64, _ waiter: Waiter, inotify: Int32) {
        // Changed in place (a copy of the folder would copy its table of waits).
        guard let watch = waiter.watch, folders[watch] != nil else { return }
        if let waits = folders[watch]!.waits[waiter.name] {
            let left = waits.removing(identifier)
            folders[watch]!.waits[waiter.name] = left
            if (left?.count ?? 0) < waits.count { folders[watch]!.count -= 1 }
        }
        if folders[watch]!.count <= 0 && folders[watch]!.idleSince == nil {
            folders[watch]!.idleSince = Syscall.monotonicNanoseconds
            idleWatches += 1
        }
    }

    /// How many watched folders have no wait.
    private(set) var idleWatches = 0

    /// Removes the watches idle for `Policy.LockWaiting.idleWatchLifetime`; returns when the next one
    /// will be due (nil: none idle).
    mutating func removeIdleWatches(now: Int64, inotify: Int32) -> Int64? {
        guard idleWatches > 0 else { return nil }
        var next: Int64?
        for (watch, folder) in folders {
            guard let idleSince = folder.idleSince else { continue }
            if now - idleSince >= idleWatchLifetime {
                folders[watch] = nil
                idleWatches -= 1
                Inotify.removeWatch(inotify, watch)
            } else {
                next = min(next ?? .max, idleSince + idleWatchLifetime)
            }
        }
        return next
    }

    /// The poll(2) timeout until the earliest timer (nil: none), dropping timers of ended or moved waits;
    /// records it as the planned wake-up.
    mutating func plannedTimeout(now: Int64, idleExpiry: Int64?) -> Int? {
        while let top = timers.top {
            if let waiter = waiters[top.identifier], waiter.due == top.time { break }
            timers.pop()
        }
        let wake = min(timers.top?.time ?? .max, idleExpiry ?? .max)
        plannedWake = wake
        guard wake != .max else { return nil }
        let remaining = wake - now
        return remaining <= 0 ? 0 : Int((remaining + 999_999) / 1_000_000)
    }

    /// The waits to probe now (named by an event, or due by their timer) and those past their deadline.
    mutating func collect(_ events: [InotifyEvent], dueAt now: Int64, inotify: Int32) -> ([DueProbe], [UInt64]) {
        // Why each is due: `timer`, `event`, or `nameGone` (an event that unlinked or moved its lock file).
        var chosen: [UInt64: DueReason] = [:]
        for event in events {
            if event.mask.contains(.queueOverflow) {
                for identifier in waiters.keys { chosen[identifier] = .event }
                continue
            }
            guard let folder = folders[event.watch] else { continue }  // a watch just removed
            if !event.mask.isDisjoint(with: .selfGone) {
                // The folder went away (or was moved): probe every wait in it; those still busy are
                // watched again at their path by `reschedule`.
                for (identifier, var waiter) in waiters where waiter.watch == event.watch {
                    waiter.watch = nil
                    waiters[identifier] = waiter
                    chosen[identifier] = .event
                }
                if folder.idleSince != nil { idleWatches -= 1 }
                folders[event.watch] = nil
                if !event.mask.contains(.ignored) { Inotify.removeWatch(inotify, event.watch) }
                continue
            }
            let reason: DueReason = event.mask.isDisjoint(with: [.deleted, .movedFrom]) ? .event : .nameGone
            folder.waits[Substring(event.name)]?.forEach { chosen[$0] = max(chosen[$0] ?? .event, reason) }
        }
        var timedOut: [UInt64] = []
        while let top = timers.top, top.time <= now {
            timers.pop()
            guard let waiter = waiters[top.identifier], waiter.due == top.time else { continue }
            if let deadline = waiter.deadline, deadline <= now {
                timedOut.append(top.identifier)
                chosen[top.identifier] = nil
            } else if chosen[top.identifier] == nil {
                chosen[top.identifier] = .timer
            }
        }
        let due = chosen.compactMap { identifier, reason -> DueProbe? in
            guard let waiter = waiters[identifier] else { return nil }
            return DueProbe(
                identifier: identifier, path: waiter.path, directory: waiter.directory, afterEvent: reason != .timer,
                nameGone: reason == .nameGone)
        }
        return (due, timedOut)
    }

    /// Schedules the next probe of a wait a probe found busy: soon after an event (twice), else at the
    /// recheck interval (a polled wait: doubling from 1 ms to 100 ms); a wait whose folder went away is
    /// watched again first.
    mutating func reschedule(_ identifier: UInt64, afterEvent: Bool, now: Int64, inotify: Int32) {
        guard var waiter = waiters[identifier] else { return }
        if waiter.watch == nil, inotify >= 0,
            let watch = addWatch(for: waiter.path, in: waiter.directory, inotify: inotify)
        {
            waiter.watch = watch
            if folders[watch]?.idleSince != nil { idleWatches -= 1 }
            attach(identifier, name: waiter.name, to: watch)
        }
        if afterEvent {
            waiter.rechecksAfterEvent = 1
            waiter.nextProbe = now + eventRechecks[0]
        } else if waiter.rechecksAfterEvent > 0 && waiter.rechecksAfterEvent < eventRechecks.count {
            waiter.nextProbe = now + eventRechecks[waiter.rechecksAfterEvent]
            waiter.rechecksAfterEvent += 1
        } else if waiter.watch == nil {
            waiter.rechecksAfterEvent = 0
            waiter.nextProbe = now + waiter.pollStep
            waiter.pollStep = min(waiter.pollStep * 2, pollLongest)
        } else {
            waiter.rechecksAfterEvent = 0
            waiter.nextProbe = now + waiter.recheckInterval
        }
        waiters[identifier] = waiter
        timers.push(waiter.due, identifier)
    }
}

/// A binary min-heap of (time, wait) timers. Entries of ended or rescheduled waits stay until they reach
/// the top, where `WaitTable.plannedTimeout` drops them (a wait has one live entry: the one at its `due`).
private struct TimerHeap {
    private var items: [(time: Int64, identifier: UInt64)] = []

    var top: (time: Int64, identifier: UInt64)? { items.first }

    mutating func push(_ time: Int64, _ identifier: UInt64) {
        items.append((time, identifier))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].time < items[parent].time else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() {
        guard !items.isEmpty else { return }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count && items[left].time < items[smallest].time { smallest = left }
            if right < items.count && items[right].time < items[smallest].time { smallest = right }
            guard smallest != parent else { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

/// The events that make the thread probe the waits of a lock file: closed after writing (a holder's
/// release or death), unlinked (abandoned), renamed away (published); and the folder's own end.
private let lockEvents: InotifyMask = [
    .closedAfterWriting, .deleted, .movedFrom, .deletedSelf, .movedSelf, .onlyDirectory,
]

private let recheckInterval = Policy.LockWaiting.recheckInterval.nanoseconds
private let idleWatchLifetime = Policy.LockWaiting.idleWatchLifetime.nanoseconds
private let eventRechecks = Policy.LockWaiting.rechecksAfterEvent.map(\.nanoseconds)
private let pollFirst = Policy.LockWaiting.pollInterval.first.nanoseconds
private let pollLongest = Policy.LockWaiting.pollInterval.longest.nanoseconds

/// The watch's thread: a detached pthread with a small stack, started once per process.
private enum LockWatchThread {
    private final class Body {
        let watch: LockWatch
        init(_ watch: LockWatch) { self.watch = watch }
    }

    /// Starts the thread; false when pthread_create fails.
    static func start(_ watch: LockWatch) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, Policy.LockWaiting.threadStackSize)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let body = Unmanaged.passRetained(Body(watch)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { raw in
                guard let raw else { return nil }
                Unmanaged<Body>.fromOpaque(raw).takeRetainedValue().watch.run()
                return nil
            }, body)
        if created != 0 {
            Unmanaged<Body>.fromOpaque(body).release()
            return false
        }
        return true
    }
}
