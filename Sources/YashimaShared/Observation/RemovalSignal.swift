// The removal signal, the remover's side (I15): `removeAll` brackets its unlinks with a locked marker in
// `signals/` when someone observes, so observers report one `.removedAll`; sweeping markers of dead removers.
// The observers' side is DirectoryWatch+Removals.swift; the whole protocol: Docs/Internals.md.

/// A removal in progress, announced to observers by a marker file held locked by its remover. Noncopyable:
/// ended exactly once (`end()`).
struct RemovalSignal: ~Copyable {
    /// The folder of markers, made by the first observer of a directory (never by a remover).
    static let folder = Directory.signalsFolder
    /// The suffix of a live marker. A marker of a killed remover is renamed to `deadSuffix` before it is
    /// unlinked, so observers tell "ended" (unlinked) from "abandoned" (renamed away).
    static let suffix = ".removal"
    static let deadSuffix = ".dead"
    /// The record's first bytes.
    static let magic: [UInt8] = Array("YSHRMVAL".utf8)
    static let recordVersion: UInt32 = 1
    /// Namespace byte count meaning "the whole directory" (`removeAll()`).
    static let wholeDirectory: UInt32 = 0xFFFF_FFFF
    /// Namespace byte count meaning "a namespace too long to copy": observers know it by digest only.
    static let namespaceOmitted: UInt32 = 0xFFFF_FFFE
    /// The longest namespace copied into a record.
    static let maximumRecordedNamespace = 64 * 1024

    /// What a marker announces: the removal of one namespace (by the SHA-256 of its UTF-8 bytes) or of
    /// the whole directory.
    enum Scope: Hashable, Sendable {
        case wholeDirectory
        case namespace(SHA256Digest)

        init(namespace: String?) {
            guard let namespace else {
                self = .wholeDirectory
                return
            }
            self = .namespace(RemovalSignal.digest(of: namespace))
        }

        /// Whether a removal of this scope removes entries of `namespace`.
        func covers(namespaceDigest: SHA256Digest) -> Bool {
            switch self {
            case .wholeDirectory: return true
            case .namespace(let digest): return digest == namespaceDigest
            }
        }
    }

    /// The SHA-256 of a namespace's UTF-8 bytes: how a marker's name names it (no key text in paths).
    static func digest(of namespace: String) -> SHA256Digest {
        SHA256.hash(Array(namespace.utf8))
    }

    /// `all.<16 hex>.removal` or `ns-<64 hex digest>.<16 hex>.removal`; the random part makes each
    /// removal's marker unique.
    static func markerName(_ scope: Scope, unique: String) -> String {
        switch scope {
        case .wholeDirectory: return "all." + unique + suffix
        case .namespace(let digest): return "ns-" + digest.hex + "." + unique + suffix
        }
    }

    /// The scope of a live marker's name; nil for any other name (dead markers, staging names, foreign files).
    static func scope(ofMarker name: String) -> Scope? {
        guard name.hasSuffix(suffix) else { return nil }
        let stem = name.dropLast(suffix.count)
        let parts = stem.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].utf8.count == 16 else { return nil }
        if parts[0] == "all" { return .wholeDirectory }
        guard parts[0].hasPrefix("ns-"), let digest = ObservedName.digest(fromHex: parts[0].utf8.dropFirst(3)) else {
            return nil
        }
        return .namespace(digest)
    }

    /// The record a marker holds: magic, version (u32), namespace byte count (u32, or `wholeDirectory`,
    /// or `namespaceOmitted`), the namespace's UTF-8 bytes. Little-endian.
    static func record(namespace: String?) -> [UInt8] {
        var bytes = magic
        func append(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        append(recordVersion)
        guard let namespace else {
            append(wholeDirectory)
            return bytes
        }
        let text = Array(namespace.utf8)
        if text.count > maximumRecordedNamespace {
            append(namespaceOmitted)
        } else {
            append(UInt32(text.count))
            bytes += text
        }
        return bytes
    }

    /// The namespace a record names, when it names one and it matches `scope`; nil otherwise.
    static func namespace(inRecord bytes: [UInt8], scope: Scope) -> String? {
        guard case .namespace(let digest) = scope, bytes.count >= 16, Array(bytes[0..<8]) == magic else { return nil }
        let version = bytes[8..<12].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let count = bytes[12..<16].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard version == recordVersion, Int(count) <= maximumRecordedNamespace, bytes.count == 16 + Int(count),
            let text = String(validating: bytes[16...], as: UTF8.self), RemovalSignal.digest(of: text) == digest
        else { return nil }
        return text
    }

    private let lock: FileLock
    let relative: String
    let directory: Directory

    private init(lock: consuming FileLock, relative: String, directory: Directory) {
        self.lock = lock
        self.relative = relative
        self.directory = directory
    }

    /// Announces a removal to observers (I15): makes the marker in `tmp/` with the file mode, writes its
    /// record, locks it exclusively and renames it into `signals/`, so it appears already locked. Nil,
    /// with nothing made, when `signals/` does not exist (nobody ever observed this directory) or the
    /// marker cannot be made. Called before the first unlink; `end()` after the last.
    static func begin(namespace: String?, in directory: Directory) -> RemovalSignal? {
        let root = directory.descriptor
        guard isObserved(directory) else { return nil }
        let staging = directory.newStagingPath()
        let fd: Int32
        switch Syscall.open(staging, in: root, flags: [.readWrite, .create, .exclusive], mode: directory.fileMode) {
        case .success(let value): fd = value
        case .failure: return nil
        }
        let relative = folder + "/" + markerName(Scope(namespace: namespace), unique: Directory.randomHex(byteCount: 8))
        let written = Syscall.setMode(fd, directory.fileMode)
            .flatMap { record(namespace: namespace).withUnsafeBytes { Syscall.write(fd, $0) } }
        guard case .success = written,
            case .locked(let lock) = FileLock.attempt(.exclusive, on: fd, ownerProcessID: directory.ownerProcessID)
        else {
            _ = Syscall.unlink(staging, in: root)
            Syscall.close(fd)
            return nil
        }
        guard case .success = Syscall.rename(staging, in: root, to: relative, in: root) else {
            _ = Syscall.unlink(staging, in: root)
            lock.release()  // I7: LOCK_UN before close
            return nil
        }
        return RemovalSignal(lock: lock, relative: relative, directory: directory)
    }

    /// Whether any process observes the directory broadly now: each holds a shared lock on `signals/`
    /// while it does, so a remover that could take an exclusive one without waiting (given back at once)
    /// knows nobody would read a marker. No `signals/` folder: nobody ever observed. Two syscalls and a
    /// close.
    static func isObserved(_ directory: Directory) -> Bool {
        guard case .success(let fd) = Syscall.open(folder, in: directory.descriptor, flags: [.readOnly, .directory])
        else { return false }
        defer { Syscall.close(fd) }
        return !FileLock.isAvailable(.exclusive, on: fd)
    }

    /// Ends the removal: unlinks the marker (observers then report the removal), releases it, and sweeps
    /// markers that killed removers left behind. A forked child neither unlinks nor unlocks (I7).
    consuming func end() {
        let (relative, directory) = (self.relative, self.directory)
        if directory.isOwnedByThisProcess { _ = Syscall.unlink(relative, in: directory.descriptor) }
        lock.release()
        RemovalSignal.sweepAbandonedMarkers(in: directory, except: relative)
    }

    /// Removes markers nobody holds (their remover was killed): each is locked exclusively without waiting
    /// (so a live remover's marker is skipped), checked to still be the named file, renamed to `.dead` (which
    /// observers read as "abandoned") and unlinked. Only a process holding a marker's lock moves it.
    static func sweepAbandonedMarkers(in directory: Directory, except ours: String) {
        let root = directory.descriptor
        guard case .success(let names) = Syscall.listDirectory(folder, in: root) else { return }
        for (name, _) in names {
            let relative = folder + "/" + name
            if relative == ours { continue }
            if name.hasSuffix(deadSuffix) {
                _ = Syscall.unlink(relative, in: root)  // a sweeper killed between its rename and unlink
                continue
            }
            guard scope(ofMarker: name) != nil,
                case .success(let fd) = Syscall.open(relative, in: root, flags: [.readOnly])
            else { continue }
            guard
                case .locked(let lock) = FileLock.attempt(.exclusive, on: fd, ownerProcessID: directory.ownerProcessID)
            else {
                Syscall.close(fd)  // its remover is alive (or it cannot be locked here)
                continue
            }
            if case .success(let mine) = Syscall.status(of: fd), mine.linkCount > 0,
                case .success(let current) = Syscall.status(of: relative, in: root), current.isSameFile(as: mine)
            {
                let dead = relative + deadSuffix
                if case .success = Syscall.rename(relative, in: root, to: dead, in: root) {
                    _ = Syscall.unlink(dead, in: root)
                }
            }
            lock.release()
        }
    }
}
