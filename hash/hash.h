/* hash/hash.h - the coordinate hash table, CPU side. The GPU table (hash/hash.cu)
 * has the same semantics: exact keys, same capacity rule, same probe bound, same answers.
 *
 * Keys are (batch, z, y, x) packed exactly into at most 63 bits with a per-coordinate-set layout
 * (vc_keypack): x in the low bits, then y, z, batch. Sorting packed keys therefore sorts rows by
 * (batch, z, y, x). The empty slot is VC_HASH_EMPTY (all ones), which no packed key can equal.
 * Open addressing, linear probing, splitmix64 finalizer, power-of-two capacity with load factor
 * at most 0.5, and a probe bound: an insert or lookup that walks more than max_probe slots
 * reports VC_HASH_PROBE_LIMIT instead of looping; the caller grows and retries. */
#ifndef VC_HASH_H
#define VC_HASH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VC_HASH_EMPTY UINT64_MAX
#define VC_HASH_DEFAULT_MAX_PROBE 256

typedef struct vc_keypack {
    int32_t bits[4];   /* bits for batch, z, y, x                                             */
    int32_t shift[4];  /* shift of batch, z, y, x inside the key                               */
    int32_t limit[4];  /* batch_size, shape z, y, x: valid values are [0, limit)               */
} vc_keypack;

/* Sets up the packing for a coordinate set; returns 0, or -1 if it needs more than 63 bits or a
 * limit is < 1. */
int vc_keypack_init(vc_keypack *kp, int32_t batch_size, const int32_t shape[3]);

/* 1 if (b,z,y,x) lies inside the limits. */
static inline int vc_key_in_range(const vc_keypack *kp, int32_t b, int32_t z, int32_t y, int32_t x)
{
    return b >= 0 && b < kp->limit[0] && z >= 0 && z < kp->limit[1] && y >= 0 &&
           y < kp->limit[2] && x >= 0 && x < kp->limit[3];
}

/* Packs an in-range coordinate (check with vc_key_in_range first). */
static inline uint64_t vc_key_pack(const vc_keypack *kp, int32_t b, int32_t z, int32_t y, int32_t x)
{
    return ((uint64_t)(uint32_t)b << kp->shift[0]) | ((uint64_t)(uint32_t)z << kp->shift[1]) |
           ((uint64_t)(uint32_t)y << kp->shift[2]) | ((uint64_t)(uint32_t)x << kp->shift[3]);
}

static inline void vc_key_unpack(const vc_keypack *kp, uint64_t key, int32_t out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = (int32_t)((key >> kp->shift[i]) & ((((uint64_t)1) << kp->bits[i]) - 1u));
}

/* splitmix64 finalizer. */
static inline uint64_t vc_hash_mix(uint64_t k)
{
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    k ^= k >> 31;
    return k;
}

/* Smallest power of two >= max(16, 2 * expected): load factor at most 0.5. 0 on overflow. */
int64_t vc_hash_capacity_for(int64_t expected);

typedef enum vc_hash_result {
    VC_HASH_INSERTED = 0,   /* new key stored                                                  */
    VC_HASH_EXISTS = 1,     /* key already present; *existing holds its value                  */
    VC_HASH_FOUND = 2,
    VC_HASH_NOT_FOUND = 3,
    VC_HASH_PROBE_LIMIT = 4,/* walked max_probe slots: grow and retry                          */
    VC_HASH_NOMEM = 5
} vc_hash_result;

typedef struct vc_hash {
    uint64_t *keys;    /* [capacity]                                                          */
    int32_t *vals;     /* [capacity]                                                          */
    int64_t capacity;  /* power of two                                                         */
    int64_t count;     /* keys stored                                                          */
    int32_t max_probe;
    const struct vc_allocator *alloc; /* where keys/vals come from (core/alloc.h); NULL: malloc */
} vc_hash;

/* Allocates an empty table sized for `expected` keys through `alloc` (NULL: malloc), which the
 * table keeps for its growth and free. Returns VC_HASH_INSERTED (0) on success or
 * VC_HASH_NOMEM. */
vc_hash_result vc_hash_init(vc_hash *h, int64_t expected, const struct vc_allocator *alloc);
void vc_hash_free(vc_hash *h);
/* Inserts key -> val unless present. Refuses (VC_HASH_PROBE_LIMIT) rather than exceed load 0.5. */
vc_hash_result vc_hash_insert(vc_hash *h, uint64_t key, int32_t val, int32_t *existing);
/* Looks a key up: VC_HASH_FOUND with *val, or VC_HASH_NOT_FOUND (or VC_HASH_PROBE_LIMIT). */
vc_hash_result vc_hash_find(const vc_hash *h, uint64_t key, int32_t *val);
/* Doubles the capacity and reinserts every key. */
vc_hash_result vc_hash_grow(vc_hash *h);
/* Inserts, growing as needed (at most a few doublings); the convenient entry point. */
vc_hash_result vc_hash_insert_grow(vc_hash *h, uint64_t key, int32_t val, int32_t *existing);
/* Copies the stored keys (any order) to out[count]. */
void vc_hash_keys(const vc_hash *h, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif
