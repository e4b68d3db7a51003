/* The stampede's floor: N processes on a bare flock. One holds LOCK_EX for 200 ms then writes a small file
 * and unlocks; the other N-1 block in flock(LOCK_SH), then open, read and close that file. Everything is
 * opened before the start barrier (the holder also takes its lock then), so what is timed is only what the
 * kernel does: the hold, the wake-ups, the reads. Each process also reports its CPU time for that part. The figure is the last process's finish, measured from
 * the barrier's release, minus the hold.
 *
 * `stampede`: one such process, exec'd by the bench (READY, then GO on stdin, then a `DONE <finished>
 * <hold started or 0> <1 if its bytes were right> <CPU ns>` line, then it stays until stdin closes so that its exit
 * costs the others nothing), the same protocol as the library's `worker get --terse`.
 * `stampede-fork`: the whole round in this program: N forked children, released together by closing a
 * pipe they all block on, results over another pipe; prints one line per round, the overhead in ns.
 * `flock-wait`: the lock hand-off's floor, a waiter in another process (see flock_wait). */
#include "floors.h"

#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>

/* This process's CPU time (user + system), nanoseconds. */
static uint64_t cpu_now(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)usage.ru_utime.tv_usec + (uint64_t)usage.ru_stime.tv_usec) * 1000u;
}

/* Sleeps to `start` + `milliseconds` on CLOCK_MONOTONIC (absolute, as the library's bench generator). */
static void hold_for(uint64_t start, long milliseconds) {
    uint64_t until = start + (uint64_t)milliseconds * 1000000u;
    struct timespec deadline = {.tv_sec = (time_t)(until / 1000000000u), .tv_nsec = (long)(until % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
    }
}

/* The timed part of one process, after the barrier; returns whether its bytes were right. */
static int run_role(int holder, int lock, const char *data, unsigned char *buffer, size_t size, long hold,
                    uint64_t start) {
    ssize_t done = 0;
    if (holder) {
        hold_for(start, hold);
        int out = open(data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out >= 0) {
            done = floors_write_full(out, buffer, size);
            close(out);
        }
        flock(lock, LOCK_UN);
    } else {
        while (flock(lock, LOCK_SH) != 0 && errno == EINTR) {
        }
        int in = open(data, O_RDONLY | O_CLOEXEC);
        if (in >= 0) {
            done = floors_read_full(in, buffer, size);
            close(in);
        }
        flock(lock, LOCK_UN);
    }
    return done == (ssize_t)size;
}

static int one_process(int argc, char **argv) {
    const char *role = floors_option(argc, argv, "role");
    const char *lock_path = floors_option(argc, argv, "lock");
    const char *data = floors_option(argc, argv, "data");
    if (!role || !lock_path || !data) floors_fail("stampede needs --role, --lock and --data");
    int holder = strcmp(role, "holder") == 0;
    if (!holder && strcmp(role, "waiter") != 0) floors_fail("--role must be holder or waiter");
    long hold = floors_long_option(argc, argv, "hold-ms", 200);
    size_t size = (size_t)floors_long_option(argc, argv, "size", 4096);
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0) floors_fail("cannot open %s", lock_path);
    if (holder && flock(lock, LOCK_EX) != 0) floors_fail("cannot lock %s", lock_path);
    unsigned char *buffer = malloc(size);
    memset(buffer, 7, size);
    char line[64];
    floors_say("READY");
    if (!floors_read_line(line, sizeof line)) return 1;
    uint64_t start = floors_now();
    uint64_t cpu = cpu_now();
    int correct = run_role(holder, lock, data, buffer, size, hold, start);
    uint64_t finished = floors_now();
    cpu = cpu_now() - cpu;
    close(lock);
    floors_say("DONE %llu %llu %d %llu", (unsigned long long)finished, (unsigned long long)(holder ? start : 0), correct,
               (unsigned long long)cpu);
    while (floors_read_line(line, sizeof line)) {
    }
    return correct ? 0 : 1;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int forked_rounds(int argc, char **argv) {
    long processes = floors_long_option(argc, argv, "processes", 8);
    long rounds = floors_long_option(argc, argv, "rounds", 5);
    long hold = floors_long_option(argc, argv, "hold-ms", 200);
    size_t size = (size_t)floors_long_option(argc, argv, "size", 4096);
    const char *directory = floors_option(argc, argv, "dir");
    if (!directory || processes < 2 || rounds < 1) floors_fail("stampede-fork needs --dir and --processes >= 2");
    double *overheads = calloc((size_t)rounds, sizeof(double));
    for (long round = 0; round < rounds; round++) {
        char lock_path[4096], data[4096];
        snprintf(lock_path, sizeof lock_path, "%s/fork-%ld.lock", directory, round);
        snprintf(data, sizeof data, "%s/fork-%ld.value", directory, round);
        unlink(data);
        int ready[2], go[2], results[2], finish[2];
        if (pipe(ready) || pipe(go) || pipe(results) || pipe(finish)) floors_fail("pipe failed");
        pid_t *children = calloc((size_t)processes, sizeof(pid_t));
        for (long index = 0; index < processes; index++) {
            pid_t child = fork();
            if (child < 0) floors_fail("fork failed");
            if (child == 0) {
                close(ready[0]);
                close(go[1]);
                close(results[0]);
                close(finish[1]);
                int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
                if (lock < 0 || (index == 0 && flock(lock, LOCK_EX) != 0)) _exit(1);
                unsigned char *buffer = malloc(size);
                memset(buffer, 7, size);
                char byte = 1;
                floors_write_full(ready[1], &byte, 1);
                while (read(go[0], &byte, 1) < 0 && errno == EINTR) {
                }
                uint64_t start = floors_now();
                int correct = run_role(index == 0, lock, data, buffer, size, hold, start);
                uint64_t record[2] = {floors_now(), (uint64_t)correct};
                floors_write_full(results[1], record, sizeof record);
                while (read(finish[0], &byte, 1) > 0 || errno == EINTR) {
                }
                _exit(0);
            }
            children[index] = child;
        }
        close(ready[1]);
        close(go[0]);
        close(results[1]);
        close(finish[0]);
        char byte;
        for (long index = 0; index < processes; index++) {
            if (read(ready[0], &byte, 1) != 1) floors_fail("a child did not get ready");
        }
        uint64_t released = floors_now();
        close(go[1]);  /* every child's read returns 0 at once */
        uint64_t last = 0;
        long wrong = 0;
        for (long index = 0; index < processes; index++) {
            uint64_t record[2];
            if (floors_read_full(results[0], record, sizeof record) != sizeof record) floors_fail("a child failed");
            if (record[0] > last) last = record[0];
            if (!record[1]) wrong++;
        }
        close(finish[1]);
        for (long index = 0; index < processes; index++) waitpid(children[index], NULL, 0);
        close(ready[0]);
        close(results[0]);
        free(children);
        overheads[round] = (double)(last - released) - (double)hold * 1e6;
        floors_say("%.0f%s", overheads[round], wrong ? " WRONG" : "");
        unlink(lock_path);
    }
    qsort(overheads, (size_t)rounds, sizeof(double), compare);
    floors_say("median %.0f", overheads[rounds / 2]);
    return 0;
}

/* `flock-wait --file F`: the hand-off's floor. For each WAIT line: open F, say BLOCKING, block in
 * flock(LOCK_EX), note the monotonic time the lock was granted, unlock, close, and print that time. */
static int flock_wait(int argc, char **argv) {
    const char *file = floors_option(argc, argv, "file");
    if (!file) floors_fail("flock-wait needs --file");
    char line[64];
    floors_say("READY");
    while (floors_read_line(line, sizeof line) && strcmp(line, "WAIT") == 0) {
        int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return 1;
        floors_say("BLOCKING");
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
        }
        uint64_t granted = floors_now();
        flock(fd, LOCK_UN);
        close(fd);
        floors_say("%llu", (unsigned long long)granted);
    }
    return 0;
}

int floors_stampede_main(int argc, char **argv) {
    if (strcmp(argv[1], "flock-wait") == 0) return flock_wait(argc, argv);
    return strcmp(argv[1], "stampede") == 0 ? one_process(argc, argv) : forked_rounds(argc, argv);
}
