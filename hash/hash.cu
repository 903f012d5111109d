// hash/hash.cu - the GPU coordinate hash table (DESIGN §3); semantics in hash_gpu.h, the CPU
// twin in hash_cpu.c. Device status block per table: [0] keys newly claimed, [1] probe-bound
// overflow flag, [2] first duplicate index (INT64_MAX when none), [3] non-empty keys processed.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "hash_gpu.h"

namespace {

const int kThreads = 256;
const int kGrowTries = 6;

unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

__global__ void clear_kernel(uint64_t *keys, int32_t *vals, int64_t cap)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < cap;
         i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = VC_HASH_EMPTY;
        vals[i] = INT32_MAX;
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
__global__ void insert_kernel(uint64_t *tkeys, int32_t *tvals, uint64_t mask, int32_t limit,
                              const uint64_t *keys, const int32_t *vals, int64_t n,
                              int record_dup, int64_t *st)
{
    unsigned n_valid = 0, n_claimed = 0; // per thread, summed per warp at the end
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t key = keys[i];
        if (key == VC_HASH_EMPTY) continue;
        n_valid++;
        int32_t val = vals ? vals[i] : (int32_t)i;
        uint64_t s = vc_hash_mix_d(key) & mask;
        bool done = false;
        for (int32_t p = 0; p < limit; p++) {
            uint64_t cur = tkeys[s];
            if (cur == VC_HASH_EMPTY) {
                cur = atomicCAS((unsigned long long *)&tkeys[s], (unsigned long long)VC_HASH_EMPTY,
                                (unsigned long long)key);
                if (cur == VC_HASH_EMPTY) {
                    n_claimed++;
                    cur = key;
                }
            }
            if (cur == key) {
                int32_t old = atomicMin(&tvals[s], val);
                // Every atomicMin after the first on a slot records max(self, smallest before):
                // the minimum over all records is the second-smallest index of the first
                // repeated key, which is where a sequential insert stops.
                if (record_dup && old != INT32_MAX && old != val) {
                    long long d = (long long)(old > val ? old : val);
                    atomicMin((long long *)&st[2], d);
                }
                done = true;
                break;
            }
            s = (s + 1u) & mask;
        }
        if (!done) st[1] = 1;
    }
    // Every lane of every warp gets here (blockDim is a multiple of 32): one atomic per warp
    // instead of one per key on a single address.
    n_valid = __reduce_add_sync(0xffffffffu, n_valid);
    n_claimed = __reduce_add_sync(0xffffffffu, n_claimed);
    if ((threadIdx.x & 31) == 0) {
        if (n_valid) atomicAdd((unsigned long long *)&st[3], (unsigned long long)n_valid);
        if (n_claimed) atomicAdd((unsigned long long *)&st[0], (unsigned long long)n_claimed);
    }
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

// Allocates and clears keys/vals of `cap` slots into *keys, *vals.
cudaError_t alloc_slots(int64_t cap, uint64_t **keys, int32_t **vals, cudaStream_t s)
{
    *keys = NULL;
    *vals = NULL;
    cudaError_t e = cudaMallocAsync((void **)keys, (size_t)cap * sizeof(uint64_t), s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)vals, (size_t)cap * sizeof(int32_t), s);
    if (e == cudaSuccess) {
        clear_kernel<<<grid_for(cap), kThreads, 0, s>>>(*keys, *vals, cap);
        e = cudaGetLastError();
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (*keys) cudaFreeAsync(*keys, s);
        if (*vals) cudaFreeAsync(*vals, s);
        *keys = NULL;
        *vals = NULL;
    }
    return e;
}

// Runs one insert round; copies the status block back (synchronises the stream).
cudaError_t insert_round(vc_hash_gpu *h, const uint64_t *keys, const int32_t *vals, int64_t n,
                         int record_dup, cudaStream_t s, int64_t st[4])
{
    vc_hash_gpu_view v = vc_hash_gpu_get_view(h);
    status_init_kernel<<<1, 1, 0, s>>>(h->status);
    if (n > 0)
        insert_kernel<<<grid_for(n), kThreads, 0, s>>>(h->keys, h->vals, v.mask, v.limit, keys,
                                                       vals, n, record_dup, h->status);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    // SYNC POINT: the claim count, the overflow flag and the duplicate index come back.
    e = cudaMemcpyAsync(st, h->status, 4 * sizeof(int64_t), cudaMemcpyDeviceToHost, s);
    if (e != cudaSuccess) return e;
    return cudaStreamSynchronize(s);
}

// Rebuilds the table at double capacity (more doublings while slots overflow). On success the
// table holds exactly the same keys and values.
vc_hash_gpu_status grow(vc_hash_gpu *h, cudaStream_t s, int32_t *grows)
{
    int64_t cap = h->capacity;
    for (int attempt = 0; attempt < kGrowTries; attempt++) {
        if (cap > INT64_MAX / 4) return VC_HASH_GPU_NOMEM;
        cap *= 2;
        vc_hash_gpu t = *h;
        cudaError_t e = alloc_slots(cap, &t.keys, &t.vals, s);
        if (e != cudaSuccess) return cuda_status(h, e);
        t.capacity = cap;
        t.count = 0;
        // Reinsert the old slots: the EMPTY ones are skipped, the others are distinct keys.
        int64_t st[4];
        e = insert_round(&t, h->keys, h->vals, h->capacity, 0, s, st);
        if (e != cudaSuccess) {
            cudaFreeAsync(t.keys, s);
            cudaFreeAsync(t.vals, s);
            return cuda_status(h, e);
        }
        (*grows)++;
        if (st[1] == 0) {
            cudaFreeAsync(h->keys, s);
            cudaFreeAsync(h->vals, s);
            h->keys = t.keys;
            h->vals = t.vals;
            h->capacity = cap;
            h->count = st[0];
            return VC_HASH_GPU_OK;
        }
        cudaFreeAsync(t.keys, s);
        cudaFreeAsync(t.vals, s);
    }
    return VC_HASH_GPU_PROBE_LIMIT;
}

} // namespace

extern "C" vc_hash_gpu_status vc_hash_gpu_create(vc_hash_gpu *h, int64_t expected,
                                                 struct CUstream_st *stream)
{
    if (!h) return VC_HASH_GPU_BAD_ARG;
    memset(h, 0, sizeof *h);
    // A launch error is read back with cudaGetLastError: drop a stale, non-sticky error left by
    // an unrelated earlier call so that it is not reported as ours.
    cudaGetLastError();
    int64_t cap = vc_hash_capacity_for(expected);
    if (cap == 0) return VC_HASH_GPU_NOMEM;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = cudaMallocAsync((void **)&h->status, 4 * sizeof(int64_t), s);
    if (e != cudaSuccess) {
        cudaGetLastError();
        h->status = NULL;
        return cuda_status(h, e);
    }
    e = alloc_slots(cap, &h->keys, &h->vals, s);
    if (e != cudaSuccess) {
        cudaFreeAsync(h->status, s);
        h->status = NULL;
        return cuda_status(h, e);
    }
    h->capacity = cap;
    h->count = 0;
    h->max_probe = VC_HASH_DEFAULT_MAX_PROBE;
    return VC_HASH_GPU_OK;
}

extern "C" void vc_hash_gpu_destroy(vc_hash_gpu *h, struct CUstream_st *stream)
{
    if (!h) return;
    cudaStream_t s = (cudaStream_t)stream;
    if (h->keys) cudaFreeAsync(h->keys, s);
    if (h->vals) cudaFreeAsync(h->vals, s);
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
    if (!h || !h->keys || !h->status || n < 0 || (n > 0 && !d_keys)) return VC_HASH_GPU_BAD_ARG;
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
        cudaError_t e = insert_round(h, d_keys, d_vals, n, record_dup, s, st);
        if (e != cudaSuccess) return cuda_status(h, e);
        h->count += st[0];
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

extern "C" vc_hash_gpu_status vc_hash_gpu_find(vc_hash_gpu *h, const uint64_t *d_keys, int64_t n,
                                               int32_t *d_out, struct CUstream_st *stream)
{
    if (!h || !h->keys || n < 0 || (n > 0 && (!d_keys || !d_out))) return VC_HASH_GPU_BAD_ARG;
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
