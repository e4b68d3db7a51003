// Defects turned on by `YASHIMA_INJECT` (yashima-stress `--inject NAME` sets it in its workers), each
// turning one consistency guard off. They exist only for the history checker's proofs (issue 32: a checker
// that never failed proves nothing): they break I10 and I16 on purpose. Read once per process; unset, each
// switch is a false constant.

import Glibc

/// The guards `YASHIMA_INJECT` (a name, or names separated by commas) turns off. Internal, for the
/// history checker's proofs only; never set in real use.
enum Injection {
    /// `publish-no-bump`: a publish renames with no write window on its key's epochs
    /// (Storage/EntryPublish.swift).
    static let publishNoBump = isSet("publish-no-bump")
    /// `publish-bump-after`: a publish renames with no write window and bumps its key's epoch once after the
    /// rename, as this cache did before the windows (Storage/EntryPublish.swift).
    static let publishBumpAfter = isSet("publish-bump-after")
    /// `removal-no-bump`: removals rename aside with no write window and bump nothing (Engine/Lifecycle.swift).
    static let removalNoBump = isSet("removal-no-bump")
    /// `memory-no-epochs`: memory serves an item without comparing its epoch stamp (Memory/MemoryStore.swift).
    static let memoryNoEpochs = isSet("memory-no-epochs")
    /// `remote-window-skip`: a write that stores remotely, or a removal, holds no write window across its
    /// remote call and never deletes the remote copy after another write (Engine/RemoteWriteWindow.swift).
    static let remoteWindowSkip = isSet("remote-window-skip")
    /// `remote-remove-skip`: a removal skips the remote tier's delete (Engine/RemoteTier.swift).
    static let remoteRemoveSkip = isSet("remote-remove-skip")

    private static func isSet(_ name: String) -> Bool {
        guard let value = getenv("YASHIMA_INJECT") else { return false }
        return String(cString: value).split(separator: ",").contains { $0 == name }
    }
}
