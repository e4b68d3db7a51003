/* The memory hit's floor: a pthread_mutex-protected open-addressing hash table from a key (namespace and
 * identity, as CacheKey has) to a value, looked up under the lock, plus one atomic load (acquire) of the
 * entry's state word, as a cache shared between threads must at least do. 512 keys in 1,024 slots; the
 * lookup hashes the key's bytes (FNV-1a 64), probes linearly and compares lengths and bytes. */
#include "floors.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    char *namespace_;
    size_t namespace_length;
    char *identity;
    size_t identity_length;
    uint64_t hash;
    unsigned char *value;
    size_t value_length;
    _Atomic uint64_t state;
    int used;
} memory_slot;

enum { slot_count = 1024, key_count = 512 };
static memory_slot slots[slot_count];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t hash_key(const char *namespace_, size_t namespace_length, const char *identity,
                         size_t identity_length) {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t index = 0; index < namespace_length; index++) hash = (hash ^ (unsigned char)namespace_[index]) * 0x100000001b3ull;
    hash = (hash ^ 0xff) * 0x100000001b3ull;
    for (size_t index = 0; index < identity_length; index++) hash = (hash ^ (unsigned char)identity[index]) * 0x100000001b3ull;
    return hash;
}

static void insert(const char *namespace_, const char *identity, size_t value_length) {
    size_t namespace_length = strlen(namespace_), identity_length = strlen(identity);
    uint64_t hash = hash_key(namespace_, namespace_length, identity, identity_length);
    size_t index = hash & (slot_count - 1);
    while (slots[index].used) index = (index + 1) & (slot_count - 1);
    memory_slot *slot = &slots[index];
    slot->namespace_ = strdup(namespace_);
    slot->namespace_length = namespace_length;
    slot->identity = strdup(identity);
    slot->identity_length = identity_length;
    slot->hash = hash;
    slot->value = calloc(1, value_length);
    slot->value_length = value_length;
    atomic_store(&slot->state, 1);
    slot->used = 1;
}

/* The lookup: the value, or NULL. __attribute__((noinline)) so that callgrind sees one call per lookup. */
__attribute__((noinline)) static const unsigned char *lookup(const char *namespace_, size_t namespace_length,
                                                             const char *identity, size_t identity_length,
                                                             size_t *length) {
    uint64_t hash = hash_key(namespace_, namespace_length, identity, identity_length);
    const unsigned char *found = NULL;
    pthread_mutex_lock(&table_lock);
    for (size_t index = hash & (slot_count - 1); slots[index].used; index = (index + 1) & (slot_count - 1)) {
        memory_slot *slot = &slots[index];
        if (slot->hash == hash && slot->namespace_length == namespace_length &&
            slot->identity_length == identity_length &&
            memcmp(slot->namespace_, namespace_, namespace_length) == 0 &&
            memcmp(slot->identity, identity, identity_length) == 0) {
            if (atomic_load_explicit(&slot->state, memory_order_acquire) != 0) {
                found = slot->value;
                *length = slot->value_length;
            }
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

int floors_memory_main(int argc, char **argv) {
    char identity[64];
    for (int key = 0; key < key_count - 1; key++) {
        snprintf(identity, sizeof identity, "k%d", key);
        insert("bench", identity, 64);
    }
    insert("bench", "memory", 4096);
    /* The key arrives as a caller's would: its own copy, not the table's. */
    char namespace_[] = "bench", wanted[] = "memory";
    size_t length = 0;
    if (strcmp(argv[1], "count-memory") == 0) {
        long count = floors_long_option(argc, argv, "count", 1000);
        uint64_t sum = 0;
        for (long index = 0; index < count; index++) {
            const unsigned char *value = lookup(namespace_, 5, wanted, 6, &length);
            sum += value ? value[0] + length : 0;
        }
        floors_sink = sum;
        return 0;
    }
    const char *samples_path = floors_option(argc, argv, "samples");
    floors_samples samples = {0};
    floors_say("READY");
    char line[256];
    while (floors_read_line(line, sizeof line)) {
        unsigned long count = 0;
        if (sscanf(line, "M %lu", &count) != 1) {
            floors_say("ERROR bad command '%s'", line);
            continue;
        }
        long misses = 0;
        double total = 0;
        for (unsigned long index = 0; index < count; index++) {
            uint64_t start = floors_now();
            const unsigned char *value = lookup(namespace_, 5, wanted, 6, &length);
            double elapsed = (double)(floors_now() - start);
            if (!value) misses++;
            else floors_sink = value[0];
            floors_sample(&samples, elapsed);
            total += elapsed;
        }
        if (floors_flush_samples(&samples, samples_path) != 0) floors_say("ERROR cannot write samples");
        else floors_say("OK %.0f %ld", total, misses);
    }
    return 0;
}
