/* The C floors of the benchmark: what the kernel and libc do for each operation YashimaShared offers, in
 * plain system calls and nothing else. Every ratio `yashima-stress bench` prints is against one of these,
 * measured in the same run. Built by the bench (or build.sh) with the system `cc` into a build folder;
 * never committed as binaries. See README.md in this folder. */
#ifndef YASHIMA_FLOORS_H
#define YASHIMA_FLOORS_H

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Monotonic nanoseconds (CLOCK_MONOTONIC, the same clock as the bench's and the workers'). */
static inline uint64_t floors_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Per-operation samples in nanoseconds, appended as raw little-endian doubles to a file the bench reads
 * (the same format as `worker mix --samples`). */
typedef struct {
    double *values;
    size_t count, capacity;
} floors_samples;

void floors_sample(floors_samples *samples, double nanoseconds);
/* Appends the samples to `path` (O_APPEND) and empties them; 0 on success. */
int floors_flush_samples(floors_samples *samples, const char *path);

/* Options: `--name value` pairs after the command word; NULL when absent. */
const char *floors_option(int argc, char **argv, const char *name);
long floors_long_option(int argc, char **argv, const char *name, long fallback);
int floors_flag(int argc, char **argv, const char *name);

/* A line on stdout, written at once (one write(2)). */
void floors_say(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* The next line of stdin without its newline into `line`; 0 at end of input. */
int floors_read_line(char *line, size_t capacity);
/* Dies with a message on stderr (exit status 1). */
void floors_fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));

/* write(2) until all `count` bytes are written; -1 on error. */
ssize_t floors_write_full(int fd, const void *bytes, size_t count);
/* read(2) until `count` bytes or end of file; the bytes read, -1 on error. */
ssize_t floors_read_full(int fd, void *bytes, size_t count);

/* A 64-bit mixer (splitmix64) for names and keys. */
static inline uint64_t floors_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Keeps a computed value alive (the compiler cannot drop the loads that made it). */
extern volatile uint64_t floors_sink;

/* The commands, one per floor (floors.c dispatches on the first word). */
int floors_read_main(int argc, char **argv);        /* read, first-read, count-read */
int floors_publish_main(int argc, char **argv);     /* publish, count-publish */
int floors_stampede_main(int argc, char **argv);    /* stampede, stampede-fork, flock-wait */
int floors_memory_main(int argc, char **argv);      /* memory, count-memory */
int floors_redis_main(int argc, char **argv);       /* redis */
int floors_http_main(int argc, char **argv);        /* http */

#endif
