// One observed storage directory on the watcher thread: its observers and watches (I1: entries appear by
// rename; I4: they go by unlink). Events, removal windows (I15) and scans are in its extensions. Reads
// entry headers only; touched by the watcher thread alone.

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
    enum Folder {
        case root, entries, signals
        case fanOut(UInt8)
    }

    let directory: Directory
    let router: WatchRouter
    /// Wakes the watcher thread (from a consumer's thread) to resume paused scans.
    let wake: @Sendable () -> Void
    var folders: [Int32: Folder] = [:]
    var rootWatch: Int32?
    var entriesWatch: Int32?
    var signalsWatch: Int32?
    /// A shared lock on `signals/`, held while broad observers exist: tells removers to make markers (I15).
    var signalsLock: FileLock?
    var fanOutWatches: [UInt8: Int32] = [:]
    /// Key observers per fan-out folder: the folder stays watched while one needs it.
    var keyFolderUse: [UInt8: Int] = [:]

    var keyObservers: [SHA256Digest: [Observer]] = [:]
    var namespaceObservers: [String: [Observer]] = [:]
    var everythingObservers: [Observer] = []
    var all: [UInt64: Observer] = [:]
    var broadCount = 0
    /// Set when the directory was removed or replaced: observers got their error; events are ignored.
    var terminated = false

    var summaries = SummaryTable(
        capacity: Policy.Observation.summaryCapacity, byteCapacity: Policy.Observation.summaryByteCapacity)
    var namespaceNames = NamespaceNames()
    var windows: [String: RemovalWindow] = [:]
    /// Markers found abandoned by a probe: their later rename or unlink is not another event.
    var abandoned: Set<String> = []
    var deferred = DeferredPublications(capacity: Policy.Observation.deferredCapacity)
    var scans: [ScanJob] = []
    /// Entries reported by the scan of a folder that just appeared, by inode: the event of their rename,
    /// queued before the watch existed or just after, is then not a second report (a publication is
    /// always a new inode, I1).
    var reportedByFolderScan: [SHA256Digest: UInt64] = [:]
    /// The cookie of each entry's last move-in: a publish's swap (EntryPublish, `RENAME_EXCHANGE`) is a
    /// move-in and then, with the next cookie, the move-out of the file it replaced, which is no removal.
    var lastMoveIn: [SHA256Digest: UInt32] = [:]
    /// Entries whose file, when it appeared, was one no reader accepts (corrupt, expired, foreign): the
    /// removal of what was there before was reported then, so the unlink of that file is not news.
    var unreadable: Set<SHA256Digest> = []
    /// Registrations of broad observers waiting for the directory's first scan (attribution is complete
    /// only after it).
    var waitingForSummaryScan: [@Sendable (Result<Void, YCache.Error>) -> Void] = []
    var summaryScanStarted = false

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
    func watchForBroadObservers() throws(YCache.Error) {
        // Made like every folder of the cache (exact mode, never through a link); a failure only means
        // removals are seen entry by entry.
        try watchSignals()
        for byte in existingFanOuts() { try watchFanOut(byte) }
    }

    /// Makes `signals/` when missing, takes its shared lock (from then on every remover makes a marker),
    /// watches it and opens windows for removals already running.
    func watchSignals() throws(YCache.Error) {
        let root = directory.descriptor
        _ = Directory.ensureDirectory(
            RemovalSignal.folder, in: root, mode: directory.directoryMode, replacingFiles: false)
        if !holdsSignalsLock,
            case .success(let fd) = Syscall.open(RemovalSignal.folder, in: root, flags: [.readOnly, .directory])
        {
            // A remover holds it exclusively only between two syscalls: a few tries suffice. Without the
            // lock a remover may skip its marker, and the removal is then seen entry by entry.
            for _ in 0..<Policy.Observation.signalsLockAttempts where !holdsSignalsLock {
                let attempt = FileLock.attempt(.shared, on: fd, ownerProcessID: directory.ownerProcessID)
                switch consume attempt {
                case .locked(let lock): signalsLock = .some(lock)
                case .busy: continue
                case .failed: continue
                }
            }
            if !holdsSignalsLock { Syscall.close(fd) }
        }
        try watch(&signalsWatch, RemovalSignal.folder, mask: WatchMask.signals, as: .signals, required: false)
        if signalsWatch != nil { openWindowsForLiveMarkers() }
    }

    var holdsSignalsLock: Bool {
        switch signalsLock {
        case .some: return true
        case .none: return false
        }
    }

    /// Gives up the lock on `signals/` (a forked child only closes its inherited descriptor, I7).
    func releaseSignalsLock() {
        signalsLock.take()?.release()
    }

    /// Removes the watches nobody needs any more (all of them once the last observer is gone).
    func releaseUnneededWatches() {
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

    func watch(
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
    func watchFanOut(_ byte: UInt8) throws(YCache.Error) {
        var slot = fanOutWatches[byte]
        try watch(
            &slot, Directory.entriesFolder + "/" + ObservedName.fanOutName(byte), mask: WatchMask.fanOut,
            as: .fanOut(byte), required: false)
        fanOutWatches[byte] = slot
    }

    func needsFanOut(_ byte: UInt8) -> Bool { broadCount > 0 || keyFolderUse[byte] != nil }

    /// The fan-out folders that exist now.
    func existingFanOuts() -> [UInt8] {
        guard case .success(let names) = Syscall.listDirectory(Directory.entriesFolder, in: directory.descriptor)
        else { return [] }
        return names.compactMap { $0.isDirectory == false ? nil : ObservedName.fanOutByte($0.name) }.sorted()
    }
}
