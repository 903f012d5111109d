// hash/hash.cu - the GPU coordinate hash table; semantics in hash_gpu.h, the CPU
// twin in hash_cpu.c. Device status block per table: [0] keys newly claimed, [1] flags (1: a key
// overflowed the probe bound, 2: a key did not fit the packed layout), [2] first duplicate index
// (INT64_MAX when none), [3] non-empty keys processed.
//
// First duplicate: every insert that meets its key already stored with a different value
// records max(that value, its own); with value = batch index the minimum over all records is,
// for each repeated key with indices s1 < s2 < ..., at least s2 (a record is the larger of two
// distinct indices of the key) and s2 itself is recorded (whichever of s1, s2 comes second sees
// a stored value <= s1 or == s2 respectively). So the minimum is the smallest index that repeats
// an earlier one, where a sequential insert stops, whatever the thread order.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "hash_gpu.h"

namespace {

const int kThreads = 256;
const int kGrowTries = 6;
// Blocks of an insert or rehash launch at most; past it the threads loop. Each block adds its
// counts with one atomic a counter, on the same two addresses for the whole grid. One resident
// wave on an H100 at 32 registers a thread (132 SMs x 8 blocks of 256 threads); the insert and
// rehash kernels walk one slot at a time to stay there (hash_gpu.h's 4-slot window took them to
// 40 registers, 6 blocks an SM, and made the 1M-key insert slower; docs/benchmarks.md).
const int64_t kInsertBlocks = 1024;

unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

unsigned insert_grid(int64_t n)
{
    const unsigned g = grid_for(n);
    return g < kInsertBlocks ? g : (unsigned)kInsertBlocks;
}

// Adds the block's sums of a and b (every thread of the block calls it) to *da and *db: one
// atomic each for the block. Atomics on one address are serialised: two a warp for the 31k
// warps of a 1M-key insert cost ~50 us on the H100 (the insert kernel took 109 us, 54-57 with
// one pair a block; 1M random load-then-CAS alone take 31; docs/benchmarks.md).
__device__ __forceinline__ void block_add2(unsigned a, unsigned b, int64_t *da, int64_t *db)
{
    __shared__ unsigned sa[kThreads / 32], sb[kThreads / 32];
    a = __reduce_add_sync(0xffffffffu, a);
    b = __reduce_add_sync(0xffffffffu, b);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sa[warp] = a;
        sb[warp] = b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long ta = 0, tb = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
            ta += sa[w];
            tb += sb[w];
        }
        if (ta && da) atomicAdd((unsigned long long *)da, ta);
        if (tb && db) atomicAdd((unsigned long long *)db, tb);
    }
}

__global__ void status_init_kernel(int64_t *st)
{
    st[0] = 0;
    st[1] = 0;
    st[2] = INT64_MAX;
    st[3] = 0;
}

// Inserts keys[i] -> vals ? vals[i] : i. record_dup: track the first duplicate index (only
// meaningful when vals == NULL, where values are distinct batch indices).
__global__ void insert_kernel(vc_hash_gpu_view h, const uint64_t *keys, const int32_t *vals,
                              int64_t n, int record_dup, int64_t *st)
{
    unsigned n_valid = 0, n_claimed = 0; // per thread, summed per block at the end
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t key = keys[i];
        if (key == VC_HASH_EMPTY) continue;
        n_valid++;
        int32_t val = vals ? vals[i] : (int32_t)i;
        int64_t rec;
        int r = vc_hash_gpu_insert_d<1>(h, key, val, true, &rec);
        if (r == VC_HGI_CLAIMED) n_claimed++;
        if (record_dup && rec != INT64_MAX) atomicMin((long long *)&st[2], (long long)rec);
        if (r == VC_HGI_OVERFLOW) atomicOr((unsigned long long *)&st[1], 1ull);
        if (r == VC_HGI_BAD_KEY) atomicOr((unsigned long long *)&st[1], 2ull);
    }
    block_add2(n_valid, n_claimed, &st[3], &st[0]); // every thread of the block gets here
}

// Moves every stored key of `from` (capacity slots) into the empty table h.
__global__ void rehash_kernel(vc_hash_gpu_view h, const uint64_t *from, int64_t cap,
                              int32_t packed, int64_t *st)
{
    unsigned n_claimed = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < cap;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t key, w;
        if (packed) {
            w = from[i];
            if (w == VC_HASH_EMPTY) continue;
            key = w >> 32;
        } else {
            key = from[2 * i];
            if (key == VC_HASH_EMPTY) continue;
            w = from[2 * i + 1];
        }
        int64_t rec;
        int r = vc_hash_gpu_insert_d<1>(h, key, vc_hash_unbias_d(w), true, &rec);
        if (r == VC_HGI_CLAIMED) n_claimed++;
        if (r == VC_HGI_OVERFLOW) atomicOr((unsigned long long *)&st[1], 1ull);
    }
    block_add2(n_claimed, 0, &st[0], NULL);
}

__global__ void find_kernel(vc_hash_gpu_view h, const uint64_t *keys, int64_t n, int32_t *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = vc_hash_gpu_lookup(h, keys[i]);
}

vc_hash_gpu_status cuda_status(vc_hash_gpu *h, cudaError_t e)
{
    h->cuda_error = (int)e;
    return e == cudaErrorMemoryAllocation ? VC_HASH_GPU_NOMEM : VC_HASH_GPU_CUDA;
}

// Allocates and clears (all ones) a table of `cap` slots into *slots.
cudaError_t alloc_slots(int64_t cap, int32_t packed, uint64_t **slots, cudaStream_t s)
{
    *slots = NULL;
    const size_t bytes = (size_t)vc_hash_gpu_table_bytes(cap, packed);
    cudaError_t e = cudaMallocAsync((void **)slots, bytes, s);
    if (e == cudaSuccess) e = cudaMemsetAsync(*slots, 0xff, bytes, s);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (*slots) cudaFreeAsync(*slots, s);
        *slots = NULL;
    }
    return e;
}

// Queues the counter reset and one insert round (no read-back).
cudaError_t insert_launch(vc_hash_gpu *h, const uint64_t *keys, const int32_t *vals, int64_t n,
                          int record_dup, cudaStream_t s)
{
    status_init_kernel<<<1, 1, 0, s>>>(h->status);
    if (n > 0)
        insert_kernel<<<insert_grid(n), kThreads, 0, s>>>(vc_hash_gpu_get_view(h), keys, vals,
                                                          n, record_dup, h->status);
    return cudaGetLastError();
}

// Copies the status block back (synchronises the stream).
cudaError_t read_status(vc_hash_gpu *h, cudaStream_t s, int64_t st[4])
{
    // SYNC POINT: the claim count, the flags and the duplicate index come back.
    cudaError_t e = cudaMemcpyAsync(st, h->status, 4 * sizeof(int64_t), cudaMemcpyDeviceToHost, s);
    if (e != cudaSuccess) return e;
    return cudaStreamSynchronize(s);
}

// Rebuilds the table at double capacity (more doublings while slots overflow). On success the
// table holds exactly the same keys and values.
vc_hash_gpu_status grow(vc_hash_gpu *h, cudaStream_t s, int32_t *grows)
{
    int64_t cap = h->capacity;
    for (int attempt = 0; attempt < kGrowTries; attempt++) {
        if (cap > INT64_MAX / 64) return VC_HASH_GPU_NOMEM;
        cap *= 2;
        vc_hash_gpu t = *h;
        cudaError_t e = alloc_slots(cap, h->packed, &t.slots, s);
        if (e != cudaSuccess) return cuda_status(h, e);
        t.capacity = cap;
        t.count = 0;
        int64_t st[4];
        status_init_kernel<<<1, 1, 0, s>>>(h->status);
        rehash_kernel<<<insert_grid(h->capacity), kThreads, 0, s>>>(
            vc_hash_gpu_get_view(&t), h->slots, h->capacity, h->packed, h->status);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = read_status(h, s, st);
        if (e != cudaSuccess) {
            cudaFreeAsync(t.slots, s);
            return cuda_status(h, e);
        }
        (*grows)++;
        if (st[1] == 0) {
            cudaFreeAsync(h->slots, s);
            h->slots = t.slots;
            h->capacity = cap;
            h->count = st[0];
            return VC_HASH_GPU_OK;
        }
        cudaFreeAsync(t.slots, s);
    }
    return VC_HASH_GPU_PROBE_LIMIT;
}

} // namespace

extern "C" vc_hash_gpu_status vc_hash_gpu_create_ex(vc_hash_gpu *h, int64_t expected,
                                                    int32_t key_bits, struct CUstream_st *stream)
{
    if (!h) return VC_HASH_GPU_BAD_ARG;
    memset(h, 0, sizeof *h);
    // A launch error is read back with cudaGetLastError: drop a stale, non-sticky error left by
    // an unrelated earlier call so that it is not reported as ours.
    cudaGetLastError();
    int64_t cap = vc_hash_capacity_for(expected);
    if (cap == 0 || cap > INT64_MAX / 64) return VC_HASH_GPU_NOMEM;
    cudaStream_t s = (cudaStream_t)stream;
    const int32_t packed = key_bits <= VC_HASH_GPU_PACKED_BITS ? 1 : 0;
    cudaError_t e = cudaMallocAsync((void **)&h->status, 4 * sizeof(int64_t), s);
    if (e != cudaSuccess) {
        cudaGetLastError();
        h->status = NULL;
        return cuda_status(h, e);
    }
    e = alloc_slots(cap, packed, &h->slots, s);
    if (e != cudaSuccess) {
        cudaFreeAsync(h->status, s);
        h->status = NULL;
        return cuda_status(h, e);
    }
    h->capacity = cap;
    h->count = 0;
    h->packed = packed;
    h->max_probe = VC_HASH_DEFAULT_MAX_PROBE;
    return VC_HASH_GPU_OK;
}

extern "C" vc_hash_gpu_status vc_hash_gpu_create(vc_hash_gpu *h, int64_t expected,
                                                 struct CUstream_st *stream)
{
    return vc_hash_gpu_create_ex(h, expected, 64, stream);
}

extern "C" void vc_hash_gpu_destroy(vc_hash_gpu *h, struct CUstream_st *stream)
{
    if (!h) return;
    cudaStream_t s = (cudaStream_t)stream;
    if (h->slots) cudaFreeAsync(h->slots, s);
    if (h->status) cudaFreeAsync(h->status, s);
    memset(h, 0, sizeof *h);
}

extern "C" vc_hash_gpu_status vc_hash_gpu_insert(vc_hash_gpu *h, const uint64_t *d_keys,
                                                 const int32_t *d_vals, int64_t n,
                                                 struct CUstream_st *stream,
                                                 vc_hash_gpu_insert_info *info)
{
    if (info) {
        info->inserted = 0;
        info->duplicates = 0;
        info->first_duplicate = -1;
        info->grows = 0;
    }
    if (!h || !h->slots || !h->status || n < 0 || (n > 0 && !d_keys))
        return VC_HASH_GPU_BAD_ARG;
    h->cuda_error = 0;
    if (n == 0) return VC_HASH_GPU_OK;
    cudaGetLastError(); // drop a stale, non-sticky error (see vc_hash_gpu_create)
    cudaStream_t s = (cudaStream_t)stream;
    int32_t grows = 0;
    vc_hash_gpu_status r;
    // Keep the load factor at most 0.5 even if every key is new.
    while (h->count + n > h->capacity / 2) {
        r = grow(h, s, &grows);
        if (r != VC_HASH_GPU_OK) return r;
    }
    const int64_t count_before = h->count;
    const int record_dup = d_vals == NULL && count_before == 0;
    for (int attempt = 0;; attempt++) {
        int64_t st[4];
        cudaError_t e = insert_launch(h, d_keys, d_vals, n, record_dup, s);
        if (e == cudaSuccess) e = read_status(h, s, st);
        if (e != cudaSuccess) return cuda_status(h, e);
        h->count += st[0];
        if (st[1] & 2) return VC_HASH_GPU_BAD_ARG;
        if (st[1] == 0) {
            if (info) {
                info->inserted = h->count - count_before;
                info->duplicates = st[3] - info->inserted;
                info->first_duplicate = (record_dup && st[2] != INT64_MAX) ? st[2] : -1;
                info->grows = grows;
            }
            return VC_HASH_GPU_OK;
        }
        // Some keys overflowed the probe bound and were not stored: grow (the keys already
        // placed move along) and insert the whole batch again; values and counts stay exact.
        if (attempt >= kGrowTries) return VC_HASH_GPU_PROBE_LIMIT;
        r = grow(h, s, &grows);
        if (r != VC_HASH_GPU_OK) return r;
    }
}

extern "C" vc_hash_gpu_status vc_hash_gpu_insert_async(vc_hash_gpu *h, const uint64_t *d_keys,
                                                       const int32_t *d_vals, int64_t n,
                                                       struct CUstream_st *stream)
{
    if (!h || !h->slots || !h->status || n < 0 || (n > 0 && !d_keys) ||
        h->count + n > h->capacity / 2)
        return VC_HASH_GPU_BAD_ARG;
    h->cuda_error = 0;
    cudaGetLastError(); // drop a stale, non-sticky error (see vc_hash_gpu_create)
    const int record_dup = d_vals == NULL && h->count == 0;
    cudaError_t e = insert_launch(h, d_keys, d_vals, n, record_dup, (cudaStream_t)stream);
    return e == cudaSuccess ? VC_HASH_GPU_OK : cuda_status(h, e);
}

extern "C" vc_hash_gpu_status vc_hash_gpu_insert_result(vc_hash_gpu *h,
                                                        struct CUstream_st *stream,
                                                        vc_hash_gpu_insert_info *info)
{
    if (info) {
        info->inserted = 0;
        info->duplicates = 0;
        info->first_duplicate = -1;
        info->grows = 0;
    }
    if (!h || !h->slots || !h->status) return VC_HASH_GPU_BAD_ARG;
    h->cuda_error = 0;
    int64_t st[4];
    cudaError_t e = read_status(h, (cudaStream_t)stream, st);
    if (e != cudaSuccess) return cuda_status(h, e);
    const int64_t before = h->count;
    h->count += st[0];
    if (info) {
        info->inserted = st[0];
        info->duplicates = st[3] - st[0];
        info->first_duplicate = (before == 0 && st[2] != INT64_MAX) ? st[2] : -1;
    }
    if (st[1] & 2) return VC_HASH_GPU_BAD_ARG;
    return st[1] ? VC_HASH_GPU_PROBE_LIMIT : VC_HASH_GPU_OK;
}

extern "C" vc_hash_gpu_status vc_hash_gpu_find(vc_hash_gpu *h, const uint64_t *d_keys, int64_t n,
                                               int32_t *d_out, struct CUstream_st *stream)
{
    if (!h || !h->slots || n < 0 || (n > 0 && (!d_keys || !d_out))) return VC_HASH_GPU_BAD_ARG;
    h->cuda_error = 0;
    if (n == 0) return VC_HASH_GPU_OK;
    cudaGetLastError(); // drop a stale, non-sticky error (see vc_hash_gpu_create)
    cudaStream_t s = (cudaStream_t)stream;
    find_kernel<<<grid_for(n), kThreads, 0, s>>>(vc_hash_gpu_get_view(h), d_keys, n, d_out);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? VC_HASH_GPU_OK : cuda_status(h, e);
}

extern "C" const char *vc_hash_gpu_error_string(int cuda_error)
{
    return cudaGetErrorString((cudaError_t)cuda_error);
}
