// socket.c: implementations of the socket shims in include/CNetworkSocket.h.
#include "CNetworkSocket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

const int ysh_AF_UNIX = AF_UNIX;

#define FAIL_WITH_ERRNO(value) do { if (err) *err = errno; return (value); } while (0)

int ysh_socket_resolve(const char *host, int port, ysh_socket_address *out, int capacity, int *gai_err, int *err) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo *list = NULL;
    int rc = getaddrinfo(host, service, &hints, &list);
    if (rc != 0) {
        if (gai_err) *gai_err = rc;
        if (err) *err = errno;
        return -1;
    }
    int count = 0;
    for (struct addrinfo *item = list; item != NULL && count < capacity; item = item->ai_next) {
        if (item->ai_addrlen > sizeof out[count].bytes) continue;
        if (item->ai_family != AF_INET && item->ai_family != AF_INET6) continue;
        out[count].family = item->ai_family;
        out[count].length = (uint32_t)item->ai_addrlen;
        memcpy(out[count].bytes, item->ai_addr, item->ai_addrlen);
        count++;
    }
    freeaddrinfo(list);
    return count;
}

const char *ysh_socket_resolve_error_text(int gai_err) { return gai_strerror(gai_err); }

int ysh_socket_open(int family, int *err) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1) FAIL_WITH_ERRNO(-1);
    return fd;
}

int ysh_socket_connect(int fd, const ysh_socket_address *address, int *err) {
    if (connect(fd, (const struct sockaddr *)address->bytes, (socklen_t)address->length) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_socket_connect_unix(int fd, const char *path, int *err) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    size_t length = strlen(path);
    if (length == 0 || length >= sizeof address.sun_path) {
        if (err) *err = ENAMETOOLONG;
        return -1;
    }
    memcpy(address.sun_path, path, length + 1);
    if (connect(fd, (const struct sockaddr *)&address, (socklen_t)sizeof address) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_socket_connect_result(int fd, int *err) {
    int value = 0;
    socklen_t length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == -1) FAIL_WITH_ERRNO(-1);
    if (value != 0) {
        if (err) *err = value;
        return -1;
    }
    return 0;
}

int ysh_socket_set_tcp_options(int fd, int *err) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == -1) FAIL_WITH_ERRNO(-1);
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}

int ysh_socket_poll(int fd, int for_write, int timeout_ms, int *err) {
    struct pollfd entry;
    entry.fd = fd;
    entry.events = for_write ? POLLOUT : POLLIN;
    entry.revents = 0;
    int rc = poll(&entry, 1, timeout_ms);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return rc > 0 ? 1 : 0;
}

ssize_t ysh_socket_send(int fd, const void *buffer, size_t count, int *err) {
    ssize_t rc;
    do { rc = send(fd, buffer, count, MSG_NOSIGNAL); } while (rc == -1 && errno == EINTR);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return rc;
}

ssize_t ysh_socket_recv(int fd, void *buffer, size_t count, int *err) {
    ssize_t rc;
    do { rc = recv(fd, buffer, count, 0); } while (rc == -1 && errno == EINTR);
    if (rc == -1) FAIL_WITH_ERRNO(-1);
    return rc;
}

int ysh_socket_shutdown(int fd, int *err) {
    if (shutdown(fd, SHUT_RDWR) == -1) FAIL_WITH_ERRNO(-1);
    return 0;
}
