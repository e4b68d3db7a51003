// CFileLock: the thin C syscall layer of YashimaShared.
//
// Every function is a prefixed (`ysh_`) one-call shim. A failing call returns -1 (or NULL) and stores
// errno in `*err` right after the call, so Swift never reads a stale errno. Calls that can be
// interrupted (open, flock, read, write) retry EINTR here, in one place. No cache logic lives here.
// Every descriptor is opened O_CLOEXEC, and every path open is O_NOFOLLOW and relative to a directory
// descriptor. The implementations: shims.c (files, folders, mappings, listing, clocks), pathwalk.c
// (resolving paths without following symlinks), sigbus_guard.c, inotify.c; the shared-memory atomics are
// inline below. The network pieces are the CNetwork target's, the hashes with CPU instructions CHashes'. GNU-only calls (renameat2, statfs magic) need _GNU_SOURCE, which the C files
// define and this header must not: Swift imports it alongside Glibc (built without _GNU_SOURCE), and a
// clean build then fails on struct definitions (fd_set) that differ between the two modules.
#ifndef YASHIMA_CFILELOCK_H
#define YASHIMA_CFILELOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The parts of `struct stat` the cache reads, with times in nanoseconds since the epoch.
typedef struct ysh_stat {
    uint64_t device;
    uint64_t inode;
    uint64_t link_count;
    int64_t size;
    int64_t allocated_bytes;   // st_blocks * 512
    int64_t modified_ns;
    int64_t changed_ns;
    uint32_t mode;
    uint32_t owner;
    uint32_t group;
} ysh_stat;

extern const int ysh_LOCK_SH;
extern const int ysh_LOCK_EX;
extern const int ysh_LOCK_NB;
extern const int ysh_LOCK_UN;
extern const int ysh_O_WRONLY;
extern const int ysh_O_RDWR;
extern const int ysh_O_CREAT;
extern const int ysh_O_EXCL;
extern const int ysh_O_DIRECTORY;
extern const int ysh_O_NONBLOCK;
/// O_NOATIME (GNU): reading does not update the file's access time; only for the file's owner (EPERM).
extern const int ysh_O_NOATIME;
extern const int ysh_AT_FDCWD;
extern const int ysh_AT_REMOVEDIR;
extern const uint32_t ysh_S_IFMT;
extern const uint32_t ysh_S_IFDIR;
extern const uint32_t ysh_S_IFREG;
extern const uint32_t ysh_S_IFLNK;

/// openat2(2) with RESOLVE_NO_SYMLINKS (no symlink in any component) and O_CLOEXEC | O_NOFOLLOW always
/// added; where openat2 is missing, walks the path with openat(2) one O_NOFOLLOW component at a time
/// (same guarantee); retries EINTR. A symlink met on the way gives ELOOP (or ENOTDIR).
int ysh_openat(int dirfd, const char *path, int flags, uint32_t mode, int *err);
/// Test hook: 1 makes ysh_openat use its component-walking fallback, as on kernels without openat2.
void ysh_set_openat2_disabled(int disabled);
/// open(2) of the storage root given by the user (symlinks in its path are the user's choice):
/// O_RDONLY | O_DIRECTORY | O_CLOEXEC.
int ysh_open_root(const char *path, int *err);
/// open(2) with O_PATH | O_DIRECTORY: a folder to create things in by *at calls; needs only search
/// permission on the path (no read permission on the folder itself).
int ysh_open_directory_path(const char *path, int *err);
/// close(2); never retried (Linux closes the descriptor even when it reports EINTR).
int ysh_close(int fd, int *err);
/// flock(2); retries EINTR.
int ysh_flock(int fd, int operation, int *err);
/// fstat(2).
int ysh_fstat(int fd, ysh_stat *out, int *err);
/// Path calls relative to a directory descriptor (fstatat, renameat, linkat, unlinkat, mkdirat,
/// utimensat): a multi-component `path` is resolved by opening its folder with ysh_openat (O_PATH), so
/// no symlink is followed in any component (ELOOP or ENOTDIR instead), and the call then acts on the last
/// component itself, never on what it points to. Relative to AT_FDCWD (the user's own path) they are
/// the plain calls.
/// fstatat(2) with AT_SYMLINK_NOFOLLOW.
int ysh_fstatat(int dirfd, const char *path, ysh_stat *out, int *err);
/// stat(2) of the user's root path (following symlinks there, which are the user's choice).
int ysh_stat_path(const char *path, ysh_stat *out, int *err);
/// pread(2) until `count` bytes or end of file; retries EINTR. Returns the bytes read.
ssize_t ysh_pread_full(int fd, void *buffer, size_t count, int64_t offset, int *err);
/// pwrite(2) until all `count` bytes are written at `offset`; retries EINTR. Returns the bytes written.
ssize_t ysh_pwrite_full(int fd, const void *buffer, size_t count, int64_t offset, int *err);
/// write(2) until all `count` bytes are written; retries EINTR. Returns the bytes written.
ssize_t ysh_write_full(int fd, const void *buffer, size_t count, int *err);
/// writev(2) of two buffers until all bytes are written; retries EINTR. One call writes an entry's
/// header and payload, so the page cache gets large folios (mapped reads then fault less).
ssize_t ysh_write2_full(int fd, const void *first, size_t first_count, const void *second, size_t second_count,
                       int *err);
/// mmap(2) PROT_READ|PROT_WRITE, MAP_SHARED: for the small shared-state file. NULL on failure.
void *ysh_mmap_shared(int fd, size_t length, int *err);
/// munmap(2).
int ysh_munmap(void *address, size_t length);
/// SIGBUS guard for MAP_SHARED mappings of files another process may truncate (the `state` file): a
/// fault inside a registered range replaces the whole range with anonymous zero pages and the faulting
/// access runs again, reading zeros; every other SIGBUS goes to the handler installed before the guard,
/// or gets the default action. The handler is installed on the first registration. Register right after
/// mmap, before the first access; unregister before munmap. -1 with errno in `*err` when the handler
/// cannot be installed or the table (1024 ranges) is full.
int ysh_sigbus_guard_register(void *address, size_t length, int *err);
void ysh_sigbus_guard_unregister(void *address);
/// How many faults the guard has absorbed in this process.
uint64_t ysh_sigbus_guard_trips(void);
/// renameat(2): replaces the target atomically.
int ysh_renameat(int fromdir, const char *from, int todir, const char *to, int *err);
/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST when the target exists.
int ysh_renameat_noreplace(int fromdir, const char *from, int todir, const char *to, int *err);
/// renameat2(2) with RENAME_EXCHANGE: swaps the two names atomically; ENOENT when either is missing.
int ysh_renameat_exchange(int fromdir, const char *from, int todir, const char *to, int *err);
/// The commit the binary was built from (set by the packaging script), or "".
const char *ysh_build_commit(void);

/// renameat2(2) with RENAME_EXCHANGE on two paths as given (symlinks in them followed, as for rename(2)):
/// swaps them atomically (for the command-line tool's folder outputs).
int ysh_rename_exchange(const char *from, const char *to, int *err);
/// linkat(2) without following symlinks: first writer wins, EEXIST otherwise.
int ysh_linkat(int fromdir, const char *from, int todir, const char *to, int *err);
/// unlinkat(2); `flags` is 0 or ysh_AT_REMOVEDIR.
int ysh_unlinkat(int dirfd, const char *path, int flags, int *err);
/// mkdirat(2).
int ysh_mkdirat(int dirfd, const char *path, uint32_t mode, int *err);
/// fchmod(2).
int ysh_fchmod(int fd, uint32_t mode, int *err);
/// futimens(2) setting both times to `ns` nanoseconds since the epoch (UTIME_NOW when ns < 0).
int ysh_futimens(int fd, int64_t ns, int *err);
/// utimensat(2) with AT_SYMLINK_NOFOLLOW setting the modification time to now.
int ysh_touch_at(int dirfd, const char *path, int *err);
/// utimensat(2) with AT_SYMLINK_NOFOLLOW setting both times to `ns` nanoseconds since the epoch (needs
/// the file's owner: EPERM otherwise); `path` is resolved as for ysh_touch_at.
int ysh_set_times_at(int dirfd, const char *path, int64_t ns, int *err);
/// ftruncate(2). Only ever used on private staging files and the shared-state file before publish.
int ysh_ftruncate(int fd, int64_t length, int *err);
/// fstatfs(2): the filesystem's magic number.
int ysh_fstatfs_type(int fd, int64_t *type_out, int *err);
/// fstatvfs(2): the filesystem's size and the bytes an unprivileged user may still allocate (f_bavail),
/// both in bytes.
int ysh_fstatvfs_space(int fd, int64_t *total_out, int64_t *available_out, int *err);
/// lseek(2) to offset 0 (SEEK_SET).
int ysh_rewind(int fd, int *err);
/// getrandom(2) into `buffer`; falls back to /dev/urandom. Returns 0 on success.
int ysh_random_bytes(void *buffer, size_t count);

/// Directory listing: an opaque stream over a duplicate of `dirfd`'s directory (opened relative to it).
typedef struct ysh_dir ysh_dir;
ysh_dir *ysh_dir_open(int dirfd, const char *path, int *err);
/// The next entry name (skipping "." and ".."), or NULL at the end. `is_dir` is 1, 0, or -1 (unknown).
const char *ysh_dir_next(ysh_dir *dir, int *is_dir);
/// fstatat(2) with AT_SYMLINK_NOFOLLOW of `name` (one component, as returned by ysh_dir_next) relative to
/// the open directory: no path walk, so no symlink can be met and no folder needs opening again.
int ysh_dir_stat(ysh_dir *dir, const char *name, ysh_stat *out, int *err);
void ysh_dir_close(ysh_dir *dir);

/// Sequentially consistent atomics on 8-byte-aligned words of shared memory (the mmapped state file),
/// inline: one instruction each, on the hit path.
static inline uint64_t ysh_atomic_load_u64(const uint64_t *address) {
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}
static inline void ysh_atomic_store_u64(uint64_t *address, uint64_t value) {
    __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
}
static inline uint64_t ysh_atomic_fetch_add_u64(uint64_t *address, uint64_t delta) {
    return __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}
static inline int64_t ysh_atomic_fetch_add_i64(int64_t *address, int64_t delta) {
    return __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}
static inline int64_t ysh_atomic_load_i64(const int64_t *address) {
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}
static inline int ysh_atomic_cas_i64(int64_t *address, int64_t expected, int64_t desired) {
    return __atomic_compare_exchange_n(address, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ? 1 : 0;
}

/// CLOCK_REALTIME and CLOCK_MONOTONIC in nanoseconds.
int64_t ysh_realtime_ns(void);
int64_t ysh_monotonic_ns(void);
/// CLOCK_REALTIME_COARSE and CLOCK_MONOTONIC_COARSE in nanoseconds: the last tick's time, never ahead of
/// the exact clocks and behind them by at most `ysh_coarse_resolution_ns()` (-1 when unknown).
int64_t ysh_realtime_coarse_ns(void);
int64_t ysh_monotonic_coarse_ns(void);
int64_t ysh_coarse_resolution_ns(void);
/// getpid(2).
int ysh_getpid(void);
/// geteuid(2).
uint32_t ysh_geteuid(void);
/// 1 on the process's main thread (gettid(2) == getpid(2)), each cached: no system call after a thread's first.
int ysh_is_main_thread(void);
/// 1 when `gid` is this process's effective group or one of its supplementary groups (getgroups(2)).
int ysh_is_group_member(uint32_t gid);

/// inotify(7), for observing changes (Observation/): the event bits the watcher uses, and the size of the
/// fixed part of `struct inotify_event` (wd, mask, cookie, len; the name follows, NUL-padded).
extern const uint32_t ysh_IN_CREATE;
extern const uint32_t ysh_IN_DELETE;
extern const uint32_t ysh_IN_MOVED_FROM;
extern const uint32_t ysh_IN_MOVED_TO;
extern const uint32_t ysh_IN_DELETE_SELF;
extern const uint32_t ysh_IN_MOVE_SELF;
extern const uint32_t ysh_IN_IGNORED;
extern const uint32_t ysh_IN_Q_OVERFLOW;
extern const uint32_t ysh_IN_UNMOUNT;
extern const uint32_t ysh_IN_ISDIR;
extern const uint32_t ysh_IN_ONLYDIR;
/// A file opened for writing was closed (a lock holder's release or death: Coordination/LockWait).
extern const uint32_t ysh_IN_CLOSE_WRITE;
extern const size_t ysh_inotify_event_size;
/// inotify_init1(IN_NONBLOCK | IN_CLOEXEC).
int ysh_inotify_init(int *err);
/// inotify_add_watch(2) on the folder `relative` to `dirfd`, reached without following any symlink: the
/// folder is opened O_PATH with ysh_openat, the watch added through /proc/self/fd/N, and the O_PATH
/// descriptor closed. Returns the watch descriptor.
int ysh_inotify_add_watch_at(int inotify_fd, int dirfd, const char *relative, uint32_t mask, int *err);
/// inotify_rm_watch(2).
int ysh_inotify_rm_watch(int inotify_fd, int wd, int *err);
/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC): wakes a thread blocked in ysh_poll2.
int ysh_eventfd(int *err);
/// Adds 1 to an eventfd counter.
int ysh_eventfd_signal(int fd, int *err);
/// Reads (and so resets) an eventfd counter; 0 when it was already 0.
int ysh_eventfd_drain(int fd);
/// poll(2) on two descriptors for POLLIN; `timeout_ms` < 0 waits forever; retries EINTR. Sets `*ready_a`
/// and `*ready_b` to 1 for a descriptor that is readable (or in error), 0 otherwise. Returns poll's result.
int ysh_poll2(int fd_a, int fd_b, int timeout_ms, int *ready_a, int *ready_b, int *err);
/// read(2) of at most `count` bytes (one call, EINTR retried). Returns the byte count.
ssize_t ysh_read_some(int fd, void *buffer, size_t count, int *err);
/// Names the calling thread (at most 15 bytes are kept), as shown in /proc/self/task/<tid>/comm.
void ysh_set_thread_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
