// The remote tier's words in the `state` file (I17): counters every process adds to (lookups, errors by kind,
// rejected values by reason, lease waits), one circuit breaker slot per remote server and direction, so every
// process on the machine sees a server's health, and one counter slot per chain member. Past byte 45,184
// (zero in older builds); C atomics only.

import CFileLock

/// What a process adds to the machine's remote counters (stripes as for `SharedCounter`).
///
/// Layout (little-endian 8-byte words, offsets in the state file; see Docs/Format.md §1.2):
/// | offset | field |
/// |---|---|
/// | 45,184 | 32 stripes of 128 bytes: stripe `s` at 45,184 + 128·s holds 16 counters, counter `c` at + 8·c |
/// | 49,280 | 32 breaker slots of 128 bytes: 8 words (word 0 the breaker's id, 0 = free), then a 64-byte label |
/// | 53,376 | 32 stripes of 128 bytes: counters 16-31, as the first stripes |
/// | 57,472 | 16 member slots of 256 bytes: 16 words (word 0 the member's id, 0 = free), then a 128-byte label |
/// | 61,568 | reserved (0), to 65,536 |
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
    /// Calls the server throttled (429, 503 SlowDown; also counted as errors).
    case throttled = 16
    /// Values a chain member received from a later member's hit.
    case backfills = 17

    /// The counter's stripe region and its word in a stripe.
    var place: (region: Int, index: Int) {
        rawValue < 16
            ? (SharedState.remoteCounterStripesOffset, rawValue)
            : (SharedState.remoteMoreCounterStripesOffset, rawValue - 16)
    }
}

/// The words of a chain member's slot (word 0 its id; bytes 128-255 its label).
enum SharedMemberWord: Int, CaseIterable, Sendable {
    case hits = 1
    case misses = 2
    case stores = 3
    case backfills = 4
    case errors = 5
    case timeouts = 6
    case bypassed = 7
    case failedWrites = 8
    case throttled = 9
    case authenticationFailures = 10
    case connectionFailures = 11
    case rejected = 12
    /// Not a counter: the member's place in its chain, from 1 (the last process to count wrote it).
    case position = 14
    /// Not a counter: bit 0 set for a read-only member.
    case flags = 15

    /// The counters (zeroed by `stats --zero`; the place and flags stay).
    static let counters: [SharedMemberWord] = allCases.filter { $0.rawValue < 14 }
}

extension SharedState {
    static let remoteCounterStripesOffset = 45_184
    static let remoteBreakerSlotsOffset = 49_280
    static let remoteBreakerSlotCount = 32
    static let remoteBreakerSlotSize = 128
    /// Bytes of a slot's label (after its eight words).
    static let remoteBreakerLabelSize = 64
    static let remoteMoreCounterStripesOffset = 53_376
    static let remoteMemberSlotsOffset = 57_472
    static let remoteMemberSlotCount = 16
    static let remoteMemberSlotSize = 256
    /// Bytes of a member slot's label (after its sixteen words).
    static let remoteMemberLabelSize = 128

    /// Adds `amount` to `counter` in this process's stripe.
    func addRemote(_ counter: SharedRemoteCounter, _ amount: UInt64 = 1) {
        addStriped(region: counter.place.region, index: counter.place.index, amount)
    }

    /// The sum of `counter` over all stripes.
    func remoteTotal(_ counter: SharedRemoteCounter) -> UInt64 {
        stripedTotal(region: counter.place.region, index: counter.place.index)
    }

    /// Where a kind of slot lives: the breakers' or the members'.
    struct SlotTable: Sendable {
        let offset: Int
        let count: Int
        let size: Int
        /// Where the label starts in a slot, and its bytes.
        let labelOffset: Int
        let labelSize: Int

        static let breakers = SlotTable(
            offset: remoteBreakerSlotsOffset, count: remoteBreakerSlotCount, size: remoteBreakerSlotSize,
            labelOffset: 64, labelSize: remoteBreakerLabelSize)
        static let members = SlotTable(
            offset: remoteMemberSlotsOffset, count: remoteMemberSlotCount, size: remoteMemberSlotSize,
            labelOffset: 128, labelSize: remoteMemberLabelSize)

        func base(_ base: UnsafeMutableRawPointer, _ slot: Int) -> UnsafeMutableRawPointer {
            base + offset + size * slot
        }
    }

    /// Runs `body` on the eight words of the breaker slot whose word 0 is `id`, claiming a free slot (and
    /// writing `label` into it) when there is none; nil when the state file cannot be had or every slot is
    /// taken. Slots are probed from `id mod 32` on; a claim is a compare-and-swap of word 0 from 0 to `id`.
    func withBreakerSlot<T>(id: UInt64, label: [UInt8], _ body: (UnsafeMutablePointer<Int64>) -> T) -> T? {
        withSlot(in: .breakers, id: id, label: label) { words, _ in body(words) }
    }

    /// Runs `body` on the words of `table`'s slot whose word 0 is `id` (claimed as for breakers); `body`
    /// learns whether this call claimed it.
    func withSlot<T>(
        in table: SlotTable, id: UInt64, label: [UInt8], _ body: (UnsafeMutablePointer<Int64>, Bool) -> T
    ) -> T? {
        precondition(id != 0)
        let found = withWords { base -> T? in
            for probe in 0..<table.count {
                let slot = table.base(base, (Int(id % UInt64(table.count)) + probe) % table.count)
                let words = slot.assumingMemoryBound(to: Int64.self)
                var owner = UInt64(bitPattern: ysh_atomic_load_i64(words))
                if owner == 0 {
                    if ysh_atomic_cas_i64(words, 0, Int64(bitPattern: id)) == 1 {
                        SharedState.writeLabel(label, at: slot + table.labelOffset, size: table.labelSize)
                        return body(words, true)
                    }
                    owner = UInt64(bitPattern: ysh_atomic_load_i64(words))
                }
                if owner == id { return body(words, false) }
            }
            return nil
        }
        return found ?? nil
    }

    /// The label's first `size` bytes (NUL-padded), as atomic words.
    private static func writeLabel(_ label: [UInt8], at address: UnsafeMutableRawPointer, size: Int) {
        var bytes = [UInt8](repeating: 0, count: size)
        for (index, byte) in label.prefix(size).enumerated() { bytes[index] = byte }
        for index in 0..<(size / 8) {
            let value = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8 * index, as: UInt64.self) }
            ysh_atomic_store_u64((address + 8 * index).assumingMemoryBound(to: UInt64.self), value)
        }
    }

    /// Adds `amount` to `word` of the member slot `id` (claimed with `label`), keeping its place and flags.
    func addMember(
        id: UInt64, label: [UInt8], position: Int, readOnly: Bool, _ word: SharedMemberWord, _ amount: UInt64
    ) {
        _ = withSlot(in: .members, id: id, label: label) { words, _ in
            for (index, value) in [(SharedMemberWord.position, Int64(position)), (.flags, readOnly ? 1 : 0)]
            where ysh_atomic_load_i64(words + index.rawValue) != value {
                ysh_atomic_store_u64(
                    UnsafeMutableRawPointer(words + index.rawValue).assumingMemoryBound(to: UInt64.self),
                    UInt64(bitPattern: value))
            }
            ysh_atomic_fetch_add_u64(
                UnsafeMutableRawPointer(words + word.rawValue).assumingMemoryBound(to: UInt64.self), amount)
        }
    }

    /// Zeroes every member slot's counters (subtracting what each holds, as `zeroCounters` does).
    func zeroMemberCounters() {
        _ = withWords { base in
            for slot in 0..<SharedState.remoteMemberSlotCount {
                let words = SlotTable.members.base(base, slot).assumingMemoryBound(to: UInt64.self)
                for word in SharedMemberWord.counters {
                    let value = ysh_atomic_load_u64(words + word.rawValue)
                    if value != 0 { _ = ysh_atomic_fetch_add_u64(words + word.rawValue, 0 &- value) }
                }
            }
        }
    }

    /// One claimed breaker (or member) slot as read now.
    struct BreakerSlot: Sendable {
        /// The label its first process wrote (up to 64 bytes; a member's up to 128).
        let label: [UInt8]
        /// Its words (word 0 the id): eight, a member's sixteen.
        let words: [Int64]
    }

    /// Every claimed breaker slot.
    func breakerSlots() -> [BreakerSlot] { slots(in: .breakers) }

    /// Every claimed member slot (sixteen words each).
    func memberSlots() -> [BreakerSlot] { slots(in: .members) }

    /// Every claimed slot of `table`: its label and words.
    private func slots(in table: SlotTable) -> [BreakerSlot] {
        withWords { base in
            (0..<table.count).compactMap { slot -> BreakerSlot? in
                let address = table.base(base, slot)
                let words = address.assumingMemoryBound(to: Int64.self)
                guard ysh_atomic_load_i64(words) != 0 else { return nil }
                var label: [UInt8] = []
                for index in 0..<(table.labelSize / 8) {
                    let value = ysh_atomic_load_u64(
                        (address + table.labelOffset + 8 * index).assumingMemoryBound(to: UInt64.self))
                    withUnsafeBytes(of: value) { label.append(contentsOf: $0) }
                }
                return BreakerSlot(
                    label: Array(label.prefix { $0 != 0 }),
                    words: (0..<(table.labelOffset / 8)).map { ysh_atomic_load_i64(words + $0) })
            }
        } ?? []
    }
}
