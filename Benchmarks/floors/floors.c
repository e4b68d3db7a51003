/* `floors COMMAND [--option value ...]`: the C floors of the benchmark (see floors.h and README.md).
 * Serving commands print READY, then answer one line per command line on stdin until stdin closes, so the
 * bench can alternate a floor's operations with the library's, chunk by chunk, in the same run. */
#include "floors.h"

#include <stdarg.h>

volatile uint64_t floors_sink;

void floors_sample(floors_samples *samples, double nanoseconds) {
    if (samples->count == samples->capacity) {
        samples->capacity = samples->capacity ? samples->capacity * 2 : 4096;
        samples->values = realloc(samples->values, samples->capacity * sizeof(double));
        if (!samples->values) floors_fail("out of memory");
    }
    samples->values[samples->count++] = nanoseconds;
}

int floors_flush_samples(floors_samples *samples, const char *path) {
    if (!path || samples->count == 0) {
        samples->count = 0;
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    ssize_t written = floors_write_full(fd, samples->values, samples->count * sizeof(double));
    close(fd);
    int ok = written == (ssize_t)(samples->count * sizeof(double));
    samples->count = 0;
    return ok ? 0 : -1;
}

const char *floors_option(int argc, char **argv, const char *name) {
    for (int index = 2; index + 1 < argc; index++) {
        if (argv[index][0] == '-' && argv[index][1] == '-' && strcmp(argv[index] + 2, name) == 0) {
            return argv[index + 1];
        }
    }
    return NULL;
}

long floors_long_option(int argc, char **argv, const char *name, long fallback) {
    const char *text = floors_option(argc, argv, name);
    if (!text) return fallback;
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (!end || *end != 0) floors_fail("--%s must be a number, not '%s'", name, text);
    return value;
}

int floors_flag(int argc, char **argv, const char *name) {
    for (int index = 2; index < argc; index++) {
        if (argv[index][0] == '-' && argv[index][1] == '-' && strcmp(argv[index] + 2, name) == 0) return 1;
    }
    return 0;
}

void floors_say(const char *format, ...) {
    char line[512];
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(line, sizeof line - 1, format, arguments);
    va_end(arguments);
    if (length < 0) return;
    if ((size_t)length > sizeof line - 2) length = (int)sizeof line - 2;
    line[length] = '\n';
    floors_write_full(1, line, (size_t)length + 1);
}

/* stdin is read byte-buffered here, not through stdio, so nothing else buffers behind the bench's back. */
static char input[4096];
static size_t input_start, input_end;

int floors_read_line(char *line, size_t capacity) {
    size_t length = 0;
    for (;;) {
        if (input_start == input_end) {
            ssize_t count;
            do {
                count = read(0, input, sizeof input);
            } while (count < 0 && errno == EINTR);
            if (count <= 0) {
                if (length == 0) return 0;
                line[length] = 0;
                return 1;
            }
            input_start = 0;
            input_end = (size_t)count;
        }
        char byte = input[input_start++];
        if (byte == '\n') {
            line[length] = 0;
            return 1;
        }
        if (length + 1 < capacity) line[length++] = byte;
    }
}

void floors_fail(const char *format, ...) {
    char message[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, sizeof message, format, arguments);
    va_end(arguments);
    fprintf(stderr, "floors: %s\n", message);
    exit(1);
}

ssize_t floors_write_full(int fd, const void *bytes, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t written = write(fd, (const char *)bytes + done, count - done);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return -1;
        done += (size_t)written;
    }
    return (ssize_t)done;
}

ssize_t floors_read_full(int fd, void *bytes, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t got = read(fd, (char *)bytes + done, count - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (ssize_t)done;
}

static const char usage[] =
    "usage: floors COMMAND [--option value ...]\n"
    "  read --paths FILE --samples OUT [--root DIR] [--mmap]   serve: 'R A B' reads paths A..<B whole\n"
    "  first-read --path FILE                     open+fstat+read+close of one file, then exit\n"
    "  count-read --paths FILE --count N          N reads of the paths in order (callgrind)\n"
    "  publish --dir D --size N --samples OUT [--same | --replace [--names N]]   serve: 'P K' K publishes\n"
    "  count-publish --dir D --size N --count N   (callgrind)\n"
    "  stampede --role holder|waiter --lock F --data D [--hold-ms 200] [--size 4096]\n"
    "  stampede-fork --processes N --dir D [--rounds R] [--hold-ms 200]\n"
    "  flock-wait --file F                        serve: 'WAIT' blocks in flock, prints when granted\n"
    "  memory --samples OUT                       serve: 'M K' K locked lookups + atomic load\n"
    "  count-memory --count N                     (callgrind)\n"
    "  redis (--socket PATH | --host H --port P) --key K --size N --samples OUT   serve: 'G K' K GETs\n"
    "  http --host H --port P --path /P --size N --samples OUT   serve: 'G K' K GETs (kept alive)\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *command = argv[1];
    if (strcmp(command, "read") == 0 || strcmp(command, "first-read") == 0 || strcmp(command, "count-read") == 0)
        return floors_read_main(argc, argv);
    if (strcmp(command, "publish") == 0 || strcmp(command, "count-publish") == 0)
        return floors_publish_main(argc, argv);
    if (strcmp(command, "stampede") == 0 || strcmp(command, "stampede-fork") == 0 || strcmp(command, "flock-wait") == 0)
        return floors_stampede_main(argc, argv);
    if (strcmp(command, "memory") == 0 || strcmp(command, "count-memory") == 0)
        return floors_memory_main(argc, argv);
    if (strcmp(command, "redis") == 0) return floors_redis_main(argc, argv);
    if (strcmp(command, "http") == 0) return floors_http_main(argc, argv);
    fputs(usage, stderr);
    return 2;
}
