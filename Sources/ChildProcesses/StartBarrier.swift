// Many children at once: reading whatever any of them writes (poll over all their outputs, so no single
// child can block the reader), and the one READY/GO start barrier of every multi-process run (stress
// workers, benchmark processes, cross-process tests): each child prints READY once it is set up and then
// waits for a GO line on its stdin; the parent sends GO to all of them only once every one is ready, so
// they start their timed or racing part together.

import Foundation
import Glibc

/// Reads what `children` wrote, waiting at most `timeout` for any of them to write, and hands every
/// complete line to `onLine`. Returns at once when every child's output is closed. Blocking.
public func readLines(
    from children: [ChildProcess], waitingAtMost timeout: Duration, onLine: (ChildProcess, String) -> Void
) {
    let open = children.filter { $0.outputDescriptor >= 0 }
    guard !open.isEmpty else { return }
    var descriptors = open.map { pollfd(fd: $0.outputDescriptor, events: Int16(POLLIN), revents: 0) }
    let milliseconds = Int32(min(timeout, .seconds(60)).nanosecondsClamped / 1_000_000)
    guard poll(&descriptors, nfds_t(descriptors.count), milliseconds) > 0 else { return }
    for (child, descriptor) in zip(open, descriptors) where descriptor.revents != 0 {
        _ = child.readAvailable { onLine(child, $0) }
    }
}

/// What a start barrier did.
public struct Release: Sendable {
    /// Whether GO was sent: every child was ready (or had exited) before the deadline.
    public let released: Bool
    /// The children that never said READY: those whose output closed first (they exited), and, when the
    /// deadline passed, those still getting ready.
    public let notReady: [ChildProcess]
}

/// The start barrier: waits until every child of `children` has printed a READY line (any other line
/// goes to `onLine`), then sends GO to all of them at once, and to `readyAlready` (children that said
/// READY before). A child whose output closes before it is ready is no longer waited for. At `deadline`
/// nobody gets GO. Blocking.
@discardableResult
public func releaseTogether(
    _ children: [ChildProcess], readyAlready: [ChildProcess] = [],
    deadline: ContinuousClock.Instant = .now.advanced(by: .seconds(60)),
    onLine: (ChildProcess, String) -> Void = { _, _ in }
) -> Release {
    var ready = Set<ObjectIdentifier>()
    var gone = Set<ObjectIdentifier>()
    func waiting() -> [ChildProcess] {
        children.filter { !ready.contains(ObjectIdentifier($0)) && !gone.contains(ObjectIdentifier($0)) }
    }
    while !waiting().isEmpty {
        let remaining = ContinuousClock.now.duration(to: deadline)
        if remaining <= .zero {
            return Release(released: false, notReady: children.filter { !ready.contains(ObjectIdentifier($0)) })
        }
        readLines(from: waiting(), waitingAtMost: min(remaining, .milliseconds(100))) { child, line in
            if line == "READY" {
                ready.insert(ObjectIdentifier(child))
            } else {
                onLine(child, line)
            }
        }
        for child in waiting() where child.outputDescriptor < 0 { gone.insert(ObjectIdentifier(child)) }
    }
    for child in children + readyAlready where !gone.contains(ObjectIdentifier(child)) { child.send("GO") }
    return Release(released: true, notReady: children.filter { gone.contains(ObjectIdentifier($0)) })
}
