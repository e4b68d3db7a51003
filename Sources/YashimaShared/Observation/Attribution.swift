// What a directory's watcher remembers, each bounded: the keys of entries it saw (to attribute a removal
// to a key once the file is gone), namespace names by digest (markers name namespaces by digest), the
// publications held back while a removal covering them runs, and each open removal (its marker).
// Watcher thread only.

/// Entry identity → key and codec, from the headers of entries seen published or found by a scan.
///
/// Bounded by count and by key bytes; the oldest are dropped first, and from then on the table is
/// partial (`isComplete` false). Complete means: the directory's first scan finished and nothing was
/// dropped, so an identity missing here was never an entry this process reported.
struct SummaryTable {
    struct Summary {
        let key: CacheKey
        let codec: String
        let byteCount: Int
    }

    let capacity: Int
    let byteCapacity: Int
    private var table: [SHA256Digest: Summary] = [:]
    /// Insertion order, for dropping the oldest; holds stale identities until compacted.
    private var order: [SHA256Digest] = []
    private var head = 0
    private var byteCount = 0
    private var scanned = false
    private var dropped = false

    init(capacity: Int, byteCapacity: Int) {
        self.capacity = capacity
        self.byteCapacity = byteCapacity
    }

    var isComplete: Bool { scanned && !dropped }
    var isFull: Bool { table.count >= capacity || byteCount >= byteCapacity }
    var count: Int { table.count }
    /// Slots of the insertion order kept (live and stale): stays proportional to `count`.
    var orderSlots: Int { order.count - head }

    mutating func insert(_ identity: SHA256Digest, key: CacheKey, codec: String) {
        let bytes = key.canonicalByteCount + codec.utf8.count
        guard bytes <= byteCapacity / 16 else {
            // One huge key would push out hundreds of others: not remembered (the table is partial).
            if let old = table.removeValue(forKey: identity) { byteCount -= old.byteCount }
            dropped = true
            return
        }
        if let old = table[identity] {
            byteCount -= old.byteCount
        } else {
            order.append(identity)
        }
        table[identity] = Summary(key: key, codec: codec, byteCount: bytes)
        byteCount += bytes
        while table.count > capacity || byteCount > byteCapacity { dropOldest() }
        compactIfStale()
    }

    /// The key and codec of `identity`, if remembered.
    func summary(of identity: SHA256Digest) -> Summary? { table[identity] }

    mutating func remove(_ identity: SHA256Digest) -> Summary? {
        guard let summary = table.removeValue(forKey: identity) else { return nil }
        byteCount -= summary.byteCount
        return summary
    }

    /// The directory's first scan is over: from now on a missing identity was never seen.
    mutating func markScanned() { scanned = true }
    /// Events were lost or the scan stopped early: the table is partial from now on.
    mutating func markIncomplete() { dropped = true }

    private mutating func dropOldest() {
        while head < order.count {
            let identity = order[head]
            head += 1
            if let summary = table.removeValue(forKey: identity) {
                byteCount -= summary.byteCount
                dropped = true
                return
            }
        }
    }

    /// Removed and re-inserted identities leave stale slots in `order`; rebuilt when they outnumber the
    /// live ones, so its size stays proportional to the table's (amortised O(1) per insert).
    private mutating func compactIfStale() {
        guard order.count - head > 2 * max(table.count, 1024) else { return }
        var seen = Set<SHA256Digest>()
        var kept: [SHA256Digest] = []
        kept.reserveCapacity(table.count)
        for identity in order[head...] where table[identity] != nil && seen.insert(identity).inserted {
            kept.append(identity)
        }
        order = kept
        head = 0
    }
}

/// Namespace names by the digest removal markers name them with (I15), learned from the keys seen.
struct NamespaceNames {
    private var digests: [String: SHA256Digest] = [:]
    private var names: [SHA256Digest: String] = [:]

    /// The digest of `namespace` (remembered).
    mutating func digest(of namespace: String) -> SHA256Digest {
        if let digest = digests[namespace] { return digest }
        let digest = RemovalSignal.digest(of: namespace)
        note(namespace, digest: digest)
        return digest
    }

    mutating func note(_ namespace: String, digest: SHA256Digest) {
        guard namespace.utf8.count <= Policy.Observation.namespaceNameLongest else { return }
        if digests.count >= Policy.Observation.namespaceNameCapacity, digests[namespace] == nil {
            digests = [:]
            names = [:]
        }
        digests[namespace] = digest
        names[digest] = namespace
    }

    func name(for digest: SHA256Digest) -> String? { names[digest] }
}

/// Publications held back while a removal covering them runs; reported after it unless it removed them.
struct DeferredPublications {
    let capacity: Int
    private var entries: [SHA256Digest: (sequence: Int, entry: YCache.ObservedEntry)] = [:]
    private var sequence = 0
    /// More than `capacity` were held: they were dropped, and observers get `.missedEvents` instead.
    private(set) var overflowed = false

    init(capacity: Int) {
        self.capacity = capacity
    }

    var count: Int { entries.count }

    mutating func add(_ identity: SHA256Digest, _ entry: YCache.ObservedEntry) {
        guard !overflowed else { return }
        if entries.count >= capacity, entries[identity] == nil {
            entries = [:]
            overflowed = true
            return
        }
        entries[identity] = (sequence, entry)
        sequence += 1
    }

    mutating func remove(_ identity: SHA256Digest) {
        entries[identity] = nil
    }

    mutating func removeAll() {
        entries = [:]
        overflowed = false
    }

    /// Removes and returns, in the order they were published, the entries `release` accepts.
    mutating func take(where release: (YCache.ObservedEntry) -> Bool) -> [YCache.ObservedEntry] {
        let released = entries.filter { release($0.value.entry) }
        for identity in released.keys { entries[identity] = nil }
        return released.values.sorted { $0.sequence < $1.sequence }.map(\.entry)
    }
}

/// One removal in progress, known by its marker in `signals/` (I15). Holds the marker open to probe
/// whether its remover still holds it.
final class RemovalWindow {
    enum Probe: Equatable {
        /// Its remover holds the marker: the removal runs.
        case running
        /// Nobody holds it and it is gone from its name: the marker's end event is on its way.
        case ending
        /// Nobody holds it, yet it is still named: its remover died mid-removal.
        case abandoned
    }

    let name: String
    let scope: RemovalSignal.Scope
    /// The namespace the marker's record names (nil for the whole directory, or when the marker was gone
    /// before it could be read).
    let namespace: String?
    private let relative: String
    private var descriptor: Int32?

    init(name: String, scope: RemovalSignal.Scope, directory: Directory) {
        self.name = name
        self.scope = scope
        relative = RemovalSignal.folder + "/" + name
        var recorded: String?
        if case .success(let fd) = Syscall.open(relative, in: directory.descriptor, flags: [.readOnly]) {
            descriptor = fd
            if case .namespace = scope, case .success(let status) = Syscall.status(of: fd),
                status.size >= 16, status.size <= Int64(16 + RemovalSignal.maximumRecordedNamespace)
            {
                var bytes = [UInt8](repeating: 0, count: Int(status.size))
                if case .success(let count) = bytes.withUnsafeMutableBytes({ Syscall.read(fd, into: $0, at: 0) }),
                    count == bytes.count
                {
                    recorded = RemovalSignal.namespace(inRecord: bytes, scope: scope)
                }
            }
        }
        namespace = recorded
    }

    /// Whether the removal's process still holds the marker (a shared lock taken without waiting, given
    /// back at once).
    func probe(in directory: Directory) -> Probe {
        if descriptor == nil {
            switch Syscall.open(relative, in: directory.descriptor, flags: [.readOnly]) {
            case .success(let fd): descriptor = fd
            case .failure(let error) where error.errno == .noSuchFile: return .ending
            case .failure: return .running
            }
        }
        guard let fd = descriptor else { return .running }
        guard FileLock.isAvailable(.shared, on: fd) else { return .running }
        if case .success(let mine) = Syscall.status(of: fd), mine.linkCount > 0,
            case .success(let current) = Syscall.status(of: relative, in: directory.descriptor),
            current.isSameFile(as: mine)
        {
            return .abandoned
        }
        return .ending
    }

    func close() {
        if let fd = descriptor { Syscall.close(fd) }
        descriptor = nil
    }
}
