// CFileLock.c: implementations of the shims in include/CFileLock.h.
// _GNU_SOURCE is defined here only (never in the public header): renameat2 and statfs need it.
#define _GNU_SOURCE 1
#include "CFileLock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

const int ysh_LOCK_SH = LOCK_SH;
const int ysh_LOCK_EX = LOCK_EX;
const int ysh_LOCK_NB = LOCK_NB;
const int ysh_LOCK_UN = LOCK_UN;
const int ysh_O_RDONLY = O_RDONLY;
const int ysh_O_WRONLY = O_WRONLY;
const int ysh_O_RDWR = O_RDWR;
const int ysh_O_CREAT = O_CREAT;
const int ysh_O_EXCL = O_EXCL;
const int ysh_O_DIRECTORY = O_DIRECTORY;
const int ysh_O_APPEND = O_APPEND;
const int ysh_AT_FDCWD = AT_FDCWD;
const int ysh_AT_REMOVEDIR = AT_REMOVEDIR;
const uint32_t ysh_S_IFMT = S_IFMT;
const uint32_t ysh_S_IFDIR = S_IFDIR;
const uint32_t ysh_S_IFREG = S_IFREG;
const uint32_t ysh_S_IFLNK = S_IFLNK;

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

// The folder holding the last component of `path`, opened O_PATH with no symlink in any component
// (relative to `dirfd`), and the last component itself. A path without '/' (or any path relative to
// AT_FDCWD: the user's own path, whose symlinks are the user's choice) uses `dirfd` as is.
// Returns the descriptor to use (close it with release_parent), or -1 with errno set.
static int open_parent(int dirfd, const char *path, const char **leaf) {
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

static void release_parent(int parent, int dirfd) {
    if (parent != dirfd) {
        int saved = errno;
        close(parent);
        errno = saved;
    }
}

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
    int parent = open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    struct stat st;
    int rc = fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW);
    release_parent(parent, dirfd);
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

void *ysh_mmap_private(int fd, size_t length, int *err) {
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) FAIL_WITH_ERRNO(NULL);
    return p;
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
    int from_parent = open_parent(fromdir, from, &from_leaf);                         \
    if (from_parent == -1) FAIL_WITH_ERRNO(-1);                                       \
    int to_parent = open_parent(todir, to, &to_leaf);                                 \
    if (to_parent == -1) {                                                            \
        release_parent(from_parent, fromdir);                                         \
        FAIL_WITH_ERRNO(-1);                                                          \
    }                                                                                 \
    int rc = (int)(call);                                                             \
    release_parent(to_parent, todir);                                                 \
    release_parent(from_parent, fromdir);                                             \
    if (rc == -1) FAIL_WITH_ERRNO(-1);                                                \
    return 0;

int ysh_renameat(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(renameat(from_parent, from_leaf, to_parent, to_leaf))
}

int ysh_renameat_noreplace(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(syscall(SYS_renameat2, from_parent, from_leaf, to_parent, to_leaf, RENAME_NOREPLACE))
}

int ysh_linkat(int fromdir, const char *from, int todir, const char *to, int *err) {
    TWO_PARENTS(linkat(from_parent, from_leaf, to_parent, to_leaf, 0))
}

int ysh_unlinkat(int dirfd, const char *path, int flags, int *err) {
    const char *leaf;
    int parent = open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = unlinkat(parent, leaf, flags);
    release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_mkdirat(int dirfd, const char *path, uint32_t mode, int *err) {
    const char *leaf;
    int parent = open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = mkdirat(parent, leaf, (mode_t)mode);
    release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_fchmodat(int dirfd, const char *path, uint32_t mode, int *err) {
    if (fchmodat(dirfd, path, (mode_t)mode, 0) == -1) FAIL_WITH_ERRNO(-1);
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
    int parent = open_parent(dirfd, path, &leaf);
    if (parent == -1) FAIL_WITH_ERRNO(-1);
    int rc = utimensat(parent, leaf, NULL, AT_SYMLINK_NOFOLLOW);
    release_parent(parent, dirfd);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_ftruncate(int fd, int64_t length, int *err) {
    if (ftruncate(fd, (off_t)length) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_fsync(int fd, int *err) {
    if (fsync(fd) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_fstatfs_type(int fd, int64_t *type_out, int *err) {
    struct statfs st;
    if (fstatfs(fd, &st) == -1) FAIL_WITH_ERRNO(-1);
    *type_out = (int64_t)st.f_type;
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

int ysh_dir_fd(ysh_dir *dir) { return dirfd(dir->stream); }

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

// MARK: CRC32C

static uint32_t crc32c_table[8][256];
static int crc32c_hardware = -1;

static void crc32c_init_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
        crc32c_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc32c_table[0][n];
        for (int k = 1; k < 8; k++) {
            c = crc32c_table[0][c & 0xff] ^ (c >> 8);
            crc32c_table[k][n] = c;
        }
    }
}

static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = crc32c_table[7][word & 0xff] ^ crc32c_table[6][(word >> 8) & 0xff] ^
              crc32c_table[5][(word >> 16) & 0xff] ^ crc32c_table[4][(word >> 24) & 0xff] ^
              crc32c_table[3][(word >> 32) & 0xff] ^ crc32c_table[2][(word >> 40) & 0xff] ^
              crc32c_table[1][(word >> 48) & 0xff] ^ crc32c_table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

// Three independent streams hide the crc32 instruction's 3-cycle latency; the partial CRCs are
// combined by shifting through zeros with the table-free software routine, which is exact.
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw_serial(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

// Multiplication modulo the CRC32C polynomial (bit-reflected), used to shift a CRC over `len` zero bytes.
static uint32_t gf2_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int i = 0; i < 32; i++) {
        if (b & 0x80000000u) product ^= a;
        b <<= 1;
        a = (a & 1) ? (a >> 1) ^ 0x82F63B78u : (a >> 1);
    }
    return product;
}

// x^(8*len) mod P, in reflected form: the operator that appends `len` zero bytes.
static uint32_t zeros_operator(size_t len) {
    uint32_t result = 0x80000000u;  // x^0
    uint32_t square = 0x00800000u;  // x^8 (one zero byte)
    while (len) {
        if (len & 1) result = gf2_multiply(result, square);
        square = gf2_multiply(square, square);
        len >>= 1;
    }
    return result;
}

enum { CRC_BLOCK = 8192 };
static uint32_t crc32c_block_shift = 0;

__attribute__((target("sse4.2")))
static uint32_t crc32c_hardware_3way(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 3 * CRC_BLOCK) {
        uint64_t a = crc, b = 0, c = 0;
        const unsigned char *pa = p, *pb = p + CRC_BLOCK, *pc = p + 2 * CRC_BLOCK;
        for (size_t i = 0; i < CRC_BLOCK; i += 8) {
            uint64_t wa, wb, wc;
            memcpy(&wa, pa + i, 8);
            memcpy(&wb, pb + i, 8);
            memcpy(&wc, pc + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            c = _mm_crc32_u64(c, wc);
        }
        // crc(A||B||C) = shift(shift(a) ^ b) ^ c, where shift appends CRC_BLOCK zero bytes.
        uint32_t combined = gf2_multiply((uint32_t)a, crc32c_block_shift) ^ (uint32_t)b;
        combined = gf2_multiply(combined, crc32c_block_shift) ^ (uint32_t)c;
        crc = combined;
        p += 3 * CRC_BLOCK;
        n -= 3 * CRC_BLOCK;
    }
    return crc32c_hw_serial(crc, p, n);
}
#endif

static void crc32c_setup(void) {
    crc32c_init_table();
    int hardware = 0;
#if defined(__x86_64__)
    unsigned int eax, ebx, ecx, edx;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSE4_2)) hardware = 1;
    crc32c_block_shift = zeros_operator(CRC_BLOCK);
#endif
    __atomic_store_n(&crc32c_hardware, hardware, __ATOMIC_RELEASE);
}

static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

uint32_t ysh_crc32c(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc32c_once, crc32c_setup);
    crc = ~crc;
#if defined(__x86_64__)
    if (crc32c_hardware) return ~crc32c_hardware_3way(crc, (const unsigned char *)data, length);
#endif
    return ~crc32c_software(crc, (const unsigned char *)data, length);
}

int ysh_crc32c_is_hardware(void) {
    pthread_once(&crc32c_once, crc32c_setup);
    return crc32c_hardware;
}

// MARK: atomics and clocks

uint64_t ysh_atomic_load_u64(const uint64_t *address) { return __atomic_load_n(address, __ATOMIC_SEQ_CST); }
void ysh_atomic_store_u64(uint64_t *address, uint64_t value) { __atomic_store_n(address, value, __ATOMIC_SEQ_CST); }
uint64_t ysh_atomic_fetch_add_u64(uint64_t *address, uint64_t delta) {
    return __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}
int64_t ysh_atomic_fetch_add_i64(int64_t *address, int64_t delta) {
    return __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}
int64_t ysh_atomic_load_i64(const int64_t *address) { return __atomic_load_n(address, __ATOMIC_SEQ_CST); }
int ysh_atomic_cas_i64(int64_t *address, int64_t expected, int64_t desired) {
    return __atomic_compare_exchange_n(address, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ? 1 : 0;
}

int64_t ysh_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t ysh_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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

int ysh_is_group_member(uint32_t gid) {
    if ((gid_t)gid == getegid()) return 1;
    gid_t groups[NGROUPS_MAX];
    int count = getgroups(NGROUPS_MAX, groups);
    for (int i = 0; i < count; i++) {
        if (groups[i] == (gid_t)gid) return 1;
    }
    return 0;
}
