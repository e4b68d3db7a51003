// curl.c: implementations of the libcurl shims in include/CNetworkCurl.h. libcurl's ABI is stable: the
// option numbers and codes below are its (curl/curl.h), declared here so no -dev package is needed.
#include "CNetworkCurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef void CURL;
struct curl_slist;

// Options (CURLOPTTYPE_LONG + n, OBJECTPOINT 10000 + n, FUNCTIONPOINT 20000 + n, OFF_T 30000 + n).
enum {
    OPT_WRITEDATA = 10001,
    OPT_URL = 10002,
    OPT_READDATA = 10009,
    OPT_WRITEFUNCTION = 20011,
    OPT_READFUNCTION = 20012,
    OPT_HTTPHEADER = 10023,
    OPT_HEADERDATA = 10029,
    OPT_CUSTOMREQUEST = 10036,
    OPT_NOPROGRESS = 43,
    OPT_NOBODY = 44,
    OPT_UPLOAD = 46,
    OPT_FOLLOWLOCATION = 52,
    OPT_XFERINFODATA = 10057,
    OPT_HEADERFUNCTION = 20079,
    OPT_NOSIGNAL = 99,
    OPT_TCP_NODELAY = 121,
    OPT_INFILESIZE_LARGE = 30115,
    OPT_TIMEOUT_MS = 155,
    OPT_CONNECTTIMEOUT_MS = 156,
    OPT_PROTOCOLS = 181,
    OPT_REDIR_PROTOCOLS = 182,
    OPT_XFERINFOFUNCTION = 20219,
};
enum { PROTO_HTTPS = 1 << 1, GLOBAL_DEFAULT = 3, CODE_FAILED_INIT = 2, CODE_OUT_OF_MEMORY = 27 };

const size_t YSH_CURL_READ_ABORT = 0x10000000;

static struct {
    int (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    int (*easy_setopt)(CURL *, int, ...);
    int (*easy_perform)(CURL *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} api;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_result = -1;  // 0 once loaded (never unloaded); written under load_lock before any handle

// Loads `name` into `api`; 0, or -1 with the reason in `message`. Called under load_lock.
static int load(const char *name, char *message, size_t capacity) {
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *text = dlerror();
        snprintf(message, capacity, "%s", text ? text : "dlopen failed");
        return -1;
    }
#define SYMBOL(field, symbol)                                                                              \
    do {                                                                                                   \
        *(void **)&api.field = dlsym(library, symbol);                                                     \
        if (api.field == NULL) {                                                                           \
            snprintf(message, capacity, "%s has no %s", name, symbol);                                     \
            dlclose(library);                                                                              \
            return -1;                                                                                     \
        }                                                                                                  \
    } while (0)
    SYMBOL(global_init, "curl_global_init");
    SYMBOL(easy_init, "curl_easy_init");
    SYMBOL(easy_cleanup, "curl_easy_cleanup");
    SYMBOL(easy_reset, "curl_easy_reset");
    SYMBOL(easy_setopt, "curl_easy_setopt");
    SYMBOL(easy_perform, "curl_easy_perform");
    SYMBOL(slist_append, "curl_slist_append");
    SYMBOL(slist_free_all, "curl_slist_free_all");
#undef SYMBOL
    if (api.global_init(GLOBAL_DEFAULT) != 0) {
        snprintf(message, capacity, "curl_global_init failed");
        dlclose(library);
        return -1;
    }
    return 0;
}

int ysh_curl_load(const char *library, char *message, size_t capacity) {
    char scratch[256];
    if (message == NULL || capacity == 0) message = scratch, capacity = sizeof scratch;
    pthread_mutex_lock(&load_lock);
    // A failure is not remembered: another name may be tried (tests), and a library installed later is found.
    if (load_result != 0) load_result = load(library, message, capacity);
    int result = load_result;
    pthread_mutex_unlock(&load_lock);
    return result;
}

int ysh_curl_probe(const char *library, char *message, size_t capacity) {
    void *handle = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
    if (handle == NULL) {
        const char *text = dlerror();
        if (message != NULL && capacity > 0) snprintf(message, capacity, "%s", text ? text : "dlopen failed");
        return -1;
    }
    dlclose(handle);
    return 0;
}

ysh_curl_handle *ysh_curl_open(void) {
    if (load_result != 0) return NULL;
    return (ysh_curl_handle *)api.easy_init();
}

void ysh_curl_close(ysh_curl_handle *handle) {
    if (handle != NULL && load_result == 0) api.easy_cleanup((CURL *)handle);
}

static size_t body_callback(char *bytes, size_t size, size_t count, void *request) {
    const ysh_curl_request *r = request;
    return r->body(r->context, bytes, size * count);
}

static size_t header_callback(char *bytes, size_t size, size_t count, void *request) {
    const ysh_curl_request *r = request;
    return r->header(r->context, bytes, size * count);
}

static size_t send_callback(char *buffer, size_t size, size_t count, void *request) {
    const ysh_curl_request *r = request;
    return r->send(r->context, buffer, size * count);
}

static int progress_callback(void *request, int64_t a, int64_t b, int64_t c, int64_t d) {
    (void)a, (void)b, (void)c, (void)d;
    const ysh_curl_request *r = request;
    return r->progress(r->context);
}

int ysh_curl_perform(ysh_curl_handle *handle, const ysh_curl_request *request) {
    if (handle == NULL || load_result != 0) return CODE_FAILED_INIT;
    CURL *curl = (CURL *)handle;
    api.easy_reset(curl);  // options back to defaults; the connection cache stays
    struct curl_slist *headers = NULL;
    for (int index = 0; index < request->header_count; index++) {
        struct curl_slist *next = api.slist_append(headers, request->headers[index]);
        if (next == NULL) {
            api.slist_free_all(headers);
            return CODE_OUT_OF_MEMORY;
        }
        headers = next;
    }
    // An empty Expect: no 100-continue round trip before a body.
    struct curl_slist *next = api.slist_append(headers, "Expect:");
    if (next == NULL) {
        api.slist_free_all(headers);
        return CODE_OUT_OF_MEMORY;
    }
    headers = next;
    api.easy_setopt(curl, OPT_URL, request->url);
    api.easy_setopt(curl, OPT_PROTOCOLS, (long)PROTO_HTTPS);
    api.easy_setopt(curl, OPT_REDIR_PROTOCOLS, (long)PROTO_HTTPS);
    api.easy_setopt(curl, OPT_FOLLOWLOCATION, 0L);
    api.easy_setopt(curl, OPT_NOSIGNAL, 1L);
    api.easy_setopt(curl, OPT_TCP_NODELAY, 1L);
    api.easy_setopt(curl, OPT_HTTPHEADER, headers);
    api.easy_setopt(curl, OPT_CONNECTTIMEOUT_MS, request->connect_timeout_ms);
    api.easy_setopt(curl, OPT_TIMEOUT_MS, request->timeout_ms);
    api.easy_setopt(curl, OPT_HEADERFUNCTION, header_callback);
    api.easy_setopt(curl, OPT_HEADERDATA, (void *)request);
    api.easy_setopt(curl, OPT_WRITEFUNCTION, body_callback);
    api.easy_setopt(curl, OPT_WRITEDATA, (void *)request);
    api.easy_setopt(curl, OPT_XFERINFOFUNCTION, progress_callback);
    api.easy_setopt(curl, OPT_XFERINFODATA, (void *)request);
    api.easy_setopt(curl, OPT_NOPROGRESS, 0L);
    if (strcmp(request->method, "HEAD") == 0) {
        api.easy_setopt(curl, OPT_NOBODY, 1L);
    } else if (strcmp(request->method, "PUT") == 0) {
        api.easy_setopt(curl, OPT_UPLOAD, 1L);
        api.easy_setopt(curl, OPT_READFUNCTION, send_callback);
        api.easy_setopt(curl, OPT_READDATA, (void *)request);
        api.easy_setopt(curl, OPT_INFILESIZE_LARGE, (int64_t)request->upload_size);
    } else if (strcmp(request->method, "GET") != 0) {
        api.easy_setopt(curl, OPT_CUSTOMREQUEST, request->method);
    }
    int code = api.easy_perform(curl);
    api.easy_reset(curl);  // nothing points at the request or the header list any more
    api.slist_free_all(headers);
    return code;
}

