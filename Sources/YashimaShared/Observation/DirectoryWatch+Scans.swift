// Scans of the entries that exist (watcher thread only): for observers that start with `.currentState`,
// paced to how fast they read (half a buffer unread pauses the scan), and the directory's first scan that
// attribution needs. Each step lists one folder or reads up to `Policy.Observation.scanStep` headers, so
// other observers' events wait one step at most.

extension DirectoryWatch {
    /// One step of each runnable scan: list a folder, or read up to `Policy.Observation.scanStep` headers.
    func scanStep() {
        var finishedSummaryScan = false
        for index in scans.indices where !scans[index].paused {
            // A scan feeding `.currentState` waits while an observer has half a buffer unread.
            if let full = scans[index].targets.first(where: { $0.channel.isHalfFull }) {
                scans[index].paused = true
                full.channel.whenDrained(wake)
                continue
            }
            var budget = Policy.Observation.scanStep
            while budget > 0 {
                if scans[index].targets.isEmpty && summaries.isFull {
                    // Attribution stops at the table's capacity (it stays partial); nobody needs the rest.
                    scans[index].folders = []
                    scans[index].files = []
                    summaries.markIncomplete()
                    break
                }
                if scans[index].files.isEmpty {
                    guard let byte = scans[index].folders.popLast() else { break }
                    let folder = Directory.entriesFolder + "/" + ObservedName.fanOutName(byte)
                    if case .success(let names) = Syscall.listDirectory(folder, in: directory.descriptor) {
                        for (name, _) in names {
                            guard let identity = ObservedName.entryIdentity(name), identity.bytes[0] == byte else {
                                continue
                            }
                            scans[index].files.append((folder + "/" + name, identity))
                        }
                    }
                    budget -= 1
                    continue
                }
                let (relative, identity) = scans[index].files.removeLast()
                budget -= 1
                guard let entry = readEntry(relative, identity: identity) else { continue }
                if scans[index].recordsSummaries, broadCount > 0 {
                    summaries.insert(identity, key: entry.observed.key, codec: entry.observed.metadata.codecIdentifier)
                }
                for observer in scans[index].targets where observer.filter.matches(entry.observed.key) {
                    observer.channel.push(.published(entry.observed))
                }
                if let full = scans[index].targets.first(where: { $0.channel.isHalfFull }) {
                    scans[index].paused = true
                    full.channel.whenDrained(wake)
                    break
                }
            }
            if scans[index].files.isEmpty && scans[index].folders.isEmpty {
                scans[index].done = true
                if scans[index].isSummaryScan { finishedSummaryScan = true }
            }
        }
        scans.removeAll { $0.done }
        if finishedSummaryScan {
            summaries.markScanned()
            let waiting = waitingForSummaryScan
            waitingForSummaryScan = []
            for completion in waiting { completion(.success(())) }
        }
    }

    func resumePausedScans() {
        for index in scans.indices { scans[index].paused = false }
    }

    // MARK: Reading headers

    /// Reads and checks the header of the entry file `relative` (its identity must be the name's, and it
    /// must not be expired); nil when it is gone, corrupt or foreign (a miss for every reader too).
    func readEntry(_ relative: String, identity: SHA256Digest) -> ReadEntry? {
        guard case .success(let (header, bytes, status)) = EntryFile(directory: directory).readHeader(relative),
            header.entryIdentity == identity, !header.isExpired(atNanoseconds: Syscall.realtimeNanoseconds),
            let key = CacheKey(canonicalBytes: bytes[header.keyOffset..<header.codecOffset]),
            let codec = String(validating: bytes[header.codecOffset..<header.payloadOffset], as: UTF8.self)
        else { return nil }
        let observed = YCache.ObservedEntry(
            key: key,
            metadata: key.metadata(
                header: header, codecIdentifier: codec, cost: nil, lastAccessedAt: status.modifiedNanoseconds),
            entryIdentifier: identity.hex)
        return ReadEntry(observed: observed, identity: identity, header: header, bytes: bytes, inode: status.inode)
    }
}

/// An entry header the watcher read.
struct ReadEntry {
    let observed: YCache.ObservedEntry
    let identity: SHA256Digest
    let header: EntryFormat.Header
    let bytes: [UInt8]
    let inode: UInt64

    /// Whether it holds exactly the key and codec a key observer asked for (the name alone is a digest).
    func matches(_ expectation: EntryExpectation) -> Bool {
        bytes.withUnsafeBytes {
            if case .success = EntryFormat.validateIdentity(
                header, bytes: $0, expectedIdentity: expectation.identity.digest, keyBytes: expectation.keyBytes,
                codecBytes: expectation.codecBytes)
            {
                return true
            }
            return false
        }
    }
}

extension ObservationFilter {
    /// Whether a broad observer with this filter reports entries of `key`.
    func matches(_ key: CacheKey) -> Bool {
        switch self {
        case .key(_, let observed, _): return observed == key
        case .namespace(let namespace, _): return key.namespace == namespace
        case .everything: return true
        }
    }
}

/// A scan of the entries that exist: for `.currentState` (`targets`) and to attribute removals.
struct ScanJob {
    var targets: [Observer]
    let recordsSummaries: Bool
    let isSummaryScan: Bool
    var folders: [UInt8]
    var files: [(String, SHA256Digest)] = []
    var paused = false
    var done = false
}
