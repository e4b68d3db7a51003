// The shared counters in the `state` file (every process's hits, misses, generations since the last
// zeroing) and the operator's words, past byte 41,024 (zero in older builds); C atomics only.

import CFileLock

/// What a process adds to the shared counters.
///
/// Layout (little-endian 8-byte words, offsets in the state file; see Docs/Format.md §1.2):
/// | offset | field |
/// |---|---|
/// | 41,024 | counters zeroed at: nanoseconds since 1970 (i64; 0 = never zeroed) |
/// | 41,032 | operator budget: bytes (i64; 0 = none recorded, `Int64.max` = unlimited) |
/// | 41,040 | reserved (0), to 41,088 |
/// | 41,088 | 32 stripes of 128 bytes: stripe `s` at 41,088 + 128·s holds 16 counters, counter `c` at + 8·c |
/// | 45,184 | reserved (0), to 65,536 |
///
/// A process adds to the stripe of its pid modulo 32 (taken when it first counts), so processes on different cores rarely share a
/// cache line (two lines per stripe, for the adjacent-line prefetcher); a reader sums the stripes.
/// Measured here (2 cores, fetch-add on a MAP_SHARED word): 7–8 ns per add alone, 34–36 ns with two
/// processes on one line, 63–67 ns with four; 8.6 and 15–16 ns on separate lines.
enum SharedCounter: Int, CaseIterable, Sendable {
    /// Lookups answered from a process's memory (`CacheStatistics.memoryHits`).
    case memoryHits = 0
    /// Lookups answered from storage (`CacheStatistics.storageHits`, which includes reads after a wait).
    case storageHits = 1
    /// Get-or-generate lookups that found nothing in memory or storage at first (and then generated,
    /// waited for another generation, or read what another process had just published).
    case misses = 2
    /// Values generated (`CacheStatistics.generations`).
    case generations = 3
    /// Lookups that used another task's or process's generation (`CacheStatistics.sharedGenerations`).
    case sharedGenerations = 4
    /// Entries found corrupt (`CacheStatistics.corruptEntries`).
    case corruptEntries = 5
    /// Storage writes that failed (`CacheStatistics.writeFailures`).
    case writeFailures = 6
    /// Cross-process waits that passed their timeout (`CacheStatistics.crossProcessTimeouts`).
    case crossProcessTimeouts = 7
    /// Generations without the key's lock file (`CacheStatistics.crossProcessLockFailures`).
    case crossProcessLockFailures = 8
    /// Nanoseconds of generation time saved by hits, as `yashima run` reports them.
    case savedNanoseconds = 9
    /// Trims after a write that failed (`CacheStatistics.trimFailures`).
    case trimFailures = 10
    /// Trims that made room for a write: after ENOSPC or EDQUOT, or below the free-space floor
    /// (`CacheStatistics.pressureTrims`; zero in files of older builds, which never wrote the word).
    case pressureTrims = 11
}

extension SharedState {
    static let countersZeroedAtOffset = 41_024
    static let operatorBudgetOffset = 41_032
    static let counterStripesOffset = 41_088
    static let counterStripeCount = 32
    static let counterStripeSize = 128

    /// Runs `body` with the base of the live mapping, kept alive meanwhile (a repair may switch files,
    /// I14); nil when no state file can be had.
    func withWords<T>(_ body: (UnsafeMutableRawPointer) -> T) -> T? {
        guard let mapping = liveMapping else { return nil }
        return withExtendedLifetime(mapping) { body(mapping.base) }
    }

    static func word(_ base: UnsafeMutableRawPointer, _ offset: Int) -> UnsafeMutablePointer<UInt64> {
        (base + offset).assumingMemoryBound(to: UInt64.self)
    }

    /// Word `index` of stripe `stripe` in the striped counters starting at `region` (the shared counters,
    /// or the remote ones: SharedState+Remote).
    static func stripedWord(_ base: UnsafeMutableRawPointer, region: Int, index: Int, stripe: Int)
        -> UnsafeMutablePointer<UInt64>
    {
        word(base, region + counterStripeSize * stripe + 8 * index)
    }

    /// Adds `amount` to word `index` of this process's stripe in the striped counters at `region`.
    func addStriped(region: Int, index: Int, _ amount: UInt64) {
        guard amount != 0 else { return }
        _ = withWords {
            ysh_atomic_fetch_add_u64(
                SharedState.stripedWord($0, region: region, index: index, stripe: SharedState.stripe), amount)
        }
    }

    /// The sum of word `index` over the stripes of the striped counters at `region`.
    func stripedTotal(region: Int, index: Int) -> UInt64 {
        withWords { base in
            (0..<SharedState.counterStripeCount).reduce(UInt64(0)) {
                $0 &+ ysh_atomic_load_u64(SharedState.stripedWord(base, region: region, index: index, stripe: $1))
            }
        } ?? 0
    }

    /// This process's stripe, chosen once: getpid(2) is a system call (about as long as the whole add), and
    /// a forked child that keeps its parent's stripe only shares a cache line with it.
    static let stripe = Int(UInt32(bitPattern: Syscall.processID) % UInt32(counterStripeCount))

    /// Adds one to `counter` in this process's stripe of `mapping`, a live mapping the caller holds (a
    /// memory hit's, which has just read its epochs there).
    static func increment(_ counter: SharedCounter, in mapping: StateMapping) {
        _ = mapping.fetchAdd(
            counterStripesOffset + counterStripeSize * stripe + 8 * counter.rawValue, 1)
    }

    /// Adds `amount` to `counter` in this process's stripe.
    func add(_ counter: SharedCounter, _ amount: UInt64 = 1) {
        addStriped(region: SharedState.counterStripesOffset, index: counter.rawValue, amount)
    }

    /// Adds what `update` changed in a process's statistics (the mirror of `CacheEngine.count`).
    func add(_ after: CacheStatistics, since before: CacheStatistics) {
        func delta(_ a: Int, _ b: Int) -> UInt64 { a > b ? UInt64(a - b) : 0 }
        add(.memoryHits, delta(after.memoryHits, before.memoryHits))
        add(.storageHits, delta(after.storageHits, before.storageHits))
        add(.generations, delta(after.generations, before.generations))
        add(.sharedGenerations, delta(after.sharedGenerations, before.sharedGenerations))
        add(.corruptEntries, delta(after.corruptEntries, before.corruptEntries))
        add(.writeFailures, delta(after.writeFailures, before.writeFailures))
        add(.crossProcessTimeouts, delta(after.crossProcessTimeouts, before.crossProcessTimeouts))
        add(.crossProcessLockFailures, delta(after.crossProcessLockFailures, before.crossProcessLockFailures))
        add(.trimFailures, delta(after.trimFailures, before.trimFailures))
        add(.pressureTrims, delta(after.pressureTrims, before.pressureTrims))
    }

    /// The sum of `counter` over all stripes.
    func total(_ counter: SharedCounter) -> UInt64 {
        stripedTotal(region: SharedState.counterStripesOffset, index: counter.rawValue)
    }

    /// Sets every counter to zero and records when. Each word has what it held subtracted (an atomic
    /// add), so an increment that lands meanwhile is kept rather than lost.
    func zeroCounters(now: Int64) {
        _ = withWords { base in
            for stripe in 0..<SharedState.counterStripeCount {
                for region in [
                    SharedState.counterStripesOffset, SharedState.remoteCounterStripesOffset,
                    SharedState.remoteMoreCounterStripesOffset,
                ] {
                    for index in 0..<(SharedState.counterStripeSize / 8) {
                        SharedState.zero(SharedState.stripedWord(base, region: region, index: index, stripe: stripe))
                    }
                }
            }
            ysh_atomic_store_u64(
                SharedState.word(base, SharedState.countersZeroedAtOffset), UInt64(bitPattern: max(1, now)))
        }
        zeroMemberCounters()
    }

    /// Subtracts what `pointer` holds (an atomic add: an increment that lands meanwhile is kept).
    private static func zero(_ pointer: UnsafeMutablePointer<UInt64>) {
        let value = ysh_atomic_load_u64(pointer)
        if value != 0 { _ = ysh_atomic_fetch_add_u64(pointer, 0 &- value) }
    }

    /// When the counters were last zeroed (nanoseconds since 1970), or nil if never.
    var countersZeroedAt: Int64? {
        let value = withWords {
            Int64(bitPattern: ysh_atomic_load_u64(SharedState.word($0, SharedState.countersZeroedAtOffset)))
        }
        return (value ?? 0) > 0 ? value : nil
    }

    /// The budget an operator recorded for the directory: nil when none, `Int64.max` for unlimited.
    var operatorBudget: Int64? {
        let value = withWords {
            Int64(bitPattern: ysh_atomic_load_u64(SharedState.word($0, SharedState.operatorBudgetOffset)))
        }
        return (value ?? 0) > 0 ? value : nil
    }

    /// Records the directory's budget (a positive byte count, or `Int64.max` for unlimited).
    func recordOperatorBudget(_ bytes: Int64) {
        _ = withWords {
            ysh_atomic_store_u64(
                SharedState.word($0, SharedState.operatorBudgetOffset), UInt64(bitPattern: max(1, bytes)))
        }
    }
}
