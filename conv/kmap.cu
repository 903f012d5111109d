// conv/kmap.cu - kernel maps on the GPU (DESIGN §3), bit-identical to the CPU twin
// conv/kmap_cpu.c. Steps: (a) pack and insert the input keys into the GPU hash table (duplicate
// and range checks); (b) new-output types: one candidate key per (input, offset), radix sort,
// unique -> the output keys in (b, z, y, x) order, which is the CPU's rank order; a second table
// maps output key -> rank; (c) out_in by lookups (output-stationary for SUBM and DOWNSAMPLE,
// input-stationary for STRIDED and TRANSPOSED: each (output, offset) has at most one input, so
// the writes never collide); (d) pair lists from an exclusive scan of the out_in flags taken in
// [K, n_out] order; (e) masks, and perm by stable LSD radix sorts of the mask words, least
// significant word first, from the identity (descending by mask, ties by row ascending).
// No atomics decide a result: atomics only claim hash slots, keep minima, or raise flags.
// Host reads: see kmap_gpu.h.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "kmap_gpu.h"
#include "hash/hash_gpu.h"

namespace {

const int kThreads = 256;
const int kMaxKernel = 7;
const int kMaxVolume = kMaxKernel * kMaxKernel * kMaxKernel;

// Slots of the per-build device scratch block.
enum { SCR_BAD_ROW = 0, SCR_N_OUT = 1, SCR_N_PAIRS = 2, SCR_FLAGS = 3, SCR_COUNT = 4 };
// Bits of SCR_FLAGS.
enum { FLAG_MISSING = 1, FLAG_BAD_ROW = 2, FLAG_CONFLICT = 4 };

struct Geom {
    int32_t kernel[3], stride[3], padding[3], dilation[3];
    int32_t in_shape[3], out_shape[3];
    int32_t K;
    int32_t type;
};

unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

#define GRID_LOOP(i, n)                                                                        \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                  \
         i += (int64_t)gridDim.x * blockDim.x)

// Kernel offset k -> (dz, dy, dx), z slowest and x fastest.
__device__ __forceinline__ void offset_of(const Geom &g, int32_t k, int32_t d[3])
{
    d[2] = k % g.kernel[2];
    int32_t t = k / g.kernel[2];
    d[1] = t % g.kernel[1];
    d[0] = t / g.kernel[1];
}

// STRIDED / TRANSPOSED: the output site input q (z, y, x) writes at offset d, if any.
__device__ __forceinline__ bool scatter_target(const Geom &g, const int32_t *q, const int32_t d[3],
                                               int32_t o[3])
{
#pragma unroll
    for (int a = 0; a < 3; a++) {
        int64_t c = q[a], s = g.stride[a], pad = g.padding[a], dil = g.dilation[a], t;
        if (g.type == VC_MAP_STRIDED) {
            t = c + pad - (int64_t)d[a] * dil;
            if (t < 0 || t % s != 0) return false;
            t /= s;
        } else {
            t = c * s - pad + (int64_t)d[a] * dil;
            if (t < 0) return false;
        }
        if (t >= g.out_shape[a]) return false;
        o[a] = (int32_t)t;
    }
    return true;
}

// SUBM / DOWNSAMPLE: the input site output p (z, y, x) reads at offset d, if inside in_shape.
__device__ __forceinline__ bool gather_source(const Geom &g, const int32_t *p, const int32_t d[3],
                                              int32_t c[3])
{
#pragma unroll
    for (int a = 0; a < 3; a++) {
        int64_t ks = g.kernel[a], dil = g.dilation[a], t;
        if (g.type == VC_MAP_SUBM) {
            t = (int64_t)p[a] + ((int64_t)d[a] - ks / 2) * dil;
        } else {
            int64_t centre = (ks % 2 == 1) ? ks / 2 : 0;
            t = (int64_t)p[a] * g.stride[a] + ((int64_t)d[a] - centre) * dil;
        }
        if (t < 0 || t >= g.in_shape[a]) return false;
        c[a] = (int32_t)t;
    }
    return true;
}

__global__ void scratch_init_kernel(int64_t *scr)
{
    scr[SCR_BAD_ROW] = INT64_MAX;
    scr[SCR_N_OUT] = 0;
    scr[SCR_N_PAIRS] = 0;
    scr[SCR_FLAGS] = 0;
}

// Packs the input rows; a row outside the limits gets VC_HASH_EMPTY (skipped by the insert) and
// the smallest such row index is kept.
__global__ void pack_in_kernel(const int32_t *coords, int64_t n, vc_keypack kp, uint64_t *keys,
                               int64_t *scr)
{
    GRID_LOOP(i, n)
    {
        const int4 c = reinterpret_cast<const int4 *>(coords)[i];
        if (vc_key_in_range_d(kp, c.x, c.y, c.z, c.w)) {
            keys[i] = vc_key_pack_d(kp, c.x, c.y, c.z, c.w);
        } else {
            keys[i] = VC_HASH_EMPTY;
            atomicMin((long long *)&scr[SCR_BAD_ROW], (long long)i);
        }
    }
}

// Candidate output keys: DOWNSAMPLE one per input, STRIDED / TRANSPOSED one per (input, offset)
// (VC_HASH_EMPTY where the offset leaves the output shape).
__global__ void candidates_kernel(const int32_t *coords, int64_t n_cand, Geom g, vc_keypack kout,
                                  uint64_t *cand)
{
    GRID_LOOP(i, n_cand)
    {
        uint64_t key = VC_HASH_EMPTY;
        if (g.type == VC_MAP_DOWNSAMPLE) {
            const int4 c = reinterpret_cast<const int4 *>(coords)[i];
            key = vc_key_pack_d(kout, c.x, c.y / g.stride[0], c.z / g.stride[1],
                                c.w / g.stride[2]);
        } else {
            int64_t q = i / g.K;
            int32_t k = (int32_t)(i - q * g.K);
            const int4 c = reinterpret_cast<const int4 *>(coords)[q];
            int32_t qc[3] = {c.y, c.z, c.w}, d[3], o[3];
            offset_of(g, k, d);
            if (scatter_target(g, qc, d, o)) key = vc_key_pack_d(kout, c.x, o[0], o[1], o[2]);
        }
        cand[i] = key;
    }
}

// n_out = unique count, less the VC_HASH_EMPTY that sorts last when any candidate was empty.
__global__ void count_unique_kernel(const uint64_t *uniq, const int64_t *num, int64_t *scr)
{
    int64_t n = *num;
    if (n > 0 && uniq[n - 1] == VC_HASH_EMPTY) n--;
    scr[SCR_N_OUT] = n;
}

__global__ void unpack_kernel(const uint64_t *keys, int64_t n, vc_keypack kp, int32_t *coords)
{
    GRID_LOOP(i, n)
    {
        int32_t c[4];
        vc_key_unpack_d(kp, keys[i], c);
        reinterpret_cast<int4 *>(coords)[i] = make_int4(c[0], c[1], c[2], c[3]);
    }
}

// Output-stationary out_in (SUBM, DOWNSAMPLE): one thread per (output, offset).
__global__ void gather_kernel(const int32_t *out_coords, int64_t n_entries, Geom g,
                              vc_keypack kin, vc_hash_gpu_view hin, int32_t *out_in)
{
    GRID_LOOP(i, n_entries)
    {
        int64_t p = i / g.K;
        int32_t k = (int32_t)(i - p * g.K);
        const int4 pc = reinterpret_cast<const int4 *>(out_coords)[p];
        int32_t pp[3] = {pc.y, pc.z, pc.w}, d[3], c[3];
        offset_of(g, k, d);
        int32_t v = -1;
        if (gather_source(g, pp, d, c)) v = vc_hash_gpu_lookup(hin, vc_key_pack_d(kin, pc.x, c[0],
                                                                                 c[1], c[2]));
        out_in[i] = v;
    }
}

// Input-stationary out_in (STRIDED, TRANSPOSED): one thread per (input, offset); (p, k) has at
// most one input q, so each element is written at most once. out_in starts at -1.
__global__ void scatter_kernel(const int32_t *in_coords, int64_t n_entries, Geom g,
                               vc_keypack kout, vc_hash_gpu_view hout, int32_t *out_in,
                               int64_t *scr)
{
    GRID_LOOP(i, n_entries)
    {
        int64_t q = i / g.K;
        int32_t k = (int32_t)(i - q * g.K);
        const int4 c = reinterpret_cast<const int4 *>(in_coords)[q];
        int32_t qc[3] = {c.y, c.z, c.w}, d[3], o[3];
        offset_of(g, k, d);
        if (!scatter_target(g, qc, d, o)) continue;
        int32_t p = vc_hash_gpu_lookup(hout, vc_key_pack_d(kout, c.x, o[0], o[1], o[2]));
        if (p < 0) {
            atomicOr((unsigned long long *)&scr[SCR_FLAGS], (unsigned long long)FLAG_MISSING);
            continue;
        }
        out_in[(int64_t)p * g.K + k] = (int32_t)q;
    }
}

// INVERSE: out_in[q, k] = p for every forward entry (p -> q at k). out_in starts at -1.
__global__ void inverse_kernel(const int32_t *fwd_out_in, int64_t n_entries, int32_t K,
                               int64_t fwd_n_in, int32_t *out_in, int64_t *scr)
{
    GRID_LOOP(i, n_entries)
    {
        int32_t q = fwd_out_in[i];
        if (q < 0) continue;
        int64_t p = i / K;
        int32_t k = (int32_t)(i - p * K);
        if (q >= fwd_n_in) {
            atomicOr((unsigned long long *)&scr[SCR_FLAGS], (unsigned long long)FLAG_BAD_ROW);
            continue;
        }
        int32_t old = atomicCAS(&out_in[(int64_t)q * K + k], -1, (int32_t)p);
        if (old != -1)
            atomicOr((unsigned long long *)&scr[SCR_FLAGS], (unsigned long long)FLAG_CONFLICT);
    }
}

// Flag of element i of out_in taken in [K, n_out] order: 1 when out_in[p, k] >= 0.
struct PairFlag {
    const int32_t *out_in;
    int64_t n;
    int32_t K;
    __host__ __device__ int64_t operator()(int64_t i) const
    {
        int64_t k = i / n, p = i - k * n;
        return out_in[p * K + k] >= 0 ? 1 : 0;
    }
};

// offsets[k] = scan[k * n] (k < K), offsets[K] = n_pairs (also stored in the scratch block).
__global__ void offsets_kernel(const int64_t *scan, PairFlag f, int32_t K, int64_t *offsets,
                               int64_t *scr)
{
    GRID_LOOP(k, (int64_t)K + 1)
    {
        int64_t v;
        if (k < K) {
            v = scan[k * f.n];
        } else {
            int64_t last = (int64_t)K * f.n - 1;
            v = scan[last] + f(last);
            scr[SCR_N_PAIRS] = v;
        }
        offsets[k] = v;
    }
}

__global__ void pairs_kernel(const int64_t *scan, PairFlag f, int64_t total, int32_t *in_rows,
                             int32_t *out_rows)
{
    GRID_LOOP(i, total)
    {
        int64_t k = i / f.n, p = i - k * f.n;
        int32_t v = f.out_in[p * f.K + k];
        if (v < 0) continue;
        int64_t pos = scan[i];
        in_rows[pos] = v;
        out_rows[pos] = (int32_t)p;
    }
}

__global__ void masks_kernel(const int32_t *out_in, int64_t n, int32_t K, int32_t words,
                             uint32_t *masks)
{
    GRID_LOOP(i, n * words)
    {
        int64_t p = i / words;
        int32_t w = (int32_t)(i - p * words);
        const int32_t *row = out_in + p * K;
        int32_t k0 = 32 * w, k1 = k0 + 32 < K ? k0 + 32 : K;
        uint32_t m = 0;
        for (int32_t k = k0; k < k1; k++)
            if (row[k] >= 0) m |= 1u << (k - k0);
        masks[i] = m;
    }
}

__global__ void iota_kernel(int32_t *v, int64_t n)
{
    GRID_LOOP(i, n) v[i] = (int32_t)i;
}

__global__ void mask_word_kernel(const uint32_t *masks, const int32_t *perm, int64_t n,
                                 int32_t words, int32_t w, uint32_t *keys)
{
    GRID_LOOP(i, n) keys[i] = masks[(int64_t)perm[i] * words + w];
}

// ---- host helpers ------------------------------------------------------------------------

vc_status cuda_fail(vc_err *err, cudaError_t e, const char *what)
{
    cudaGetLastError(); // clear a non-sticky error so later calls start clean
    if (e == cudaErrorMemoryAllocation)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of device memory (%s)", what);
    return vc_fail(err, VC_ERR_CUDA, "kernel map: %s: %s", what, cudaGetErrorString(e));
}

vc_status hash_fail(vc_err *err, vc_hash_gpu_status r, const vc_hash_gpu *h, const char *what)
{
    switch (r) {
    case VC_HASH_GPU_NOMEM:
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of device memory for the %s "
                       "hash table", what);
    case VC_HASH_GPU_PROBE_LIMIT:
        return vc_fail(err, VC_ERR_CAPACITY, "kernel map: the %s hash table could not place a "
                       "key within its probe bound, even after growing", what);
    case VC_HASH_GPU_CUDA:
        return vc_fail(err, VC_ERR_CUDA, "kernel map: %s hash table: %s", what,
                       vc_hash_gpu_error_string(h->cuda_error));
    default:
        return vc_fail(err, VC_ERR_INTERNAL, "kernel map: %s hash table: bad argument", what);
    }
}

// Stream-ordered temporaries, freed together.
struct Temps {
    void *p[24];
    int n;
    cudaStream_t s;
    cudaError_t alloc(void **out, int64_t bytes)
    {
        *out = NULL;
        if (n >= 24) return cudaErrorInvalidValue;
        if (bytes < 16) bytes = 16;
        cudaError_t e = cudaMallocAsync(out, (size_t)bytes, s);
        if (e != cudaSuccess) {
            *out = NULL;
            return e;
        }
        p[n++] = *out;
        return cudaSuccess;
    }
    void release(void *q)
    {
        for (int i = 0; i < n; i++)
            if (p[i] == q) {
                cudaFreeAsync(q, s);
                p[i] = p[--n];
                return;
            }
    }
    void free_all()
    {
        for (int i = 0; i < n; i++) cudaFreeAsync(p[i], s);
        n = 0;
    }
};

// Device allocation of n elements (at least one, so success is never NULL).
template <typename T> cudaError_t dev_alloc(T **out, int64_t n)
{
    if (n < 1) n = 1;
    *out = NULL;
    cudaError_t e = cudaMalloc((void **)out, (size_t)n * sizeof(T));
    if (e != cudaSuccess) *out = NULL;
    return e;
}

#define CU(call, what)                                                                         \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            st = cuda_fail(err, e_, what);                                                     \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

#define LAUNCHED(what) CU(cudaGetLastError(), what)

// Fills offsets / in_rows / out_rows / n_pairs and masks / perm of m from m->out_in (device), and
// checks the flags raised while out_in was built. SYNC POINT: n_pairs and the flags come back.
vc_status finish_gpu(vc_kmap_data *m, cudaStream_t s, int64_t *scr, cudaEvent_t ev_pairs,
                     vc_err *err)
{
    vc_status st = VC_OK;
    Temps t = {{0}, 0, s};
    const int32_t K = m->volume;
    const int64_t n = m->n_out;
    const int32_t words = (K + 31) / 32;
    const int64_t total = n * K;
    int64_t host[2] = {0, 0};
    int64_t *scan = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    PairFlag f = {m->out_in, n > 0 ? n : 1, K};
    uint32_t *keys_a = NULL, *keys_b = NULL;
    int32_t *perm_b = NULL, *pa, *pb;

    CU(dev_alloc(&m->offsets, (int64_t)K + 1), "allocating offsets");
    CU(dev_alloc(&m->masks, n * words), "allocating masks");
    CU(dev_alloc(&m->perm, n), "allocating perm");
    if (n > 0) {
        CU(t.alloc((void **)&scan, total * (int64_t)sizeof(int64_t)), "allocating the pair scan");
        auto flags = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), f);
        CU(cub::DeviceScan::ExclusiveSum(NULL, tmp_bytes, flags, scan, total, s), "pair scan");
        CU(t.alloc(&tmp, (int64_t)tmp_bytes), "allocating scan storage");
        CU(cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, flags, scan, total, s), "pair scan");
        t.release(tmp);
        tmp = NULL;
        offsets_kernel<<<grid_for((int64_t)K + 1), kThreads, 0, s>>>(scan, f, K, m->offsets, scr);
        LAUNCHED("offsets kernel");
    } else {
        CU(cudaMemsetAsync(m->offsets, 0, ((size_t)K + 1) * sizeof(int64_t), s), "offsets");
    }
    // SYNC POINT: n_pairs (sizes in_rows / out_rows) and the out_in flags.
    CU(cudaMemcpyAsync(host, scr + SCR_N_PAIRS, 2 * sizeof(int64_t), cudaMemcpyDeviceToHost, s),
       "reading the pair count");
    CU(cudaStreamSynchronize(s), "building out_in");
    if (host[1] & FLAG_MISSING) {
        st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: an output key collected in step 2 was "
                     "not found in step 3");
        goto fail;
    }
    if (host[1] & FLAG_BAD_ROW) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: a forward entry is not an input "
                     "row");
        goto fail;
    }
    if (host[1] & FLAG_CONFLICT) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: an input feeds two outputs at "
                     "the same offset");
        goto fail;
    }
    m->n_pairs = n > 0 ? host[0] : 0;
    CU(dev_alloc(&m->in_rows, m->n_pairs), "allocating in_rows");
    CU(dev_alloc(&m->out_rows, m->n_pairs), "allocating out_rows");
    if (n > 0) {
        pairs_kernel<<<grid_for(total), kThreads, 0, s>>>(scan, f, total, m->in_rows,
                                                          m->out_rows);
        LAUNCHED("pairs kernel");
        t.release(scan);
        scan = NULL;
    }
    if (ev_pairs) CU(cudaEventRecord(ev_pairs, s), "event");
    m->mask_words = words;
    if (n > 0) {
        masks_kernel<<<grid_for(n * words), kThreads, 0, s>>>(m->out_in, n, K, words, m->masks);
        LAUNCHED("masks kernel");
        // perm: stable LSD radix sorts by mask word, least significant first, descending.
        CU(t.alloc((void **)&keys_a, n * (int64_t)sizeof(uint32_t)), "allocating sort keys");
        CU(t.alloc((void **)&keys_b, n * (int64_t)sizeof(uint32_t)), "allocating sort keys");
        CU(t.alloc((void **)&perm_b, n * (int64_t)sizeof(int32_t)), "allocating sort values");
        CU(cub::DeviceRadixSort::SortPairsDescending(NULL, tmp_bytes, keys_a, keys_b, m->perm,
                                                     perm_b, n, 0, 32, s), "mask sort");
        CU(t.alloc(&tmp, (int64_t)tmp_bytes), "allocating sort storage");
        iota_kernel<<<grid_for(n), kThreads, 0, s>>>(m->perm, n);
        LAUNCHED("iota kernel");
        pa = m->perm;
        pb = perm_b;
        for (int32_t w = 0; w < words; w++) {
            mask_word_kernel<<<grid_for(n), kThreads, 0, s>>>(m->masks, pa, n, words, w, keys_a);
            LAUNCHED("mask word kernel");
            CU(cub::DeviceRadixSort::SortPairsDescending(tmp, tmp_bytes, keys_a, keys_b, pa, pb, n,
                                                         0, 32, s), "mask sort");
            int32_t *x = pa;
            pa = pb;
            pb = x;
        }
        if (pa != m->perm)
            CU(cudaMemcpyAsync(m->perm, pa, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToDevice,
                               s), "copying perm");
    }
    t.free_all();
    return VC_OK;

fail:
    t.free_all();
    return st;
}

void copy_desc(vc_kmap_data *m, const int32_t kernel[3], const int32_t stride[3],
               const int32_t padding[3], const int32_t dilation[3])
{
    for (int a = 0; a < 3; a++) {
        m->kernel[a] = kernel[a];
        m->stride[a] = stride[a];
        m->padding[a] = padding[a];
        m->dilation[a] = dilation[a];
    }
}

vc_status build_impl(const int32_t *d_in, int64_t n_in, const int32_t shape[3],
                     int32_t batch_size, const vc_map_desc *d, cudaStream_t s, vc_kmap_data *out,
                     vc_kmap_gpu_timing *timing, vc_err *err)
{
    if (!out || !shape || !d)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: NULL argument");
    if (n_in < 0 || (n_in > 0 && !d_in))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: bad input (%lld rows, %s)",
                       (long long)n_in, d_in ? "data" : "NULL data");
    if (n_in > VC_MAX_ROWS)
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld input rows exceed the limit %lld",
                       (long long)n_in, (long long)VC_MAX_ROWS);
    if (batch_size < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: batch size %d must be >= 1",
                       (int)batch_size);
    int32_t oshape[3];
    vc_status st = vc_kmap_check_desc(d, shape, oshape, err);
    if (st != VC_OK) return st;
    vc_keypack kin, kout;
    if (vc_keypack_init(&kin, batch_size, shape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: coordinates of batch %d, shape "
                       "%dx%dx%d do not pack into 63 bits", (int)batch_size, (int)shape[0],
                       (int)shape[1], (int)shape[2]);
    const bool new_out = d->type != VC_MAP_SUBM;
    if (new_out && vc_keypack_init(&kout, batch_size, oshape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: output coordinates of batch %d, "
                       "shape %dx%dx%d do not pack into 63 bits", (int)batch_size,
                       (int)oshape[0], (int)oshape[1], (int)oshape[2]);
    if (!new_out) kout = kin;

    vc_kmap_data m;
    memset(&m, 0, sizeof m);
    m.type = d->type;
    copy_desc(&m, d->kernel, d->stride, d->padding, d->dilation);
    Geom g;
    for (int a = 0; a < 3; a++) {
        m.out_shape[a] = oshape[a];
        g.kernel[a] = d->kernel[a];
        g.stride[a] = d->stride[a];
        g.padding[a] = d->padding[a];
        g.dilation[a] = d->dilation[a];
        g.in_shape[a] = shape[a];
        g.out_shape[a] = oshape[a];
    }
    const int32_t K = d->kernel[0] * d->kernel[1] * d->kernel[2];
    g.K = K;
    g.type = (int32_t)d->type;
    m.volume = K;
    m.n_in = n_in;
    m.out_batch_size = batch_size;

    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    Temps t = {{0}, 0, s};
    vc_hash_gpu hin, hout;
    memset(&hin, 0, sizeof hin);
    memset(&hout, 0, sizeof hout);
    cudaEvent_t ev[6] = {0, 0, 0, 0, 0, 0};
    int64_t *scr = NULL;
    uint64_t *keys_in = NULL;
    vc_hash_gpu_status hr;
    vc_hash_gpu_insert_info info;
    int64_t n_entries = 0;

    if (timing) {
        for (int i = 0; i < 6; i++) CU(cudaEventCreate(&ev[i]), "creating events");
        CU(cudaEventRecord(ev[0], s), "event");
    }
    CU(t.alloc((void **)&scr, SCR_COUNT * (int64_t)sizeof(int64_t)), "allocating scratch");
    scratch_init_kernel<<<1, 1, 0, s>>>(scr);
    LAUNCHED("scratch init");

    // (a) input keys: range check, duplicates.
    hr = vc_hash_gpu_create(&hin, n_in, s);
    if (hr != VC_HASH_GPU_OK) {
        st = hash_fail(err, hr, &hin, "input");
        goto fail;
    }
    if (n_in > 0) {
        CU(t.alloc((void **)&keys_in, n_in * (int64_t)sizeof(uint64_t)), "allocating keys");
        pack_in_kernel<<<grid_for(n_in), kThreads, 0, s>>>(d_in, n_in, kin, keys_in, scr);
        LAUNCHED("pack kernel");
        // SYNC POINT (inside the insert): duplicate count, first duplicate, overflow flag.
        hr = vc_hash_gpu_insert(&hin, keys_in, NULL, n_in, s, &info);
        if (hr != VC_HASH_GPU_OK) {
            st = hash_fail(err, hr, &hin, "input");
            goto fail;
        }
        int64_t bad = INT64_MAX;
        // Same sync point: the stream is idle after the insert, this read does not wait.
        CU(cudaMemcpyAsync(&bad, scr + SCR_BAD_ROW, sizeof bad, cudaMemcpyDeviceToHost, s),
           "reading the range check");
        CU(cudaStreamSynchronize(s), "inserting the input keys");
        // Report what a sequential pass over the rows meets first, as the CPU does.
        int64_t dup = info.duplicates > 0 ? info.first_duplicate : -1;
        if (info.duplicates > 0 && dup < 0) dup = INT64_MAX - 1; // not located: still an error
        if (bad != INT64_MAX && (dup < 0 || bad < dup)) {
            int32_t c[4] = {0, 0, 0, 0};
            CU(cudaMemcpy(c, d_in + 4 * bad, sizeof c, cudaMemcpyDeviceToHost), "reading a row");
            st = vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: input row %lld (%d, %d, %d, %d) "
                         "lies outside batch size %d, shape %dx%dx%d", (long long)bad, (int)c[0],
                         (int)c[1], (int)c[2], (int)c[3], (int)batch_size, (int)shape[0],
                         (int)shape[1], (int)shape[2]);
            goto fail;
        }
        if (dup >= 0) {
            int32_t c[4] = {0, 0, 0, 0};
            if (dup < n_in)
                CU(cudaMemcpy(c, d_in + 4 * dup, sizeof c, cudaMemcpyDeviceToHost),
                   "reading a row");
            st = vc_fail(err, VC_ERR_DUPLICATE, "kernel map: input row %lld repeats the "
                         "coordinate (%d, %d, %d, %d) of an earlier row (%lld duplicates)",
                         (long long)dup, (int)c[0], (int)c[1], (int)c[2], (int)c[3],
                         (long long)info.duplicates);
            goto fail;
        }
        t.release(keys_in);
        keys_in = NULL;
    }
    if (timing) CU(cudaEventRecord(ev[1], s), "event");

    // (b) output coordinates in (b, z, y, x) order, and the output table key -> rank.
    if (new_out) {
        int64_t n_cand = n_in;
        if (d->type != VC_MAP_DOWNSAMPLE && vc_mul_overflow_i64(n_in, K, &n_cand)) {
            st = vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld inputs x %d offsets overflows",
                         (long long)n_in, (int)K);
            goto fail;
        }
        uint64_t *cand = NULL, *alt = NULL;
        int64_t *num = NULL;
        m.n_out = 0;
        if (n_cand > 0) {
            CU(t.alloc((void **)&cand, n_cand * (int64_t)sizeof(uint64_t)), "allocating keys");
            CU(t.alloc((void **)&alt, n_cand * (int64_t)sizeof(uint64_t)), "allocating keys");
            CU(t.alloc((void **)&num, (int64_t)sizeof(int64_t)), "allocating a counter");
            candidates_kernel<<<grid_for(n_cand), kThreads, 0, s>>>(d_in, n_cand, g, kout, cand);
            LAUNCHED("candidates kernel");
            // Bit `total` is set only in VC_HASH_EMPTY: sorting on total + 1 bits puts it last.
            const int end_bit = kout.shift[0] + kout.bits[0] + 1;
            cub::DoubleBuffer<uint64_t> db(cand, alt);
            size_t bytes = 0;
            void *tmp = NULL;
            CU(cub::DeviceRadixSort::SortKeys(NULL, bytes, db, n_cand, 0, end_bit, s),
               "sorting output keys");
            CU(t.alloc(&tmp, (int64_t)bytes), "allocating sort storage");
            CU(cub::DeviceRadixSort::SortKeys(tmp, bytes, db, n_cand, 0, end_bit, s),
               "sorting output keys");
            t.release(tmp);
            uint64_t *sorted = db.Current(), *uniq = db.Alternate();
            bytes = 0;
            CU(cub::DeviceSelect::Unique(NULL, bytes, sorted, uniq, num, n_cand, s),
               "unique output keys");
            CU(t.alloc(&tmp, (int64_t)bytes), "allocating unique storage");
            CU(cub::DeviceSelect::Unique(tmp, bytes, sorted, uniq, num, n_cand, s),
               "unique output keys");
            t.release(tmp);
            count_unique_kernel<<<1, 1, 0, s>>>(uniq, num, scr);
            LAUNCHED("count kernel");
            // SYNC POINT: n_out sizes out_coords and out_in.
            CU(cudaMemcpyAsync(&m.n_out, scr + SCR_N_OUT, sizeof m.n_out, cudaMemcpyDeviceToHost,
                               s), "reading the output count");
            CU(cudaStreamSynchronize(s), "collecting output keys");
            t.release(sorted);
            cand = uniq;
        }
        if (m.n_out > VC_MAX_ROWS) {
            st = vc_fail(err, VC_ERR_LIMIT, "kernel map: more than %lld output rows",
                         (long long)VC_MAX_ROWS);
            goto fail;
        }
        CU(dev_alloc(&m.out_coords, 4 * m.n_out), "allocating output coordinates");
        hr = vc_hash_gpu_create(&hout, m.n_out, s);
        if (hr != VC_HASH_GPU_OK) {
            st = hash_fail(err, hr, &hout, "output");
            goto fail;
        }
        if (m.n_out > 0) {
            unpack_kernel<<<grid_for(m.n_out), kThreads, 0, s>>>(cand, m.n_out, kout,
                                                                 m.out_coords);
            LAUNCHED("unpack kernel");
            // SYNC POINT (inside the insert): the overflow flag of the output table.
            hr = vc_hash_gpu_insert(&hout, cand, NULL, m.n_out, s, &info);
            if (hr != VC_HASH_GPU_OK) {
                st = hash_fail(err, hr, &hout, "output");
                goto fail;
            }
            if (info.duplicates != 0) {
                st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: unique output keys repeat");
                goto fail;
            }
        }
        if (cand) t.release(cand);
        if (alt && alt != cand) t.release(alt);
        if (num) t.release(num);
    } else {
        m.n_out = n_in;
    }
    if (timing) CU(cudaEventRecord(ev[2], s), "event");

    // (c) out_in.
    if (vc_mul_overflow_i64(m.n_out, K, &n_entries)) {
        st = vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld outputs x %d offsets overflows",
                     (long long)m.n_out, (int)K);
        goto fail;
    }
    CU(dev_alloc(&m.out_in, n_entries), "allocating out_in");
    if (d->type == VC_MAP_SUBM || d->type == VC_MAP_DOWNSAMPLE) {
        if (n_entries > 0) {
            const int32_t *oc = d->type == VC_MAP_SUBM ? d_in : m.out_coords;
            gather_kernel<<<grid_for(n_entries), kThreads, 0, s>>>(
                oc, n_entries, g, kin, vc_hash_gpu_get_view(&hin), m.out_in);
            LAUNCHED("gather kernel");
        }
    } else {
        CU(cudaMemsetAsync(m.out_in, 0xff, (size_t)(n_entries > 0 ? n_entries : 1) * 4, s),
           "clearing out_in");
        int64_t n_scatter = n_in * K;
        if (n_scatter > 0 && m.n_out > 0) {
            scatter_kernel<<<grid_for(n_scatter), kThreads, 0, s>>>(
                d_in, n_scatter, g, kout, vc_hash_gpu_get_view(&hout), m.out_in, scr);
            LAUNCHED("scatter kernel");
        }
    }
    if (timing) CU(cudaEventRecord(ev[3], s), "event");
    vc_hash_gpu_destroy(&hin, s);
    vc_hash_gpu_destroy(&hout, s);

    // (d), (e) pairs, masks, perm.
    st = finish_gpu(&m, s, scr, timing ? ev[4] : NULL, err);
    if (st != VC_OK) goto fail;
    if (timing) {
        CU(cudaEventRecord(ev[5], s), "event");
        CU(cudaEventSynchronize(ev[5]), "timing");
        CU(cudaEventElapsedTime(&timing->insert_ms, ev[0], ev[1]), "timing");
        CU(cudaEventElapsedTime(&timing->out_coords_ms, ev[1], ev[2]), "timing");
        CU(cudaEventElapsedTime(&timing->out_in_ms, ev[2], ev[3]), "timing");
        CU(cudaEventElapsedTime(&timing->pairs_ms, ev[3], ev[4]), "timing");
        CU(cudaEventElapsedTime(&timing->masks_ms, ev[4], ev[5]), "timing");
        CU(cudaEventElapsedTime(&timing->total_ms, ev[0], ev[5]), "timing");
        for (int i = 0; i < 6; i++) cudaEventDestroy(ev[i]);
    }
    t.free_all();
    *out = m;
    return VC_OK;

fail:
    t.free_all();
    vc_hash_gpu_destroy(&hin, s);
    vc_hash_gpu_destroy(&hout, s);
    for (int i = 0; i < 6; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    vc_kmap_data_free_gpu(&m);
    return st;
}

} // namespace

extern "C" vc_status vc_kmap_build_gpu(const int32_t *d_in_coords, int64_t n_in,
                                       const int32_t shape[3], int32_t batch_size,
                                       const vc_map_desc *d, struct CUstream_st *stream,
                                       vc_kmap_data *out, vc_err *err)
{
    return build_impl(d_in_coords, n_in, shape, batch_size, d, (cudaStream_t)stream, out, NULL,
                      err);
}

extern "C" vc_status vc_kmap_build_gpu_timed(const int32_t *d_in_coords, int64_t n_in,
                                             const int32_t shape[3], int32_t batch_size,
                                             const vc_map_desc *d, struct CUstream_st *stream,
                                             vc_kmap_data *out, vc_kmap_gpu_timing *timing,
                                             vc_err *err)
{
    return build_impl(d_in_coords, n_in, shape, batch_size, d, (cudaStream_t)stream, out, timing,
                      err);
}

extern "C" vc_status vc_kmap_inverse_gpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                                         int32_t fwd_in_batch_size, struct CUstream_st *stream,
                                         vc_kmap_data *out, vc_err *err)
{
    if (!fwd || !fwd_in_shape || !out)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: NULL argument");
    if (fwd->type != VC_MAP_STRIDED && fwd->type != VC_MAP_DOWNSAMPLE)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: the forward map must be "
                       "STRIDED or DOWNSAMPLE (type %d)", (int)fwd->type);
    const int32_t K = fwd->volume;
    if (K < 1 || K > kMaxVolume || fwd->n_in < 0 || fwd->n_in > VC_MAX_ROWS || fwd->n_out < 0 ||
        fwd->n_out > VC_MAX_ROWS || (fwd->n_out > 0 && !fwd->out_in))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: malformed forward map");
    if (fwd_in_batch_size < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: batch size %d must be >= 1",
                       (int)fwd_in_batch_size);
    static const char *const axis_name[3] = {"z", "y", "x"};
    for (int a = 0; a < 3; a++)
        if (fwd_in_shape[a] < 1)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: shape %s = %d must be "
                           ">= 1", axis_name[a], (int)fwd_in_shape[a]);
    cudaStream_t s = (cudaStream_t)stream;
    vc_kmap_data m;
    memset(&m, 0, sizeof m);
    m.type = VC_MAP_INVERSE;
    copy_desc(&m, fwd->kernel, fwd->stride, fwd->padding, fwd->dilation);
    for (int a = 0; a < 3; a++) m.out_shape[a] = fwd_in_shape[a];
    m.volume = K;
    m.n_in = fwd->n_out;
    m.n_out = fwd->n_in;
    m.out_batch_size = fwd_in_batch_size;
    int64_t n_entries, fwd_entries = fwd->n_out * (int64_t)K;
    if (vc_mul_overflow_i64(m.n_out, K, &n_entries))
        return vc_fail(err, VC_ERR_LIMIT, "inverse map: %lld outputs x %d offsets overflows",
                       (long long)m.n_out, (int)K);
    vc_status st = VC_OK;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    Temps t = {{0}, 0, s};
    int64_t *scr = NULL;
    CU(t.alloc((void **)&scr, SCR_COUNT * (int64_t)sizeof(int64_t)), "allocating scratch");
    scratch_init_kernel<<<1, 1, 0, s>>>(scr);
    LAUNCHED("scratch init");
    CU(dev_alloc(&m.out_in, n_entries), "allocating out_in");
    CU(cudaMemsetAsync(m.out_in, 0xff, (size_t)(n_entries > 0 ? n_entries : 1) * 4, s),
       "clearing out_in");
    if (fwd_entries > 0) {
        inverse_kernel<<<grid_for(fwd_entries), kThreads, 0, s>>>(fwd->out_in, fwd_entries, K,
                                                                  fwd->n_in, m.out_in, scr);
        LAUNCHED("inverse kernel");
    }
    // The flags raised above are read back with n_pairs (the one sync point).
    st = finish_gpu(&m, s, scr, NULL, err);
    if (st != VC_OK) goto fail;
    t.free_all();
    *out = m;
    return VC_OK;

fail:
    t.free_all();
    vc_kmap_data_free_gpu(&m);
    return st;
}

extern "C" void vc_kmap_data_free_gpu(vc_kmap_data *m)
{
    if (!m) return;
    cudaFree(m->out_coords);
    cudaFree(m->out_in);
    cudaFree(m->offsets);
    cudaFree(m->in_rows);
    cudaFree(m->out_rows);
    cudaFree(m->masks);
    cudaFree(m->perm);
    memset(m, 0, sizeof *m);
}
