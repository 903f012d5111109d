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
// The kernels and the host helpers shared with the bounded variant (voxelize_bounded.cu) are
// in voxelize_kernels.cuh.
#include "voxelize/voxelize_kernels.cuh"

namespace {

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

// The device buffers of one vc_voxelize_gpu call and the host copy of its counters.
struct Pass {
    Temps t;
    int64_t h[INF_COUNT];
    GroupBufs g;
};

// (a) The counters, and per point its key and index (where make_keys) and the counts of the
// point kernel.
vc_status run_points(Pass &r, const vc_voxelize_desc *d, const vc_points *pts,
                     const int32_t shape[3], const vc_keypack &kp1, bool make_keys,
                     cudaStream_t s, vc_err *err)
{
    vc_status st = VC_OK;
    const int64_t n = pts->count;
    VC_CUDA_TRY(r.t.alloc((void **)&r.g.info, INF_COUNT * (int64_t)sizeof(int64_t)),
                "allocating counters");
    info_init_kernel<<<1, 1, 0, s>>>(r.g.info);
    VC_CUDA_TRY(cudaGetLastError(), "counter init");
    {
        const PointParams p = point_params(d, shape, kp1, pts->data, pts->batch, n, pts->dim,
                                           make_keys, false);
        if (make_keys) {
            VC_CUDA_TRY(r.t.alloc((void **)&r.g.keys_a, n * (int64_t)sizeof(uint64_t)),
                        "allocating keys");
            VC_CUDA_TRY(r.t.alloc((void **)&r.g.keys_b, n * (int64_t)sizeof(uint64_t)),
                        "allocating keys");
            VC_CUDA_TRY(r.t.alloc((void **)&r.g.idx_a, n * (int64_t)sizeof(int64_t)),
                        "allocating indices");
            VC_CUDA_TRY(r.t.alloc((void **)&r.g.idx_b, n * (int64_t)sizeof(int64_t)),
                        "allocating indices");
        }
        point_kernel<<<grid_for(n), kThreads, 0, s>>>(p, r.g.keys_a, r.g.idx_a, r.g.info);
        VC_CUDA_TRY(cudaGetLastError(), "point kernel");
    }
fail:
    return st;
}

// (b) sort; (c) voxels; (d) the cap: the temporaries, then the shared queue (kernels header).
vc_status group_points(Pass &r, int64_t n, int64_t cap, int end_bit, cudaStream_t s,
                       vc_err *err)
{
    vc_status st = VC_OK;
    GroupBufs &g = r.g;
    const char *what = "grouping points";
    VC_CUDA_TRY(group_tmp_bytes(n, end_bit, &g.tmp_bytes), "sizing the sort");
    VC_CUDA_TRY(r.t.alloc(&g.tmp, (int64_t)g.tmp_bytes), "allocating sort storage");
    VC_CUDA_TRY(r.t.alloc((void **)&g.start, (n + 1) * (int64_t)sizeof(int64_t)),
                "allocating starts");
    if (cap > 0) {
        VC_CUDA_TRY(r.t.alloc((void **)&g.ptflag, n * (int64_t)sizeof(int64_t)),
                    "allocating flags");
        VC_CUDA_TRY(r.t.alloc((void **)&g.prank, n * (int64_t)sizeof(int64_t)),
                    "allocating ranks");
        VC_CUDA_TRY(r.t.alloc((void **)&g.krow, n * (int64_t)sizeof(int64_t)),
                    "allocating rows");
    }
    VC_CUDA_TRY(queue_group(g, n, cap, end_bit, 0, s, &what), what);
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
    VC_CUDA_TRY(cudaMemcpyAsync(r.h, r.g.info, sizeof r.h, cudaMemcpyDeviceToHost, s),
                "reading the counts");
    VC_CUDA_TRY(cudaStreamSynchronize(s), "voxelizing");
    return report_counts(r.h, d, pts->data, pts->dim, B, shape, make_keys, batch_size, kp,
                         err);
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
        coords_kernel<<<grid_for(kept), kThreads, 0, s>>>(r.g.skey, r.g.start, r.g.krow, kept, NULL,
                                                          kp, res->coords);
        VC_CUDA_TRY(cudaGetLastError(), "coordinates kernel");
        features_kernel<<<grid_for(feat_elems), kThreads, 0, s>>>(
            pts->data, pts->dim, r.g.sidx, r.g.start, r.g.krow, kept, NULL, channels,
            (int)d->reduce, (int)d->dtype, res->features);
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

    const KeyPlan plan = key_plan(d, shape, B != NULL);
    const vc_keypack &kp1 = plan.kp1;
    const bool make_keys = plan.make_keys;
    if (!make_keys && !B) return keypack_fail(err, plan.known_bs, shape);
    const int end_bit = plan.end_bit;

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
