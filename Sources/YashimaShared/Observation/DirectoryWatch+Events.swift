// A directory's inotify events, decoded into changes (watcher thread only): entries appearing in a fan-out
// folder (a publish: its header is read to know the key, I1), entries unlinked (I4: attributed to a key
// when this process saw it, SummaryTable), fan-out folders appearing, the directory removed or replaced,
// and lost events (IN_Q_OVERFLOW).

extension DirectoryWatch {
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
                if event.mask.contains(.movedTo) {
                    if lastMoveIn.count > Policy.Observation.recentIdentityCapacity { lastMoveIn = [:] }
                    lastMoveIn[identity] = event.cookie
                }
                published(identity, relative: relative)
            } else if !event.mask.isDisjoint(with: .disappeared), !isSwappedOut(identity, relative, by: event) {
                removed(identity)
            }
        }
    }

    /// Whether a move-out of an entry's name is the second half of a publish's swap (EntryPublish): the
    /// kernel gives the swap's two moves consecutive cookies, move-in first, and the name still holds a
    /// file. (Another rename on the machine taking the cookie between them makes it a removal reported
    /// before the publication: never a removal missed, unless the name was filled again since.)
    private func isSwappedOut(_ identity: SHA256Digest, _ relative: String, by event: InotifyEvent) -> Bool {
        guard event.mask.contains(.movedFrom), let moveIn = lastMoveIn.removeValue(forKey: identity),
            moveIn &+ 1 == event.cookie,
            case .success(let status) = Syscall.status(of: relative, in: directory.descriptor)
        else { return false }
        return status.isRegularFile
    }

    /// A fan-out folder appeared (made on first use, after observation began): watch it, then read what
    /// was published into it before the watch existed.
    func fanOutAppeared(_ byte: UInt8) {
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
        if reportedByFolderScan.count > Policy.Observation.recentIdentityCapacity { reportedByFolderScan = [:] }
        for (name, _) in names {
            guard let identity = ObservedName.entryIdentity(name), identity.bytes[0] == byte else { continue }
            if let inode = published(identity, relative: folder + "/" + name) { reportedByFolderScan[identity] = inode }
        }
    }

    func keyFolder(of observer: Observer) -> UInt8? {
        guard case .key(let expectation, _, _) = observer.filter else { return nil }
        return expectation.identity.digest.bytes[0]
    }

    /// The directory (or its `entries/`) was removed, moved or replaced: the inodes watched are no longer
    /// the cache's, so every observation of it ends with an error (observe again to follow a new one).
    func terminate() {
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
    func published(_ identity: SHA256Digest, relative: String) -> UInt64? {
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
                if unreadable.count > Policy.Observation.recentIdentityCapacity { unreadable = [] }
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
    func removed(_ identity: SHA256Digest) {
        if unreadable.remove(identity) != nil { return }  // reported when the unreadable file appeared
        reportRemoval(identity)
    }

    /// Reports that the entry `identity` is gone: to its key observers, and to broad observers with its key
    /// when this process saw it (or without, when it may have missed it).
    func reportRemoval(_ identity: SHA256Digest) {
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

    func deliverToKeyObservers(_ change: YCache.Change, entry: ReadEntry, identity: SHA256Digest) {
        for observer in keyObservers[identity] ?? [] {
            guard case .key(let expectation, _, _) = observer.filter, entry.matches(expectation) else { continue }
            observer.channel.push(change)
        }
    }

    func deliverToBroadObservers(_ change: YCache.Change, namespace: String) {
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
}
