/* hash/hash_gpu.h - the coordinate hash table on the GPU (DESIGN §3), with the semantics of the
 * CPU table in hash.h: keys packed exactly by vc_keypack, VC_HASH_EMPTY in empty slots, int32
 * values, capacity vc_hash_capacity_for(n) (a power of two, load factor at most 0.5), linear
 * probing from vc_hash_mix(key) & (capacity - 1), at most min(max_probe, capacity) slots walked.
 *
 * Inserts run one thread per key: a thread claims an empty slot with atomicCAS on the key, and
 * every thread that reaches its key (the claimer too) stores its value with atomicMin, so the
 * value of a key given several times is the smallest one, whatever the thread order. A thread
 * that walks past the probe bound sets a device flag; the host reads the flag back (the one
 * synchronisation point of an insert) and rebuilds the table at double capacity, a bounded
 * number of times, before giving up with VC_HASH_GPU_PROBE_LIMIT. Lookups need no flag: every
 * stored key sits fewer than max_probe slots past its home, so a walk of max_probe slots that
 * meets neither the key nor an empty slot proves the key absent.
 *
 * The C API below carries no CUDA types but `struct CUstream_st *` (a cudaStream_t). Under nvcc
 * the header also gives device functions (pack, mix, lookup) so that kernels elsewhere can probe
 * a table in place through the plain-data vc_hash_gpu_view. */
#ifndef VC_HASH_GPU_H
#define VC_HASH_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "hash.h" /* C declarations: keep them C-linked when included from CUDA sources */

struct CUstream_st;

typedef enum vc_hash_gpu_status {
    VC_HASH_GPU_OK = 0,
    VC_HASH_GPU_NOMEM = 1,       /* a device allocation failed                                 */
    VC_HASH_GPU_PROBE_LIMIT = 2, /* keys could not be placed within the probe bound, even after
                                    the bounded number of doublings                          */
    VC_HASH_GPU_CUDA = 3,        /* another CUDA error: see vc_hash_gpu.cuda_error             */
    VC_HASH_GPU_BAD_ARG = 4      /* NULL table, negative count, NULL keys with n > 0          */
} vc_hash_gpu_status;

typedef struct vc_hash_gpu {
    uint64_t *keys;     /* device [capacity], VC_HASH_EMPTY in empty slots                     */
    int32_t *vals;      /* device [capacity], INT32_MAX in empty slots                         */
    int64_t capacity;   /* power of two >= 16                                                  */
    int64_t count;      /* keys stored; exact on the host after every insert                   */
    int32_t max_probe;  /* VC_HASH_DEFAULT_MAX_PROBE                                           */
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

/* Allocates an empty table sized for `expected` keys (stream-ordered allocation on `stream`). */
vc_hash_gpu_status vc_hash_gpu_create(vc_hash_gpu *h, int64_t expected,
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
/* d_out[i] = value of d_keys[i], or -1 when absent (device arrays). Asynchronous. */
vc_hash_gpu_status vc_hash_gpu_find(vc_hash_gpu *h, const uint64_t *d_keys, int64_t n,
                                    int32_t *d_out, struct CUstream_st *stream);
/* cudaGetErrorString of a cuda_error value. */
const char *vc_hash_gpu_error_string(int cuda_error);

/* What a kernel needs to probe a table: plain data, pass it by value. */
typedef struct vc_hash_gpu_view {
    const uint64_t *keys;
    const int32_t *vals;
    uint64_t mask;      /* capacity - 1                                                        */
    int32_t limit;      /* slots a walk may visit: min(max(max_probe, 1), capacity)            */
} vc_hash_gpu_view;

static inline vc_hash_gpu_view vc_hash_gpu_get_view(const vc_hash_gpu *h)
{
    vc_hash_gpu_view v;
    int64_t limit = h->max_probe < 1 ? 1 : h->max_probe;
    if (limit > h->capacity) limit = h->capacity;
    v.keys = h->keys;
    v.vals = h->vals;
    v.mask = (uint64_t)h->capacity - 1u;
    v.limit = (int32_t)limit;
    return v;
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

/* The value stored for `key`, or -1. */
static __device__ __forceinline__ int32_t vc_hash_gpu_lookup(const vc_hash_gpu_view &h,
                                                             uint64_t key)
{
    if (key == VC_HASH_EMPTY) return -1;
    uint64_t s = vc_hash_mix_d(key) & h.mask;
    for (int32_t n = 0; n < h.limit; n++) {
        uint64_t k = h.keys[s];
        if (k == key) return h.vals[s];
        if (k == VC_HASH_EMPTY) return -1;
        s = (s + 1u) & h.mask;
    }
    return -1;
}
#endif

#endif
