// The observers' side of the removal signal (I15): a marker in `signals/` opens a window whose unlinks fold
// into one `.removedAll`; publications in it are held back; a dead remover's marker is `.missedEvents`.

extension DirectoryWatch {
    /// Windows for markers already present when broad observation began (or after an overflow), when
    /// their remover still holds them.
    func openWindowsForLiveMarkers() {
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

    func openWindow(_ name: String, scope: RemovalSignal.Scope) {
        guard windows[name] == nil, !abandoned.contains(name) else { return }
        let window = RemovalWindow(name: name, scope: scope, directory: directory)
        if let namespace = window.namespace {
            namespaceNames.note(namespace, digest: RemovalSignal.digest(of: namespace))
        }
        windows[name] = window
    }

    /// A marker went away: unlinked by its remover (the removal is over: report it) or renamed away by a
    /// sweeper (its remover died: changes may be missing).
    func closeWindow(_ name: String, scope: RemovalSignal.Scope, abandoned wasAbandoned: Bool) {
        if abandoned.remove(name) != nil { return }  // already reported when the probe found it abandoned
        let window = windows.removeValue(forKey: name)
        window?.close()
        report(scope, abandoned: wasAbandoned, namespace: window?.namespace)
        flushDeferred()
    }

    /// Reports the end of a removal of `scope` to the broad observers it concerns.
    func report(_ scope: RemovalSignal.Scope, abandoned: Bool, namespace recorded: String?) {
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
    func flushDeferred() {
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
}
