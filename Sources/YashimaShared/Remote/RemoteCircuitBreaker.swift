// RemoteCircuitBreaker.swift: closed, open for a cooldown after one failure, half-open with exactly one
// probe; a failed probe doubles the cooldown (to a maximum); a throttled server keeps it open for its
// Retry-After (bounded by that maximum). Its words live in the storage directory's `state` file when a board
// is attached (one breaker per machine, I17), else in this process (MachineBoard.swift).

import CFileLock
import Synchronization

/// A circuit breaker with a half-open single probe, kept in words that every process on the machine may
/// share. Thread-safe and process-safe: every word is read and written with the C atomics.
///
/// Words (Int64): 1 open until (monotonic ns; 0 = closed), 2 cooldown now (ns; 0 = the initial one),
/// 3 probe until (monotonic ns: a probe is in flight until then; 0 = none), 4 opened at (realtime ns), 5
/// why it opened (``RemoteFailureKind``), 6 the chain member its server belongs to (0: none); 0 and 7 belong
/// to the slot (Docs/Format.md §1.2).
/// `CLOCK_MONOTONIC` is the same for every process of one boot; a time from before a reboot (further
/// ahead than the longest cooldown or probe) is taken as passed.
final class RemoteCircuitBreaker: Sendable {
    /// The breaker's position.
    enum State: Equatable, Sendable {
        /// Calls go through.
        case closed
        /// Calls are bypassed until the monotonic time `until` (nanoseconds).
        case open(until: Int64)
        /// One probe is in flight; other calls are bypassed.
        case halfOpen
    }

    /// What a caller may do.
    enum Admission: Equatable, Sendable {
        /// Make the call; report its outcome with ``record(success:admission:)``. `isProbe` is true for
        /// the single call after a cooldown.
        case proceed(isProbe: Bool)
        /// Do not call the backend: it is considered down.
        case bypass
    }

    /// Word indexes (see the type's documentation).
    enum Word {
        static let openUntil = 1
        static let cooldown = 2
        static let probeUntil = 3
        static let openedAt = 4
        static let reason = 5
        static let member = 6
    }

    /// The first cooldown after a failure, in nanoseconds.
    let initialCooldown: Int64
    /// The longest cooldown after repeated failed probes, in nanoseconds.
    let maximumCooldown: Int64
    /// How long one probe may take before another process may probe (its caller died or hung).
    let probeWindow: Int64
    /// What the breaker guards, as `yashima stats` shows it (a server and a direction; no credentials).
    let label: String
    /// The label's 64-bit digest: the breaker's slot in the shared state (never 0).
    let identity: UInt64
    private let now: @Sendable () -> Int64
    /// The id of the chain member this breaker's server belongs to (0: none), written to word 6.
    private let member = Atomic<UInt64>(0)
    private let local = ProcessBreakerWords()
    private let board: MachineBoardLink

    /// Creates a closed breaker.
    ///
    /// - Parameters:
    ///   - cooldown: How long the breaker stays open after the first failure.
    ///   - maximumCooldown: The cap on the doubled cooldown after failed probes.
    ///   - probeWindow: The most one probe may take (default: the maximum cooldown).
    ///   - label: What it guards (shown by `yashima stats`; its digest names the shared slot).
    ///   - board: Where the machine's shared words are, once attached.
    ///   - now: The monotonic clock in nanoseconds (tests pass their own).
    init(
        cooldown: Duration, maximumCooldown: Duration? = nil, probeWindow: Duration? = nil, label: String = "",
        board: MachineBoardLink = MachineBoardLink(),
        now: @escaping @Sendable () -> Int64 = { Syscall.monotonicNanoseconds }
    ) {
        initialCooldown = max(1, cooldown.remoteNanoseconds)
        self.maximumCooldown = max(initialCooldown, (maximumCooldown ?? cooldown * 8).remoteNanoseconds)
        self.probeWindow = max(1, probeWindow?.remoteNanoseconds ?? self.maximumCooldown)
        self.label = label
        var hasher = SHA256()
        hasher.update(Array("yashima.remote.breaker.v1".utf8) + [0] + Array(label.utf8))
        identity = max(1, hasher.finalize().w0)
        self.board = board
        self.now = now
    }

    /// Runs `body` on the breaker's words: the machine's shared slot when a board is attached and has
    /// room, else this process's own words.
    private func withWords<T>(_ body: (UnsafeMutablePointer<Int64>) -> T) -> T {
        let member = Int64(bitPattern: member.load(ordering: .relaxed))
        if let shared = board.current,
            let result = shared.withBreakerWords(
                id: identity, label: label,
                { words in
                    // Which chain member the server serves, for `yashima stats` (the last process's word).
                    if member != 0 && ysh_atomic_load_i64(words + Word.member) != member {
                        Self.store(words, Word.member, member)
                    }
                    return body(words)
                })
        {
            return result
        }
        return body(local.words)
    }

    /// Names the chain member this breaker's server belongs to (its slot's word 6).
    func join(member id: UInt64) { member.store(id, ordering: .relaxed) }

    /// The breaker's position now (an open breaker past its cooldown still reads `.open`).
    var state: State {
        let time = now()
        return withWords { words in
            let until = ysh_atomic_load_i64(words + Word.openUntil)
            guard until != 0 else { return .closed }
            let probe = ysh_atomic_load_i64(words + Word.probeUntil)
            if isLive(probe, time: time, within: probeWindow) { return .halfOpen }
            return .open(until: until)
        }
    }

    /// True when `until` is still ahead of `time` and not absurdly far (a time from before a reboot).
    private func isLive(_ until: Int64, time: Int64, within limit: Int64) -> Bool {
        until != 0 && time < until && until - time <= limit
    }

    /// Decides whether a call may go to the backend.
    func admit() -> Admission {
        let time = now()
        return withWords { words in
            let until = ysh_atomic_load_i64(words + Word.openUntil)
            if until == 0 { return .proceed(isProbe: false) }
            if isLive(until, time: time, within: maximumCooldown) { return .bypass }
            // Past the cooldown: half-open. One caller, in any process, claims the probe.
            let probe = ysh_atomic_load_i64(words + Word.probeUntil)
            if isLive(probe, time: time, within: probeWindow) { return .bypass }
            guard ysh_atomic_cas_i64(words + Word.probeUntil, probe, time &+ probeWindow) == 1 else { return .bypass }
            return .proceed(isProbe: true)
        }
    }

    /// Reports the outcome of an admitted call.
    ///
    /// A failure while closed opens the breaker; the probe's outcome closes or reopens it. Outcomes of
    /// calls admitted before the breaker opened change nothing once it is open or half-open (they are
    /// old news), except that their failures do not shorten an open period either.
    ///
    /// - Parameters:
    ///   - failure: Why the call failed (kept for `yashima stats` when it opens the breaker).
    ///   - backOff: The server asked every client to stay away this long (nanoseconds; a throttle's
    ///     `Retry-After`): the breaker is open until then, whatever its position and its cooldown (at most
    ///     the maximum cooldown ahead, so a wait is bounded and a far time never reads as from before a
    ///     reboot). An open period is extended to it, never shortened.
    func record(success: Bool, admission: Admission, failure: RemoteFailureKind = .error, backOff: Int64? = nil) {
        let time = now()
        let isProbe = admission == .proceed(isProbe: true)
        if !success, let backOff {
            holdOpen(
                until: time &+ min(maximumCooldown, max(1, backOff)), time: time, failure: failure, isProbe: isProbe)
            return
        }
        withWords { words in
            switch (isProbe, success) {
            case (true, true):
                Self.store(words, Word.openUntil, 0)
                Self.store(words, Word.cooldown, 0)
                Self.store(words, Word.probeUntil, 0)
            case (true, false):
                let current = ysh_atomic_load_i64(words + Word.cooldown)
                let next = min(maximumCooldown, max(initialCooldown, current == 0 ? initialCooldown : current) &* 2)
                Self.store(words, Word.cooldown, next)
                Self.store(words, Word.reason, Int64(failure.rawValue))
                Self.store(words, Word.openUntil, time &+ next)
                Self.store(words, Word.probeUntil, 0)
            case (false, false):
                guard ysh_atomic_cas_i64(words + Word.openUntil, 0, time &+ initialCooldown) == 1 else { return }
                Self.store(words, Word.cooldown, 0)
                Self.store(words, Word.openedAt, Syscall.realtimeNanoseconds)
                Self.store(words, Word.reason, Int64(failure.rawValue))
            case (false, true):
                break
            }
        }
    }

    /// Opens the breaker until `until` (a throttle's back-off), or keeps it open that long: word 1 is moved
    /// forward by compare-and-swap (never back); a probe's own throttle ends its probe.
    private func holdOpen(until: Int64, time: Int64, failure: RemoteFailureKind, isProbe: Bool) {
        withWords { words in
            while true {
                let current = ysh_atomic_load_i64(words + Word.openUntil)
                let live = isLive(current, time: time, within: maximumCooldown)
                if live && current >= until { break }
                guard ysh_atomic_cas_i64(words + Word.openUntil, current, until) == 1 else { continue }
                if current == 0 || !live { Self.store(words, Word.openedAt, Syscall.realtimeNanoseconds) }
                Self.store(words, Word.reason, Int64(failure.rawValue))
                break
            }
            if isProbe { Self.store(words, Word.probeUntil, 0) }
        }
    }

    /// Closes the breaker because the server answered a call of the other direction that proves this one
    /// works too (a write answered: the server reads as well). Nothing when it is closed already.
    func closeBecauseServerAnswered() {
        withWords { words in
            guard ysh_atomic_load_i64(words + Word.openUntil) != 0 else { return }
            Self.store(words, Word.openUntil, 0)
            Self.store(words, Word.cooldown, 0)
            Self.store(words, Word.probeUntil, 0)
        }
    }

    private static func store(_ words: UnsafeMutablePointer<Int64>, _ index: Int, _ value: Int64) {
        ysh_atomic_store_u64(
            UnsafeMutableRawPointer(words + index).assumingMemoryBound(to: UInt64.self), UInt64(bitPattern: value))
    }
}

/// Why a remote call failed, as a breaker records it (word 5 of its slot; `yashima stats` shows it).
enum RemoteFailureKind: UInt64, Sendable {
    /// Something else: a protocol violation, an unexpected reply.
    case error = 1
    /// The deadline passed.
    case timeout = 2
    /// The connection was refused, reset or closed, or the host did not resolve.
    case connection = 3
    /// The server refused the credentials.
    case authentication = 4
    /// The server answered with an error (`LOADING`, `CLUSTERDOWN`, a 5xx status, ...).
    case serverError = 5
    /// The server refuses writes (`OOM`, `READONLY`, `MISCONF`, an HTTP write refused).
    case writesRefused = 6
    /// The server is throttling (HTTP 429, or 503 with `Retry-After` or S3's `SlowDown`): every process
    /// backs off for its `Retry-After`.
    case throttled = 7
}

/// A breaker's words in this process's memory (used until a board is attached, or when the shared
/// state has no room or cannot be had).
///
/// Safe to share (`@unchecked Sendable`): the words are allocated once, freed only in `deinit`, and read
/// and written only through the C atomics.
final class ProcessBreakerWords: @unchecked Sendable {
    /// Eight words, zero at first (closed).
    let words: UnsafeMutablePointer<Int64>

    init() {
        words = UnsafeMutablePointer<Int64>.allocate(capacity: 8)
        words.initialize(repeating: 0, count: 8)
    }

    deinit { words.deallocate() }
}
