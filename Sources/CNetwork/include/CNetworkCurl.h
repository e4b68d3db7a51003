// CNetworkCurl.h: the system's libcurl (Debian's libcurl4), loaded with dlopen at first use, for the HTTP
// remote's https:// transfers (plain http:// has its own client over CNetworkSocket.h). Nothing links
// libcurl: a process that never talks https never loads it. One easy handle per connection kept alive;
// the request, its callbacks and its limits in one struct, one perform call. No protocol logic lives here.
#ifndef YASHIMA_CNETWORK_CURL_H
#define YASHIMA_CNETWORK_CURL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Loads `library` (say "libcurl.so.4") and initialises it (curl_global_init), once per process: once
/// loaded, later calls return 0 at once. Returns 0, or -1 with the loader's message (dlerror) copied into
/// `message` (a failure is not remembered: a later call tries again).
int ysh_curl_load(const char *library, char *message, size_t capacity);

/// Whether `library` opens (dlopen, closed again at once), whatever is loaded already: 0, or -1 with the
/// loader's message copied into `message`, as `ysh_curl_load` would report it.
int ysh_curl_probe(const char *library, char *message, size_t capacity);

/// An easy handle (opaque): its connection cache keeps one connection alive between transfers.
typedef struct ysh_curl_handle ysh_curl_handle;

/// curl_easy_init; NULL when libcurl is not loaded or out of memory.
ysh_curl_handle *ysh_curl_open(void);
/// curl_easy_cleanup (closes its connection).
void ysh_curl_close(ysh_curl_handle *handle);

/// Receives response bytes (a header line, or body bytes): returns `count` to go on, anything else stops.
typedef size_t (*ysh_curl_receive_fn)(void *context, const char *bytes, size_t count);
/// Fills `buffer` with up to `capacity` request body bytes: the count, 0 at the end, or
/// YSH_CURL_READ_ABORT.
typedef size_t (*ysh_curl_send_fn)(void *context, char *buffer, size_t capacity);
/// Called while the transfer runs (often while bytes move; about once a second when idle): nonzero stops it.
typedef int (*ysh_curl_progress_fn)(void *context);

/// What a send callback returns to stop the transfer.
extern const size_t YSH_CURL_READ_ABORT;

/// One request.
typedef struct ysh_curl_request {
    const char *method;            // GET, HEAD, PUT, DELETE
    const char *url;               // https://host[:port]/path
    const char *const *headers;    // "Name: value" lines
    int header_count;
    int64_t upload_size;           // PUT: the body's length (sent with Content-Length); else -1
    long connect_timeout_ms;       // the most connecting (and the TLS handshake) may take
    long timeout_ms;               // the most the whole transfer may take
    void *context;                 // passed to every callback
    ysh_curl_receive_fn header;    // each response header line, status lines included
    ysh_curl_receive_fn body;      // response body bytes
    ysh_curl_send_fn send;         // the request body (PUT)
    ysh_curl_progress_fn progress; // deadlines and cancellation
} ysh_curl_request;

/// Resets `handle` (its connection stays), sets the request (no redirects, no signals, https only, no
/// `Expect: 100-continue`, no compression) and performs it. Returns the CURLcode (0 when a response
/// came, whatever its status).
int ysh_curl_perform(ysh_curl_handle *handle, const ysh_curl_request *request);


#ifdef __cplusplus
}
#endif
#endif
