/* The Redis round trip's floor: one blocking connection (Unix socket or TCP), a RESP `GET` of a value of
 * the hit's size, read whole into a reused buffer. The value is SET once before READY. With the publish
 * floor (publish.c) it makes the floor of a remote hit: the transfer plus the filesystem's publish. */
#include "floors.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

static int connect_to(const char *socket_path, const char *host, const char *port) {
    if (socket_path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        if (fd < 0 || strlen(socket_path) >= sizeof address.sun_path) return -1;
        strcpy(address.sun_path, socket_path);
        if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *found = NULL;
    if (getaddrinfo(host, port, &hints, &found) != 0 || !found) return -1;
    int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
    if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(found);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

typedef struct {
    int fd;
    char *buffer;
    size_t capacity;
} connection;

/* Reads one reply into the buffer: a simple line (+OK, -ERR) or a bulk string; the bulk's length, -1 for
 * a simple line or nil, -2 on error. */
static long read_reply(connection *link) {
    size_t have = 0;
    for (;;) {
        ssize_t got = recv(link->fd, link->buffer + have, link->capacity - have, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -2;
        have += (size_t)got;
        char *end = memchr(link->buffer, '\n', have);
        if (!end) continue;
        if (link->buffer[0] != '$') return link->buffer[0] == '+' ? -1 : -2;
        long length = strtol(link->buffer + 1, NULL, 10);
        if (length < 0) return -1;
        size_t total = (size_t)(end - link->buffer) + 1 + (size_t)length + 2;
        if (total > link->capacity) return -2;
        while (have < total) {
            got = recv(link->fd, link->buffer + have, total - have, 0);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return -2;
            have += (size_t)got;
        }
        return length;
    }
}

int floors_redis_main(int argc, char **argv) {
    const char *key = floors_option(argc, argv, "key");
    size_t size = (size_t)floors_long_option(argc, argv, "size", 4096);
    if (!key) floors_fail("redis needs --key");
    connection link = {.capacity = size + 4096};
    link.fd = connect_to(floors_option(argc, argv, "socket"), floors_option(argc, argv, "host"),
                         floors_option(argc, argv, "port") ? floors_option(argc, argv, "port") : "6379");
    if (link.fd < 0) floors_fail("cannot connect to Redis");
    link.buffer = malloc(link.capacity);
    char header[512];
    int header_length = snprintf(header, sizeof header, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(key), key, size);
    char *set = malloc((size_t)header_length + size + 2);
    memcpy(set, header, (size_t)header_length);
    for (size_t index = 0; index < size; index++) set[header_length + (int)index] = (char)(index * 7);
    memcpy(set + header_length + size, "\r\n", 2);
    if (floors_write_full(link.fd, set, (size_t)header_length + size + 2) < 0 || read_reply(&link) != -1)
        floors_fail("SET failed");
    free(set);
    char get[512];
    int get_length = snprintf(get, sizeof get, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
    const char *samples_path = floors_option(argc, argv, "samples");
    floors_samples samples = {0};
    floors_say("READY");
    char line[256];
    while (floors_read_line(line, sizeof line)) {
        unsigned long count = 0;
        if (sscanf(line, "G %lu", &count) != 1) {
            floors_say("ERROR bad command '%s'", line);
            continue;
        }
        long failures = 0;
        double last = 0;
        for (unsigned long index = 0; index < count; index++) {
            uint64_t start = floors_now();
            int sent = floors_write_full(link.fd, get, (size_t)get_length) == get_length;
            long got = sent ? read_reply(&link) : -2;
            last = (double)(floors_now() - start);
            if (got != (long)size) failures++;
            floors_sample(&samples, last);
        }
        if (floors_flush_samples(&samples, samples_path) != 0) floors_say("ERROR cannot write samples");
        else floors_say("OK %.0f %ld", last, failures);
    }
    return 0;
}
