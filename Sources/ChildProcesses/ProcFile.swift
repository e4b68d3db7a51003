// Reading a /proc file whole. procfs reports a size of 0 and hands its text out a page per read, and
// `String(contentsOfFile:)` stops after the first page (27 of /proc/net/tcp's 211 lines, measured); the
// library's census reads /proc/locks the same way for the same reason (StorageOperator+Census, `procText`).

import Foundation

/// Files of /proc, read to their end.
public enum ProcFile {
    /// The whole text of the /proc file at `path`, or nil when it cannot be read.
    public static func text(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
