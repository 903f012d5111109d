// voxelize/voxelize.cu - voxelization on the GPU (contract in voxelize_gpu.h), with the semantics of
// the CPU twin voxelize/voxelize_cpu.c: identical coordinates, order, counts and statistics, the same
// errors in the same order naming the same point, features bit-identical to the CPU's.
//
// Pipeline (n points, one thread per point or voxel, no atomics that decide a value):
//  (a) point kernel: batch checks (smallest bad index by atomicMin, largest batch index by
//      atomicMax), non-finite check (smallest index), voxel index per axis with IEEE float32
//      subtraction and division (__fsub_rn, __fdiv_rn) and floorf, the packed key
//      (b << S) | (z, y, x) - the layout of vc_keypack, whose shifts of x, y, z and b do not
//      depend on the batch size - or VC_HASH_EMPTY for a dropped point.
//  (b) stable radix sort of (key, point index) pairs from the identity: the kept points come
//      first, grouped by voxel in (b, z, y, x) order, each voxel's points in input order.
//      The sort runs over the bits a valid key can use plus one, in which VC_HASH_EMPTY is all
//      ones, so dropped points sort last; with an inferred batch size the bound is 31 batch bits.
//  (c) voxel heads (key differs from the previous one) and an exclusive scan: start[v], the
//      first sorted position of voxel v; its count is start[v + 1] - start[v]; its first point
//      (smallest index) is the point at start[v].
//  (d) the cap (max_voxels > 0): flag each voxel's first point in a point-indexed array; an
//      exclusive scan gives each voxel the number of voxels whose first point comes earlier,
//      which is its id on the CPU (ids in order of first appearance); ids < max_voxels stay.
//      A scan of the kept flags compacts the kept voxels, still in (b, z, y, x) order.
//  (e) ONE SYNC: the counters (errors, counts, voxels, points used) come back to the host, which
//      reports errors in the CPU's order (batch, batch size and key layout, non-finite point,
//      voxel limit), then allocates the result exactly and launches the output kernels.
//  (f) coordinates unpacked from the keys; features: MEAN sums each (voxel, column) in double in
//      the sorted order, which is input order, as the CPU does, then (float)(sum / count):
//      bit-identical to the CPU; FIRST copies the first point's columns; COUNT the count.
//      16-bit outputs use device twins of core/dtype.h's conversions (same bits).
// Error paths may make one more blocking read (the offending point's batch index or coordinates
// for the message). Temporaries and the result arrays come from the options' allocator
// (core/alloc.h; by default the device pool), stream ordered; temporaries are freed on every
// path. The function returns without waiting for the output kernels: the result is ready in
// stream order.
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
    INF_COUNT = 9
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
    GRID_LOOP(i, p.n) {
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
// kept count and the points used.
__global__ void count_kernel(const int64_t *head, const int64_t *vid, int64_t n, int64_t cap,
                             int64_t *start, int64_t *info)
{
    const int64_t nvox = vid[n - 1] + head[n - 1];
    info[INF_NVOX] = nvox;
    start[nvox] = info[INF_VALID];
    info[INF_KEPT] = cap > 0 && nvox > cap ? cap : nvox;
    if (cap == 0) info[INF_USED] = info[INF_VALID];
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

// (f) Coordinates of the kept rows.
__global__ void coords_kernel(const uint64_t *skey, const int64_t *start, const int64_t *krow,
                              int64_t kept, vc_keypack kp, int32_t *coords)
{
    GRID_LOOP(r, kept) {
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
                                int64_t channels, int reduce, int dtype, void *out)
{
    GRID_LOOP(t, kept * channels) {
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

// ---- host side ---------------------------------------------------------------------------

const char kArea[] = "voxelize (GPU)"; // messages of VC_CUDA_TRY (core/cuda_check.cuh)

// Stream-ordered temporaries through the call's allocator (core/alloc.h), freed together.
struct Temps {
    void *p[16];
    int n;
    cudaStream_t s;
    const vc_allocator *a;
    cudaError_t alloc(void **out, int64_t bytes)
    {
        *out = NULL;
        if (n >= 16) return cudaErrorInvalidValue;
        if (bytes < 16) bytes = 16;
        cudaError_t e = (cudaError_t)vc_dev_alloc(a, out, (size_t)bytes, s);
        if (e != cudaSuccess) {
            *out = NULL;
            return e;
        }
        p[n++] = *out;
        return cudaSuccess;
    }
    void free_all()
    {
        for (int i = 0; i < n; i++) vc_dev_free(a, p[i], s);
        n = 0;
    }
};

// Is p something a kernel may read? Unregistered host memory is refused.
vc_status check_device_ptr(const void *p, const char *name, vc_err *err)
{
    cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return vc_fail(err, VC_ERR_CUDA, "voxelize (GPU): inspecting the %s pointer: %s", name,
                       cudaGetErrorString(e));
    }
    if (a.type == cudaMemoryTypeUnregistered)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize (GPU): points %s %p is not device-accessible memory", name, p);
    return VC_OK;
}

vc_status keypack_fail(vc_err *err, int32_t batch_size, const int32_t shape[3])
{
    return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                   "voxelize: batch size %d and grid %d x %d x %d (z, y, x) do not pack "
                   "into a 63-bit key",
                   (int)batch_size, (int)shape[0], (int)shape[1], (int)shape[2]);
}

// The device buffers of one vc_voxelize_gpu call and the host copy of its counters.
struct Pass {
    Temps t;
    int64_t h[INF_COUNT];
    int64_t *info, *idx_a, *idx_b, *start, *krow;
    uint64_t *keys_a, *keys_b;
    const uint64_t *skey; // the sorted keys
    const int64_t *sidx;  // the points in key order
    void *tmp;
    size_t tmp_bytes;
};

// (a) The counters, and per point its key and index (where make_keys) and the counts of the
// point kernel.
vc_status run_points(Pass &r, const vc_voxelize_desc *d, const vc_points *pts,
                     const int32_t shape[3], const vc_keypack &kp1, bool make_keys,
                     cudaStream_t s, vc_err *err)
{
    vc_status st = VC_OK;
    const int64_t n = pts->count;
    VC_CUDA_TRY(r.t.alloc((void **)&r.info, INF_COUNT * (int64_t)sizeof(int64_t)),
                "allocating counters");
    info_init_kernel<<<1, 1, 0, s>>>(r.info);
    VC_CUDA_TRY(cudaGetLastError(), "counter init");
    {
        PointParams p;
        memset(&p, 0, sizeof p);
        p.pts = pts->data;
        p.batch = pts->batch;
        p.n = n;
        p.dim = pts->dim;
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
        if (make_keys) {
            VC_CUDA_TRY(r.t.alloc((void **)&r.keys_a, n * (int64_t)sizeof(uint64_t)),
                        "allocating keys");
            VC_CUDA_TRY(r.t.alloc((void **)&r.keys_b, n * (int64_t)sizeof(uint64_t)),
                        "allocating keys");
            VC_CUDA_TRY(r.t.alloc((void **)&r.idx_a, n * (int64_t)sizeof(int64_t)),
                        "allocating indices");
            VC_CUDA_TRY(r.t.alloc((void **)&r.idx_b, n * (int64_t)sizeof(int64_t)),
                        "allocating indices");
        }
        point_kernel<<<grid_for(n), kThreads, 0, s>>>(p, r.keys_a, r.idx_a, r.info);
        VC_CUDA_TRY(cudaGetLastError(), "point kernel");
    }
fail:
    return st;
}

// (b) sort; (c) voxels; (d) the cap.
vc_status group_points(Pass &r, int64_t n, int64_t cap, int end_bit, cudaStream_t s,
                       vc_err *err)
{
    vc_status st = VC_OK;
    int64_t *head = NULL, *vid = NULL, *ptflag = NULL, *prank = NULL;
    cub::DoubleBuffer<uint64_t> dk(r.keys_a, r.keys_b);
    cub::DoubleBuffer<int64_t> dv(r.idx_a, r.idx_b);
    size_t sort_bytes = 0, scan_bytes = 0;
    VC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, dk, dv, n, 0, end_bit, s),
                "sizing the sort");
    VC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, r.idx_a, r.idx_b, n, s),
                "sizing the scan");
    r.tmp_bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    VC_CUDA_TRY(r.t.alloc(&r.tmp, (int64_t)r.tmp_bytes), "allocating sort storage");
    VC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(r.tmp, r.tmp_bytes, dk, dv, n, 0, end_bit, s),
                "sorting point keys");
    r.skey = dk.Current();
    r.sidx = dv.Current();
    // The alternate buffers are free now: heads and voxel ids live there.
    head = (int64_t *)dk.Alternate();
    vid = dv.Alternate();
    VC_CUDA_TRY(r.t.alloc((void **)&r.start, (n + 1) * (int64_t)sizeof(int64_t)),
                "allocating starts");
    head_kernel<<<grid_for(n), kThreads, 0, s>>>(r.skey, n, r.info, head);
    VC_CUDA_TRY(cudaGetLastError(), "head kernel");
    VC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(r.tmp, r.tmp_bytes, head, vid, n, s),
                "scanning heads");
    count_kernel<<<1, 1, 0, s>>>(head, vid, n, cap, r.start, r.info);
    VC_CUDA_TRY(cudaGetLastError(), "count kernel");
    start_kernel<<<grid_for(n), kThreads, 0, s>>>(head, vid, n, r.start);
    VC_CUDA_TRY(cudaGetLastError(), "start kernel");
    if (cap > 0) {
        // head and vid are free again: kept flags and rows go there.
        int64_t *kflag = head, *row = vid;
        VC_CUDA_TRY(r.t.alloc((void **)&ptflag, n * (int64_t)sizeof(int64_t)),
                    "allocating flags");
        VC_CUDA_TRY(r.t.alloc((void **)&prank, n * (int64_t)sizeof(int64_t)),
                    "allocating ranks");
        VC_CUDA_TRY(r.t.alloc((void **)&r.krow, n * (int64_t)sizeof(int64_t)),
                    "allocating rows");
        VC_CUDA_TRY(cudaMemsetAsync(ptflag, 0, (size_t)n * sizeof(int64_t), s),
                    "clearing flags");
        first_flag_kernel<<<grid_for(n), kThreads, 0, s>>>(r.sidx, r.start, n, r.info, ptflag);
        VC_CUDA_TRY(cudaGetLastError(), "first-point kernel");
        VC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(r.tmp, r.tmp_bytes, ptflag, prank, n, s),
                    "ranking voxels");
        keep_kernel<<<grid_for(n), kThreads, 0, s>>>(r.sidx, r.start, prank, n, cap, r.info,
                                                     kflag);
        VC_CUDA_TRY(cudaGetLastError(), "keep kernel");
        VC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(r.tmp, r.tmp_bytes, kflag, row, n, s),
                    "scanning kept voxels");
        compact_kernel<<<grid_for(n), kThreads, 0, s>>>(kflag, row, r.start, n, r.krow, r.info);
        VC_CUDA_TRY(cudaGetLastError(), "compact kernel");
    }
fail:
    return st;
}

// (e) SYNC POINT: the counters come back; then the errors in the CPU's order: batch index,
// batch size and key layout, non-finite point, voxel count. *batch_size and *kp: the result's.
vc_status read_counts(Pass &r, const vc_voxelize_desc *d, const vc_points *pts,
                      const int32_t shape[3], bool make_keys, int32_t *batch_size,
                      vc_keypack *kp, cudaStream_t s, vc_err *err)
{
    vc_status st = VC_OK;
    const int32_t *B = pts->batch;
    VC_CUDA_TRY(cudaMemcpyAsync(r.h, r.info, sizeof r.h, cudaMemcpyDeviceToHost, s),
                "reading the counts");
    VC_CUDA_TRY(cudaStreamSynchronize(s), "voxelizing");
    if (r.h[INF_BAD_BATCH] != INT64_MAX) {
        const int64_t i = r.h[INF_BAD_BATCH];
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
        const int64_t maxb = B ? r.h[INF_MAX_BATCH] : 0;
        if (maxb >= INT32_MAX)
            return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                           "voxelize: batch index %d leaves no room for a batch size",
                           (int)maxb);
        *batch_size = (int32_t)maxb + 1;
    }
    if (vc_keypack_init(kp, *batch_size, shape) != 0 || !make_keys)
        return keypack_fail(err, *batch_size, shape);
    if (d->nonfinite == VC_NONFINITE_ERROR && r.h[INF_BAD_COORD] != INT64_MAX) {
        const int64_t i = r.h[INF_BAD_COORD];
        float q[3] = {0, 0, 0};
        VC_CUDA_TRY(cudaMemcpy(q, pts->data + i * pts->dim, sizeof q, cudaMemcpyDeviceToHost),
                    "reading a point");
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: point %lld has a non-finite coordinate (%g, %g, %g)",
                       (long long)i, (double)q[0], (double)q[1], (double)q[2]);
    }
    if (r.h[INF_NVOX] > VC_MAX_ROWS)
        return vc_fail(err, VC_ERR_LIMIT, "voxelize: more than %lld distinct voxels",
                       (long long)VC_MAX_ROWS);
fail:
    return st;
}

// (f) the result: the kept voxels' coordinates and features, into *res.
vc_status make_result(Pass &r, const vc_voxelize_desc *d, const vc_points *pts,
                      const int32_t shape[3], int64_t channels, int32_t batch_size,
                      const vc_keypack &kp, vc_voxels *res, cudaStream_t s, vc_err *err)
{
    vc_status st = VC_OK;
    const int64_t kept = r.h[INF_KEPT];
    res->n = kept;
    res->channels = channels;
    memcpy(res->shape, shape, sizeof res->shape);
    res->batch_size = batch_size;
    if (kept > 0) {
        int64_t feat_elems;
        if (vc_mul_overflow_i64(kept, channels, &feat_elems))
            return vc_fail(err, VC_ERR_LIMIT, "voxelize: %lld voxels x %lld channels overflows",
                           (long long)kept, (long long)channels);
        const size_t esize = d->dtype == VC_DTYPE_FP32 ? 4 : 2;
        VC_CUDA_TRY((cudaError_t)vc_dev_alloc(res->alloc, (void **)&res->coords,
                                              (size_t)kept * 4 * sizeof(int32_t), s),
                    "allocating voxel coordinates");
        VC_CUDA_TRY((cudaError_t)vc_dev_alloc(res->alloc, &res->features,
                                              (size_t)feat_elems * esize, s),
                    "allocating voxel features");
        coords_kernel<<<grid_for(kept), kThreads, 0, s>>>(r.skey, r.start, r.krow, kept, kp,
                                                          res->coords);
        VC_CUDA_TRY(cudaGetLastError(), "coordinates kernel");
        features_kernel<<<grid_for(feat_elems), kThreads, 0, s>>>(
            pts->data, pts->dim, r.sidx, r.start, r.krow, kept, channels, (int)d->reduce,
            (int)d->dtype, res->features);
        VC_CUDA_TRY(cudaGetLastError(), "features kernel");
    }
fail:
    return st;
}

} // namespace

extern "C" vc_status vc_voxelize_gpu(const vc_voxelize_desc *d, const vc_points *pts,
                                     const vc_engine_options *opt, struct CUstream_st *stream,
                                     vc_voxels *out, vc_voxelize_stats *stats, vc_err *err)
{
    // ---- argument checks: those of the CPU twin, in its order ----
    int32_t shape[3];
    int64_t total_elems;
    vc_status st = vc_voxelize_check_args(d, pts, out, VC_MEMORY_DEVICE, shape, &total_elems,
                                          err);
    if (st != VC_OK) return st;

    // Per point the GPU keeps two keys and two indices of 8 bytes: keep those sizes in range
    // (a count this large fails to allocate anyway).
    if (pts->count > INT64_MAX / 64)
        return vc_fail(err, VC_ERR_LIMIT, "voxelize (GPU): %lld points is over the limit",
                       (long long)pts->count);

    const int64_t n = pts->count;
    const int64_t dim = pts->dim;
    const int32_t *B = pts->batch;
    const int64_t cap = d->max_voxels;
    const int64_t channels = d->reduce == VC_REDUCE_COUNT ? 1 : dim;
    cudaStream_t s = (cudaStream_t)stream;

    // No points: nothing to run on the device.
    if (n == 0) {
        int32_t batch_size = d->batch_size > 0 ? d->batch_size : 1;
        vc_keypack kp;
        if (vc_keypack_init(&kp, batch_size, shape) != 0)
            return keypack_fail(err, batch_size, shape);
        vc_voxels res;
        memset(&res, 0, sizeof res);
        res.alloc = vc_opt_allocator(opt);
        res.stream = stream;
        res.channels = channels;
        memcpy(res.shape, shape, sizeof res.shape);
        res.batch_size = batch_size;
        *out = res;
        if (stats) {
            memset(stats, 0, sizeof *stats);
        }
        return VC_OK;
    }
    st = check_device_ptr(pts->data, "data", err);
    if (st != VC_OK) return st;
    if (B) {
        st = check_device_ptr(B, "batch", err);
        if (st != VC_OK) return st;
    }

    // The key layout. Shifts of x, y, z and the batch field do not depend on the batch size;
    // only the batch field's width does (the 63-bit check).
    vc_keypack kp1;
    const bool layout_ok = vc_keypack_init(&kp1, 1, shape) == 0;
    const bool batch_known = d->batch_size > 0 || !B;
    const int32_t known_bs = d->batch_size > 0 ? d->batch_size : 1;
    vc_keypack kpk;
    memset(&kpk, 0, sizeof kpk);
    const bool known_ok = batch_known && vc_keypack_init(&kpk, known_bs, shape) == 0;
    // The layout cannot fit whatever the batch indices: only the batch errors (reported first
    // by the CPU) remain to be looked for.
    const bool make_keys = layout_ok && (!batch_known || known_ok);
    if (!make_keys && !B) return keypack_fail(err, known_bs, shape);
    const int32_t S = kp1.shift[0]; // bits of z, y, x
    int end_bit = S + (batch_known ? (known_ok ? kpk.bits[0] : 0) : 31) + 1;
    if (end_bit > 64) end_bit = 64;

    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    Pass r;
    memset(&r, 0, sizeof r);
    r.t.s = s;
    r.t.a = vc_opt_allocator(opt);
    vc_voxels res;
    memset(&res, 0, sizeof res);
    res.alloc = r.t.a;
    res.stream = stream;
    int32_t batch_size = 0;
    vc_keypack kp;
    st = run_points(r, d, pts, shape, kp1, make_keys, s, err);
    if (st == VC_OK && make_keys) st = group_points(r, n, cap, end_bit, s, err);
    if (st == VC_OK) st = read_counts(r, d, pts, shape, make_keys, &batch_size, &kp, s, err);
    if (st == VC_OK) st = make_result(r, d, pts, shape, channels, batch_size, kp, &res, s, err);
    if (st != VC_OK) {
        r.t.free_all();
        vc_voxels_free_gpu(&res);
        return st;
    }
    r.t.free_all(); // stream-ordered: after the kernels above
    *out = res;
    if (stats) {
        stats->points_in = n;
        stats->points_used = r.h[INF_USED];
        stats->points_out_of_range = r.h[INF_OUT_OF_RANGE];
        stats->points_nonfinite = r.h[INF_NONFINITE];
        stats->voxels_total = r.h[INF_NVOX];
        stats->voxels_kept = r.h[INF_KEPT];
    }
    return VC_OK;
}

extern "C" void vc_voxels_free_gpu(vc_voxels *v)
{
    if (!v) return;
    // Stream ordered on the stream that made them (its users are ordered on it).
    vc_dev_free(v->alloc, v->coords, v->stream);
    vc_dev_free(v->alloc, v->features, v->stream);
    cudaGetLastError();
    memset(v, 0, sizeof *v);
}
