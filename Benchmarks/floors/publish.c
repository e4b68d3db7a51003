/* The floor of a miss and publish: what any cache that shares a file per entry between processes must do
 * for a new value, in plain system calls. A look that misses (open of the entry's name: ENOENT), the key's
 * lock file created and locked (it is also the staging file, as the library's), a 256-byte header and the
 * value written in one call, renamed into place without replacing (renameat2 RENAME_NOREPLACE), unlocked
 * and closed. Names are 64 hex digits under 256 fan-out folders (locks/xx, entries/xx, made before timing),
 * as the library's; new names each time, or with --same one name whose entry is unlinked before each
 * publish (not timed), as a remote hit's local copy is removed between hits in the bench. With --replace
 * (and --names N, default 100): N names in turn, each published over its existing entry (no miss, plain
 * renameat), as `store` replacing a key does. */
#include "floors.h"

#include <stdio.h>
#include <sys/file.h>

typedef struct {
    int root;
    unsigned char *bytes;
    size_t size;
    uint64_t seed;
    uint64_t counter;
    int same;
    int replace;
    uint64_t names;
} publish_state;

static void make_folders(const char *root) {
    char path[4096];
    const char *tops[] = {"locks", "entries"};
    if (mkdir(root, 0700) != 0 && errno != EEXIST) floors_fail("cannot create %s: errno %d", root, errno);
    for (int top = 0; top < 2; top++) {
        snprintf(path, sizeof path, "%s/%s", root, tops[top]);
        if (mkdir(path, 0700) != 0 && errno != EEXIST) floors_fail("cannot create %s: errno %d", path, errno);
        for (int fan = 0; fan < 256; fan++) {
            snprintf(path, sizeof path, "%s/%s/%02x", root, tops[top], fan);
            if (mkdir(path, 0700) != 0 && errno != EEXIST) floors_fail("cannot create %s: errno %d", path, errno);
        }
    }
}

/* The key's name: 64 hex digits. */
static void name_for(publish_state *state, uint64_t number, char name[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int word = 0; word < 4; word++) {
        uint64_t value = floors_mix(state->seed ^ (number * 4 + (uint64_t)word));
        for (int nibble = 0; nibble < 16; nibble++) name[word * 16 + nibble] = digits[(value >> (nibble * 4)) & 15];
    }
    name[64] = 0;
}

/* One miss and publish; 0 on success. */
static int publish_one(publish_state *state, const char *entry, const char *lock) {
    if (!state->replace) {
        int missing = openat(state->root, entry, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (missing >= 0) {
            close(missing);
            return -1;
        }
    }
    int fd = openat(state->root, lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    int ok = flock(fd, LOCK_EX | LOCK_NB) == 0 &&
             floors_write_full(fd, state->bytes, state->size) == (ssize_t)state->size &&
             renameat2(state->root, lock, state->root, entry, state->replace ? 0 : RENAME_NOREPLACE) == 0;
    flock(fd, LOCK_UN);
    close(fd);
    return ok ? 0 : -1;
}

/* The paths of the next publish; with --same, the entry left by the last one is unlinked (untimed). */
static void next_paths(publish_state *state, char entry[128], char lock[128]) {
    char name[65];
    uint64_t number = state->counter++;
    name_for(state, state->same ? 0 : state->replace ? number % state->names : number, name);
    snprintf(entry, 128, "entries/%.2s/%s.entry", name, name);
    snprintf(lock, 128, "locks/%.2s/%s.lock", name, name);
    if (state->same) unlinkat(state->root, entry, 0);
}

int floors_publish_main(int argc, char **argv) {
    const char *directory = floors_option(argc, argv, "dir");
    if (!directory) floors_fail("%s needs --dir", argv[1]);
    publish_state state = {0};
    state.size = 256 + (size_t)floors_long_option(argc, argv, "size", 4096);
    state.same = floors_flag(argc, argv, "same");
    state.replace = floors_flag(argc, argv, "replace");
    state.names = (uint64_t)floors_long_option(argc, argv, "names", 100);
    if (state.names == 0) floors_fail("--names must be at least 1");
    state.seed = floors_mix(floors_now() ^ ((uint64_t)getpid() << 32));
    state.bytes = malloc(state.size);
    if (!state.bytes) floors_fail("out of memory");
    for (size_t index = 0; index < state.size; index++) state.bytes[index] = (unsigned char)(index * 7);
    make_folders(directory);
    state.root = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (state.root < 0) floors_fail("cannot open %s", directory);
    char entry[128], lock[128];
    if (strcmp(argv[1], "count-publish") == 0) {
        long count = floors_long_option(argc, argv, "count", 100);
        long failures = 0;
        for (long index = 0; index < count; index++) {
            next_paths(&state, entry, lock);
            if (publish_one(&state, entry, lock) != 0) failures++;
        }
        return failures == 0 ? 0 : 1;
    }
    const char *samples_path = floors_option(argc, argv, "samples");
    floors_samples samples = {0};
    floors_say("READY");
    char line[256];
    while (floors_read_line(line, sizeof line)) {
        unsigned long count = 0;
        if (sscanf(line, "P %lu", &count) != 1) {
            floors_say("ERROR bad command '%s'", line);
            continue;
        }
        long failures = 0;
        double last = 0;
        for (unsigned long index = 0; index < count; index++) {
            next_paths(&state, entry, lock);
            uint64_t start = floors_now();
            int status = publish_one(&state, entry, lock);
            last = (double)(floors_now() - start);
            if (status != 0) failures++;
            floors_sample(&samples, last);
        }
        if (floors_flush_samples(&samples, samples_path) != 0) floors_say("ERROR cannot write samples");
        else floors_say("OK %.0f %ld", last, failures);
    }
    return 0;
}
