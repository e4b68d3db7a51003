// The machine's board for the remote tier (I17): Remote/'s breakers and counters (a chain's by member too)
// kept in the storage directory's `state` file (Storage/State/SharedState+Remote.swift) once storage is open,
// so every process using the directory shares one breaker per server and one set of remote counters; and
// reading them back.

import Foundation

/// Remote/'s view of the machine (MachineBoard) over the open directory's state file.
final class DirectoryMachineBoard: MachineBoard {
    private let state: @Sendable () -> SharedState?

    /// A board over whatever state file `state` returns now (nil until storage is open).
    init(state: @escaping @Sendable () -> SharedState?) {
        self.state = state
    }

    func withBreakerWords<T>(id: UInt64, label: String, _ body: (UnsafeMutablePointer<Int64>) -> T) -> T? {
        guard let state = state() else { return nil }
        return state.withBreakerSlot(id: id, label: Array(label.utf8), body)
    }

    func count(_ counter: RemoteStatistics.Counter, _ amount: Int) {
        guard amount > 0, let shared = Self.shared(counter), let state = state() else { return }
        state.addRemote(shared, UInt64(amount))
    }

    func count(_ counter: RemoteStatistics.Counter, _ amount: Int, member: RemoteMemberTag) {
        guard amount > 0, let word = Self.memberWord(counter), let state = state() else { return }
        state.addMember(
            id: member.id, label: Array(member.label.utf8), position: member.position, readOnly: member.readOnly, word,
            UInt64(amount))
    }

    /// The member slot's word for a store's counter, if it keeps one.
    static func memberWord(_ counter: RemoteStatistics.Counter) -> SharedMemberWord? {
        switch counter {
        case .hits: return .hits
        case .misses: return .misses
        case .puts: return .stores
        case .backfills: return .backfills
        case .errors: return .errors
        case .timeouts: return .timeouts
        case .bypassed: return .bypassed
        case .failedWrites: return .failedWrites
        case .throttled: return .throttled
        case .authenticationFailures: return .authenticationFailures
        case .connectionFailures: return .connectionFailures
        case .rejectedValues: return .rejected
        default: return nil
        }
    }

    /// The machine's counter for a store's counter, if it has one.
    static func shared(_ counter: RemoteStatistics.Counter) -> SharedRemoteCounter? {
        switch counter {
        case .hits: return .hits
        case .misses: return .misses
        case .puts: return .stores
        case .errors: return .errors
        case .timeouts: return .timeouts
        case .bypassed: return .bypassed
        case .leaseWaits: return .leaseWaits
        case .leaseWaitNanoseconds: return .leaseWaitNanoseconds
        case .leaseTakeovers: return .leaseTakeovers
        case .rejectedBadSignature: return .rejectedBadSignature
        case .rejectedUnsigned: return .rejectedUnsigned
        case .rejectedDamaged: return .rejectedDamaged
        case .rejectedTooLarge: return .rejectedTooLarge
        case .failedWrites: return .failedWrites
        case .authenticationFailures: return .authenticationFailures
        case .connectionFailures: return .connectionFailures
        case .throttled: return .throttled
        case .backfills: return .backfills
        case .rejectedValues, .oversizedValues, .leasesAcquired, .leasesLost, .storesFromFile,
            .releasesAfterFailedStore, .signedValuesKept:
            return nil
        }
    }

    /// A slot's label as text (bytes outside printable ASCII shown as `?`).
    private static func text(_ label: [UInt8]) -> String {
        String(decoding: label.map { $0 >= 0x20 && $0 < 0x7F ? $0 : 0x3F }, as: UTF8.self)
    }

    /// The chain members recorded in `state`, decoded for operators (`yashima stats`), by place.
    static func members(in state: SharedState) -> [RemoteMemberRecord] {
        state.memberSlots().map { slot in
            let words = slot.words
            var counts: [SharedMemberWord: UInt64] = [:]
            for word in SharedMemberWord.counters { counts[word] = UInt64(bitPattern: words[word.rawValue]) }
            return RemoteMemberRecord(
                id: UInt64(bitPattern: words[0]), label: text(slot.label),
                position: Int(words[SharedMemberWord.position.rawValue]),
                readOnly: words[SharedMemberWord.flags.rawValue] & 1 == 1, counts: counts)
        }.sorted { ($0.position, $0.label) < ($1.position, $1.label) }
    }

    /// The breakers recorded in `state`, decoded for operators (`yashima stats`).
    static func health(in state: SharedState) -> [RemoteHealthRecord] {
        let monotonic = Syscall.monotonicNanoseconds
        let realtime = Syscall.realtimeNanoseconds
        let wallClock = { (time: Int64) in Date(timeIntervalSince1970: Double(realtime + (time - monotonic)) / 1e9) }
        return state.breakerSlots().map { slot in
            let words = slot.words
            let label = text(slot.label)
            let until = words[RemoteCircuitBreaker.Word.openUntil]
            let probe = words[RemoteCircuitBreaker.Word.probeUntil]
            let position: RemoteHealthRecord.Position
            if until == 0 {
                position = .closed
            } else if probe > monotonic {
                position = .halfOpen
            } else if until > monotonic {
                position = .open(until: wallClock(until))
            } else {
                position = .probeDue
            }
            let openedAt = words[RemoteCircuitBreaker.Word.openedAt]
            return RemoteHealthRecord(
                label: label, member: UInt64(bitPattern: words[RemoteCircuitBreaker.Word.member]), position: position,
                openedAt: until == 0 || openedAt == 0 ? nil : Date(timeIntervalSince1970: Double(openedAt) / 1e9),
                reason: until == 0 ? nil : RemoteFailureKind(rawValue: UInt64(words[RemoteCircuitBreaker.Word.reason])))
        }
    }
}

/// One remote server's breaker, as every process on the machine sees it.
struct RemoteHealthRecord: Sendable {
    /// Where the breaker is.
    enum Position: Sendable, Equatable {
        /// Calls go through.
        case closed
        /// Calls are bypassed until then.
        case open(until: Date)
        /// The cooldown has passed: the next call is a probe.
        case probeDue
        /// One process is probing the server now.
        case halfOpen
    }

    /// The server and direction (`redis 127.0.0.1:6379/0 reads`), without credentials.
    let label: String
    /// The id of the chain member the server serves (``RemoteMemberRecord/id``), 0 for none.
    let member: UInt64
    let position: Position
    /// When it opened (after a closed period), if open.
    let openedAt: Date?
    /// Why it opened, if open.
    let reason: RemoteFailureKind?

    /// Why it opened, in words (`timed out`, `connection failed`, ...), if open.
    var reasonText: String? {
        switch reason {
        case nil: return nil
        case .timeout: return "timed out"
        case .connection: return "connection failed"
        case .authentication: return "authentication failed"
        case .serverError: return "server error"
        case .writesRefused: return "writes refused"
        case .throttled: return "throttled"
        case .error: return "error"
        }
    }
}

/// One chain member's counters, as every process on the machine added to them.
struct RemoteMemberRecord: Sendable {
    /// Its slot's id (its breakers name it).
    let id: UInt64
    /// Its servers, without credentials.
    let label: String
    /// Its place in the chain, from 1.
    let position: Int
    /// A read-only member.
    let readOnly: Bool
    /// Its counters.
    let counts: [SharedMemberWord: UInt64]
}
