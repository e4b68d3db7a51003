// One observation: what it filters on, and its bounded buffer of changes between the watcher thread
// (which pushes) and the observing task (which awaits `next`). The buffer never holds more than its limit:
// an observer that falls behind finds its buffered changes replaced by one `.missedEvents`. Waiting holds
// no thread: the task suspends on a continuation the watcher thread resumes.

import Synchronization

/// Which changes an observer gets.
enum ObservationFilter: Sendable {
    /// One key's entry with one codec: its identity, and the key and codec bytes a published file must hold.
    case key(EntryExpectation, key: CacheKey, codecIdentifier: String)
    /// Every entry whose key has this namespace.
    case namespace(String, digest: SHA256Digest)
    /// Every entry of the directory.
    case everything

    /// True for the filters that need every fan-out folder watched and removals attributed.
    var isBroad: Bool {
        if case .key = self { return false }
        return true
    }
}

/// One registered observation.
final class Observer: Sendable {
    private static let nextIdentifier = Atomic<UInt64>(1)

    let identifier: UInt64
    let filter: ObservationFilter
    let start: YCache.ObservationStart
    let channel: ObserverChannel
    /// The watcher this observer is registered with (set once, before registration).
    private let watcherBox = Mutex<Watcher?>(nil)
    private let unregistered = Atomic<Bool>(false)

    init(filter: ObservationFilter, start: YCache.ObservationStart, bufferLimit: Int) {
        identifier = Observer.nextIdentifier.wrappingAdd(1, ordering: .relaxed).oldValue
        self.filter = filter
        self.start = start
        channel = ObserverChannel(limit: bufferLimit)
    }

    var watcher: Watcher? {
        get { watcherBox.withLock { $0 } }
        set { watcherBox.withLock { $0 = newValue } }
    }

    /// True the first time only: unregistering is idempotent (cancellation, end of iteration and deinit
    /// may all ask).
    func claimUnregistration() -> Bool {
        !unregistered.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Ends the observation: the sequence finishes and the watches it needed are released.
    func cancel() {
        channel.finish()
        ObservationHub.shared.unregister(self)
    }
}

/// The bounded buffer of one observer.
final class ObserverChannel: Sendable {
    typealias Delivery = Result<YCache.Change?, YCache.Error>

    private struct State {
        var events: [YCache.Change] = []
        var head = 0
        var failure: YCache.Error?
        var finished = false
        var waiter: CheckedContinuation<Delivery, Never>?
        /// Called once the consumer has drained the buffer below half (a paused scan waits for it).
        var onDrained: (@Sendable () -> Void)?
        var overflows = 0

        var count: Int { events.count - head }

        mutating func pop() -> Delivery? {
            if head < events.count {
                let event = events[head]
                head += 1
                if head >= 1024 && head * 2 >= events.count {
                    events.removeFirst(head)
                    head = 0
                } else if head == events.count {
                    events.removeAll(keepingCapacity: true)
                    head = 0
                }
                return .success(event)
            }
            if let failure {
                self.failure = nil
                finished = true
                return .failure(failure)
            }
            return finished ? .success(nil) : nil
        }
    }

    /// The most changes kept; at least 2 (a `.missedEvents` and what follows it).
    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(2, limit)
    }

    /// Hands `change` to a waiting consumer or buffers it. A full buffer is replaced by one
    /// `.missedEvents` (the consumer must re-read what it needs; the changes it would have read are
    /// covered by that). Returns false when the observation has ended.
    @discardableResult
    func push(_ change: YCache.Change) -> Bool {
        let resumed: CheckedContinuation<Delivery, Never>? = state.withLock { state in
            guard !state.finished, state.failure == nil else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if state.count >= limit {
                state.events = [.missedEvents]
                state.head = 0
                state.overflows += 1
            } else {
                state.events.append(change)
            }
            return nil
        }
        resumed?.resume(returning: .success(change))
        return !isEnded
    }

    /// Ends the sequence with `error` once the buffered changes are read.
    func fail(_ error: YCache.Error) {
        let resumed: CheckedContinuation<Delivery, Never>? = state.withLock { state in
            guard !state.finished, state.failure == nil else { return nil }
            if let waiter = state.waiter, state.count == 0 {
                state.waiter = nil
                state.finished = true
                return waiter
            }
            state.failure = error
            return nil
        }
        resumed?.resume(returning: .failure(error))
    }

    /// Ends the sequence now; buffered changes are dropped.
    func finish() {
        let resumed: CheckedContinuation<Delivery, Never>? = state.withLock { state in
            state.finished = true
            state.events = []
            state.head = 0
            state.failure = nil
            state.onDrained = nil
            defer { state.waiter = nil }
            return state.waiter
        }
        resumed?.resume(returning: .success(nil))
    }

    var isEnded: Bool { state.withLock { $0.finished || $0.failure != nil } }

    /// Buffered changes not yet read.
    var bufferedCount: Int { state.withLock { $0.count } }

    /// How many times the buffer overflowed into a `.missedEvents`.
    var overflowCount: Int { state.withLock { $0.overflows } }

    /// Whether the buffer is at least half full (a scan feeding this observer pauses then).
    var isHalfFull: Bool { state.withLock { $0.count * 2 >= limit } }

    /// Calls `body` (once) when the consumer has read the buffer below half, or at once if it already is.
    func whenDrained(_ body: @escaping @Sendable () -> Void) {
        let now: Bool = state.withLock { state in
            if state.count * 2 < limit || state.finished {
                return true
            }
            state.onDrained = body
            return false
        }
        if now { body() }
    }

    /// The next change; nil once the observation has ended (cancelled, finished). Suspends while the
    /// buffer is empty; cancelling the waiting task ends the observation.
    func next(observer: Observer, isolation actor: isolated (any Actor)?) async throws(YCache.Error) -> YCache.Change? {
        if Task.isCancelled {
            observer.cancel()
            return nil
        }
        if let delivery = take() { return try delivery.get() }
        let delivery = await withTaskCancellationHandler(
            operation: {
                await withCheckedContinuation(isolation: actor) {
                    (continuation: CheckedContinuation<Delivery, Never>) in
                    let ready: Delivery? = state.withLock { state in
                        if let delivery = state.pop() { return delivery }
                        state.waiter = continuation
                        return nil
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            },
            onCancel: { observer.cancel() },
            isolation: actor)
        return try delivery.get()
    }

    private func take() -> Delivery? {
        let (delivery, drained): (Delivery?, (@Sendable () -> Void)?) = state.withLock { state in
            let delivery = state.pop()
            var drained: (@Sendable () -> Void)?
            if let hook = state.onDrained, state.count * 2 < limit {
                drained = hook
                state.onDrained = nil
            }
            return (delivery, drained)
        }
        drained?()
        return delivery
    }
}
