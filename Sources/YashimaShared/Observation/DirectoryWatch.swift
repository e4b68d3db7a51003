// One observed storage directory, on the watcher thread: its watches (added when an observer needs them,
// removed when none does), decoding its events into changes for its observers, attributing removals to
// keys (SummaryTable), removal windows (I15: one `.removedAll` per removal, the entries' unlinks folded
// into it) and the scans behind `.currentState` and new fan-out folders. Relies on I1 (an entry appears
// only by rename: IN_MOVED_TO, or IN_CREATE for a link) and I4 (removal only unlinks: IN_DELETE).
// Reads entry headers only; never writes, touches or unlinks an entry.

/// Watch masks. Children's attribute changes (touch, I11) are not subscribed: hits never wake anyone.
enum WatchMask {
    static let root: InotifyMask = [.deletedSelf, .movedSelf, .onlyDirectory]
    static let entries: InotifyMask = [.created, .movedTo, .deletedSelf, .movedSelf, .onlyDirectory]
    static let fanOut: InotifyMask = [
        .created, .movedTo, .deleted, .movedFrom, .deletedSelf, .movedSelf, .onlyDirectory,
    ]
    static let signals: InotifyMask = [
        .created, .movedTo, .deleted, .movedFrom, .deletedSelf, .movedSelf, .onlyDirectory,
    ]
}

/// The watched directory's state. Watcher thread only (see Watcher).
final class DirectoryWatch {
    private enum Folder {
        case root, entries, signals
        case fanOut(UInt8)
    }

    let directory: Directory
    private let router: WatchRouter
    /// Wakes the watcher thread (from a consumer's thread) to resume paused scans.
    private let wake: @Sendable () -> Void
    private var folders: [Int32: Folder] = [:]
    private var rootWatch: Int32?
    private var entriesWatch: Int32?
    private var signalsWatch: Int32?
    /// `signals/` open with `flock(LOCK_SH)` while broad observers exist: tells removers to make markers (I15).
    private var signalsLock: Int32?
    private var fanOutWatches: [UInt8: Int32] = [:]
    /// Key observers per fan-out folder: the folder stays watched while one needs it.
    private var keyFolderUse: [UInt8: Int] = [:]

    private var keyObservers: [SHA256Digest: [Observer]] = [:]
    private var namespaceObservers: [String: [Observer]] = [:]
    private var everythingObservers: [Observer] = []
    private var all: [UInt64: Observer] = [:]
    private var broadCount = 0
    /// Set when the directory was removed or replaced: observers got their error; events are ignored.
    private var terminated = false

    private var summaries = SummaryTable(
        capacity: ObservationPolicy.summaryCapacity, byteCapacity: ObservationPolicy.summaryByteCapacity)
    private var namespaceNames = NamespaceNames()
    private var windows: [String: RemovalWindow] = [:]
    /// Markers found abandoned by a probe: their later rename or unlink is not another event.
    private var abandoned: Set<String> = []
    private var deferred = DeferredPublications(capacity: ObservationPolicy.deferredCapacity)
    private var scans: [ScanJob] = []
    /// Entries reported by the scan of a folder that just appeared, by inode: the event of their rename,
    /// queued before the watch existed or just after, is then not a second report (a publication is
    /// always a new inode, I1).
    private var reportedByFolderScan: [SHA256Digest: UInt64] = [:]
    /// Entries whose file, when it appeared, was one no reader accepts (corrupt, expired, foreign): the
    /// removal of what was there before was reported then, so the unlink of that file is not news.
    private var unreadable: Set<SHA256Digest> = []
    /// Registrations of broad observers waiting for the directory's first scan (attribution is complete
    /// only after it).
    private var waitingForSummaryScan: [@Sendable (Result<Void, YCache.Error>) -> Void] = []
    private var summaryScanStarted = false

    init(directory: Directory, router: WatchRouter, wake: @escaping @Sendable () -> Void) {
        self.directory = directory
        self.router = router
        self.wake = wake
    }

    var observerCount: Int { all.count }
    var hasRunnableScan: Bool { scans.contains { !$0.paused } }
    var hasOpenRemovals: Bool { !windows.isEmpty }
    func contains(_ observer: Observer) -> Bool { all[observer.identifier] != nil }

    // MARK: Registration

    func register(_ observer: Observer, completion: @escaping @Sendable (Result<Void, YCache.Error>) -> Void) {
        do throws(YCache.Error) {
            if terminated {
                throw .observationUnavailable(
                    path: directory.path, reason: "the storage directory was removed or replaced")
            }
            try watch(&rootWatch, ".", mask: WatchMask.root, as: .root, required: true)
            try watch(&entriesWatch, Directory.entriesFolder, mask: WatchMask.entries, as: .entries, required: true)
            switch observer.filter {
            case .key(let expectation, _, _):
                let byte = expectation.identity.digest.bytes[0]
                keyFolderUse[byte, default: 0] += 1
                all[observer.identifier] = observer
                keyObservers[expectation.identity.digest, default: []].append(observer)
                do throws(YCache.Error) {
                    try watchFanOut(byte)
                } catch {
                    unregister(observer)
                    throw error
                }
                completion(.success(()))
                if observer.start == .currentState {
                    let relative = directory.entryPath(for: expectation.identity).relative
                    if let entry = readEntry(relative, identity: expectation.identity.digest),
                        entry.matches(expectation)
                    {
                        observer.channel.push(.published(entry.observed))
                    }
                }
                return
            case .namespace(let namespace, let digest):
                namespaceNames.note(namespace, digest: digest)
                all[observer.identifier] = observer
                namespaceObservers[namespace, default: []].append(observer)
            case .everything:
                all[observer.identifier] = observer
                everythingObservers.append(observer)
            }
            broadCount += 1
            do throws(YCache.Error) {
                if broadCount == 1 { try watchForBroadObservers() }
            } catch {
                unregister(observer)
                throw error
            }
            // Two scans: the directory's first, which attribution needs before `observe` returns (never
            // paced: it feeds no observer), and this observer's `.currentState`, paced to its reading
            // (which starts only once `observe` has returned).
            if !summaryScanStarted {
                summaryScanStarted = true
                scans.append(
                    ScanJob(targets: [], recordsSummaries: true, isSummaryScan: true, folders: existingFanOuts()))
            }
            if observer.start == .currentState {
                scans.append(
                    ScanJob(
                        targets: [observer], recordsSummaries: true, isSummaryScan: false, folders: existingFanOuts()))
            }
            if scans.contains(where: { $0.isSummaryScan }) {
                waitingForSummaryScan.append(completion)
            } else {
                completion(.success(()))
            }
        } catch {
            completion(.failure(error))
        }
    }

    func unregister(_ observer: Observer) {
        guard all.removeValue(forKey: observer.identifier) != nil else { return }
        switch observer.filter {
        case .key(let expectation, _, _):
            let identity = expectation.identity.digest
            keyObservers[identity]?.removeAll { $0 === observer }
            if keyObservers[identity]?.isEmpty == true { keyObservers[identity] = nil }
            let byte = identity.bytes[0]
            keyFolderUse[byte, default: 1] -= 1
            if keyFolderUse[byte] == 0 { keyFolderUse[byte] = nil }
        case .namespace(let namespace, _):
            namespaceObservers[namespace]?.removeAll { $0 === observer }
            if namespaceObservers[namespace]?.isEmpty == true { namespaceObservers[namespace] = nil }
            broadCount -= 1
        case .everything:
            everythingObservers.removeAll { $0 === observer }
            broadCount -= 1
        }
        for index in scans.indices { scans[index].targets.removeAll { $0 === observer } }
        scans.removeAll { !$0.isSummaryScan && $0.targets.isEmpty }
        releaseUnneededWatches()
    }

    /// The watches broad observers need: `signals/` (made when missing, I15) and every fan-out folder.
    private func watchForBroadObservers() throws(YCache.Error) {
        // Made like every folder of the cache (exact mode, never through a link); a failure only means
        // removals are seen entry by entry.
        try watchSignals()
        for byte in existingFanOuts() { try watchFanOut(byte) }
    }

    /// Makes `signals/` when missing, takes its shared lock (from then on every remover makes a marker),
    /// watches it and opens windows for removals already running.
    private func watchSignals() throws(YCache.Error) {
        let root = directory.descriptor
        _ = Directory.ensureDirectory(
            RemovalSignal.folder, in: root, mode: directory.directoryMode, replacingFiles: false)
        if signalsLock == nil,
            case .success(let fd) = Syscall.open(RemovalSignal.folder, in: root, flags: [.readOnly, .directory])
        {
            // A remover holds LOCK_EX only between two syscalls: a few tries suffice. Without the lock a
            // remover may skip its marker, and the removal is then seen entry by entry.
            for _ in 0..<64 {
                if case .success = Syscall.lock(fd, exclusive: false, wait: false) {
                    signalsLock = fd
                    break
                }
            }
            if signalsLock == nil { Syscall.close(fd) }
        }
        try watch(&signalsWatch, RemovalSignal.folder, mask: WatchMask.signals, as: .signals, required: false)
        if signalsWatch != nil { openWindowsForLiveMarkers() }
    }

    private func releaseSignalsLock() {
        guard let fd = signalsLock else { return }
        if directory.isOwnedByThisProcess { Syscall.unlock(fd) }  // I7: never unlock an inherited description
        Syscall.close(fd)
        signalsLock = nil
    }

    /// Removes the watches nobody needs any more (all of them once the last observer is gone).
    private func releaseUnneededWatches() {
        for (byte, wd) in fanOutWatches where broadCount == 0 && keyFolderUse[byte] == nil {
            router.remove(wd)
            folders[wd] = nil
            fanOutWatches[byte] = nil
        }
        if broadCount == 0 {
            if let wd = signalsWatch {
                router.remove(wd)
                folders[wd] = nil
                signalsWatch = nil
            }
            releaseSignalsLock()
            for window in windows.values { window.close() }
            windows = [:]
            abandoned = []
            deferred.removeAll()
            summaries = SummaryTable(capacity: summaries.capacity, byteCapacity: summaries.byteCapacity)
            summaryScanStarted = false
            scans.removeAll()
            let waiting = waitingForSummaryScan
            waitingForSummaryScan = []
            for completion in waiting { completion(.success(())) }
        }
        if all.isEmpty { removeAllWatches() }
    }

    func removeAllWatches() {
        for wd in folders.keys { router.remove(wd) }
        folders = [:]
        rootWatch = nil
        entriesWatch = nil
        signalsWatch = nil
        fanOutWatches = [:]
        releaseSignalsLock()
        for window in windows.values { window.close() }
        windows = [:]
    }

    /// Whether the watcher may forget this directory: nobody observes it, or it was removed or replaced
    /// (its observers got their error; observing the path again starts afresh).
    var isRetired: Bool { all.isEmpty || terminated }

    /// Ends every observation of this directory with `error`.
    func failAll(_ error: YCache.Error) {
        for observer in all.values { observer.channel.fail(error) }
        let waiting = waitingForSummaryScan
        waitingForSummaryScan = []
        for completion in waiting { completion(.failure(error)) }
    }

    // MARK: Watches

    private func watch(
        _ slot: inout Int32?, _ relative: String, mask: InotifyMask, as folder: Folder, required: Bool
    ) throws(YCache.Error) {
        guard slot == nil else { return }
        switch router.add(relative, in: directory, mask: mask, for: self) {
        case .success(let wd):
            slot = wd
            folders[wd] = folder
        case .failure(let error) where !required && error.errno.isFolderMissingOrReplaced:
            return
        case .failure(let error):
            throw ObservationError.watch(error, folder: relative, path: directory.path)
        }
    }

    /// Watches fan-out folder `byte` if it exists (a missing one is watched when `entries/` reports it).
    private func watchFanOut(_ byte: UInt8) throws(YCache.Error) {
        var slot = fanOutWatches[byte]
        try watch(
            &slot, Directory.entriesFolder + "/" + ObservedName.fanOutName(byte), mask: WatchMask.fanOut,
            as: .fanOut(byte), required: false)
        fanOutWatches[byte] = slot
    }

    private func needsFanOut(_ byte: UInt8) -> Bool { broadCount > 0 || keyFolderUse[byte] != nil }

    /// The fan-out folders that exist now.
    private func existingFanOuts() -> [UInt8] {
        guard case .success(let names) = Syscall.listDirectory(Directory.entriesFolder, in: directory.descriptor)
        else { return [] }
        return names.compactMap { $0.isDirectory == false ? nil : ObservedName.fanOutByte($0.name) }.sorted()
    }

    // MARK: Events

    func handle(_ event: InotifyEvent) {
        guard !terminated, let folder = folders[event.watch] else {
            if event.mask.contains(.ignored) { router.forget(event.watch) }
            return
        }
        if event.mask.contains(.ignored) {
            router.forget(event.watch)
            folders[event.watch] = nil
        }
        switch folder {
        case .root, .entries:
            if !event.mask.isDisjoint(with: InotifyMask.selfGone) {
                terminate()
            } else if !event.mask.isDisjoint(with: .appeared), event.mask.contains(.isDirectory),
                let byte = ObservedName.fanOutByte(event.name)
            {
                fanOutAppeared(byte)
            }
        case .signals:
            if !event.mask.isDisjoint(with: InotifyMask.selfGone) {
                if event.mask.contains(.ignored) { signalsWatch = nil }
                for window in windows.values { window.close() }
                windows = [:]
                if broadCount > 0, signalsWatch == nil, !event.mask.contains(.movedSelf) {
                    releaseSignalsLock()
                    try? watchSignals()
                }
                return
            }
            guard let scope = RemovalSignal.scope(ofMarker: event.name) else { return }
            if !event.mask.isDisjoint(with: .appeared) {
                openWindow(event.name, scope: scope)
            } else if event.mask.contains(.deleted) {
                closeWindow(event.name, scope: scope, abandoned: false)
            } else if event.mask.contains(.movedFrom) {
                closeWindow(event.name, scope: scope, abandoned: true)
            }
        case .fanOut(let byte):
            if !event.mask.isDisjoint(with: InotifyMask.selfGone) {
                if event.mask.contains(.ignored), fanOutWatches[byte] == event.watch { fanOutWatches[byte] = nil }
                return
            }
            guard let identity = ObservedName.entryIdentity(event.name), identity.bytes[0] == byte else { return }
            let relative = Directory.entriesFolder + "/" + ObservedName.fanOutName(byte) + "/" + event.name
            if !event.mask.isDisjoint(with: .appeared) {
                published(identity, relative: relative)
            } else if !event.mask.isDisjoint(with: .disappeared) {
                removed(identity)
            }
        }
    }

    /// A fan-out folder appeared (made on first use, after observation began): watch it, then read what
    /// was published into it before the watch existed.
    private func fanOutAppeared(_ byte: UInt8) {
        guard needsFanOut(byte), fanOutWatches[byte] == nil else { return }
        do throws(YCache.Error) {
            try watchFanOut(byte)
        } catch {
            // Observers that need this folder cannot go on without it: a clear error, not a silent gap.
            for observer in all.values where observer.filter.isBroad || keyFolder(of: observer) == byte {
                observer.channel.fail(error)
            }
            return
        }
        let folder = Directory.entriesFolder + "/" + ObservedName.fanOutName(byte)
        guard case .success(let names) = Syscall.listDirectory(folder, in: directory.descriptor) else { return }
        if reportedByFolderScan.count > 4096 { reportedByFolderScan = [:] }
        for (name, _) in names {
            guard let identity = ObservedName.entryIdentity(name), identity.bytes[0] == byte else { continue }
            if let inode = published(identity, relative: folder + "/" + name) { reportedByFolderScan[identity] = inode }
        }
    }

    private func keyFolder(of observer: Observer) -> UInt8? {
        guard case .key(let expectation, _, _) = observer.filter else { return nil }
        return expectation.identity.digest.bytes[0]
    }

    /// The directory (or its `entries/`) was removed, moved or replaced: the inodes watched are no longer
    /// the cache's, so every observation of it ends with an error (observe again to follow a new one).
    private func terminate() {
        terminated = true
        failAll(
            .observationUnavailable(
                path: directory.path,
                reason: "the storage directory (or its entries folder) was removed, moved or replaced while observed"))
        removeAllWatches()
        scans.removeAll()
    }

    /// An entry file appeared in a fan-out folder. Returns the inode reported, if any.
    @discardableResult
    private func published(_ identity: SHA256Digest, relative: String) -> UInt64? {
        let keyTargets = keyObservers[identity] ?? []
        guard !keyTargets.isEmpty || broadCount > 0 else { return nil }
        // An identity names one key and codec, so a known one has a known namespace: when nobody observes
        // it, the header need not be read (writes to other namespaces cost an observer nearly nothing).
        if keyTargets.isEmpty, everythingObservers.isEmpty, let known = summaries.summary(of: identity),
            namespaceObservers[known.key.namespace] == nil
        {
            return nil
        }
        guard let entry = readEntry(relative, identity: identity) else {
            // Gone again: its unlink, queued, reports the removal of whatever was reported before (an entry
            // unlinked before its header could be read is reported neither way to a broad observer that knows
            // every entry). Still there but unreadable (corrupt, expired, foreign: a miss for every reader):
            // the entry it replaced is gone now.
            if case .success = Syscall.status(of: relative, in: directory.descriptor) {
                reportRemoval(identity)
                if unreadable.count > 4096 { unreadable = [] }
                unreadable.insert(identity)
            }
            return nil
        }
        unreadable.remove(identity)
        if let inode = reportedByFolderScan.removeValue(forKey: identity), inode == entry.inode { return nil }
        deliverToKeyObservers(.published(entry.observed), entry: entry, identity: identity)
        guard broadCount > 0 else { return entry.inode }
        summaries.insert(identity, key: entry.observed.key, codec: entry.observed.metadata.codecIdentifier)
        let namespace = entry.observed.key.namespace
        let digest = namespaceNames.digest(of: namespace)
        if windows.values.contains(where: { $0.scope.covers(namespaceDigest: digest) }) {
            // A removal covering it runs: reported after that removal's `.removedAll`, unless it removes it.
            deferred.add(identity, entry.observed)
        } else {
            deliverToBroadObservers(.published(entry.observed), namespace: namespace)
        }
        return entry.inode
    }

    /// An entry file was unlinked (or renamed away).
    private func removed(_ identity: SHA256Digest) {
        if unreadable.remove(identity) != nil { return }  // reported when the unreadable file appeared
        reportRemoval(identity)
    }

    /// Reports that the entry `identity` is gone: to its key observers, and to broad observers with its key
    /// when this process saw it (or without, when it may have missed it).
    private func reportRemoval(_ identity: SHA256Digest) {
        let hex = identity.hex
        for observer in keyObservers[identity] ?? [] {
            guard case .key(_, let key, let codec) = observer.filter else { continue }
            observer.channel.push(.removed(YCache.RemovedEntry(entryIdentifier: hex, key: key, codecIdentifier: codec)))
        }
        guard broadCount > 0 else { return }
        reportedByFolderScan[identity] = nil
        let summary = summaries.remove(identity)
        deferred.remove(identity)
        if let summary {
            let digest = namespaceNames.digest(of: summary.key.namespace)
            // Folded into the `.removedAll` of a removal covering it (I15).
            if windows.values.contains(where: { $0.scope.covers(namespaceDigest: digest) }) { return }
            deliverToBroadObservers(
                .removed(YCache.RemovedEntry(entryIdentifier: hex, key: summary.key, codecIdentifier: summary.codec)),
                namespace: summary.key.namespace)
            return
        }
        // Never seen: not one this process reported, when it knows every entry; otherwise it may be anyone's.
        if summaries.isComplete { return }
        let change = YCache.Change.removed(YCache.RemovedEntry(entryIdentifier: hex, key: nil, codecIdentifier: nil))
        if windows.isEmpty { everythingObservers.forEach { $0.channel.push(change) } }
        if windows.values.contains(where: { $0.scope == .wholeDirectory }) { return }
        for (namespace, observers) in namespaceObservers {
            let digest = namespaceNames.digest(of: namespace)
            if windows.values.contains(where: { $0.scope.covers(namespaceDigest: digest) }) { continue }
            observers.forEach { $0.channel.push(change) }
        }
    }

    private func deliverToKeyObservers(_ change: YCache.Change, entry: ReadEntry, identity: SHA256Digest) {
        for observer in keyObservers[identity] ?? [] {
            guard case .key(let expectation, _, _) = observer.filter, entry.matches(expectation) else { continue }
            observer.channel.push(change)
        }
    }

    private func deliverToBroadObservers(_ change: YCache.Change, namespace: String) {
        namespaceObservers[namespace]?.forEach { $0.channel.push(change) }
        everythingObservers.forEach { $0.channel.push(change) }
    }

    /// Events were lost (IN_Q_OVERFLOW): every observer is told, attribution becomes partial, open
    /// removals are forgotten (their end may be among the lost events) and the folders are listed again
    /// (one may have appeared unseen).
    func handleOverflow() {
        guard !terminated else { return }
        for observer in all.values { observer.channel.push(.missedEvents) }
        summaries.markIncomplete()
        for window in windows.values { window.close() }
        windows = [:]
        abandoned = []
        deferred.removeAll()
        if broadCount > 0, signalsWatch != nil { openWindowsForLiveMarkers() }
        for byte in existingFanOuts() where needsFanOut(byte) && fanOutWatches[byte] == nil { fanOutAppeared(byte) }
    }

    // MARK: Removal windows (I15)

    /// Windows for markers already present when broad observation began (or after an overflow), when
    /// their remover still holds them.
    private func openWindowsForLiveMarkers() {
        guard case .success(let names) = Syscall.listDirectory(RemovalSignal.folder, in: directory.descriptor) else {
            return
        }
        for (name, _) in names {
            guard let scope = RemovalSignal.scope(ofMarker: name) else { continue }
            openWindow(name, scope: scope)
            if let window = windows[name], window.probe(in: directory) != .running {
                // Over (or abandoned) before this observation saw it begin: its unlinks were reported one
                // by one, or before observation began; its marker's later unlink or rename is not news.
                window.close()
                windows[name] = nil
                abandoned.insert(name)
            }
        }
    }

    private func openWindow(_ name: String, scope: RemovalSignal.Scope) {
        guard windows[name] == nil, !abandoned.contains(name) else { return }
        let window = RemovalWindow(name: name, scope: scope, directory: directory)
        if let namespace = window.namespace {
            namespaceNames.note(namespace, digest: RemovalSignal.digest(of: namespace))
        }
        windows[name] = window
    }

    /// A marker went away: unlinked by its remover (the removal is over: report it) or renamed away by a
    /// sweeper (its remover died: changes may be missing).
    private func closeWindow(_ name: String, scope: RemovalSignal.Scope, abandoned wasAbandoned: Bool) {
        if abandoned.remove(name) != nil { return }  // already reported when the probe found it abandoned
        let window = windows.removeValue(forKey: name)
        window?.close()
        report(scope, abandoned: wasAbandoned, namespace: window?.namespace)
        flushDeferred()
    }

    /// Reports the end of a removal of `scope` to the broad observers it concerns.
    private func report(_ scope: RemovalSignal.Scope, abandoned: Bool, namespace recorded: String?) {
        switch scope {
        case .wholeDirectory:
            let change: YCache.Change = abandoned ? .missedEvents : .removedAll(namespace: nil)
            for observers in namespaceObservers.values { observers.forEach { $0.channel.push(change) } }
            everythingObservers.forEach { $0.channel.push(change) }
        case .namespace(let digest):
            var namespace = recorded ?? namespaceNames.name(for: digest)
            for (observed, observers) in namespaceObservers {
                guard let first = observers.first, case .namespace(_, let observedDigest) = first.filter,
                    observedDigest == digest
                else { continue }
                namespace = namespace ?? observed
                observers.forEach { $0.channel.push(abandoned ? .missedEvents : .removedAll(namespace: observed)) }
            }
            let change: YCache.Change =
                abandoned || namespace == nil ? .missedEvents : .removedAll(namespace: namespace)
            everythingObservers.forEach { $0.channel.push(change) }
        }
    }

    /// Publications held back during removals, reported once no open removal covers them.
    private func flushDeferred() {
        if deferred.overflowed {
            deferred.removeAll()
            for observer in all.values where observer.filter.isBroad { observer.channel.push(.missedEvents) }
            return
        }
        let covering = windows.values.map(\.scope)
        for entry in deferred.take(where: { entry in
            let digest = namespaceNames.digest(of: entry.key.namespace)
            return !covering.contains { $0.covers(namespaceDigest: digest) }
        }) {
            deliverToBroadObservers(.published(entry), namespace: entry.key.namespace)
        }
    }

    /// Checks open removals' processes (a killed remover never ends its marker): called about once a
    /// second while removals are open, never otherwise.
    func probeRemovals() {
        for (name, window) in windows {
            switch window.probe(in: directory) {
            case .running, .ending:
                continue
            case .abandoned:
                window.close()
                windows[name] = nil
                abandoned.insert(name)
                report(window.scope, abandoned: true, namespace: window.namespace)
                flushDeferred()
            }
        }
    }

    // MARK: Scans

    /// One step of each runnable scan: list a folder, or read up to `ObservationPolicy.scanStep` headers.
    func scanStep() {
        var finishedSummaryScan = false
        for index in scans.indices where !scans[index].paused {
            // A scan feeding `.currentState` waits while an observer has half a buffer unread.
            if let full = scans[index].targets.first(where: { $0.channel.isHalfFull }) {
                scans[index].paused = true
                full.channel.whenDrained(wake)
                continue
            }
            var budget = ObservationPolicy.scanStep
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
    private func readEntry(_ relative: String, identity: SHA256Digest) -> ReadEntry? {
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
