// CNetworkSocket.h: the socket shims of the remote tier (Redis client). Same rules as CFileLock's shims:
// one call per shim, a failing call returns -1 and stores errno in `*err` right after the call, EINTR is
// retried here where a retry is safe (send, recv; never poll or connect, whose caller recomputes its
// deadline). Every socket is SOCK_CLOEXEC | SOCK_NONBLOCK; send always passes MSG_NOSIGNAL, so a peer
// that closed its end gives EPIPE, never SIGPIPE. No protocol logic lives here.
#ifndef YASHIMA_CNETWORK_SOCKET_H
#define YASHIMA_CNETWORK_SOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One resolved socket address (a copy of a `struct sockaddr_storage` prefix).
typedef struct ysh_socket_address {
    int family;         // AF_INET or AF_INET6
    uint32_t length;    // bytes of `bytes` in use
    uint8_t bytes[128]; // the sockaddr itself
} ysh_socket_address;

/// getaddrinfo(3) for a TCP stream to `host`:`port` (AF_UNSPEC, numeric port). Fills up to `capacity`
/// addresses in the resolver's order and returns how many; on failure returns -1 and stores the
/// getaddrinfo error code (EAI_*) in `*gai_err` and errno (for EAI_SYSTEM) in `*err`. Blocking: the
/// resolver's own timeouts apply (an IP literal never waits).
int ysh_socket_resolve(const char *host, int port, ysh_socket_address *out, int capacity, int *gai_err, int *err);
/// gai_strerror(3) of an EAI_* code (a static string).
const char *ysh_socket_resolve_error_text(int gai_err);
/// socket(2) with SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK in `family` (AF_INET, AF_INET6, AF_UNIX).
int ysh_socket_open(int family, int *err);
/// The AF_UNIX family constant.
extern const int ysh_AF_UNIX;
/// connect(2) to a resolved address. On a non-blocking socket -1 with EINPROGRESS (or EAGAIN for a
/// Unix socket whose backlog is full) means "in progress": poll for writability, then
/// ysh_socket_connect_result.
int ysh_socket_connect(int fd, const ysh_socket_address *address, int *err);
/// connect(2) to a Unix socket path; ENAMETOOLONG when the path does not fit sun_path.
int ysh_socket_connect_unix(int fd, const char *path, int *err);
/// getsockopt(SO_ERROR) after an in-progress connect became writable: 0 when connected, else -1 with the
/// connect's errno in `*err`.
int ysh_socket_connect_result(int fd, int *err);
/// TCP_NODELAY and SO_KEEPALIVE on a TCP socket (requests are small and latency-bound).
int ysh_socket_set_tcp_options(int fd, int *err);
/// poll(2) on one descriptor for reading (`for_write` 0) or writing (1), up to `timeout_ms` (-1: no
/// limit). Returns 1 when ready (also on POLLHUP/POLLERR: the next call reports it), 0 on timeout, -1 with
/// `*err` (EINTR is returned, not retried: the caller recomputes the time left).
int ysh_socket_poll(int fd, int for_write, int timeout_ms, int *err);
/// send(2) with MSG_NOSIGNAL; retries EINTR. Returns bytes sent (maybe fewer than `count`), or -1
/// (EAGAIN: poll for writing and call again).
ssize_t ysh_socket_send(int fd, const void *buffer, size_t count, int *err);
/// shutdown(2) SHUT_RDWR: wakes a thread blocked in poll or recv on `fd` (recv then returns 0) without
/// releasing the descriptor number, so it cannot be reused under that thread.
int ysh_socket_shutdown(int fd, int *err);
/// recv(2); retries EINTR. Returns bytes read, 0 at end of stream, or -1 (EAGAIN: poll and call again).
ssize_t ysh_socket_recv(int fd, void *buffer, size_t count, int *err);

#ifdef __cplusplus
}
#endif
#endif
