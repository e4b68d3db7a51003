// `--users UID,UID… --group GID` (as root): the workers of every scenario run as these users, taking turns
// by worker index, each under `setpriv` with the usual umask 022, and every cache — the workers' and the
// judge's — is group-shared. This is YashimaShared's group-shared mode under the stress scenarios with
// real users: lock files, entries, trims, removals and repairs of one user's files by another.
//
// The orchestrator stays root but joins the group (so it accepts folders the users created); the run's
// folders are root:GID with mode 2770 (setgid: what is created inside belongs to the group); files the
// users append to are 0660; the workers run a copy of this executable inside the run folder.

import Foundation
import Glibc
import YashimaShared

@MainActor
enum SharedUsers {
    struct Setup {
        let users: [uid_t]
        let group: gid_t
        /// The copy of this executable the users run.
        let executable: String
    }

    private(set) static var setup: Setup?

    /// The sharing mode of every cache in this run.
    static var sharing: StorageSharingMode { setup == nil ? .privateToUser : .groupShared }

    /// Parses `--users` and `--group` (both or neither).
    nonisolated static func parse(users: String?, group: String?) throws -> (users: [uid_t], group: gid_t)? {
        guard users != nil || group != nil else { return nil }
        guard let users, let group else { throw ArgumentError(description: "--users and --group go together") }
        let ids = users.split(separator: ",").compactMap { uid_t($0) }
        guard !ids.isEmpty, ids.count == users.split(separator: ",").count, ids.allSatisfy({ $0 != 0 }) else {
            throw ArgumentError(description: "--users must be user ids other than 0, comma-separated, not '\(users)'")
        }
        guard let groupID = gid_t(group), groupID != 0 else {
            throw ArgumentError(description: "--group must be a group id other than 0, not '\(group)'")
        }
        guard geteuid() == 0 else { throw ArgumentError(description: "--users needs root (it starts workers as them)") }
        guard FileManager.default.isExecutableFile(atPath: setpriv) else {
            throw ArgumentError(description: "--users needs \(setpriv) (util-linux)")
        }
        return (ids, groupID)
    }

    /// Prepares this process and the run folder `root`: the usual umask, membership of the group, the
    /// folder's owner and mode, and the users' copy of this executable.
    static func begin(users: [uid_t], group: gid_t, root: String, executable: String) throws {
        umask(0o022)
        var groups = [group]
        guard setgroups(1, &groups) == 0 else {
            throw ArgumentError(description: "setgroups(\(group)) failed: errno \(errno)")
        }
        try reachable(root)
        let copy = root + "/yashima-stress"
        setup = Setup(users: users, group: group, executable: copy)
        share(root)
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: executable, toPath: copy)
        chmod(copy, 0o755)
    }

    /// Gives `path` the group-shared mode of this run: a folder root:group 2770, a file root:group 0660.
    /// Nothing in the private mode.
    static func share(_ path: String) {
        guard let setup else { return }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        _ = chown(path, 0, setup.group)
        _ = chmod(path, info.st_mode & S_IFMT == S_IFDIR ? 0o2770 : 0o660)
    }

    /// The program and leading arguments that start worker `index`: this executable, or `setpriv` running
    /// the users' copy as the worker's user.
    static func launcher(forWorker index: Int, executable: String) -> (program: String, arguments: [String]) {
        guard let setup else { return (executable, [executable]) }
        let user = setup.users[index % setup.users.count]
        return (
            setpriv,
            [setpriv, "--reuid=\(user)", "--regid=\(setup.group)", "--groups=\(setup.group)", setup.executable]
        )
    }

    private nonisolated static let setpriv = "/usr/bin/setpriv"

    /// The users must be able to reach `root`: every folder above it must be searchable by others.
    private static func reachable(_ root: String) throws {
        var path = URL(fileURLWithPath: root).standardizedFileURL.deletingLastPathComponent().path
        while path != "/" && !path.isEmpty {
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & 0o001 != 0 else {
                throw ArgumentError(
                    description: "--users: the users cannot reach \(root): \(path) is not searchable by others "
                        + "(choose --directory under /tmp)")
            }
            path = URL(fileURLWithPath: path).deletingLastPathComponent().path
        }
    }
}
