// inotify.c: the shims of observation (Observation/) and of lock waits (Coordination/LockWait): inotify watches reached without following a
// symlink, the eventfd that wakes the watcher thread, poll on two descriptors, and naming that thread.
#define _GNU_SOURCE 1
#include "CFileLock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#define FAIL_WITH_ERRNO(value) do { if (err) *err = errno; return (value); } while (0)

const uint32_t ysh_IN_CREATE = IN_CREATE;
const uint32_t ysh_IN_DELETE = IN_DELETE;
const uint32_t ysh_IN_MOVED_FROM = IN_MOVED_FROM;
const uint32_t ysh_IN_MOVED_TO = IN_MOVED_TO;
const uint32_t ysh_IN_DELETE_SELF = IN_DELETE_SELF;
const uint32_t ysh_IN_MOVE_SELF = IN_MOVE_SELF;
const uint32_t ysh_IN_IGNORED = IN_IGNORED;
const uint32_t ysh_IN_Q_OVERFLOW = IN_Q_OVERFLOW;
const uint32_t ysh_IN_UNMOUNT = IN_UNMOUNT;
const uint32_t ysh_IN_ISDIR = IN_ISDIR;
const uint32_t ysh_IN_ONLYDIR = IN_ONLYDIR;
const uint32_t ysh_IN_CLOSE_WRITE = IN_CLOSE_WRITE;
const size_t ysh_inotify_event_size = sizeof(struct inotify_event);

int ysh_inotify_init(int *err) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd == -1) FAIL_WITH_ERRNO(-1);
    return fd;
}

int ysh_inotify_add_watch_at(int inotify_fd, int dirfd, const char *relative, uint32_t mask, int *err) {
    int folder = ysh_openat(dirfd, relative, O_PATH | O_DIRECTORY, 0, err);
    if (folder == -1) return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", folder);
    int wd = inotify_add_watch(inotify_fd, path, mask);
    int saved = errno;
    close(folder);
    if (wd == -1) {
        if (err) *err = saved;
        return -1;
    }
    return wd;
}

int ysh_inotify_rm_watch(int inotify_fd, int wd, int *err) {
    if (inotify_rm_watch(inotify_fd, wd) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_eventfd(int *err) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd == -1) FAIL_WITH_ERRNO(-1);
    return fd;
}

int ysh_eventfd_signal(int fd, int *err) {
    uint64_t one = 1;
    ssize_t n;
    do { n = write(fd, &one, sizeof one); } while (n == -1 && errno == EINTR);
    if (n == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_eventfd_drain(int fd) {
    uint64_t value = 0;
    ssize_t n;
    do { n = read(fd, &value, sizeof value); } while (n == -1 && errno == EINTR);
    return n == (ssize_t)sizeof value && value > 0 ? 1 : 0;
}

int ysh_poll2(int fd_a, int fd_b, int timeout_ms, int *ready_a, int *ready_b, int *err) {
    struct pollfd fds[2];
    fds[0].fd = fd_a;
    fds[0].events = POLLIN;
    fds[0].revents = 0;
    fds[1].fd = fd_b;
    fds[1].events = POLLIN;
    fds[1].revents = 0;
    int rc;
    do { rc = poll(fds, 2, timeout_ms); } while (rc == -1 && errno == EINTR);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    if (ready_a) *ready_a = fds[0].revents != 0;
    if (ready_b) *ready_b = fds[1].revents != 0;
    return rc;
}

ssize_t ysh_read_some(int fd, void *buffer, size_t count, int *err) {
    ssize_t n;
    do { n = read(fd, buffer, count); } while (n == -1 && errno == EINTR);
    if (n == -1) FAIL_WITH_ERRNO(-1);
    return n;
}

void ysh_set_thread_name(const char *name) {
    char truncated[16];
    snprintf(truncated, sizeof truncated, "%s", name);
    pthread_setname_np(pthread_self(), truncated);
}
