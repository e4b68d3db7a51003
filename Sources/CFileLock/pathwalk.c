// pathwalk.c: resolving a path below a directory descriptor without following a symlink in any
// component (I13). openat2 with RESOLVE_NO_SYMLINKS where the kernel has it (Linux 5.6), else a walk of
// O_NOFOLLOW opens one component at a time, which gives the same guarantee; and the folder of every
// other *at call, opened the same way (pathwalk.h). Retries EINTR.
#define _GNU_SOURCE 1
#include "CFileLock.h"
#include "pathwalk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#define FAIL_WITH_ERRNO(value) do { if (err) *err = errno; return (value); } while (0)

static int openat2_unavailable = 0;

void ysh_set_openat2_disabled(int disabled) {
    __atomic_store_n(&openat2_unavailable, disabled ? 1 : 0, __ATOMIC_RELAXED);
}

// Without openat2 (Linux < 5.6): walk `path` one component at a time, each opened O_NOFOLLOW, so no
// symlink is followed in any component. Returns the final descriptor opened with `flags` and `mode`.
static int openat_walking(int dirfd, const char *path, int flags, mode_t mode) {
    char component[NAME_MAX + 1];
    int current = dirfd;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (slash == NULL) break;
        size_t length = (size_t)(slash - p);
        if (length > NAME_MAX) {
            if (current != dirfd) close(current);
            errno = ENAMETOOLONG;
            return -1;
        }
        if (length > 0) {
            memcpy(component, p, length);
            component[length] = '\0';
            int next;
            do {
                next = openat(current, component, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            } while (next == -1 && errno == EINTR);
            if (next == -1) {
                // O_NOFOLLOW|O_DIRECTORY on a symlink gives ENOTDIR; report ELOOP as openat2 does.
                int saved = errno;
                struct stat st;
                if (saved == ENOTDIR && fstatat(current, component, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISLNK(st.st_mode)) {
                    saved = ELOOP;
                }
                if (current != dirfd) close(current);
                errno = saved;
                return -1;
            }
            if (current != dirfd) close(current);
            current = next;
        }
        p = slash + 1;
    }
    int fd;
    do { fd = openat(current, p, flags | O_CLOEXEC | O_NOFOLLOW, mode); } while (fd == -1 && errno == EINTR);
    int saved = errno;
    if (current != dirfd) close(current);
    errno = saved;
    return fd;
}

int ysh_openat(int dirfd, const char *path, int flags, uint32_t mode, int *err) {
    int fd;
    if (!__atomic_load_n(&openat2_unavailable, __ATOMIC_RELAXED)) {
        // openat2 refuses a symlink in *any* component (a planted fan-out folder), not only the last.
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW);
        how.mode = (flags & O_CREAT) ? (uint64_t)mode : 0;
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        do { fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how); } while (fd == -1 && errno == EINTR);
        if (fd != -1) return fd;
        if (errno != ENOSYS) FAIL_WITH_ERRNO(-1);
        __atomic_store_n(&openat2_unavailable, 1, __ATOMIC_RELAXED);
    }
    fd = openat_walking(dirfd, path, flags, (mode_t)mode);
    if (fd == -1) FAIL_WITH_ERRNO(-1);
    return fd;
}

int ysh_open_parent(int dirfd, const char *path, const char **leaf) {
    const char *slash = strrchr(path, '/');
    if (dirfd == AT_FDCWD || slash == NULL) {
        *leaf = path;
        return dirfd;
    }
    size_t length = (size_t)(slash - path);
    char folder[PATH_MAX];
    if (length == 0 || length >= sizeof folder) {
        errno = length == 0 ? EINVAL : ENAMETOOLONG;
        return -1;
    }
    memcpy(folder, path, length);
    folder[length] = '\0';
    int err = 0;
    int fd = ysh_openat(dirfd, folder, O_PATH | O_DIRECTORY, 0, &err);
    if (fd == -1) {
        errno = err;
        return -1;
    }
    *leaf = slash + 1;
    return fd;
}

void ysh_release_parent(int parent, int dirfd) {
    if (parent != dirfd) {
        int saved = errno;
        close(parent);
        errno = saved;
    }
}
