// pool/pool.cu - pooling on the GPU, with the semantics of the CPU twin pool/pool_cpu.c.
//  - vc_pool_gpu: one thread per (output row, channel), channels fastest so a warp reads whole
//    input rows; the K taps of out_in are visited in k order exactly as on the CPU (max keeps the
//    first NaN it meets; the mean sums in fp32 in k order and divides by the count), so results
//    are bit-identical to the CPU twin. Rows with no input give 0. No host synchronisation.
//    Rows of whole 16-byte vectors (pool_vec_kernel) take 8 (fp32: 4) channels a thread, the
//    same arithmetic per channel.
//  - vc_global_pool_gpu: rows are grouped by batch item with a stable radix sort of the batch
//    indices (skipped for batch size 1), each item's rows are cut into S fixed slices, each
//    (channel tile, item, slice) block reduces its slice in a fixed pattern (lane y takes rows
//    y, y+8, ...; lanes combined in order), and a last kernel combines the S slices in order.
//    Sums are in double, like the CPU's; nothing depends on scheduling, so the result is the same
//    run after run. The batch indices are checked first and the first bad row is read back
//    (one synchronisation) so that a bad index fails before dst is touched, as on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>

#include "pool/pool.h"
#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"

namespace {

const char kArea[] = "pool"; // messages of VC_CUDA_TRY (core/cuda_check.cuh)

const int kTileC = 32;   // channels per global-pool block (threadIdx.x)
const int kLanes = 8;    // row lanes per global-pool block (threadIdx.y)

// One input value into a map pool's running max or sum, as the CPU twin does.
__device__ __forceinline__ void pool_take(float &v, int64_t &count, float x, int mode)
{
    if (mode == VC_POOL_AVG) {
        v += x;
    } else if (count == 0 || (!isnan(v) && (x > v || isnan(x)))) {
        v = x; // a NaN, once seen, stays
    }
    count++;
}

// Input rows of taps k0 .. k0 + 7 of an output's out_in row (-1: absent, past K, or not an
// input row), loaded together so that their round trips overlap.
__device__ __forceinline__ void load_taps8(const int32_t *row, int32_t k0, int32_t K,
                                           int64_t n_in, int32_t r[8])
{
#pragma unroll
    for (int u = 0; u < 8; u++) {
        r[u] = k0 + u < K ? __ldg(row + k0 + u) : -1;
        if (r[u] >= n_in) r[u] = -1;
    }
}

// BATCH: the taps eight at a time (below); else one at a time, fewer registers, for layers
// with enough threads to hide the loads' latency.
template <bool BATCH>
__global__ void pool_kernel(const int32_t *out_in, int64_t n_out, int32_t K, int64_t n_in,
                            const void *in, int dtype, int64_t channels, int mode, void *out)
{
    GRID_LOOP(i, n_out * channels)
    {
        const int64_t p = i / channels, c = i - p * channels;
        const int32_t *row = out_in + p * K;
        float v = 0.0f;
        int64_t count = 0;
        // BATCH: eight taps at a time - their indices, then their features, all in flight
        // together (a small pooling layer is bound by these dependent loads), then combined in
        // k order, as the one-at-a-time loop does.
        for (int32_t k0 = 0; BATCH && k0 < K; k0 += 8) {
            int32_t r[8];
            float x[8];
            load_taps8(row, k0, K, n_in, r);
#pragma unroll
            for (int u = 0; u < 8; u++)
                x[u] = r[u] >= 0 ? load_f32(in, dtype, (int64_t)r[u] * channels + c) : 0.0f;
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (r[u] >= 0) pool_take(v, count, x[u], mode);
        }
        for (int32_t k = 0; !BATCH && k < K; k++) {
            const int32_t r = row[k];
            if (r < 0 || r >= n_in) continue;
            pool_take(v, count, load_f32(in, dtype, (int64_t)r * channels + c), mode);
        }
        if (mode == VC_POOL_AVG && count > 0) v /= (float)count;
        store_f32(out, dtype, i, v);
    }
}

// The same pooling, V = 16 / sizeof(T) channels a thread (8 for 16-bit features, 4 for fp32),
// read and written as 16-byte vectors, so that a warp moves a row's channels in a few wide
// transactions instead of one 2-byte load per thread. Taps eight at a time, as BATCH above;
// each channel is combined in k order exactly as pool_kernel does (the same bits).
template <typename T> __device__ __forceinline__ float elem_f32(T x);
template <> __device__ __forceinline__ float elem_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ float elem_f32<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float elem_f32<__nv_bfloat16>(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}
template <typename T> __device__ __forceinline__ T f32_elem(float v);
template <> __device__ __forceinline__ float f32_elem<float>(float v) { return v; }
template <> __device__ __forceinline__ __half f32_elem<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 f32_elem<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

template <typename T>
__global__ void pool_vec_kernel(const int32_t *out_in, int64_t n_out, int32_t K, int64_t n_in,
                                const T *in, int64_t channels, int mode, T *out)
{
    constexpr int V = 16 / sizeof(T);
    const int64_t groups = channels / V;
    GRID_LOOP(i, n_out * groups)
    {
        const int64_t p = i / groups, c = (i - p * groups) * V;
        const int32_t *row = out_in + p * K;
        float v[V];
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = 0.0f;
        int64_t count = 0;
        for (int32_t k0 = 0; k0 < K; k0 += 8) {
            int32_t r[8];
            uint4 x[8];
            load_taps8(row, k0, K, n_in, r);
#pragma unroll
            for (int u = 0; u < 8; u++)
                x[u] = r[u] >= 0 ? __ldg(reinterpret_cast<const uint4 *>(in + (int64_t)r[u] *
                                                                                   channels + c))
                                 : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int u = 0; u < 8; u++) {
                if (r[u] < 0) continue;
                const T *e = reinterpret_cast<const T *>(&x[u]);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    int64_t cnt = count; // every channel of the row has seen `count` inputs
                    pool_take(v[j], cnt, elem_f32<T>(e[j]), mode);
                }
                count++;
            }
        }
        uint4 o;
        T *e = reinterpret_cast<T *>(&o);
#pragma unroll
        for (int j = 0; j < V; j++)
            e[j] = f32_elem<T>(mode == VC_POOL_AVG && count > 0 ? v[j] / (float)count : v[j]);
        *reinterpret_cast<uint4 *>(out + p * channels + c) = o;
    }
}

// ---- global pooling ----------------------------------------------------------------------

// Smallest row whose batch index is outside [0, batch_size); the batch keys for the sort.
__global__ void batch_check_kernel(const int32_t *coords, int64_t n, int32_t batch_size,
                                   long long *bad, uint32_t *keys)
{
    GRID_LOOP(i, n)
    {
        const int32_t b = coords[4 * i];
        if (b < 0 || b >= batch_size) atomicMin(bad, (long long)i);
        if (keys) keys[i] = (uint32_t)b;
    }
}

__global__ void iota_kernel(int32_t *v, int64_t n)
{
    GRID_LOOP(i, n) v[i] = (int32_t)i;
}

// seg[b] = first sorted position of batch b, b in [0, batch_size]; sorted NULL: one item.
__global__ void segments_kernel(const uint32_t *sorted, int64_t n, int32_t batch_size,
                                int64_t *seg)
{
    GRID_LOOP(b, (int64_t)batch_size + 1)
    {
        int64_t lo = 0, hi = n;
        if (!sorted) {
            lo = b == 0 ? 0 : n;
        } else {
            while (lo < hi) {
                const int64_t mid = (lo + hi) >> 1;
                if ((int64_t)sorted[mid] < b) lo = mid + 1;
                else hi = mid;
            }
        }
        seg[b] = lo;
    }
}

// Combines (v, cnt) with (o, ocnt) in a fixed order; max keeps the first NaN.
__device__ __forceinline__ void combine(double &v, int64_t &cnt, double o, int64_t ocnt,
                                        int mode)
{
    if (ocnt == 0) return;
    if (mode == VC_POOL_AVG) {
        v += o;
    } else if (cnt == 0 || (!isnan(v) && (o > v || isnan(o)))) {
        v = o;
    }
    cnt += ocnt;
}

// Block (item b * tiles + channel tile, slice s): reduces rows [lo, hi) of item b's rows.
__global__ void global_slice_kernel(const void *in, int dtype, int64_t channels,
                                    const int32_t *order, const int64_t *seg, int32_t slices,
                                    int mode, double *part, int64_t *part_cnt)
{
    __shared__ double sv[kLanes][kTileC];
    __shared__ int64_t sc[kLanes][kTileC];
    const int32_t tiles = (int32_t)((channels + kTileC - 1) / kTileC);
    const int64_t c = (int64_t)(blockIdx.x % tiles) * kTileC + threadIdx.x;
    const int32_t b = (int32_t)(blockIdx.x / tiles), s = blockIdx.y;
    const int64_t beg = seg[b], len = seg[b + 1] - beg;
    const int64_t lo = beg + len * s / slices, hi = beg + len * (s + 1) / slices;
    double v = 0.0;
    int64_t cnt = 0;
    if (c < channels) {
        for (int64_t j = lo + threadIdx.y; j < hi; j += kLanes) {
            const int64_t row = order ? order[j] : j;
            combine(v, cnt, (double)load_f32(in, dtype, row * channels + c), 1, mode);
        }
    }
    sv[threadIdx.y][threadIdx.x] = v;
    sc[threadIdx.y][threadIdx.x] = cnt;
    __syncthreads();
    if (threadIdx.y == 0 && c < channels) {
        for (int y = 1; y < kLanes; y++) combine(v, cnt, sv[y][threadIdx.x], sc[y][threadIdx.x],
                                                 mode);
        const int64_t at = ((int64_t)b * slices + s) * channels + c;
        part[at] = v;
        part_cnt[at] = cnt;
    }
}

__global__ void global_final_kernel(const double *part, const int64_t *part_cnt,
                                    int32_t batch_size, int32_t slices, int64_t channels,
                                    int mode, float *dst)
{
    GRID_LOOP(i, (int64_t)batch_size * channels)
    {
        const int64_t b = i / channels, c = i - b * channels;
        double v = 0.0;
        int64_t cnt = 0;
        for (int32_t s = 0; s < slices; s++) {
            const int64_t at = (b * slices + s) * channels + c;
            combine(v, cnt, part[at], part_cnt[at], mode);
        }
        if (cnt == 0) v = 0.0;
        else if (mode == VC_POOL_AVG) v /= (double)cnt;
        dst[i] = (float)v;
    }
}

} // namespace

extern "C" vc_status vc_pool_gpu(const vc_kmap_data *map, vc_pool_mode mode, const void *in,
                                 vc_dtype dtype, int64_t channels, void *out,
                                 const vc_engine_options *opt, struct CUstream_st *stream,
                                 vc_err *err)
{
    (void)opt; // allocates nothing
    vc_status st = vc_pool_check_args(map, mode, in, dtype, channels, out, err);
    if (st != VC_OK) return st;
    const int64_t n_in = map->n_in, n_out = map->n_out;
    const int64_t K = map->volume;
    if (K > VC_KMAP_MAX_VOLUME)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "pool: bad kernel map (volume %lld)",
                       (long long)K);
    if (n_out == 0) return VC_OK;
    cudaStream_t s = stream;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    // Else eight taps in flight per thread below 2^19 outputs x channels (faster on the small
    // k2 s2 max pools of spconv's net; at 41k x 64 one at a time is faster:
    // docs/journal/benchmarks-history.md, "Tap split: the coarse levels on more CTAs").
    // 16-byte rows (channels a multiple of 8 for 16-bit features, 4 for fp32, aligned arrays)
    // from 2^17 outputs x channels: the vector kernel, taps eight at a time whatever the size,
    // since a thread carries 8 (or 4) channels and the layer has that many times fewer threads
    // (measured faster on spconv's k2 s2 max pools, docs/journal/benchmarks-history.md, "k1
    // shortcuts as dense GEMMs, 16-byte pooling"); below 2^17 it lost: a
    // thread's 8 x 8 combines in series are then the critical path.
    const int v = dtype == VC_DTYPE_FP32 ? 4 : 8;
    const bool vec = channels % v == 0 && n_out * channels >= (1 << 17) &&
                     ((uintptr_t)in | (uintptr_t)out) % 16 == 0;
    const int64_t vthreads = n_out * (channels / v);
    if (vec && dtype == VC_DTYPE_FP16)
        pool_vec_kernel<__half><<<grid_for(vthreads), kThreads, 0, s>>>(
            map->out_in, n_out, (int32_t)K, n_in, static_cast<const __half *>(in), channels,
            (int)mode, static_cast<__half *>(out));
    else if (vec && dtype == VC_DTYPE_BF16)
        pool_vec_kernel<__nv_bfloat16><<<grid_for(vthreads), kThreads, 0, s>>>(
            map->out_in, n_out, (int32_t)K, n_in, static_cast<const __nv_bfloat16 *>(in),
            channels, (int)mode, static_cast<__nv_bfloat16 *>(out));
    else if (vec)
        pool_vec_kernel<float><<<grid_for(vthreads), kThreads, 0, s>>>(
            map->out_in, n_out, (int32_t)K, n_in, static_cast<const float *>(in), channels,
            (int)mode, static_cast<float *>(out));
    else if (n_out * channels < (1 << 19))
        pool_kernel<true><<<grid_for(n_out * channels), kThreads, 0, s>>>(
            map->out_in, n_out, (int32_t)K, n_in, in, (int)dtype, channels, (int)mode, out);
    else
        pool_kernel<false><<<grid_for(n_out * channels), kThreads, 0, s>>>(
            map->out_in, n_out, (int32_t)K, n_in, in, (int)dtype, channels, (int)mode, out);
    VC_CUDA_TRY(cudaGetLastError(), "pool kernel");
fail:
    return st;
}

extern "C" vc_status vc_global_pool_gpu(const int32_t *coords, int64_t n, int32_t batch_size,
                                        vc_pool_mode mode, const void *in, vc_dtype dtype,
                                        int64_t channels, float *dst,
                                        const vc_engine_options *opt,
                                        struct CUstream_st *stream, vc_err *err)
{
    vc_status st = VC_OK;
    const vc_allocator *al = vc_opt_allocator(opt);
    st = vc_global_pool_check_args(coords, n, batch_size, mode, in, dtype, channels, dst, err);
    if (st != VC_OK) return st;
    // the device's own limits: rows index int32 arrays, and the grid holds every (batch, tile)
    if (n > VC_MAX_ROWS || (int64_t)batch_size * ((channels + kTileC - 1) / kTileC) > INT32_MAX)
        return vc_fail(err, VC_ERR_LIMIT, "global pool: sizes overflow");
    cudaStream_t s = stream;
    cudaGetLastError();
    long long *bad = NULL;
    uint32_t *keys = NULL, *keys_sorted = NULL;
    int32_t *rows = NULL, *order = NULL;
    int64_t *seg = NULL, *part_cnt = NULL;
    double *part = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    long long host_bad = 0;
    int32_t host_batch = 0;
    const int32_t tiles = (int32_t)((channels + kTileC - 1) / kTileC);
    int32_t slices = 1;

    if (n == 0) {
        VC_CUDA_TRY(cudaMemsetAsync(dst, 0, (size_t)(batch_size * channels) * sizeof(float), s),
                    "zeroing the result");
        goto fail;
    }
    VC_CUDA_TRY(vc_dev_alloc_n(al, &bad, 1, s), "allocating the check flag");
    VC_CUDA_TRY(cudaMemsetAsync(bad, 0x7f, sizeof(long long), s), "initialising the check flag");
    if (batch_size > 1)
        VC_CUDA_TRY(vc_dev_alloc_n(al, &keys, n, s),
                    "allocating sort keys");
    batch_check_kernel<<<grid_for(n), kThreads, 0, s>>>(coords, n, batch_size, bad, keys);
    VC_CUDA_TRY(cudaGetLastError(), "batch check kernel");
    // SYNC POINT: the first bad row, before anything is written to dst.
    VC_CUDA_TRY(cudaMemcpyAsync(&host_bad, bad, sizeof host_bad, cudaMemcpyDeviceToHost, s),
                "reading the batch check");
    VC_CUDA_TRY(cudaStreamSynchronize(s), "checking batch indices");
    if (host_bad < n) {
        VC_CUDA_TRY(cudaMemcpy(&host_batch, coords + 4 * host_bad, sizeof host_batch,
                               cudaMemcpyDeviceToHost), "reading a bad batch index");
        st = vc_fail(err, VC_ERR_OUT_OF_RANGE,
                     "global pool: row %lld has batch index %d outside [0, %d)", host_bad,
                     (int)host_batch, (int)batch_size);
        goto fail;
    }

    if (batch_size > 1) {
        int end_bit = 1;
        while (end_bit < 32 && ((int64_t)1 << end_bit) < (int64_t)batch_size) end_bit++;
        VC_CUDA_TRY(vc_dev_alloc_n(al, &keys_sorted, n, s),
                    "allocating sort keys");
        VC_CUDA_TRY(vc_dev_alloc_n(al, &rows, n, s),
                    "allocating sort values");
        VC_CUDA_TRY(vc_dev_alloc_n(al, &order, n, s),
                    "allocating sort values");
        iota_kernel<<<grid_for(n), kThreads, 0, s>>>(rows, n);
        VC_CUDA_TRY(cudaGetLastError(), "iota kernel");
        VC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, keys, keys_sorted, rows, order,
                                                    (int)n, 0, end_bit, s), "batch sort");
        VC_CUDA_TRY((cudaError_t)vc_dev_alloc(al, &tmp, tmp_bytes ? tmp_bytes : 16, s),
                    "allocating sort storage");
        VC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, keys, keys_sorted, rows, order,
                                                    (int)n, 0, end_bit, s), "batch sort");
    }
    {
        // Enough (tile, item, slice) blocks to fill the GPU; a fixed function of the sizes.
        const int64_t blocks = (int64_t)tiles * batch_size;
        int64_t sl = (4 * 132 + blocks - 1) / blocks;
        const int64_t by_rows = (n + 1023) / 1024; // at least ~1024 rows per slice overall
        if (sl > by_rows) sl = by_rows;
        if (sl > 256) sl = 256;
        if (sl < 1) sl = 1;
        slices = (int32_t)sl;
    }
    VC_CUDA_TRY(vc_dev_alloc_n(al, &seg, (int64_t)batch_size + 1, s),
                "allocating segments");
    VC_CUDA_TRY(vc_dev_alloc_n(al, &part, (int64_t)batch_size * slices * channels, s),
                "allocating partial results");
    VC_CUDA_TRY(vc_dev_alloc_n(al, &part_cnt, (int64_t)batch_size * slices * channels, s),
                "allocating partial counts");
    segments_kernel<<<grid_for((int64_t)batch_size + 1), kThreads, 0, s>>>(
        batch_size > 1 ? keys_sorted : NULL, n, batch_size, seg);
    VC_CUDA_TRY(cudaGetLastError(), "segments kernel");
    {
        dim3 grid((unsigned)((int64_t)tiles * batch_size), (unsigned)slices);
        dim3 block(kTileC, kLanes);
        global_slice_kernel<<<grid, block, 0, s>>>(in, (int)dtype, channels,
                                                   batch_size > 1 ? order : NULL, seg, slices,
                                                   (int)mode, part, part_cnt);
        VC_CUDA_TRY(cudaGetLastError(), "global pool kernel");
    }
    global_final_kernel<<<grid_for((int64_t)batch_size * channels), kThreads, 0, s>>>(
        part, part_cnt, batch_size, slices, channels, (int)mode, dst);
    VC_CUDA_TRY(cudaGetLastError(), "global pool final kernel");

fail:
    vc_dev_free(al, bad, s);
    vc_dev_free(al, keys, s);
    vc_dev_free(al, keys_sorted, s);
    vc_dev_free(al, rows, s);
    vc_dev_free(al, order, s);
    vc_dev_free(al, tmp, s);
    vc_dev_free(al, seg, s);
    vc_dev_free(al, part, s);
    vc_dev_free(al, part_cnt, s);
    return st;
}
