// Scans of the entries that exist: every regular `*.entry` file under the fan-out folders, with the
// status the listing gave it (one fstatat per name, relative to the listed folder: no path walk, I13) and,
// when asked, its payload bytes from its fixed header; as an array, or streamed one folder at a time
// (memory bounded by a folder's listing). Behind trim, usage, removeAll, listing and the operator's
// verification. Blocking (one syscall or two per file): callers run it off the cooperative pool.

/// One entry file seen by a scan.
struct ScannedEntry: Sendable {
    let relative: String
    let modified: Int64
    let allocatedBytes: Int64
    /// The file's size (to notice, before unlinking, that it was replaced since the scan).
    let size: Int64
    /// Payload bytes from its header (`EntryFile.chargedPayloadBytes`); 0 when the scan did not read them.
    let payloadBytes: Int64
}

/// A directory's usage, counted by a scan.
struct CountedUsage: Sendable, Equatable {
    var payloadBytes: Int64
    var allocatedBytes: Int64
    var entries: Int

    init(payloadBytes: Int64, allocatedBytes: Int64, entries: Int) {
        self.payloadBytes = payloadBytes
        self.allocatedBytes = allocatedBytes
        self.entries = entries
    }

    /// The usage of the entries a scan found (which read their payload bytes).
    init(counting scanned: [ScannedEntry]) {
        payloadBytes = scanned.reduce(Int64(0)) { $0 + $1.payloadBytes }
        allocatedBytes = scanned.reduce(Int64(0)) { $0 + $1.allocatedBytes }
        entries = scanned.count
    }

    /// Counts one more entry (whose payload bytes the scan read).
    mutating func add(_ entry: ScannedEntry) {
        payloadBytes += entry.payloadBytes
        allocatedBytes += entry.allocatedBytes
        entries += 1
    }
}

extension EntryFile {
    /// Every entry file (regular files ending in `.entry` under the fan-out folders). Blocking.
    /// - Parameter readingPayloads: Also read each file's fixed header for its payload bytes (one open
    ///   and one 128-byte read per file, on top of the listing's fstatat).
    func scanEntries(readingPayloads: Bool = false) -> [ScannedEntry] {
        var found: [ScannedEntry] = []
        forEachEntry(readingPayloads: readingPayloads) { found.append($0) }
        return found
    }

    /// The fan-out folders of `entries/` (two-character names), in listing order; empty when it cannot be
    /// listed.
    func entryFolders() -> [String] {
        guard case .success(let folders) = Syscall.listDirectory(Directory.entriesFolder, in: directory.descriptor)
        else { return [] }
        return folders.filter { $0.isDirectory != false && $0.name.count == 2 }.map(\.name)
    }

    /// Calls `body` with every entry file, one fan-out folder at a time (memory: one folder's listing).
    /// Blocking.
    func forEachEntry(readingPayloads: Bool = false, _ body: (ScannedEntry) -> Void) {
        for folder in entryFolders() {
            forEachEntry(inFolder: folder, readingPayloads: readingPayloads, body)
        }
    }

    /// Calls `body` with every entry file of the fan-out folder `folder` (`"ab"`). Blocking.
    func forEachEntry(inFolder folder: String, readingPayloads: Bool = false, _ body: (ScannedEntry) -> Void) {
        let folderPath = Directory.entriesFolder + "/" + folder
        // Statuses relative to the listed folder: one fstatat per name, no path walk (I13).
        guard case .success(let names) = Syscall.listDirectoryWithStatus(folderPath, in: directory.descriptor) else {
            return
        }
        for name in names where name.name.hasSuffix(Directory.entrySuffix) {
            let relative = folderPath + "/" + name.name
            // A file that vanished between listing and stat was removed by someone else: skip it.
            guard let status = name.status, status.isRegularFile else { continue }
            body(
                ScannedEntry(
                    relative: relative, modified: status.modifiedNanoseconds, allocatedBytes: status.allocatedBytes,
                    size: status.size,
                    payloadBytes: readingPayloads ? chargedPayloadBytes(relative, status: status) : 0))
        }
    }
}
