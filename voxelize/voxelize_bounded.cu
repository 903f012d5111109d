// voxelize/voxelize_bounded.cu - the bounded, graph-capturable GPU voxelization
// (voxelize_gpu.h): the pipeline of voxelize.cu (steps a-f, kernels in voxelize_kernels.cuh)
// over fixed extents with the point count, the voxel count and every counter on the device.
//
// A run always sorts max_points (key, index) pairs: the points past the count get the empty
// key, so they sort after every dropped point and the valid prefix - hence every voxel, its
// start and its points in input order - is exactly what vc_voxelize_gpu sorts for the same
// points (the sort is stable and runs over at least the bits a valid key can use plus one).
// Voxel-indexed steps run over max_points (a voxel count never passes the point count) and the
// output kernels over max_voxels, each skipping past the device count. The sort's pass count and
// buffer selection depend only on the extent and end bit, so a captured graph replays the same
// buffers. The output coordinates are unpacked with a 31-bit batch field: the same values for
// every valid key whatever the batch size (inferred batch sizes are known only on the device).
#include "voxelize/voxelize_kernels.cuh"

namespace {

const char kBounded[] = "voxelize (bounded)";

// The counters cleared and the count read: INF_NPTS = min(max(*d_n, 0), max_points); no
// output rows yet.
__global__ void bounded_init_kernel(int64_t *info, const int64_t *d_n, int64_t max_points)
{
    for (int i = 0; i < INF_COUNT; i++) info[i] = 0;
    info[INF_BAD_BATCH] = INT64_MAX;
    info[INF_BAD_COORD] = INT64_MAX;
    if (!d_n) return;
    const int64_t n = *d_n;
    info[INF_NREQ] = n;
    info[INF_NPTS] = n < 0 ? 0 : (n > max_points ? max_points : n);
}

size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// The workspace of b: the counters, the arrays of steps (b)-(d) for max_points, the CUB
// storage. Returns its size; with base, points g's arrays into it.
size_t carve(const vc_voxelize_gpu_bounded *b, char *base, GroupBufs *g)
{
    const size_t P = (size_t)b->max_points;
    const bool cap = b->desc.max_voxels > 0;
    size_t off = 0;
    auto take = [&](size_t bytes) -> char * {
        char *p = base ? base + off : NULL;
        off += align256(bytes);
        return p;
    };
    GroupBufs t;
    memset(&t, 0, sizeof t);
    t.info = (int64_t *)take(INF_COUNT * sizeof(int64_t));
    t.keys_a = (uint64_t *)take(P * sizeof(uint64_t));
    t.keys_b = (uint64_t *)take(P * sizeof(uint64_t));
    t.idx_a = (int64_t *)take(P * sizeof(int64_t));
    t.idx_b = (int64_t *)take(P * sizeof(int64_t));
    t.start = (int64_t *)take((P + 1) * sizeof(int64_t));
    if (cap) {
        t.ptflag = (int64_t *)take(P * sizeof(int64_t));
        t.prank = (int64_t *)take(P * sizeof(int64_t));
        t.krow = (int64_t *)take(P * sizeof(int64_t));
    }
    t.tmp_bytes = b->cub_bytes;
    t.tmp = take(b->cub_bytes);
    if (g) *g = t;
    return off;
}

vc_status create_checks(const vc_voxelize_desc *d, int64_t max_points, int64_t dim,
                        int64_t max_voxels, int32_t shape[3], vc_err *err)
{
    vc_status st = vc_voxelize_check(d, shape, err);
    if (st != VC_OK) return st;
    if (dim < 3 || dim > VC_MAX_CHANNELS)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: points dim %lld must be in [3, %lld] (x, y, z, extra columns)",
                       (long long)dim, (long long)VC_MAX_CHANNELS);
    if (max_points < 1 || max_voxels < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "%s: max_points %lld and max_voxels %lld must be >= 1", kBounded,
                       (long long)max_points, (long long)max_voxels);
    // Per point a run keeps about eight int64 arrays; max_voxels x channels elements of output.
    if (max_points > INT64_MAX / 128 || max_voxels > INT64_MAX / 8 / VC_MAX_CHANNELS)
        return vc_fail(err, VC_ERR_LIMIT, "%s: max_points %lld or max_voxels %lld is over the "
                       "limit", kBounded, (long long)max_points, (long long)max_voxels);
    return VC_OK;
}

} // namespace

extern "C" vc_status vc_voxelize_gpu_bounded_create(const vc_voxelize_desc *d,
                                                    int64_t max_points, int64_t dim,
                                                    int64_t max_voxels,
                                                    const vc_engine_options *opt,
                                                    vc_voxelize_gpu_bounded *b, vc_err *err)
{
    if (!b) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "%s: output is NULL", kBounded);
    memset(b, 0, sizeof *b);
    vc_voxelize_gpu_bounded t;
    memset(&t, 0, sizeof t);
    vc_status st = create_checks(d, max_points, dim, max_voxels, t.shape, err);
    if (st != VC_OK) return st;
    t.desc = *d;
    if (opt) t.opt = *opt;
    t.max_points = max_points;
    t.dim = dim;
    t.max_voxels = max_voxels;
    t.channels = d->reduce == VC_REDUCE_COUNT ? 1 : dim;
    const vc_allocator *a = vc_opt_allocator(opt);
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    // CUB storage for either kind of run (with or without batch indices: other end bits).
    cudaError_t e = cudaSuccess;
    for (int with_batch = 0; with_batch < 2 && e == cudaSuccess; with_batch++) {
        const KeyPlan plan = key_plan(d, t.shape, with_batch != 0);
        size_t bytes = 0;
        if (plan.make_keys) e = group_tmp_bytes(max_points, plan.end_bit, &bytes);
        if (bytes > t.cub_bytes) t.cub_bytes = bytes;
    }
    const size_t esize = d->dtype == VC_DTYPE_FP32 ? 4 : 2;
    t.work_bytes = carve(&t, NULL, NULL);
    // Made on the legacy stream, which create waits for: any stream may use them.
    if (e == cudaSuccess) e = (cudaError_t)vc_dev_alloc(a, &t.work, t.work_bytes, NULL);
    if (e == cudaSuccess)
        e = (cudaError_t)vc_dev_alloc(a, (void **)&t.coords,
                                      (size_t)max_voxels * 4 * sizeof(int32_t), NULL);
    if (e == cudaSuccess)
        e = (cudaError_t)vc_dev_alloc(a, &t.features,
                                      (size_t)(max_voxels * t.channels) * esize, NULL);
    GroupBufs g;
    carve(&t, (char *)t.work, &g);
    t.info = g.info;
    t.d_count = g.info + INF_OUT;
    if (e == cudaSuccess) {
        // A check before any run reports an empty frame.
        bounded_init_kernel<<<1, 1>>>(t.info, NULL, 0);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(NULL);
    if (e != cudaSuccess) {
        st = vc_cuda_fail(err, e, kArea, "allocating the bounded voxelization");
        vc_dev_free(a, t.work, NULL);
        vc_dev_free(a, t.coords, NULL);
        vc_dev_free(a, t.features, NULL);
        cudaGetLastError();
        return st;
    }
    t.last_make_keys = 1;
    t.batch_size = d->batch_size > 0 ? d->batch_size : 1;
    *b = t;
    return VC_OK;
}

extern "C" vc_status vc_voxelize_gpu_bounded_run(vc_voxelize_gpu_bounded *b,
                                                 const float *d_points, const int32_t *d_batch,
                                                 const int64_t *d_n_points,
                                                 struct CUstream_st *stream, vc_err *err)
{
    if (!b || !b->work) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "%s: not created", kBounded);
    if (!d_points || !d_n_points)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "%s: the points or their count is NULL",
                       kBounded);
    vc_status st = VC_OK;
    const vc_voxelize_desc *d = &b->desc;
    const int64_t P = b->max_points, V = b->max_voxels, C = b->channels;
    const KeyPlan plan = key_plan(d, b->shape, d_batch != NULL);
    cudaStream_t s = (cudaStream_t)stream;
    GroupBufs g;
    carve(b, (char *)b->work, &g);
    const char *what = "grouping points";
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    bounded_init_kernel<<<1, 1, 0, s>>>(g.info, d_n_points, P);
    VC_CUDA_TRY(cudaGetLastError(), "counter init");
    {
        const PointParams p = point_params(d, b->shape, plan.kp1, d_points, d_batch, P, b->dim,
                                           plan.make_keys, true);
        point_kernel<<<grid_for(P), kThreads, 0, s>>>(p, g.keys_a, g.idx_a, g.info);
        VC_CUDA_TRY(cudaGetLastError(), "point kernel");
    }
    if (plan.make_keys) {
        VC_CUDA_TRY(queue_group(g, P, d->max_voxels, plan.end_bit, V, s, &what), what);
        vc_keypack kp = plan.kp1;
        kp.bits[0] = 31; // every batch index a valid key holds (non-negative int32)
        const int64_t *rows = g.info + INF_OUT;
        coords_kernel<<<grid_for(V), kThreads, 0, s>>>(g.skey, g.start, g.krow, V, rows, kp,
                                                        b->coords);
        VC_CUDA_TRY(cudaGetLastError(), "coordinates kernel");
        features_kernel<<<grid_for(V * C), kThreads, 0, s>>>(d_points, b->dim, g.sidx, g.start,
                                                              g.krow, V, rows, C, (int)d->reduce,
                                                              (int)d->dtype, b->features);
        VC_CUDA_TRY(cudaGetLastError(), "features kernel");
    }
    b->last_points = d_points;
    b->last_batch = d_batch;
    b->last_make_keys = plan.make_keys ? 1 : 0;
fail:
    return st;
}

extern "C" vc_status vc_voxelize_gpu_bounded_check(vc_voxelize_gpu_bounded *b,
                                                   struct CUstream_st *stream,
                                                   vc_voxelize_stats *stats, vc_err *err)
{
    if (!b || !b->work) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "%s: not created", kBounded);
    vc_status st = VC_OK;
    int64_t h[INF_COUNT];
    int32_t batch_size = 0;
    vc_keypack kp;
    cudaStream_t s = (cudaStream_t)stream;
    // THE synchronisation point of the bounded variant.
    VC_CUDA_TRY(cudaMemcpyAsync(h, b->info, sizeof h, cudaMemcpyDeviceToHost, s),
                "reading the counts");
    VC_CUDA_TRY(cudaStreamSynchronize(s), "voxelizing");
    b->voxels_needed = 0;
    if (h[INF_NREQ] < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: points count %lld is negative",
                       (long long)h[INF_NREQ]);
    // Points past max_points were not read (a bad one among them would go unseen): first.
    if (h[INF_NREQ] > b->max_points)
        return vc_fail(err, VC_ERR_CAPACITY, "%s: %lld points exceed max_points %lld", kBounded,
                       (long long)h[INF_NREQ], (long long)b->max_points);
    st = report_counts(h, &b->desc, b->last_points, b->dim, b->last_batch, b->shape,
                       b->last_make_keys != 0, &batch_size, &kp, err);
    if (st != VC_OK) return st;
    b->voxels_needed = h[INF_KEPT];
    if (h[INF_KEPT] > b->max_voxels)
        return vc_fail(err, VC_ERR_CAPACITY, "%s: %lld voxels exceed max_voxels %lld", kBounded,
                       (long long)h[INF_KEPT], (long long)b->max_voxels);
    b->batch_size = batch_size;
    if (stats) {
        stats->points_in = h[INF_NPTS];
        stats->points_used = h[INF_USED];
        stats->points_out_of_range = h[INF_OUT_OF_RANGE];
        stats->points_nonfinite = h[INF_NONFINITE];
        stats->voxels_total = h[INF_NVOX];
        stats->voxels_kept = h[INF_KEPT];
    }
fail:
    return st;
}

extern "C" void vc_voxelize_gpu_bounded_destroy(vc_voxelize_gpu_bounded *b)
{
    if (!b) return;
    const vc_allocator *a = vc_opt_allocator(&b->opt);
    if (b->work) cudaDeviceSynchronize();
    vc_dev_free(a, b->work, NULL);
    vc_dev_free(a, b->coords, NULL);
    vc_dev_free(a, b->features, NULL);
    cudaGetLastError();
    memset(b, 0, sizeof *b);
}
