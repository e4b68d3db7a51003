// sigbus_guard.c: the SIGBUS guard for MAP_SHARED mappings of the state file (I14).
//
// A MAP_SHARED mapping of a file that someone truncates faults with SIGBUS on every page past the new end
// of file; the cache maps its `state` file that way, and a damaged directory (a stray writer, a bug, a
// disk error) must not kill every process using it. Guarded ranges live in a fixed table registered
// lock-free (a compare-and-swap claims a slot). The handler, installed once, looks the faulting address
// up: inside a guarded range it replaces the whole range with anonymous zero pages (MAP_FIXED), counts a
// trip and returns, so the faulting access runs again and reads zeros; the cache reads a zero magic word
// as "this state file is dead" and switches to a good one. Any other SIGBUS goes to the handler that was
// installed before ours, or gets the default action (the process dies of SIGBUS, as without the guard).
// mmap(2) is not on POSIX's async-signal-safe list, but glibc's mmap is the bare system call (it only sets
// errno, which the handler saves and restores).
#define _GNU_SOURCE 1
#include "CFileLock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD_SLOTS 1024

static struct {
    _Atomic(uintptr_t) start;
    _Atomic(size_t) length;
} guard_slots[GUARD_SLOTS];
static struct sigaction guard_previous;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static int guard_install_errno = 0;
static _Atomic(uint64_t) guard_trips = 0;

static void guard_default_action(int signal_number, const siginfo_t *info) {
    // Previously ignored and sent by someone (kill, sigqueue): keep ignoring it. A fault cannot be
    // ignored (the kernel kills the process for it), so it gets the default action like everything else.
    if (!(guard_previous.sa_flags & SA_SIGINFO) && guard_previous.sa_handler == SIG_IGN && info->si_code <= 0) {
        return;
    }
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal_number, &fallback, NULL);
    // Blocked while this handler runs: delivered with the default action as soon as it returns (a fault
    // would also fault again on return).
    raise(signal_number);
}

static void guard_handler(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    uintptr_t address = (uintptr_t)info->si_addr;
    if (info->si_code > 0) {  // a fault (BUS_ADRERR and the like), not a signal someone sent
        for (int i = 0; i < GUARD_SLOTS; i++) {
            uintptr_t start = atomic_load(&guard_slots[i].start);
            size_t length = atomic_load(&guard_slots[i].length);
            if (start == 0 || length == 0 || address < start || address - start >= length) continue;
            void *zeros = mmap((void *)start, length, PROT_READ | PROT_WRITE,
                               MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (zeros != MAP_FAILED) {
                atomic_fetch_add(&guard_trips, 1);
                errno = saved_errno;
                return;  // the access runs again, on zeros
            }
            break;  // cannot replace it: die as an unguarded fault would
        }
    }
    if (guard_previous.sa_flags & SA_SIGINFO) {
        if (guard_previous.sa_sigaction != NULL) {
            guard_previous.sa_sigaction(signal_number, info, context);
            errno = saved_errno;
            return;
        }
    } else if (guard_previous.sa_handler != SIG_DFL && guard_previous.sa_handler != SIG_IGN) {
        guard_previous.sa_handler(signal_number);
        errno = saved_errno;
        return;
    }
    guard_default_action(signal_number, info);
    errno = saved_errno;
}

static void guard_install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = guard_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &guard_previous) != 0) guard_install_errno = errno;
}

int ysh_sigbus_guard_register(void *address, size_t length, int *err) {
    pthread_once(&guard_once, guard_install);
    if (guard_install_errno != 0) {
        if (err) *err = guard_install_errno;
        return -1;
    }
    if (address == NULL || length == 0) {
        if (err) *err = EINVAL;
        return -1;
    }
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t expected = 0;
        if (atomic_compare_exchange_strong(&guard_slots[i].start, &expected, (uintptr_t)address)) {
            atomic_store(&guard_slots[i].length, length);
            return 0;
        }
    }
    if (err) *err = ENOMEM;
    return -1;
}

void ysh_sigbus_guard_unregister(void *address) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
        if (atomic_load(&guard_slots[i].start) == (uintptr_t)address) {
            atomic_store(&guard_slots[i].length, 0);
            atomic_store(&guard_slots[i].start, 0);
            return;
        }
    }
}

uint64_t ysh_sigbus_guard_trips(void) { return atomic_load(&guard_trips); }
