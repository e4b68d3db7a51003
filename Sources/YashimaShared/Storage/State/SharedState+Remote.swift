// The remote tier's words in the `state` file (I17): counters every process adds to (lookups, errors by kind,
// rejected values by reason, lease waits) and one circuit breaker slot per remote server and direction, so
// every process on the machine sees a server's health. Past byte 45,184 (zero in older builds); C atomics only.

import CFileLock

/// What a process adds to the machine's remote counters (stripes as for `SharedCounter`).
///
/// Layout (little-endian 8-byte words, offsets in the state file; see Docs/Format.md §1.2):
/// | offset | field |
/// |---|---|
/// | 45,184 | 32 stripes of 128 bytes: stripe `s` at 45,184 + 128·s holds 16 counters, counter `c` at + 8·c |
/// | 49,280 | 32 breaker slots of 128 bytes: 8 words (word 0 the breaker's id, 0 = free), then a 64-byte label |
/// | 53,376 | reserved (0), to 65,536 |
enum SharedRemoteCounter: Int, CaseIterable, Sendable {
    /// Remote lookups that returned a verified value.
    case hits = 0
    /// Remote lookups that found nothing usable.
    case misses = 1
    /// Values stored remotely.
    case stores = 2
    /// Remote calls that failed, other than timeouts.
    case errors = 3
    /// Remote calls that missed their deadline.
    case timeouts = 4
    /// Remote calls not made because the server's breaker was open.
    case bypassed = 5
    /// Waits for another host's lease.
    case leaseWaits = 6
    /// Nanoseconds spent in those waits.
    case leaseWaitNanoseconds = 7
    /// Leases taken over after the holder's lease expired without a release.
    case leaseTakeovers = 8
    /// Values rejected: their signature does not match this host's secret.
    case rejectedBadSignature = 9
    /// Values rejected: unsigned, read by a host with a secret.
    case rejectedUnsigned = 10
    /// Values rejected: damaged, truncated, another entry's or not this cache's.
    case rejectedDamaged = 11
    /// Values not read: longer than the size cap.
    case rejectedTooLarge = 12
    /// Writes (stores, leases, removals) that failed.
    case failedWrites = 13
    /// Calls whose credentials the server refused.
    case authenticationFailures = 14
    /// Calls that could not connect or lost the connection.
    case connectionFailures = 15
}

extension SharedState {
    static let remoteCounterStripesOffset = 45_184
    static let remoteBreakerSlotsOffset = 49_280
    static let remoteBreakerSlotCount = 32
    static let remoteBreakerSlotSize = 128
    /// Bytes of a slot's label (after its eight words).
    static let remoteBreakerLabelSize = 64

    /// Adds `amount` to `counter` in this process's stripe.
    func addRemote(_ counter: SharedRemoteCounter, _ amount: UInt64 = 1) {
        addStriped(region: SharedState.remoteCounterStripesOffset, index: counter.rawValue, amount)
    }

    /// The sum of `counter` over all stripes.
    func remoteTotal(_ counter: SharedRemoteCounter) -> UInt64 {
        stripedTotal(region: SharedState.remoteCounterStripesOffset, index: counter.rawValue)
    }

    private static func slotBase(_ base: UnsafeMutableRawPointer, _ slot: Int) -> UnsafeMutableRawPointer {
        base + remoteBreakerSlotsOffset + remoteBreakerSlotSize * slot
    }

    /// Runs `body` on the eight words of the breaker slot whose word 0 is `id`, claiming a free slot (and
    /// writing `label` into it) when there is none; nil when the state file cannot be had or every slot is
    /// taken. Slots are probed from `id mod 32` on; a claim is a compare-and-swap of word 0 from 0 to `id`.
    func withBreakerSlot<T>(id: UInt64, label: [UInt8], _ body: (UnsafeMutablePointer<Int64>) -> T) -> T? {
        precondition(id != 0)
        let found = withWords { base -> T? in
            let count = SharedState.remoteBreakerSlotCount
            for probe in 0..<count {
                let slot = SharedState.slotBase(base, (Int(id % UInt64(count)) + probe) % count)
                let words = slot.assumingMemoryBound(to: Int64.self)
                var owner = UInt64(bitPattern: ysh_atomic_load_i64(words))
                if owner == 0 {
                    if ysh_atomic_cas_i64(words, 0, Int64(bitPattern: id)) == 1 {
                        SharedState.writeLabel(label, at: slot + 64)
                        return body(words)
                    }
                    owner = UInt64(bitPattern: ysh_atomic_load_i64(words))
                }
                if owner == id { return body(words) }
            }
            return nil
        }
        return found ?? nil
    }

    /// The label's first 64 bytes (NUL-padded), as eight atomic words.
    private static func writeLabel(_ label: [UInt8], at address: UnsafeMutableRawPointer) {
        var bytes = [UInt8](repeating: 0, count: remoteBreakerLabelSize)
        for (index, byte) in label.prefix(remoteBreakerLabelSize).enumerated() { bytes[index] = byte }
        for index in 0..<(remoteBreakerLabelSize / 8) {
            let value = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8 * index, as: UInt64.self) }
            ysh_atomic_store_u64((address + 8 * index).assumingMemoryBound(to: UInt64.self), value)
        }
    }

    /// One claimed breaker slot as read now.
    struct BreakerSlot: Sendable {
        /// The label its first process wrote (up to 64 bytes).
        let label: [UInt8]
        /// Its eight words (word 0 the id).
        let words: [Int64]
    }

    /// Every claimed breaker slot.
    func breakerSlots() -> [BreakerSlot] {
        withWords { base in
            (0..<SharedState.remoteBreakerSlotCount).compactMap { slot -> BreakerSlot? in
                let address = SharedState.slotBase(base, slot)
                let words = address.assumingMemoryBound(to: Int64.self)
                guard ysh_atomic_load_i64(words) != 0 else { return nil }
                var label: [UInt8] = []
                for index in 0..<(SharedState.remoteBreakerLabelSize / 8) {
                    let value = ysh_atomic_load_u64((address + 64 + 8 * index).assumingMemoryBound(to: UInt64.self))
                    withUnsafeBytes(of: value) { label.append(contentsOf: $0) }
                }
                return BreakerSlot(
                    label: Array(label.prefix { $0 != 0 }), words: (0..<8).map { ysh_atomic_load_i64(words + $0) })
            }
        } ?? []
    }
}
