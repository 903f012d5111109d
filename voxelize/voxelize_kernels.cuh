// voxelize/voxelize_kernels.cuh - the kernels of the GPU voxelization (steps a-f of
// voxelize.cu's header) and the host helpers both GPU voxelizers share: the per-call one
// (voxelize.cu) and the bounded, graph-capturable one (voxelize_bounded.cu). Internal; include
// from those two .cu files only (everything is in an anonymous namespace).
//
// Device counts: with PointParams.dev_count set, the point kernel runs over the extent p.n and
// treats only the first info[INF_NPTS] points as input; the rest get the empty key (they sort
// last, after every dropped point, in index order) and touch no counter. The output kernels take
// an optional device row count (d_rows) and skip the rows past it.
#ifndef VC_VOXELIZE_VOXELIZE_KERNELS_CUH
#define VC_VOXELIZE_VOXELIZE_KERNELS_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "voxelize/voxelize_gpu.h"
#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"
#include "hash/hash_gpu.h"

namespace {

// Slots of the device counter block read back at the sync point.
enum {
    INF_BAD_BATCH = 0,   // smallest index with a bad batch index, INT64_MAX when none
    INF_MAX_BATCH = 1,   // largest valid batch index
    INF_BAD_COORD = 2,   // smallest index with a non-finite x, y or z, INT64_MAX when none
    INF_NONFINITE = 3,
    INF_OUT_OF_RANGE = 4,
    INF_VALID = 5,       // points with a key
    INF_NVOX = 6,        // distinct voxels
    INF_KEPT = 7,
    INF_USED = 8,        // points in kept voxels
    INF_NREQ = 9,        // bounded: the point count asked for (*d_n_points)
    INF_NPTS = 10,       // bounded: the points read, min(max(INF_NREQ, 0), max_points)
    INF_OUT = 11,        // bounded: rows written, min(INF_KEPT, max_voxels) (its d_count)
    INF_COUNT = 12
};

struct PointParams {
    const float *pts;
    const int32_t *batch;
    int64_t n;
    int64_t dim;
    float lo[3], vs[3], lim[3]; // x, y, z
    int32_t shift[4];           // batch, z, y, x (vc_keypack order)
    int32_t batch_limit;        // desc->batch_size: > 0 means b >= it is an error
    int32_t make_keys;          // 0: only check the batch indices
    int32_t dev_count;          // 1: n is the extent, info[INF_NPTS] the points (bounded)
};

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ long long warp_min(long long v)
{
    for (int o = 16; o > 0; o >>= 1) {
        long long w = __shfl_down_sync(0xffffffffu, v, o);
        v = w < v ? w : v;
    }
    return v;
}

__global__ void info_init_kernel(int64_t *info)
{
    for (int i = 0; i < INF_COUNT; i++) info[i] = 0;
    info[INF_BAD_BATCH] = INT64_MAX;
    info[INF_BAD_COORD] = INT64_MAX;
}

// (a) One thread per point. Every lane of every warp reaches the reductions at the end
// (blockDim is a multiple of 32).
__global__ void point_kernel(PointParams p, uint64_t *keys, int64_t *idx, int64_t *info)
{
    unsigned long long nonfinite = 0, out_of_range = 0, valid = 0;
    long long bad_batch = INT64_MAX, bad_coord = INT64_MAX;
    unsigned maxb = 0;
    const int64_t live = p.dev_count ? info[INF_NPTS] : p.n;
    GRID_LOOP(i, p.n) {
        if (i >= live) { // a tail row of the extent: sorts last, counts nowhere
            if (p.make_keys) {
                keys[i] = VC_HASH_EMPTY;
                idx[i] = i;
            }
            continue;
        }
        int32_t b = 0;
        if (p.batch) {
            b = p.batch[i];
            if (b < 0 || (p.batch_limit > 0 && b >= p.batch_limit)) {
                if (i < bad_batch) bad_batch = i;
            } else if ((unsigned)b > maxb) {
                maxb = (unsigned)b;
            }
        }
        if (!p.make_keys) continue;
        const float *q = p.pts + i * p.dim;
        const float v[3] = {q[0], q[1], q[2]};
        uint64_t key = VC_HASH_EMPTY;
        if (!isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2])) {
            nonfinite++;
            if (i < bad_coord) bad_coord = i;
        } else {
            uint32_t c[3];
            bool inside = true;
#pragma unroll
            for (int a = 0; a < 3; a++) {
                // float32 subtraction and a true IEEE division (not a reciprocal multiply)
                float t = __fsub_rn(v[a], p.lo[a]);
                float f = floorf(__fdiv_rn(t, p.vs[a]));
                if (!(f >= 0.0f && f < p.lim[a])) {
                    inside = false;
                    break;
                }
                c[a] = (uint32_t)(int32_t)f;
            }
            if (inside) {
                key = ((uint64_t)(uint32_t)b << p.shift[0]) | ((uint64_t)c[2] << p.shift[1]) |
                      ((uint64_t)c[1] << p.shift[2]) | ((uint64_t)c[0] << p.shift[3]);
                valid++;
            } else {
                out_of_range++;
            }
        }
        keys[i] = key;
        idx[i] = i;
    }
    nonfinite = warp_sum(nonfinite);
    out_of_range = warp_sum(out_of_range);
    valid = warp_sum(valid);
    bad_batch = warp_min(bad_batch);
    bad_coord = warp_min(bad_coord);
    maxb = __reduce_max_sync(0xffffffffu, maxb);
    if ((threadIdx.x & 31) == 0) {
        if (nonfinite) atomicAdd((unsigned long long *)&info[INF_NONFINITE], nonfinite);
        if (out_of_range) atomicAdd((unsigned long long *)&info[INF_OUT_OF_RANGE], out_of_range);
        if (valid) atomicAdd((unsigned long long *)&info[INF_VALID], valid);
        if (bad_batch != INT64_MAX) atomicMin((long long *)&info[INF_BAD_BATCH], bad_batch);
        if (bad_coord != INT64_MAX) atomicMin((long long *)&info[INF_BAD_COORD], bad_coord);
        if (maxb) atomicMax((unsigned long long *)&info[INF_MAX_BATCH], (unsigned long long)maxb);
    }
}

// (c) head[j] = 1 where sorted position j (among the valid prefix) starts a voxel.
__global__ void head_kernel(const uint64_t *skey, int64_t n, const int64_t *info, int64_t *head)
{
    const int64_t valid = info[INF_VALID];
    GRID_LOOP(j, n) head[j] = (j < valid && (j == 0 || skey[j] != skey[j - 1])) ? 1 : 0;
}

// After the scan of the heads: the voxel count, start[nvox] = valid, and without a cap the
// kept count and the points used. bound > 0 (bounded): info[INF_OUT] = min(kept, bound).
__global__ void count_kernel(const int64_t *head, const int64_t *vid, int64_t n, int64_t cap,
                             int64_t bound, int64_t *start, int64_t *info)
{
    const int64_t nvox = vid[n - 1] + head[n - 1];
    const int64_t kept = cap > 0 && nvox > cap ? cap : nvox;
    info[INF_NVOX] = nvox;
    start[nvox] = info[INF_VALID];
    info[INF_KEPT] = kept;
    if (cap == 0) info[INF_USED] = info[INF_VALID];
    if (bound > 0) info[INF_OUT] = kept > bound ? bound : kept;
}

__global__ void start_kernel(const int64_t *head, const int64_t *vid, int64_t n, int64_t *start)
{
    GRID_LOOP(j, n)
        if (head[j]) start[vid[j]] = j;
}

// (d) The cap: flag the first point of every voxel.
__global__ void first_flag_kernel(const int64_t *sidx, const int64_t *start, int64_t n,
                                  const int64_t *info, int64_t *ptflag)
{
    const int64_t nvox = info[INF_NVOX];
    GRID_LOOP(v, n)
        if (v < nvox) ptflag[sidx[start[v]]] = 1;
}

// kflag[v] = 1 when fewer than `cap` voxels have an earlier first point.
__global__ void keep_kernel(const int64_t *sidx, const int64_t *start, const int64_t *prank,
                            int64_t n, int64_t cap, const int64_t *info, int64_t *kflag)
{
    const int64_t nvox = info[INF_NVOX];
    GRID_LOOP(v, n) kflag[v] = (v < nvox && prank[sidx[start[v]]] < cap) ? 1 : 0;
}

// krow[row] = voxel of each kept row; the points used (an exact integer sum).
__global__ void compact_kernel(const int64_t *kflag, const int64_t *row, const int64_t *start,
                               int64_t n, int64_t *krow, int64_t *info)
{
    unsigned long long used = 0;
    GRID_LOOP(v, n) {
        if (kflag[v]) {
            krow[row[v]] = v;
            used += (unsigned long long)(start[v + 1] - start[v]);
        }
    }
    used = warp_sum(used);
    if ((threadIdx.x & 31) == 0 && used)
        atomicAdd((unsigned long long *)&info[INF_USED], used);
}

// (f) Coordinates of the kept rows: `kept` rows, or the first *d_rows of them (d_rows: a
// device count, bounded runs).
__global__ void coords_kernel(const uint64_t *skey, const int64_t *start, const int64_t *krow,
                              int64_t kept, const int64_t *d_rows, vc_keypack kp,
                              int32_t *coords)
{
    const int64_t rows = d_rows ? *d_rows : kept;
    GRID_LOOP(r, kept) {
        if (r >= rows) break;
        const int64_t v = krow ? krow[r] : r;
        int32_t c[4];
        vc_key_unpack_d(kp, skey[start[v]], c);
#pragma unroll
        for (int k = 0; k < 4; k++) coords[r * 4 + k] = c[k];
    }
}

// Device twins of core/dtype.h (same bit manipulation, same results, NaN payloads included).
__device__ __forceinline__ uint16_t f32_to_bf16_d(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ __forceinline__ uint16_t f32_to_f16_d(float f)
{
    uint32_t u = __float_as_uint(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u;
    uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

__device__ __forceinline__ void store_d(void *out, int dtype, int64_t i, float v)
{
    if (dtype == VC_DTYPE_FP16)
        ((uint16_t *)out)[i] = f32_to_f16_d(v);
    else if (dtype == VC_DTYPE_BF16)
        ((uint16_t *)out)[i] = f32_to_bf16_d(v);
    else
        ((float *)out)[i] = v;
}

// One thread per (row, channel). MEAN adds in double in the sorted order (input order), exactly
// the CPU's sequence of operations.
__global__ void features_kernel(const float *pts, int64_t dim, const int64_t *sidx,
                                const int64_t *start, const int64_t *krow, int64_t kept,
                                const int64_t *d_rows, int64_t channels, int reduce, int dtype,
                                void *out)
{
    const int64_t live = (d_rows ? *d_rows : kept) * channels;
    GRID_LOOP(t, kept * channels) {
        if (t >= live) break;
        const int64_t r = t / channels, c = t - r * channels;
        const int64_t v = krow ? krow[r] : r;
        const int64_t s0 = start[v], m = start[v + 1] - s0;
        float val;
        if (reduce == VC_REDUCE_MEAN) {
            double s = 0.0;
            for (int64_t j = s0; j < s0 + m; j++) s += (double)pts[sidx[j] * dim + c];
            val = (float)(s / (double)m);
        } else if (reduce == VC_REDUCE_FIRST) {
            val = pts[sidx[s0] * dim + c];
        } else {
            val = (float)m;
        }
        store_d(out, dtype, t, val);
    }
}

// ---- host helpers of both voxelizers ------------------------------------------------------

const char kArea[] = "voxelize (GPU)"; // messages of VC_CUDA_TRY (core/cuda_check.cuh)

vc_status keypack_fail(vc_err *err, int32_t batch_size, const int32_t shape[3])
{
    return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                   "voxelize: batch size %d and grid %d x %d x %d (z, y, x) do not pack "
                   "into a 63-bit key",
                   (int)batch_size, (int)shape[0], (int)shape[1], (int)shape[2]);
}

// (a)'s parameters: n points (the extent when dev_count) of dim columns.
PointParams point_params(const vc_voxelize_desc *d, const int32_t shape[3],
                         const vc_keypack &kp1, const float *pts, const int32_t *batch,
                         int64_t n, int64_t dim, bool make_keys, bool dev_count)
{
    PointParams p;
    memset(&p, 0, sizeof p);
    p.pts = pts;
    p.batch = batch;
    p.n = n;
    p.dim = dim;
    for (int a = 0; a < 3; a++) {
        p.lo[a] = d->range[a];
        p.vs[a] = d->voxel_size[a];
    }
    p.lim[0] = (float)shape[2];
    p.lim[1] = (float)shape[1];
    p.lim[2] = (float)shape[0];
    for (int k = 0; k < 4; k++) p.shift[k] = kp1.shift[k];
    p.batch_limit = d->batch_size;
    p.make_keys = make_keys ? 1 : 0;
    p.dev_count = dev_count ? 1 : 0;
    return p;
}

// The key layout of a run. kp1: the packing for batch size 1, whose shifts of x, y, z and the
// batch field are those of every batch size (only the batch field's width differs). make_keys:
// the layout can fit for some batch size the points may give (false: only the batch errors,
// reported first by the CPU, remain to be looked for; without a batch array that means the
// layout cannot fit at known_bs). end_bit: the sort's bits, those a valid key can use plus one
// (VC_HASH_EMPTY is all ones there, so dropped points sort last); with an inferred batch size
// the batch field is bounded by 31 bits.
struct KeyPlan {
    vc_keypack kp1;
    bool make_keys;
    int end_bit;
    int32_t known_bs;
};

KeyPlan key_plan(const vc_voxelize_desc *d, const int32_t shape[3], bool has_batch)
{
    KeyPlan k;
    memset(&k, 0, sizeof k);
    const bool layout_ok = vc_keypack_init(&k.kp1, 1, shape) == 0;
    const bool batch_known = d->batch_size > 0 || !has_batch;
    k.known_bs = d->batch_size > 0 ? d->batch_size : 1;
    vc_keypack kpk;
    memset(&kpk, 0, sizeof kpk);
    const bool known_ok = batch_known && vc_keypack_init(&kpk, k.known_bs, shape) == 0;
    k.make_keys = layout_ok && (!batch_known || known_ok);
    k.end_bit = k.kp1.shift[0] + (batch_known ? (known_ok ? kpk.bits[0] : 0) : 31) + 1;
    if (k.end_bit > 64) k.end_bit = 64;
    return k;
}

// The device arrays of steps (b) to (d) for n points.
struct GroupBufs {
    uint64_t *keys_a, *keys_b;      // [n]: the point kernel's keys, the sort's other buffer
    int64_t *idx_a, *idx_b;         // [n]: the point kernel's indices, the other buffer
    int64_t *start;                 // [n + 1]
    int64_t *ptflag, *prank, *krow; // [n] each; cap > 0 only
    int64_t *info;
    void *tmp;                      // CUB storage of group_tmp_bytes
    size_t tmp_bytes;
    const uint64_t *skey;           // out: the sorted keys
    const int64_t *sidx;            // out: the points in key order
};

// Bytes of CUB storage for the sort and the scans of n points over end_bit bits.
cudaError_t group_tmp_bytes(int64_t n, int end_bit, size_t *bytes)
{
    cub::DoubleBuffer<uint64_t> dk(NULL, NULL);
    cub::DoubleBuffer<int64_t> dv(NULL, NULL);
    size_t sort_bytes = 0, scan_bytes = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, dk, dv, n, 0, end_bit);
    if (e == cudaSuccess)
        e = cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, (const int64_t *)NULL,
                                          (int64_t *)NULL, n);
    *bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    return e;
}

// (b) sort; (c) voxels; (d) the cap (cap > 0). Queued only: no allocation, no synchronisation.
// bound > 0: info[INF_OUT] = min(kept, bound). On failure *what names the step.
cudaError_t queue_group(GroupBufs &g, int64_t n, int64_t cap, int end_bit, int64_t bound,
                        cudaStream_t s, const char **what)
{
    cudaError_t e;
    cub::DoubleBuffer<uint64_t> dk(g.keys_a, g.keys_b);
    cub::DoubleBuffer<int64_t> dv(g.idx_a, g.idx_b);
#define VC_Q(call, msg)                                                                        \
    do {                                                                                       \
        *what = msg;                                                                           \
        if ((e = (call)) != cudaSuccess) return e;                                             \
    } while (0)
    VC_Q(cub::DeviceRadixSort::SortPairs(g.tmp, g.tmp_bytes, dk, dv, n, 0, end_bit, s),
         "sorting point keys");
    g.skey = dk.Current();
    g.sidx = dv.Current();
    // The alternate buffers are free now: heads and voxel ids live there.
    int64_t *head = (int64_t *)dk.Alternate(), *vid = dv.Alternate();
    head_kernel<<<grid_for(n), kThreads, 0, s>>>(g.skey, n, g.info, head);
    VC_Q(cudaGetLastError(), "head kernel");
    VC_Q(cub::DeviceScan::ExclusiveSum(g.tmp, g.tmp_bytes, head, vid, n, s), "scanning heads");
    count_kernel<<<1, 1, 0, s>>>(head, vid, n, cap, bound, g.start, g.info);
    VC_Q(cudaGetLastError(), "count kernel");
    start_kernel<<<grid_for(n), kThreads, 0, s>>>(head, vid, n, g.start);
    VC_Q(cudaGetLastError(), "start kernel");
    if (cap > 0) {
        // head and vid are free again: kept flags and rows go there.
        int64_t *kflag = head, *row = vid;
        VC_Q(cudaMemsetAsync(g.ptflag, 0, (size_t)n * sizeof(int64_t), s), "clearing flags");
        first_flag_kernel<<<grid_for(n), kThreads, 0, s>>>(g.sidx, g.start, n, g.info, g.ptflag);
        VC_Q(cudaGetLastError(), "first-point kernel");
        VC_Q(cub::DeviceScan::ExclusiveSum(g.tmp, g.tmp_bytes, g.ptflag, g.prank, n, s),
             "ranking voxels");
        keep_kernel<<<grid_for(n), kThreads, 0, s>>>(g.sidx, g.start, g.prank, n, cap, g.info,
                                                     kflag);
        VC_Q(cudaGetLastError(), "keep kernel");
        VC_Q(cub::DeviceScan::ExclusiveSum(g.tmp, g.tmp_bytes, kflag, row, n, s),
             "scanning kept voxels");
        compact_kernel<<<grid_for(n), kThreads, 0, s>>>(kflag, row, g.start, n, g.krow, g.info);
        VC_Q(cudaGetLastError(), "compact kernel");
    }
#undef VC_Q
    return cudaSuccess;
}

// (e) after the sync, from the host copy h of the counters: the errors in the CPU's order
// (batch index, batch size and key layout, non-finite point, voxel count). P, dim, B: the
// points the counters describe (device; an error path reads the offending point, blocking).
// On VC_OK *batch_size and *kp are the result's.
vc_status report_counts(const int64_t *h, const vc_voxelize_desc *d, const float *P,
                        int64_t dim, const int32_t *B, const int32_t shape[3], bool make_keys,
                        int32_t *batch_size, vc_keypack *kp, vc_err *err)
{
    vc_status st = VC_OK;
    if (h[INF_BAD_BATCH] != INT64_MAX) {
        const int64_t i = h[INF_BAD_BATCH];
        int32_t b = 0;
        VC_CUDA_TRY(cudaMemcpy(&b, B + i, sizeof b, cudaMemcpyDeviceToHost),
                    "reading a batch index");
        if (b < 0)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "voxelize: point %lld has negative batch index %d", (long long)i,
                           (int)b);
        return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                       "voxelize: point %lld has batch index %d, batch_size is %d",
                       (long long)i, (int)b, (int)d->batch_size);
    }
    *batch_size = d->batch_size;
    if (*batch_size == 0) {
        const int64_t maxb = B ? h[INF_MAX_BATCH] : 0;
        if (maxb >= INT32_MAX)
            return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                           "voxelize: batch index %d leaves no room for a batch size",
                           (int)maxb);
        *batch_size = (int32_t)maxb + 1;
    }
    if (vc_keypack_init(kp, *batch_size, shape) != 0 || !make_keys)
        return keypack_fail(err, *batch_size, shape);
    if (d->nonfinite == VC_NONFINITE_ERROR && h[INF_BAD_COORD] != INT64_MAX) {
        const int64_t i = h[INF_BAD_COORD];
        float q[3] = {0, 0, 0};
        VC_CUDA_TRY(cudaMemcpy(q, P + i * dim, sizeof q, cudaMemcpyDeviceToHost),
                    "reading a point");
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: point %lld has a non-finite coordinate (%g, %g, %g)",
                       (long long)i, (double)q[0], (double)q[1], (double)q[2]);
    }
    if (h[INF_NVOX] > VC_MAX_ROWS)
        return vc_fail(err, VC_ERR_LIMIT, "voxelize: more than %lld distinct voxels",
                       (long long)VC_MAX_ROWS);
fail:
    return st;
}

} // namespace

#endif
