// The only Swift file calling CFileLock's inotify, eventfd and poll shims (the rest of the C layer goes
// through System/Syscalls.swift). As there, every call returns `Result<_, SystemCallError>` with errno
// captured in C right after the call; nothing here blocks except `Inotify.wait` (marked Blocking), which
// only the watcher thread calls.

import CFileLock

/// The inotify event bits the watcher subscribes to and decodes.
struct InotifyMask: OptionSet, Sendable, Hashable {
    let rawValue: UInt32

    static let created = InotifyMask(rawValue: ysh_IN_CREATE)
    static let deleted = InotifyMask(rawValue: ysh_IN_DELETE)
    static let movedFrom = InotifyMask(rawValue: ysh_IN_MOVED_FROM)
    static let movedTo = InotifyMask(rawValue: ysh_IN_MOVED_TO)
    /// A file opened for writing was closed (lock waits: a holder's release, or its death).
    static let closedAfterWriting = InotifyMask(rawValue: ysh_IN_CLOSE_WRITE)
    static let deletedSelf = InotifyMask(rawValue: ysh_IN_DELETE_SELF)
    static let movedSelf = InotifyMask(rawValue: ysh_IN_MOVE_SELF)
    /// The watch is gone (removed by us, or its folder was deleted or unmounted).
    static let ignored = InotifyMask(rawValue: ysh_IN_IGNORED)
    /// The kernel's event queue overflowed (`fs.inotify.max_queued_events`): events were lost.
    static let queueOverflow = InotifyMask(rawValue: ysh_IN_Q_OVERFLOW)
    static let unmounted = InotifyMask(rawValue: ysh_IN_UNMOUNT)
    /// The event's name is a folder.
    static let isDirectory = InotifyMask(rawValue: ysh_IN_ISDIR)
    /// Watch flag: only add the watch when the path is a folder.
    static let onlyDirectory = InotifyMask(rawValue: ysh_IN_ONLYDIR)

    /// A name appeared: renamed into the folder, or created (or hard-linked) in it.
    static let appeared: InotifyMask = [.created, .movedTo]
    /// A name went away: unlinked, or renamed out of the folder.
    static let disappeared: InotifyMask = [.deleted, .movedFrom]
    /// The watched folder itself went away.
    static let selfGone: InotifyMask = [.deletedSelf, .movedSelf, .ignored, .unmounted]
}

enum Inotify {
    /// Size of the fixed part of `struct inotify_event`.
    static let eventHeaderSize = Int(ysh_inotify_event_size)

    /// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`.
    static func initialize() -> Result<Int32, SystemCallError> {
        var err: Int32 = 0
        let fd = ysh_inotify_init(&err)
        if fd == -1 { return .failure(SystemCallError(operation: "inotify_init1", errno: Errno(rawValue: err))) }
        return .success(fd)
    }

    /// `inotify_add_watch(2)` on folder `relative` under `directory`, reached without following a symlink
    /// in any component (I13). Adding a watch for an inode already watched returns the same descriptor.
    static func addWatch(
        _ inotify: Int32, _ relative: String, in directory: Int32, mask: InotifyMask
    ) -> Result<Int32, SystemCallError> {
        var err: Int32 = 0
        let wd = ysh_inotify_add_watch_at(inotify, directory, relative, mask.rawValue, &err)
        if wd == -1 { return .failure(SystemCallError(operation: "inotify_add_watch", errno: Errno(rawValue: err))) }
        return .success(wd)
    }

    /// `inotify_rm_watch(2)`. EINVAL (the watch is already gone with its folder) is not an error here.
    static func removeWatch(_ inotify: Int32, _ wd: Int32) {
        var err: Int32 = 0
        _ = ysh_inotify_rm_watch(inotify, wd, &err)
    }

    /// Blocks until `inotify` or `wake` is readable or `timeoutMilliseconds` pass (`nil`: forever).
    /// Blocking: only the watcher thread calls it.
    static func wait(
        _ inotify: Int32, orWake wake: Int32, timeoutMilliseconds: Int?
    ) -> Result<(events: Bool, woken: Bool), SystemCallError> {
        var err: Int32 = 0
        var events: Int32 = 0
        var woken: Int32 = 0
        let timeout = timeoutMilliseconds.map { Int32(clamping: $0) } ?? -1
        if ysh_poll2(inotify, wake, timeout, &events, &woken, &err) == -1 {
            return .failure(SystemCallError(operation: "poll", errno: Errno(rawValue: err)))
        }
        return .success((events != 0, woken != 0))
    }

    /// One `read(2)` of queued events into `buffer`; 0 bytes when none are queued (EAGAIN).
    static func read(_ inotify: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, SystemCallError> {
        var err: Int32 = 0
        let n = ysh_read_some(inotify, buffer.baseAddress, buffer.count, &err)
        if n >= 0 { return .success(n) }
        if Errno(rawValue: err) == .wouldBlock { return .success(0) }
        return .failure(SystemCallError(operation: "read", errno: Errno(rawValue: err)))
    }
}

/// An eventfd that wakes the watcher thread out of `Inotify.wait`.
enum WakeSignal {
    /// `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`.
    static func make() -> Result<Int32, SystemCallError> {
        var err: Int32 = 0
        let fd = ysh_eventfd(&err)
        if fd == -1 { return .failure(SystemCallError(operation: "eventfd", errno: Errno(rawValue: err))) }
        return .success(fd)
    }

    /// Adds one to the counter (wakes a waiter).
    static func signal(_ fd: Int32) {
        var err: Int32 = 0
        _ = ysh_eventfd_signal(fd, &err)
    }

    /// Resets the counter.
    static func drain(_ fd: Int32) {
        _ = ysh_eventfd_drain(fd)
    }
}

extension Syscall {
    /// Names the calling thread (15 bytes at most), as `/proc/self/task/<tid>/comm` shows it.
    static func nameThread(_ name: String) {
        ysh_set_thread_name(name)
    }
}
