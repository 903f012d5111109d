/* hash/hash_gpu.h - the coordinate hash table on the GPU, with the semantics of the
 * CPU table in hash.h: keys packed exactly by vc_keypack, int32 values, capacity
 * vc_hash_capacity_for(n) (a power of two, load factor at most 0.5), linear probing from
 * vc_hash_mix(key) & (capacity - 1), at most min(max_probe, capacity) slots walked.
 *
 * Slot layouts (a lookup touches one 32-byte sector per probe, not two):
 *  - packed, for tables created with key_bits <= 31 (every coordinate layout of up to 31 bits,
 *    which covers the usual grids: SECOND's 41 x 1600 x 1408 with 8 batch items is 31 bits):
 *    one uint64 per slot, key << 32 | (uint32)(value ^ 0x80000000). The value is biased so that
 *    an unsigned 64-bit atomicMin on a slot keeps the smallest signed value of its key;
 *  - wide, for any key of up to 63 bits: two uint64 per slot, {key, (uint32)(value ^
 *    0x80000000)}, 16-byte aligned.
 * An empty slot is all ones in both layouts (the key VC_HASH_EMPTY, which no packed key equals),
 * so clearing a table is a memset of 0xff.
 *
 * Inserts run one thread per key: a thread claims an empty slot with atomicCAS (on the whole
 * slot when packed, on the key word when wide), and every thread that meets its key already
 * stored keeps the smaller value with atomicMin, so the value of a key given several times is
 * the smallest one, whatever the thread order. A thread that walks past the probe bound sets a
 * device flag. vc_hash_gpu_insert reads the flag back (its one synchronisation point) and
 * rebuilds the table at double capacity, a bounded number of times, before giving up with
 * VC_HASH_GPU_PROBE_LIMIT. Lookups need no flag: every stored key sits fewer than max_probe
 * slots past its home, so a walk of max_probe slots that meets neither the key nor an empty slot
 * proves the key absent.
 *
 * The C API below carries no CUDA types but `struct CUstream_st *` (a cudaStream_t). Under nvcc
 * the header also gives device functions (pack, mix, insert, lookup) so that kernels elsewhere
 * can build and probe a table in place through the plain-data vc_hash_gpu_view. */
#ifndef VC_HASH_GPU_H
#define VC_HASH_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "hash.h" /* C declarations: keep them C-linked when included from CUDA sources */

struct CUstream_st;

/* Keys of at most this many bits fit the packed 8-byte slots. */
#define VC_HASH_GPU_PACKED_BITS 31

typedef enum vc_hash_gpu_status {
    VC_HASH_GPU_OK = 0,
    VC_HASH_GPU_NOMEM = 1,       /* a device allocation failed                                 */
    VC_HASH_GPU_PROBE_LIMIT = 2, /* keys could not be placed within the probe bound, even after
                                    the bounded number of doublings                          */
    VC_HASH_GPU_CUDA = 3,        /* another CUDA error: see vc_hash_gpu.cuda_error             */
    VC_HASH_GPU_BAD_ARG = 4      /* NULL table, negative count, NULL keys with n > 0, or a key
                                    wider than the packed layout of the table                 */
} vc_hash_gpu_status;

typedef struct vc_hash_gpu {
    uint64_t *slots;    /* device: [capacity] (packed) or [2 * capacity] (wide), all ones when
                           empty                                                               */
    int64_t capacity;   /* power of two >= 16                                                  */
    int64_t count;      /* keys stored; exact on the host after every vc_hash_gpu_insert       */
    int32_t max_probe;  /* VC_HASH_DEFAULT_MAX_PROBE                                           */
    int32_t packed;     /* 1: 8-byte slots (keys < 2^31); 0: 16-byte slots                     */
    int64_t *status;    /* device scratch [4] for the insert counters                          */
    int cuda_error;     /* the cudaError_t of the last call that returned VC_HASH_GPU_CUDA or
                           VC_HASH_GPU_NOMEM; 0 otherwise                                     */
} vc_hash_gpu;

typedef struct vc_hash_gpu_insert_info {
    int64_t inserted;        /* keys new to the table                                          */
    int64_t duplicates;      /* keys of the batch already present (earlier in the batch or
                                before the call); exact                                       */
    int64_t first_duplicate; /* with d_vals == NULL and a table empty before the call: the
                                smallest batch index i whose key occurs at an index < i (what a
                                sequential insert would stop at); -1 when there is none       */
    int32_t grows;           /* doublings the insert needed                                    */
} vc_hash_gpu_insert_info;

/* Allocates an empty wide table (any key of up to 63 bits) sized for `expected` keys
 * (stream-ordered allocation on `stream`). */
vc_hash_gpu_status vc_hash_gpu_create(vc_hash_gpu *h, int64_t expected,
                                      struct CUstream_st *stream);
/* The same for keys of at most `key_bits` bits: packed 8-byte slots when key_bits <= 31. */
vc_hash_gpu_status vc_hash_gpu_create_ex(vc_hash_gpu *h, int64_t expected, int32_t key_bits,
                                         struct CUstream_st *stream);
/* Frees the table (stream-ordered) and zeroes the struct; NULL and zeroed tables are fine. */
void vc_hash_gpu_destroy(vc_hash_gpu *h, struct CUstream_st *stream);
/* Inserts d_keys[n] (device) with values d_vals[n] (device), or with value i for key i when
 * d_vals is NULL. Keys equal to VC_HASH_EMPTY are skipped (neither inserted nor duplicates).
 * A key met again keeps the smallest value. Grows first if count + n would pass load 0.5.
 * Synchronises `stream` once per attempt to read the counters back; info may be NULL. */
vc_hash_gpu_status vc_hash_gpu_insert(vc_hash_gpu *h, const uint64_t *d_keys,
                                      const int32_t *d_vals, int64_t n,
                                      struct CUstream_st *stream, vc_hash_gpu_insert_info *info);
/* The insert without its read-back: queues the counter reset and the insert kernel, nothing
 * else (no growth, no synchronisation; usable under stream capture). count + n must stay within
 * load 0.5 (VC_HASH_GPU_BAD_ARG otherwise). vc_hash_gpu_insert_result must follow before the
 * next insert: it reads the counters back. */
vc_hash_gpu_status vc_hash_gpu_insert_async(vc_hash_gpu *h, const uint64_t *d_keys,
                                            const int32_t *d_vals, int64_t n,
                                            struct CUstream_st *stream);
/* Synchronises `stream`, reads the counters of the last vc_hash_gpu_insert_async, updates
 * h->count and fills info (may be NULL; grows = 0). VC_HASH_GPU_PROBE_LIMIT when a key could not
 * be placed (the table is then incomplete: rebuild it larger), VC_HASH_GPU_BAD_ARG when a key did
 * not fit the packed layout. */
vc_hash_gpu_status vc_hash_gpu_insert_result(vc_hash_gpu *h, struct CUstream_st *stream,
                                             vc_hash_gpu_insert_info *info);
/* d_out[i] = value of d_keys[i], or -1 when absent (device arrays). Asynchronous. */
vc_hash_gpu_status vc_hash_gpu_find(vc_hash_gpu *h, const uint64_t *d_keys, int64_t n,
                                    int32_t *d_out, struct CUstream_st *stream);
/* cudaGetErrorString of a cuda_error value. */
const char *vc_hash_gpu_error_string(int cuda_error);

/* What a kernel needs to probe a table: plain data, pass it by value. */
typedef struct vc_hash_gpu_view {
    uint64_t *slots;
    uint64_t mask;      /* capacity - 1                                                        */
    int32_t limit;      /* slots a walk may visit: min(max(max_probe, 1), capacity)            */
    int32_t packed;
} vc_hash_gpu_view;

/* The view of a table of `capacity` slots at `slots` (capacity a power of two). */
static inline vc_hash_gpu_view vc_hash_gpu_make_view(uint64_t *slots, int64_t capacity,
                                                     int32_t max_probe, int32_t packed)
{
    vc_hash_gpu_view v;
    int64_t limit = max_probe < 1 ? 1 : max_probe;
    if (limit > capacity) limit = capacity;
    v.slots = slots;
    v.mask = (uint64_t)capacity - 1u;
    v.limit = (int32_t)limit;
    v.packed = packed;
    return v;
}

static inline vc_hash_gpu_view vc_hash_gpu_get_view(const vc_hash_gpu *h)
{
    return vc_hash_gpu_make_view(h->slots, h->capacity, h->max_probe, h->packed);
}

/* Bytes of a table of `capacity` slots. */
static inline int64_t vc_hash_gpu_table_bytes(int64_t capacity, int32_t packed)
{
    return capacity * (packed ? 8 : 16);
}

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* Device twins of the inline helpers of hash.h (same arithmetic, bit for bit). */
static __device__ __forceinline__ uint64_t vc_hash_mix_d(uint64_t k)
{
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    k ^= k >> 31;
    return k;
}

static __device__ __forceinline__ bool vc_key_in_range_d(const vc_keypack &kp, int64_t b,
                                                         int64_t z, int64_t y, int64_t x)
{
    return b >= 0 && b < kp.limit[0] && z >= 0 && z < kp.limit[1] && y >= 0 &&
           y < kp.limit[2] && x >= 0 && x < kp.limit[3];
}

static __device__ __forceinline__ uint64_t vc_key_pack_d(const vc_keypack &kp, int32_t b,
                                                         int32_t z, int32_t y, int32_t x)
{
    return ((uint64_t)(uint32_t)b << kp.shift[0]) | ((uint64_t)(uint32_t)z << kp.shift[1]) |
           ((uint64_t)(uint32_t)y << kp.shift[2]) | ((uint64_t)(uint32_t)x << kp.shift[3]);
}

static __device__ __forceinline__ void vc_key_unpack_d(const vc_keypack &kp, uint64_t key,
                                                       int32_t out[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        out[i] = (int32_t)((key >> kp.shift[i]) & ((((uint64_t)1) << kp.bits[i]) - 1u));
}

/* Value bias: unsigned order of biased values is the signed order of the values. */
static __device__ __forceinline__ uint32_t vc_hash_bias_d(int32_t v)
{
    return (uint32_t)v ^ 0x80000000u;
}

static __device__ __forceinline__ int32_t vc_hash_unbias_d(uint64_t w)
{
    return (int32_t)((uint32_t)w ^ 0x80000000u);
}

/* Result of vc_hash_gpu_insert_d. */
enum { VC_HGI_CLAIMED = 0, VC_HGI_EXISTS = 1, VC_HGI_OVERFLOW = 2, VC_HGI_BAD_KEY = 3 };

/* Slots read together by an insert's walk (vc_hash_gpu_insert_from_d). */
#define VC_HASH_GPU_WALK_WINDOW 4

/* One slot of an insert's walk: cur is what the walk read from slot s (VC_HASH_EMPTY: claim it
 * with a compare-and-swap, which returns what the slot holds now). Returns VC_HGI_CLAIMED,
 * VC_HGI_EXISTS (the key is there; keep_min as in vc_hash_gpu_insert_from_d), or -1 where the
 * slot holds another key and the walk goes on. */
static __device__ __forceinline__ int vc_hash_gpu_try_slot_d(const vc_hash_gpu_view &h,
                                                             uint64_t s, unsigned long long cur,
                                                             uint64_t key, int32_t val,
                                                             bool keep_min, int64_t *dup_record)
{
    unsigned long long *slots = (unsigned long long *)h.slots;
    const unsigned long long empty = (unsigned long long)VC_HASH_EMPTY;
    if (h.packed) {
        const unsigned long long mine = ((unsigned long long)key << 32) | vc_hash_bias_d(val);
        if (cur == empty) {
            cur = atomicCAS(&slots[s], empty, mine);
            if (cur == empty) return VC_HGI_CLAIMED;
        }
        if ((cur >> 32) != key) return -1;
        if (keep_min) {
            int32_t old = vc_hash_unbias_d(atomicMin(&slots[s], mine));
            if (old != val) *dup_record = old > val ? old : val;
        }
        return VC_HGI_EXISTS;
    }
    bool claimed = false;
    if (cur == empty) {
        cur = atomicCAS(&slots[2 * s], empty, (unsigned long long)key);
        claimed = cur == empty;
        if (claimed) cur = key;
    }
    if (cur != key) return -1;
    // The claimer stores its value too: a duplicate may come between the claim and this store,
    // so both keep the minimum (an empty value is all ones, the largest).
    if (keep_min || claimed) {
        unsigned long long old =
            atomicMin(&slots[2 * s + 1], (unsigned long long)vc_hash_bias_d(val));
        if (keep_min && old != empty) {
            int32_t ov = vc_hash_unbias_d(old);
            if (ov != val) *dup_record = ov > val ? ov : val;
        }
    }
    return claimed ? VC_HGI_CLAIMED : VC_HGI_EXISTS;
}

/* Inserts key -> val, walking from slot s as the p0-th probe of the key (vc_hash_gpu_insert_d
 * below starts at the key's home, p0 = 0; a batch resumes a walk). Returns VC_HGI_CLAIMED (new
 * key), VC_HGI_EXISTS (key already there: the smaller value is kept) or VC_HGI_OVERFLOW (no slot
 * within the probe bound). The key must fit the table's layout (vc_hash_gpu_insert_d checks).
 * *dup_record gets, when the call met an earlier value of its key different from val, max(that
 * value, val); INT64_MAX otherwise (the minimum of all records of a batch inserted with val =
 * index is the first duplicate index, see hash.cu). keep_min = false skips the atomicMin of an
 * existing key (the value is then left as it is, and no record is made): for callers that only
 * need the set of keys. cas_first: the first slot is claimed with a compare-and-swap straight
 * away instead of after a read that finds it empty (one memory round trip fewer where keys are
 * mostly distinct; where many threads insert the same key, the read-first walk keeps them off
 * the atomic unit).
 * Past the first slot, the walk reads VC_HASH_GPU_WALK_WINDOW slots at a time (reading them for
 * every insert made a 1M-key insert 12% slower), then examines them in probe order: a
 * slot read as holding another key holds it for good (keys are never removed), and one read as
 * empty is claimed by a compare-and-swap, which tells what it holds now; so the slot taken is
 * still the first empty-or-matching one in probe order, at one memory round trip per window
 * instead of one per slot. W = 1 walks one slot at a time (fewer registers). */
template <int W = VC_HASH_GPU_WALK_WINDOW>
static __device__ __forceinline__ int vc_hash_gpu_insert_from_d(const vc_hash_gpu_view &h,
                                                                uint64_t key, int32_t val,
                                                                bool keep_min,
                                                                int64_t *dup_record,
                                                                bool cas_first, uint64_t s,
                                                                int32_t p0)
{
    const unsigned long long *slots = (const unsigned long long *)h.slots;
    const int ws = h.packed ? 1 : 2; // words a slot
    *dup_record = INT64_MAX;
    int32_t p = p0;
    if (p < h.limit && (cas_first || W > 1)) { // the first slot alone: most inserts end there
        const unsigned long long cur =
            cas_first ? (unsigned long long)VC_HASH_EMPTY : slots[ws * s];
        const int r = vc_hash_gpu_try_slot_d(h, s, cur, key, val, keep_min, dup_record);
        if (r >= 0) return r;
        s = (s + 1u) & h.mask;
        p++;
    }
    while (p < h.limit) {
        const int32_t n = h.limit - p < W ? h.limit - p : W;
        unsigned long long win[W];
#pragma unroll
        for (int j = 0; j < W; j++)
            win[j] = j < n ? slots[ws * ((s + j) & h.mask)] : (unsigned long long)VC_HASH_EMPTY;
#pragma unroll
        for (int j = 0; j < W; j++) {
            if (j >= n) break;
            const int r =
                vc_hash_gpu_try_slot_d(h, (s + j) & h.mask, win[j], key, val, keep_min, dup_record);
            if (r >= 0) return r;
        }
        s = (s + (uint64_t)n) & h.mask;
        p += n;
    }
    return VC_HGI_OVERFLOW;
}

/* False for a key that the table's layout cannot hold (VC_HASH_EMPTY, or wider than 31 bits in
 * packed slots). */
static __device__ __forceinline__ bool vc_hash_gpu_key_ok_d(const vc_hash_gpu_view &h,
                                                            uint64_t key)
{
    return h.packed ? !(key >> VC_HASH_GPU_PACKED_BITS) : key != VC_HASH_EMPTY;
}

/* Inserts key -> val from the key's home slot: vc_hash_gpu_insert_from_d<W>, or VC_HGI_BAD_KEY
 * (dup_record INT64_MAX) for a key the layout cannot hold. */
template <int W = VC_HASH_GPU_WALK_WINDOW>
static __device__ __forceinline__ int vc_hash_gpu_insert_d(const vc_hash_gpu_view &h,
                                                           uint64_t key, int32_t val,
                                                           bool keep_min, int64_t *dup_record,
                                                           bool cas_first = false)
{
    *dup_record = INT64_MAX;
    if (!vc_hash_gpu_key_ok_d(h, key)) return VC_HGI_BAD_KEY;
    return vc_hash_gpu_insert_from_d<W>(h, key, val, keep_min, dup_record, cas_first,
                                        vc_hash_mix_d(key) & h.mask, 0);
}

/* Inserts keys[0..N) -> val where act[j], with keep_min = false (res[j]: VC_HGI_*, set where
 * act[j]): the home slot of every key is read before any is examined, and the compare-and-swaps
 * of the empty ones are issued before any result is used, so N inserts wait on two memory
 * round trips, plus the walks of keys whose home slot holds another key, instead of 2N. */
template <int N>
static __device__ __forceinline__ void vc_hash_gpu_claim_batch(const vc_hash_gpu_view &h,
                                                               const uint64_t *keys,
                                                               const bool *act, int32_t val,
                                                               int *res)
{
    unsigned long long *slots = (unsigned long long *)h.slots;
    const int w = h.packed ? 1 : 2; // words a slot
    uint64_t s[N];
    unsigned long long cur[N];
    bool live[N], tried[N];
#pragma unroll
    for (int j = 0; j < N; j++) {
        res[j] = VC_HGI_BAD_KEY;
        live[j] = act[j] && vc_hash_gpu_key_ok_d(h, keys[j]);
        s[j] = vc_hash_mix_d(keys[j]) & h.mask;
        cur[j] = live[j] ? slots[w * s[j]] : 0ull;
    }
#pragma unroll
    for (int j = 0; j < N; j++) {
        const unsigned long long mine =
            h.packed ? ((unsigned long long)keys[j] << 32) | vc_hash_bias_d(val) : keys[j];
        tried[j] = live[j] && cur[j] == (unsigned long long)VC_HASH_EMPTY;
        if (tried[j])
            cur[j] = atomicCAS(&slots[w * s[j]], (unsigned long long)VC_HASH_EMPTY, mine);
    }
#pragma unroll
    for (int j = 0; j < N; j++) {
        if (!live[j]) continue;
        if (tried[j] && cur[j] == (unsigned long long)VC_HASH_EMPTY) {
            if (!h.packed) atomicMin(&slots[2 * s[j] + 1], (unsigned long long)vc_hash_bias_d(val));
            res[j] = VC_HGI_CLAIMED;
        } else if ((h.packed ? cur[j] >> 32 : cur[j]) == keys[j]) {
            res[j] = VC_HGI_EXISTS;
        } else {
            int64_t rec;
            // one slot at a time: the window took the new-output insert kernel from 64 to 72
            // registers (3 blocks an SM instead of 4) for walks that are rare here
            res[j] = vc_hash_gpu_insert_from_d<1>(h, keys[j], val, false, &rec, false,
                                                  (s[j] + 1u) & h.mask, 1);
        }
    }
}

/* The slot index holding `key`, or -1. */
static __device__ __forceinline__ int64_t vc_hash_gpu_slot_d(const vc_hash_gpu_view &h,
                                                             uint64_t key)
{
    if (!vc_hash_gpu_key_ok_d(h, key)) return -1;
    uint64_t s = vc_hash_mix_d(key) & h.mask;
    if (h.packed) {
        for (int32_t n = 0; n < h.limit; n++) {
            uint64_t w = h.slots[s];
            if ((w >> 32) == key) return (int64_t)s;
            if (w == VC_HASH_EMPTY) return -1;
            s = (s + 1u) & h.mask;
        }
        return -1;
    }
    for (int32_t n = 0; n < h.limit; n++) {
        uint64_t k = h.slots[2 * s];
        if (k == key) return (int64_t)s;
        if (k == VC_HASH_EMPTY) return -1;
        s = (s + 1u) & h.mask;
    }
    return -1;
}

/* Overwrites the value of the key stored in slot s (no other thread may touch the slot). */
static __device__ __forceinline__ void vc_hash_gpu_set_d(const vc_hash_gpu_view &h, int64_t s,
                                                         uint64_t key, int32_t val)
{
    if (h.packed)
        h.slots[s] = (key << 32) | vc_hash_bias_d(val);
    else
        h.slots[2 * s + 1] = vc_hash_bias_d(val);
}

/* The values stored for keys[0..N) where act[j] (out[j] = -1 where absent or not act): the
 * first probe of every key is loaded before any is examined, so N lookups wait on one memory
 * round trip (plus one per further probe) instead of N. */
template <int N>
static __device__ __forceinline__ void vc_hash_gpu_lookup_batch(const vc_hash_gpu_view &h,
                                                                const uint64_t *keys,
                                                                const bool *act, int32_t *out)
{
    uint64_t s[N];
    bool live[N];
#pragma unroll
    for (int j = 0; j < N; j++) {
        out[j] = -1;
        live[j] = act[j] && vc_hash_gpu_key_ok_d(h, keys[j]);
        s[j] = vc_hash_mix_d(keys[j]) & h.mask;
    }
    if (h.packed) {
        uint64_t w[N];
#pragma unroll
        for (int j = 0; j < N; j++) w[j] = live[j] ? h.slots[s[j]] : VC_HASH_EMPTY;
#pragma unroll
        for (int j = 0; j < N; j++) {
            if (!live[j]) continue;
            for (int32_t p = 1;; p++) {
                if ((w[j] >> 32) == keys[j]) {
                    out[j] = vc_hash_unbias_d(w[j]);
                    break;
                }
                if (w[j] == VC_HASH_EMPTY || p >= h.limit) break;
                s[j] = (s[j] + 1u) & h.mask;
                w[j] = h.slots[s[j]];
            }
        }
        return;
    }
    const ulonglong2 *slots = reinterpret_cast<const ulonglong2 *>(h.slots);
    ulonglong2 w[N];
#pragma unroll
    for (int j = 0; j < N; j++) w[j] = live[j] ? slots[s[j]] : make_ulonglong2(VC_HASH_EMPTY, 0);
#pragma unroll
    for (int j = 0; j < N; j++) {
        if (!live[j]) continue;
        for (int32_t p = 1;; p++) {
            if (w[j].x == keys[j]) {
                out[j] = vc_hash_unbias_d(w[j].y);
                break;
            }
            if (w[j].x == VC_HASH_EMPTY || p >= h.limit) break;
            s[j] = (s[j] + 1u) & h.mask;
            w[j] = slots[s[j]];
        }
    }
}

/* The value stored for `key`, or -1. */
static __device__ __forceinline__ int32_t vc_hash_gpu_lookup(const vc_hash_gpu_view &h,
                                                             uint64_t key)
{
    const bool act = true;
    int32_t out;
    vc_hash_gpu_lookup_batch<1>(h, &key, &act, &out);
    return out;
}
#endif

#endif
