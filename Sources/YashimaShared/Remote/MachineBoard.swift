// MachineBoard.swift: what the processes of one machine share about a remote tier, seen from Remote/: its
// servers' breakers, its counters and a chain's members' counters, kept in the storage directory's `state`
// file by the engine (Engine/DirectoryMachineBoard.swift, I17). Until one is attached, or when it has no room,
// each process keeps its own.

import Synchronization

/// The machine's shared view of the remote tier (the storage directory's `state` file).
protocol MachineBoard: Sendable {
    /// Runs `body` on the eight words of the breaker named `id` (its slot's word 0), claiming a slot for it
    /// (with `label`, for `yashima stats`) when none is; nil when the state file cannot be had or is full.
    func withBreakerWords<T>(id: UInt64, label: String, _ body: (UnsafeMutablePointer<Int64>) -> T) -> T?

    /// Adds `amount` to the machine's count of `counter` (counters that are not shared are ignored).
    func count(_ counter: RemoteStatistics.Counter, _ amount: Int)

    /// Adds `amount` to `member`'s count of `counter` (claiming the member's slot; counters a member's slot
    /// does not keep, or a full board, are ignored).
    func count(_ counter: RemoteStatistics.Counter, _ amount: Int, member: RemoteMemberTag)
}

extension MachineBoard {
    /// A board that keeps no member slots ignores members' counts.
    func count(_ counter: RemoteStatistics.Counter, _ amount: Int, member: RemoteMemberTag) {}
}

/// The board a store's guard, breakers and statistics use, attached once the engine has one. Thread-safe.
final class MachineBoardLink: Sendable {
    private let board = Mutex<(any MachineBoard)?>(nil)

    init() {}

    /// The attached board, if any.
    var current: (any MachineBoard)? { board.withLock { $0 } }

    /// Attaches `board` (replacing any).
    func attach(_ new: any MachineBoard) { board.withLock { $0 = new } }
}
