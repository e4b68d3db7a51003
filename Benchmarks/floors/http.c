/* The HTTP round trip's floor: one kept-alive TCP connection (TCP_NODELAY), `GET <path> HTTP/1.1`, the
 * response's headers read up to the blank line, then exactly Content-Length bytes of body into a reused
 * buffer. No TLS, no chunked bodies (a server that sends one is an error here). With the publish floor
 * (publish.c) it makes the floor of an HTTP remote hit: the transfer plus the filesystem's publish. A
 * connection the server closed is opened again inside the timed operation that found it closed. */
#include "floors.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>

static int connect_tcp(const char *host, const char *port) {
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
    const char *host, *port;
    int fd;
    char *request;
    size_t request_length;
    char *buffer;
    size_t capacity;
} http_link;

/* One GET: the body's length, or -1. `retry`: open a new connection once if the old one was closed. */
static long get_once(http_link *link, int retry) {
    if (link->fd < 0 && (link->fd = connect_tcp(link->host, link->port)) < 0) return -1;
    if (floors_write_full(link->fd, link->request, link->request_length) < 0) goto closed;
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == link->capacity) return -1;
        ssize_t got = recv(link->fd, link->buffer + have, link->capacity - have, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (have == 0) goto closed;
            return -1;
        }
        have += (size_t)got;
        end = memmem(link->buffer, have, "\r\n\r\n", 4);
    }
    size_t header_length = (size_t)(end - link->buffer) + 4;
    if (have < 12 || memcmp(link->buffer + 9, "200", 3) != 0) return -1;
    long length = -1;
    for (char *line = link->buffer; line < end; line = memchr(line, '\n', (size_t)(end - line)) + 1) {
        if (strncasecmp(line, "Content-Length:", 15) == 0) length = strtol(line + 15, NULL, 10);
        if (!memchr(line, '\n', (size_t)(end - line))) break;
    }
    if (length < 0 || header_length + (size_t)length > link->capacity) return -1;
    size_t total = header_length + (size_t)length;
    while (have < total) {
        ssize_t got = recv(link->fd, link->buffer + have, total - have, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        have += (size_t)got;
    }
    return length;
closed:
    close(link->fd);
    link->fd = -1;
    return retry ? get_once(link, 0) : -1;
}

int floors_http_main(int argc, char **argv) {
    http_link link = {.fd = -1};
    link.host = floors_option(argc, argv, "host");
    link.port = floors_option(argc, argv, "port");
    const char *path = floors_option(argc, argv, "path");
    /* The stored object may be larger than the value (an envelope): --size is a capacity hint, and every
     * response must be as long as the first. */
    long size = floors_long_option(argc, argv, "size", 4096);
    if (!link.host || !link.port || !path) floors_fail("http needs --host, --port and --path");
    char request[4096];
    int length = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", path, link.host, link.port);
    if (length <= 0 || length >= (int)sizeof request) floors_fail("the path is too long");
    link.request = request;
    link.request_length = (size_t)length;
    link.capacity = (size_t)size + (size_t)size / 8 + 65536;
    link.buffer = malloc(link.capacity);
    size = get_once(&link, 1);
    if (size < 0) floors_fail("GET %s failed", path);
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
            long got = get_once(&link, 1);
            last = (double)(floors_now() - start);
            if (got != size) failures++;
            floors_sample(&samples, last);
        }
        if (floors_flush_samples(&samples, samples_path) != 0) floors_say("ERROR cannot write samples");
        else floors_say("OK %.0f %ld", last, failures);
    }
    return 0;
}
