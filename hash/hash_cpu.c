/* hash/hash_cpu.c - the CPU coordinate hash table: exact packing of (b, z, y, x)
 * into at most 63 bits, open addressing with linear probing from the splitmix64 finalizer,
 * power-of-two capacity at load factor at most 0.5, bounded probes, growth by doubling.
 *
 * Invariant: every stored key sits fewer than max_probe slots past its home slot, so a lookup
 * that walks max_probe slots without meeting the key or an empty slot knows the key is absent
 * (as long as max_probe was not lowered after the inserts). Such a walk still reports
 * VC_HASH_PROBE_LIMIT, as hash.h documents. The reserved key VC_HASH_EMPTY can never be stored:
 * vc_hash_insert refuses it with VC_HASH_NOT_FOUND and vc_hash_find never finds it. */
#include "hash.h"
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

/* Doublings one vc_hash_grow call tries before giving up, and grows one insert_grow tries. */
#define VC_HASH_GROW_TRIES 6
#define VC_HASH_INSERT_GROW_TRIES 6

/* Bits needed to hold the values 0 .. limit-1 (0 bits for limit 1). */
static int32_t bits_for_limit(int32_t limit)
{
    int32_t b = 0;
    while (b < 31 && ((int64_t)1 << b) < (int64_t)limit) b++;
    return b;
}

int vc_keypack_init(vc_keypack *kp, int32_t batch_size, const int32_t shape[3])
{
    if (!kp || !shape) return -1;
    int32_t limit[4] = {batch_size, shape[0], shape[1], shape[2]};
    int32_t bits[4], shift[4];
    int32_t total = 0;
    /* x lowest, then y, z, batch highest: packed keys sort as rows sort by (b, z, y, x). */
    for (int i = 3; i >= 0; i--) {
        if (limit[i] < 1) return -1;
        bits[i] = bits_for_limit(limit[i]);
        shift[i] = total;
        total += bits[i];
    }
    if (total > 63) return -1;
    for (int i = 0; i < 4; i++) {
        kp->bits[i] = bits[i];
        kp->shift[i] = shift[i];
        kp->limit[i] = limit[i];
    }
    return 0;
}

int64_t vc_hash_capacity_for(int64_t expected)
{
    if (expected < 0 || expected > INT64_MAX / 2) return 0;
    int64_t target = expected * 2 < 16 ? 16 : expected * 2;
    int64_t cap = 16;
    while (cap < target) {
        if (cap > INT64_MAX / 2) return 0;
        cap *= 2;
    }
    return cap;
}

/* Allocates an empty table of exactly `capacity` slots (a power of two >= 16). */
static vc_hash_result table_alloc(vc_hash *h, int64_t capacity, int32_t max_probe,
                                  const vc_allocator *a)
{
    memset(h, 0, sizeof *h);
    h->alloc = a;
    if (capacity < 16 || (capacity & (capacity - 1)) != 0) return VC_HASH_NOMEM;
    if ((uint64_t)capacity > SIZE_MAX / sizeof(uint64_t)) return VC_HASH_NOMEM;
    uint64_t *keys = vc_host_alloc_n(a, (size_t)capacity, sizeof(uint64_t));
    int32_t *vals = keys ? vc_host_alloc_n(a, (size_t)capacity, sizeof(int32_t)) : NULL;
    if (!keys || !vals) {
        vc_host_free(a, keys);
        return VC_HASH_NOMEM;
    }
    memset(keys, 0xff, (size_t)capacity * sizeof(uint64_t)); /* every slot VC_HASH_EMPTY */
    memset(vals, 0, (size_t)capacity * sizeof(int32_t));
    h->keys = keys;
    h->vals = vals;
    h->capacity = capacity;
    h->count = 0;
    h->max_probe = max_probe;
    return VC_HASH_INSERTED;
}

vc_hash_result vc_hash_init(vc_hash *h, int64_t expected, const vc_allocator *alloc)
{
    if (!h) return VC_HASH_NOMEM;
    int64_t cap = vc_hash_capacity_for(expected);
    if (cap == 0) {
        memset(h, 0, sizeof *h);
        return VC_HASH_NOMEM;
    }
    return table_alloc(h, cap, VC_HASH_DEFAULT_MAX_PROBE, alloc);
}

void vc_hash_free(vc_hash *h)
{
    if (!h) return;
    vc_host_free(h->alloc, h->keys);
    vc_host_free(h->alloc, h->vals);
    memset(h, 0, sizeof *h);
}

/* Walks the probe sequence of `key`. Returns the slot holding the key (*found = 1) or the first
 * empty slot on the way (*found = 0), or -1 when the probe bound ran out first. */
static int64_t probe(const vc_hash *h, uint64_t key, int *found)
{
    uint64_t mask = (uint64_t)h->capacity - 1u;
    uint64_t i = vc_hash_mix(key) & mask;
    int64_t limit = h->max_probe < 1 ? 1 : h->max_probe;
    if (limit > h->capacity) limit = h->capacity;
    for (int64_t n = 0; n < limit; n++) {
        uint64_t k = h->keys[i];
        if (k == key) {
            *found = 1;
            return (int64_t)i;
        }
        if (k == VC_HASH_EMPTY) {
            *found = 0;
            return (int64_t)i;
        }
        i = (i + 1u) & mask;
    }
    return -1;
}

vc_hash_result vc_hash_insert(vc_hash *h, uint64_t key, int32_t val, int32_t *existing)
{
    if (!h || !h->keys || h->capacity < 1) return VC_HASH_NOMEM;
    if (key == VC_HASH_EMPTY) return VC_HASH_NOT_FOUND;
    int found = 0;
    int64_t s = probe(h, key, &found);
    if (s < 0) return VC_HASH_PROBE_LIMIT;
    if (found) {
        if (existing) *existing = h->vals[s];
        return VC_HASH_EXISTS;
    }
    /* Refuse rather than exceed load factor 0.5: the caller grows and retries. */
    if ((h->count + 1) > h->capacity / 2) return VC_HASH_PROBE_LIMIT;
    h->keys[s] = key;
    h->vals[s] = val;
    h->count++;
    return VC_HASH_INSERTED;
}

vc_hash_result vc_hash_find(const vc_hash *h, uint64_t key, int32_t *val)
{
    if (!h || !h->keys || h->capacity < 1 || key == VC_HASH_EMPTY) return VC_HASH_NOT_FOUND;
    int found = 0;
    int64_t s = probe(h, key, &found);
    if (s < 0) return VC_HASH_PROBE_LIMIT;
    if (!found) return VC_HASH_NOT_FOUND;
    if (val) *val = h->vals[s];
    return VC_HASH_FOUND;
}

vc_hash_result vc_hash_grow(vc_hash *h)
{
    if (!h || !h->keys) return VC_HASH_NOMEM;
    int64_t cap = h->capacity;
    for (int attempt = 0; attempt < VC_HASH_GROW_TRIES; attempt++) {
        if (cap > INT64_MAX / 2) return VC_HASH_NOMEM;
        cap *= 2;
        vc_hash t;
        if (table_alloc(&t, cap, h->max_probe, h->alloc) != VC_HASH_INSERTED) return VC_HASH_NOMEM;
        int ok = 1;
        /* Reinsert in slot order: deterministic. */
        for (int64_t i = 0; i < h->capacity && ok; i++) {
            if (h->keys[i] == VC_HASH_EMPTY) continue;
            if (vc_hash_insert(&t, h->keys[i], h->vals[i], NULL) != VC_HASH_INSERTED) ok = 0;
        }
        if (ok) {
            vc_host_free(h->alloc, h->keys);
            vc_host_free(h->alloc, h->vals);
            *h = t;
            return VC_HASH_INSERTED;
        }
        vc_hash_free(&t); /* a probe ran too long at this size: try the next doubling */
    }
    return VC_HASH_PROBE_LIMIT;
}

vc_hash_result vc_hash_insert_grow(vc_hash *h, uint64_t key, int32_t val, int32_t *existing)
{
    for (int attempt = 0; attempt <= VC_HASH_INSERT_GROW_TRIES; attempt++) {
        vc_hash_result r = vc_hash_insert(h, key, val, existing);
        if (r != VC_HASH_PROBE_LIMIT || attempt == VC_HASH_INSERT_GROW_TRIES) return r;
        vc_hash_result g = vc_hash_grow(h);
        if (g != VC_HASH_INSERTED) return g;
    }
    return VC_HASH_PROBE_LIMIT;
}

void vc_hash_keys(const vc_hash *h, uint64_t *out)
{
    if (!h || !h->keys || !out) return;
    int64_t n = 0;
    for (int64_t i = 0; i < h->capacity; i++)
        if (h->keys[i] != VC_HASH_EMPTY) out[n++] = h->keys[i];
}
