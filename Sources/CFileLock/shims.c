// shims.c: the one-call shims of include/CFileLock.h for files, folders, mappings, listing, clocks and
// identities. Each stores errno in `*err` right after a failing call and retries EINTR where a call can
// be interrupted; path calls relative to a directory resolve their folder through pathwalk.h, so no
// symlink is followed in any component. No cache logic lives here.
// _GNU_SOURCE is defined in the C files only (never in the public header): renameat2 and statfs need it.
#define _GNU_SOURCE 1
#include "CFileLock.h"
#include "pathwalk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

const int ysh_LOCK_SH = LOCK_SH;
const int ysh_LOCK_EX = LOCK_EX;
const int ysh_LOCK_NB = LOCK_NB;
const int ysh_LOCK_UN = LOCK_UN;
const int ysh_O_WRONLY = O_WRONLY;
const int ysh_O_RDWR = O_RDWR;
const int ysh_O_CREAT = O_CREAT;
const int ysh_O_EXCL = O_EXCL;
const int ysh_O_DIRECTORY = O_DIRECTORY;
const int ysh_O_NONBLOCK = O_NONBLOCK;
const int ysh_O_NOATIME = O_NOATIME;
const int ysh_AT_FDCWD = AT_FDCWD;
const int ysh_AT_REMOVEDIR = AT_REMOVEDIR;
const uint32_t ysh_S_IFMT = S_IFMT;
const uint32_t ysh_S_IFDIR = S_IFDIR;
const uint32_t ysh_S_IFREG = S_IFREG;
const uint32_t ysh_S_IFLNK = S_IFLNK;

#define FAIL_WITH_ERRNO(value) do { if (err) *err = errno; return (value); } while (0)

int ysh_open_root(const char *path, int *err) {
    int fd;
    do { fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC); } while (fd == -1 && errno == EINTR);
    if (fd == -1) FAIL_WITH_ERRNO(-1);
    return fd;
}

int ysh_open_directory_path(const char *path, int *err) {
    int fd;
    do { fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC); } while (fd == -1 && errno == EINTR);
    if (fd == -1) FAIL_WITH_ERRNO(-1);
    return fd;
}

int ysh_close(int fd, int *err) {
    if (close(fd) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_flock(int fd, int operation, int *err) {
    int rc;
    do { rc = flock(fd, operation); } while (rc == -1 && errno == EINTR);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

static void fill_stat(const struct stat *st, ysh_stat *out) {
    out->device = (uint64_t)st->st_dev;
    out->inode = (uint64_t)st->st_ino;
    out->link_count = (uint64_t)st->st_nlink;
    out->size = (int64_t)st->st_size;
    out->allocated_bytes = (int64_t)st->st_blocks * 512;
    out->modified_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    out->changed_ns = (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
    out->mode = (uint32_t)st->st_mode;
    out->owner = (uint32_t)st->st_uid;
    out->group = (uint32_t)st->st_gid;
}

int ysh_fstat(int fd, ysh_stat *out, int *err) {
    struct stat st;
    if (fstat(fd, &st) == -1) FAIL_WITH_ERRNO(-1);
    fill_stat(&st, out);
    return 0;
}

int ysh_fstatat(int dirfd, const char *path, ysh_stat *out, int *err) {
    const char *leaf;
    int parent = ysh_open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    struct stat st;
    int rc = fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW);
    ysh_release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    fill_stat(&st, out);
    return 0;
}

int ysh_stat_path(const char *path, ysh_stat *out, int *err) {
    struct stat st;
    if (stat(path, &st) == -1) FAIL_WITH_ERRNO(-1);
    fill_stat(&st, out);
    return 0;
}

ssize_t ysh_pread_full(int fd, void *buffer, size_t count, int64_t offset, int *err) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = pread(fd, (char *)buffer + done, count - done, (off_t)(offset + (int64_t)done));
        if (n == -1) {
            if (errno == EINTR) continue;
            FAIL_WITH_ERRNO(-1);
        }
        if (n == 0) break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

ssize_t ysh_pwrite_full(int fd, const void *buffer, size_t count, int64_t offset, int *err) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = pwrite(fd, (const char *)buffer + done, count - done, (off_t)(offset + (int64_t)done));
        if (n == -1) {
            if (errno == EINTR) continue;
            FAIL_WITH_ERRNO(-1);
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

ssize_t ysh_write_full(int fd, const void *buffer, size_t count, int *err) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = write(fd, (const char *)buffer + done, count - done);
        if (n == -1) {
            if (errno == EINTR) continue;
            FAIL_WITH_ERRNO(-1);
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

ssize_t ysh_write2_full(int fd, const void *first, size_t first_count, const void *second, size_t second_count,
                       int *err) {
    struct iovec parts[2] = {{(void *)first, first_count}, {(void *)second, second_count}};
    size_t total = first_count + second_count, done = 0;
    while (done < total) {
        // Skip what is already written, then write the rest in one call.
        struct iovec rest[2];
        int count = 0;
        size_t skip = done;
        for (int i = 0; i < 2; i++) {
            if (skip >= parts[i].iov_len) { skip -= parts[i].iov_len; continue; }
            rest[count].iov_base = (char *)parts[i].iov_base + skip;
            rest[count].iov_len = parts[i].iov_len - skip;
            skip = 0;
            count++;
        }
        ssize_t n = writev(fd, rest, count);
        if (n == -1) {
            if (errno == EINTR) continue;
            FAIL_WITH_ERRNO(-1);
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

void *ysh_mmap_shared(int fd, size_t length, int *err) {
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) FAIL_WITH_ERRNO(NULL);
    return p;
}

int ysh_munmap(void *address, size_t length) { return munmap(address, length); }

// Two-path calls: both parents are resolved without symlinks; the call itself never follows the last
// component (rename and link act on names, not on what a symlink points to).
#define TWO_PARENTS(call)                                                             \
    const char *from_leaf, *to_leaf;                                                  \
    int from_parent = ysh_open_parent(fromdir, from, &from_leaf);                         \
    if (from_parent == -1) FAIL_WITH_ERRNO(-1);                                       \
    int to_parent = ysh_open_parent(todir, to, &to_leaf);                                 \
    if (to_parent == -1) {                                                            \
        ysh_release_parent(from_parent, fromdir);                                         \
        FAIL_WITH_ERRNO(-1);                                                          \
    }                                                                                 \
    int rc = (int)(call);                                                             \
    ysh_release_parent(to_parent, todir);                                                 \
    ysh_release_parent(from_parent, fromdir);                                             \
    if (rc == -1) FAIL_WITH_ERRNO(-1);                                                \
    return 0;

int ysh_renameat(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(renameat(from_parent, from_leaf, to_parent, to_leaf))
}

int ysh_renameat_noreplace(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(syscall(SYS_renameat2, from_parent, from_leaf, to_parent, to_leaf, RENAME_NOREPLACE))
}

int ysh_renameat_exchange(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(syscall(SYS_renameat2, from_parent, from_leaf, to_parent, to_leaf, RENAME_EXCHANGE))
}

int ysh_rename_exchange(const char *from, const char *to, int *err) {
    int rc = (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_linkat(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(linkat(from_parent, from_leaf, to_parent, to_leaf, 0))
}

int ysh_unlinkat(int dirfd, const char *path, int flags, int *err) {
    const char *leaf;
    int parent = ysh_open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = unlinkat(parent, leaf, flags);
    ysh_release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_mkdirat(int dirfd, const char *path, uint32_t mode, int *err) {
    const char *leaf;
    int parent = ysh_open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = mkdirat(parent, leaf, (mode_t)mode);
    ysh_release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_fchmod(int fd, uint32_t mode, int *err) {
    if (fchmod(fd, (mode_t)mode) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_futimens(int fd, int64_t ns, int *err) {
    struct timespec times[2];
    if (ns < 0) {
        times[0].tv_sec = 0; times[0].tv_nsec = UTIME_NOW;
    } else {
        times[0].tv_sec = (time_t)(ns / 1000000000LL); times[0].tv_nsec = (long)(ns % 1000000000LL);
    }
    times[1] = times[0];
    if (futimens(fd, times) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_touch_at(int dirfd, const char *path, int *err) {
    /* Both times to now (times == NULL): the only form the kernel allows to a process that may write the
       file without owning it (another user of a group-shared directory). Any explicit time, even
       UTIME_OMIT for one of them, needs the owner: EPERM otherwise. */
    const char *leaf;
    int parent = ysh_open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = utimensat(parent, leaf, NULL, AT_SYMLINK_NOFOLLOW);
    ysh_release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_set_times_at(int dirfd, const char *path, int64_t ns, int *err) {
    struct timespec times[2];
    times[0].tv_sec = (time_t)(ns / 1000000000LL); times[0].tv_nsec = (long)(ns % 1000000000LL);
    times[1] = times[0];
    const char *leaf;
    int parent = ysh_open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = utimensat(parent, leaf, times, AT_SYMLINK_NOFOLLOW);
    ysh_release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_ftruncate(int fd, int64_t length, int *err) {
    if (ftruncate(fd, (off_t)length) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_fstatfs_type(int fd, int64_t *type_out, int *err) {
    struct statfs st;
    if (fstatfs(fd, &st) == -1) FAIL_WITH_ERRNO(-1);
    *type_out = (int64_t)st.f_type;
    return 0;
}

int ysh_fstatvfs_space(int fd, int64_t *total_out, int64_t *available_out, int *err) {
    struct statvfs st;
    if (fstatvfs(fd, &st) == -1) FAIL_WITH_ERRNO(-1);
    uint64_t unit = st.f_frsize ? st.f_frsize : st.f_bsize;
    *total_out = (int64_t)(st.f_blocks * unit);
    *available_out = (int64_t)(st.f_bavail * unit);
    return 0;
}

int ysh_rewind(int fd, int *err) {
    if (lseek(fd, 0, SEEK_SET) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_random_bytes(void *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = getrandom((char *)buffer + done, count - done, 0);
        if (n == -1) {
            if (errno == EINTR) continue;
            break;
        }
        done += (size_t)n;
    }
    if (done == count) return 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd == -1) return -1;
    ssize_t n = ysh_pread_full(fd, (char *)buffer + done, count - done, 0, NULL);
    close(fd);
    return (n == (ssize_t)(count - done)) ? 0 : -1;
}

struct ysh_dir {
    DIR *stream;
};

ysh_dir *ysh_dir_open(int dirfd, const char *path, int *err) {
    int fd = ysh_openat(dirfd, path, O_RDONLY | O_DIRECTORY, 0, err);
    if (fd == -1) return NULL;
    DIR *stream = fdopendir(fd);
    if (stream == NULL) {
        int saved = errno;
        close(fd);
        if (err) *err = saved;
        return NULL;
    }
    ysh_dir *dir = malloc(sizeof(ysh_dir));
    if (dir == NULL) {
        closedir(stream);
        if (err) *err = ENOMEM;
        return NULL;
    }
    dir->stream = stream;
    return dir;
}

const char *ysh_dir_next(ysh_dir *dir, int *is_dir) {
    for (;;) {
        struct dirent *entry = readdir(dir->stream);
        if (entry == NULL) return NULL;
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        if (is_dir) *is_dir = entry->d_type == DT_DIR ? 1 : (entry->d_type == DT_UNKNOWN ? -1 : 0);
        return entry->d_name;
    }
}

int ysh_dir_stat(ysh_dir *dir, const char *name, ysh_stat *out, int *err) {
    struct stat st;
    if (fstatat(dirfd(dir->stream), name, &st, AT_SYMLINK_NOFOLLOW) == -1) FAIL_WITH_ERRNO(-1);
    fill_stat(&st, out);
    return 0;
}

void ysh_dir_close(ysh_dir *dir) {
    if (dir == NULL) return;
    closedir(dir->stream);
    free(dir);
}

// MARK: clocks and identities

/// A clock's time in nanoseconds.
static int64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t ysh_realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }

int64_t ysh_monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

// The coarse clocks: the time of the kernel's last tick, read from the vDSO without the TSC (about 5 ns
// here against 25 for the exact ones). Never ahead of the exact clock, and behind it by at most the
// resolution that clock_getres(2) gives for them (one tick).
int64_t ysh_realtime_coarse_ns(void) { return clock_ns(CLOCK_REALTIME_COARSE); }

int64_t ysh_monotonic_coarse_ns(void) { return clock_ns(CLOCK_MONOTONIC_COARSE); }

int64_t ysh_coarse_resolution_ns(void) {
    struct timespec ts;
    if (clock_getres(CLOCK_REALTIME_COARSE, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// getpid(2) is a real system call in current glibc; the cache checks it on every storage access to
// notice a fork (I7). Cache it, and reset the cache in the child through pthread_atfork.
static int cached_pid = 0;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
static void pid_after_fork(void) { __atomic_store_n(&cached_pid, 0, __ATOMIC_RELAXED); }
static void pid_setup(void) { pthread_atfork(NULL, NULL, pid_after_fork); }

int ysh_getpid(void) {
    pthread_once(&pid_once, pid_setup);
    int pid = __atomic_load_n(&cached_pid, __ATOMIC_RELAXED);
    if (pid == 0) {
        pid = (int)getpid();
        __atomic_store_n(&cached_pid, pid, __ATOMIC_RELAXED);
    }
    return pid;
}
uint32_t ysh_geteuid(void) { return (uint32_t)geteuid(); }

// Whether the calling thread is the process's main one (its thread id is the process id), as Foundation's
// `Thread.isMainThread` answers on Linux, which makes two system calls (gettid, getpid) every time. The
// thread id is cached per thread, with the process id it was read under: a forked child's only thread (the
// forking one, with the parent's cache) reads its own id again, since ysh_getpid() is reset by the fork.
static __thread int cached_tid = 0;
static __thread int cached_tid_pid = 0;

int ysh_is_main_thread(void) {
    int pid = ysh_getpid();
    if (cached_tid_pid != pid) {
        cached_tid = (int)syscall(SYS_gettid);
        cached_tid_pid = pid;
    }
    return cached_tid == pid;
}

int ysh_is_group_member(uint32_t gid) {
    if ((gid_t)gid == getegid()) return 1;
    gid_t groups[NGROUPS_MAX];
    int count = getgroups(NGROUPS_MAX, groups);
    for (int i = 0; i < count; i++) {
        if (groups[i] == (gid_t)gid) return 1;
    }
    return 0;
}
