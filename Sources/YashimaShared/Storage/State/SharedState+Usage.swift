// The state file's usage words (I9: payload bytes, which the storage budget counts, and allocated bytes,
// with the flag saying a scan has counted them) and its last-publish time (I11), read and adjusted
// through the live mapping by every publish, unlink and trim.

extension SharedState {
    // MARK: Usage (I9)

    /// Allocated bytes of all entries, as last adjusted (never negative); 0 while no state file can be had.
    var usage: Int64 {
        guard let mapping = live() else { return 0 }
        return max(0, mapping.loadSigned(SharedState.usageOffset))
    }

    /// Adds `delta` (may be negative) to the allocated-bytes counter. Lost if the file dies meanwhile: its
    /// replacement starts uncounted.
    func adjustUsage(by delta: Int64) {
        guard delta != 0, let mapping = live() else { return }
        mapping.adjust(SharedState.usageOffset, by: delta)
    }

    /// Payload bytes of all entries, as last adjusted (never negative): what the storage budget counts.
    var payloadBytes: Int64 {
        guard let mapping = live() else { return 0 }
        return max(0, mapping.loadSigned(SharedState.payloadOffset))
    }

    /// Adds `delta` (may be negative) to the payload-bytes counter.
    func adjustPayloadBytes(by delta: Int64) {
        guard delta != 0, let mapping = live() else { return }
        mapping.adjust(SharedState.payloadOffset, by: delta)
    }

    /// Whether a full scan has counted the usage words since the file was made. A state file made by 0.1
    /// (which had no payload counter) or by a repair (I14) holds 0 there; until a trim scan counts them,
    /// the counters are not trusted and the next budgeted write recounts (I9). True while no state file
    /// can be had (there is nothing to recount into).
    var isPayloadCounted: Bool {
        guard let mapping = live() else { return true }
        return mapping.load(SharedState.accountingFlagsOffset) & SharedState.countedFlag != 0
    }

    /// Records that a scan counted the usage words.
    func markPayloadCounted() {
        guard let mapping = live() else { return }
        mapping.setFlag(SharedState.countedFlag, at: SharedState.accountingFlagsOffset)
    }

    /// Records that the usage words can no longer be trusted (a trim's sample found them far from what
    /// the directory holds): the next budgeted write recounts them (I9).
    func markPayloadUncounted() {
        guard let mapping = live() else { return }
        mapping.clearFlag(SharedState.countedFlag, at: SharedState.accountingFlagsOffset)
    }

    // MARK: Last publish (I11)

    /// The largest mtime any publish gave an entry (nanoseconds since 1970; 0 in a state file made by 0.1
    /// or a repair). An entry last used before this looks older to trim than something published since,
    /// so a hit on it touches (I11).
    var lastPublishNanoseconds: Int64 { live()?.loadSigned(SharedState.lastPublishOffset) ?? 0 }

    /// Raises the last-publish time to `nanoseconds`. It is lowered only when it lies more than the touch
    /// interval ahead (left by a clock that jumped back), so that it cannot keep every later hit touching.
    func notePublish(atNanoseconds nanoseconds: Int64) {
        guard let mapping = live() else { return }
        mapping.raise(SharedState.lastPublishOffset, to: nanoseconds)
    }

    // MARK: The live mapping, for the shared counters

    /// The mapping in use (retained by the caller while it touches words of it), or nil.
    var liveMapping: StateMapping? { live() }

    // MARK: Tests

    /// Clears the accounting flags, as a state file made by 0.1 has them (tests only).
    func clearAccountingFlagsForTesting() {
        live()?.store(SharedState.accountingFlagsOffset, 0)
    }
}
