/* The storage hit's floor: open + fstat + read(2) into a reused buffer + close of the same files, in the
 * same order, as the library's hits (the cache's own entry files, read whole); with --root DIR the paths are
 * relative to DIR and opened with openat from it, as the library opens entries from its root. With --mmap: open + fstat +
 * mmap + one load per 4 KiB page + munmap + close. Also a fresh process's one read (first-read: the whole
 * process, exec to exit, is the floor of the library's fresh open and first hit) and an untimed loop for
 * callgrind (count-read). */
#include "floors.h"

#include <sys/mman.h>

typedef struct {
    int root; /* --root: the paths are relative to it, opened with openat (as the library opens its entries) */
    char **paths;
    size_t count;
    unsigned char *buffer;
    size_t capacity;
} read_state;

static void load_paths(read_state *state, const char *file) {
    FILE *list = fopen(file, "r");
    if (!list) floors_fail("cannot open the paths file %s", file);
    size_t capacity = 1024;
    state->paths = malloc(capacity * sizeof(char *));
    char *line = NULL;
    size_t length = 0;
    ssize_t got;
    while ((got = getline(&line, &length, list)) > 0) {
        if (line[got - 1] == '\n') line[--got] = 0;
        if (got == 0) continue;
        if (state->count == capacity) {
            capacity *= 2;
            state->paths = realloc(state->paths, capacity * sizeof(char *));
        }
        state->paths[state->count++] = strdup(line);
    }
    free(line);
    fclose(list);
    if (state->count == 0) floors_fail("no paths in %s", file);
}

/* One open + fstat + read + close; the bytes read, or -1. */
static ssize_t read_whole(read_state *state, const char *path) {
    int fd = openat(state->root, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat info;
    if (fstat(fd, &info) != 0) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)info.st_size;
    if (size > state->capacity) {
        free(state->buffer);
        state->capacity = size;
        state->buffer = malloc(size);
        if (!state->buffer) floors_fail("out of memory");
    }
    ssize_t done = floors_read_full(fd, state->buffer, size);
    close(fd);
    return done == (ssize_t)size ? done : -1;
}

/* One open + fstat + mmap + touch every page + munmap + close. */
static ssize_t map_whole(read_state *state, const char *path) {
    int fd = openat(state->root, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat info;
    if (fstat(fd, &info) != 0 || info.st_size == 0) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)info.st_size;
    unsigned char *bytes = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (bytes == MAP_FAILED) return -1;
    uint64_t sum = 0;
    for (size_t offset = 0; offset < size; offset += 4096) sum += bytes[offset];
    floors_sink = sum;
    munmap(bytes, size);
    return (ssize_t)size;
}

int floors_read_main(int argc, char **argv) {
    read_state state = {.root = AT_FDCWD};
    const char *root = floors_option(argc, argv, "root");
    if (root && (state.root = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) floors_fail("cannot open %s", root);
    if (strcmp(argv[1], "first-read") == 0) {
        const char *path = floors_option(argc, argv, "path");
        if (!path) floors_fail("first-read needs --path");
        return read_whole(&state, path) > 0 ? 0 : 1;
    }
    const char *file = floors_option(argc, argv, "paths");
    if (!file) floors_fail("%s needs --paths", argv[1]);
    load_paths(&state, file);
    int mapped = floors_flag(argc, argv, "mmap");
    if (strcmp(argv[1], "count-read") == 0) {
        long count = floors_long_option(argc, argv, "count", 1000);
        long failures = 0;
        for (long index = 0; index < count; index++) {
            const char *path = state.paths[(size_t)index % state.count];
            if ((mapped ? map_whole(&state, path) : read_whole(&state, path)) < 0) failures++;
        }
        return failures == 0 ? 0 : 1;
    }
    const char *samples_path = floors_option(argc, argv, "samples");
    floors_samples samples = {0};
    floors_say("READY");
    char line[256];
    while (floors_read_line(line, sizeof line)) {
        unsigned long from = 0, to = 0;
        if (sscanf(line, "R %lu %lu", &from, &to) != 2 || from > to || to > state.count) {
            floors_say("ERROR bad command '%s' (%zu paths)", line, state.count);
            continue;
        }
        long failures = 0;
        double total = 0;
        for (size_t index = from; index < to; index++) {
            uint64_t start = floors_now();
            ssize_t done = mapped ? map_whole(&state, state.paths[index]) : read_whole(&state, state.paths[index]);
            double elapsed = (double)(floors_now() - start);
            if (done < 0) failures++;
            floors_sample(&samples, elapsed);
            total += elapsed;
        }
        if (floors_flush_samples(&samples, samples_path) != 0) floors_say("ERROR cannot write samples");
        else floors_say("OK %.0f %ld", total, failures);
    }
    return 0;
}
