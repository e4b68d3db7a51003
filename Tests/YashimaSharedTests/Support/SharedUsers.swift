// Real users for the permission and observation tests: a group-shared storage directory used by two users
// of one group, and a third user of its own, each running a copy of the worker under `setpriv`.

import Foundation
import Glibc
import Testing

/// A group-shared storage directory for two real users of one group (uid 40001 and 40002, gid 40000),
/// each running a copy of the worker under `setpriv` with umask 022; and a third user (40003) of its
/// own. Needs root (as in CI).
final class SharedUsers {
    static let group: gid_t = 40000
    static let first: uid_t = 40001
    static let second: uid_t = 40002
    static let loner: uid_t = 40003
    static var available: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    }

    /// Under /tmp, so that the other users can reach it (the test's own TMPDIR may be private).
    let base: String
    /// The storage root: setgid, of the shared group, as the README's administrator step makes it.
    let root: String
    /// A copy of the worker: the build folder may be private to root.
    private let executable: String

    init() throws {
        var template = Array("/tmp/yashima-users-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        try #require(created)
        base = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        root = base + "/cache"
        executable = base + "/yashima-stress"
        chmod(base, 0o755)
        try FileManager.default.copyItem(
            atPath: productsDirectory().appendingPathComponent("yashima-stress").path, toPath: executable)
        try #require(mkdir(root, 0o700) == 0 && chown(root, Self.first, Self.group) == 0)
        try #require(chmod(root, 0o2770) == 0)
        try #require(mkdir(base + "/loner", 0o700) == 0 && chown(base + "/loner", Self.loner, Self.loner) == 0)
    }

    deinit { try? FileManager.default.removeItem(atPath: base) }

    /// `yashima-stress worker <arguments>` as `user` on the shared root (group-shared mode), or on
    /// `directory` with `sharing`.
    func worker(as user: uid_t, _ arguments: [String], directory: String? = nil, sharing: String = "group") throws
        -> ChildProcess
    {
        let group = user == Self.loner ? gid_t(Self.loner) : Self.group
        let run = "umask 022; exec /usr/bin/setpriv --reuid=\(user) --regid=\(group) --groups=\(group)"
        return try ChildProcess(
            executable: URL(fileURLWithPath: "/bin/sh"),
            ["-c", run + " \"$0\" \"$@\"", executable, "worker"] + arguments
                + ["--directory", directory ?? root, "--sharing", sharing])
    }
}
