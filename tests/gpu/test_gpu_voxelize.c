/* tests/gpu/test_gpu_voxelize.c - GPU voxelization (voxelize/voxelize.cu) against its CPU twin
 * vc_voxelize_cpu on the same input: same status; on failure the same message (so the same
 * point index) and *out / *stats untouched; on success the same shape, batch size, statistics
 * and coordinates (bit for bit), and features bit-identical for every reduction and dtype
 * (MEAN included: the GPU adds in double in input order, as the CPU does; the largest relative
 * error of MEAN is printed as well, and must be <= 1e-6 in any case). NaN equals NaN.
 * Cases: random clouds (N = 0, 1, 31, 33, 5000, 1M; dim 3..5; batch 1..3 given and inferred;
 * MEAN, FIRST, COUNT; fp32, fp16, bf16; caps below, at and above the voxel count), points on
 * voxel and range boundaries, points outside, the division rule, NaN and inf with SKIP and
 * ERROR, the order of errors (batch, batch size and key layout, coordinates), 63-bit keys, bad
 * arguments, the KITTI preset, determinism (two runs, same bits), the default stream, and the
 * real scans datasets/data/vlp16.bin and octomap_scan.bin when present (VC_TEST_DATA_ROOT, the
 * working directory or the source tree; skipped with a line saying so otherwise).
 * The device allocators are filled with 0xFF (NaN) before each GPU run, so an unwritten output
 * element shows. VC_SANITIZE=1 keeps sizes small (for compute-sanitizer). Prints its seed
 * (VC_TEST_SEED replays). Exits 77 without a CUDA build or a usable device. */
#define _POSIX_C_SOURCE 200809L /* core/clock.h */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "voxelize/voxelize.h"
#include "core/dtype.h"
#include "core/clock.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"
#include "voxelize_testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

#include "voxelize/voxelize_gpu.h"

static cudaStream_t g_stream;
static int g_small;              /* VC_SANITIZE: small sizes only                              */
static int64_t g_cases;          /* GPU/CPU comparisons made                                   */
static int64_t g_mean_elems;     /* MEAN feature elements compared                             */
static int64_t g_mean_not_bits;  /* ... of which not bit-identical (expected 0)                */
static double g_mean_max_rel;    /* largest relative error of MEAN (fp32 outputs)              */

/* Fills freed device memory (both allocators) with 0xFF so that unwritten output elements read
 * as NaN, not zeros. */
static void dirty_device(void)
{
    const size_t bytes = (size_t)(g_small ? 4 : 64) << 20;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) == cudaSuccess) {
        cudaMemset(p, 0xff, bytes);
        cudaDeviceSynchronize();
        cudaFree(p);
    }
    p = NULL;
    if (cudaMallocAsync(&p, bytes, g_stream) == cudaSuccess) {
        cudaMemsetAsync(p, 0xff, bytes, g_stream);
        cudaFreeAsync(p, g_stream);
        cudaStreamSynchronize(g_stream);
    }
    cudaGetLastError();
}

/* ---- one GPU run, results copied to the host ---------------------------------------------- */

typedef struct gpu_run {
    vc_status st;
    vc_err err;
    vc_voxels v;             /* host copies (malloc'ed)                                        */
    vc_voxelize_stats stats;
    double ms;               /* wall time of the call and its completion                       */
} gpu_run;

static void gpu_run_free(gpu_run *r)
{
    free(r->v.coords);
    free(r->v.features);
    memset(&r->v, 0, sizeof r->v);
}


/* Runs the GPU voxelizer on device copies of pts / batch (stream: g_stream or the default). */
static void gpu_voxelize(const vc_voxelize_desc *d, const float *pts, int64_t n, int dim,
                         const int32_t *batch, int default_stream, gpu_run *r)
{
    memset(r, 0, sizeof *r);
    dirty_device();
    float *dp = n > 0 ? to_device(pts, (size_t)n * (size_t)dim * sizeof(float)) : NULL;
    int32_t *db = batch ? to_device(batch, (size_t)n * sizeof(int32_t)) : NULL;
    vc_points p = make_points(dp, n, dim, db, VC_MEMORY_DEVICE);
    vc_voxels out;
    memset(&out, 0x5a, sizeof out);
    vc_voxels out_before = out;
    vc_voxelize_stats st;
    memset(&st, 0x5a, sizeof st);
    vc_voxelize_stats st_before = st;
    cudaStream_t s = default_stream ? (cudaStream_t)0 : g_stream;
    double t0 = vc_clock_ms();
    r->st = vc_voxelize_gpu(d, &p, NULL, s, &out, &st, &r->err);
    CUDA_OK(cudaStreamSynchronize(s));
    r->ms = vc_clock_ms() - t0;
    if (r->st != VC_OK) {
        CHECK_MSG(memcmp(&out, &out_before, sizeof out) == 0, "failed call wrote *out");
        CHECK_MSG(memcmp(&st, &st_before, sizeof st) == 0, "failed call wrote *stats");
    } else {
        r->stats = st;
        r->v = out;
        r->v.coords = NULL;
        r->v.features = NULL;
        if (out.n > 0) {
            size_t esize = d->dtype == VC_DTYPE_FP32 ? 4 : 2;
            size_t cb = (size_t)out.n * 4 * sizeof(int32_t);
            size_t fb = (size_t)out.n * (size_t)out.channels * esize;
            r->v.coords = malloc(cb);
            r->v.features = malloc(fb);
            CHECK(out.coords != NULL && out.features != NULL);
            if (out.coords && out.features) {
                CUDA_OK(cudaMemcpy(r->v.coords, out.coords, cb, cudaMemcpyDeviceToHost));
                CUDA_OK(cudaMemcpy(r->v.features, out.features, fb, cudaMemcpyDeviceToHost));
            }
        } else {
            CHECK_MSG(out.coords == NULL && out.features == NULL, "n = 0 with arrays");
        }
        vc_voxels_free_gpu(&out);
        CHECK(out.coords == NULL && out.features == NULL && out.n == 0);
    }
    cudaFree(dp);
    cudaFree(db);
}

/* ---- comparison with the CPU ------------------------------------------------------------- */

static int same_value(const void *a, const void *b, vc_dtype dt, int64_t i)
{
    if (dt == VC_DTYPE_FP32) {
        if (memcmp((const float *)a + i, (const float *)b + i, 4) == 0) return 1;
    } else if (((const uint16_t *)a)[i] == ((const uint16_t *)b)[i]) {
        return 1;
    }
    return isnan(vc_load_f32(a, dt, i)) && isnan(vc_load_f32(b, dt, i));
}

/* Compares a GPU run with the CPU's answer; returns the number of problems. */
static int compare(const char *what, const vc_voxelize_desc *d, vc_status cs, const vc_err *cerr,
                   const vc_voxels *cv, const vc_voxelize_stats *cst, const gpu_run *g)
{
    int bad = 0;
#define CMP(cond, ...)                                                                         \
    do {                                                                                       \
        if (!(cond)) bad++;                                                                    \
        CHECK_MSG(cond, __VA_ARGS__);                                                          \
    } while (0)
    g_cases++;
    CMP(g->st == cs, "%s: GPU status %d (%s), CPU status %d (%s)", what, (int)g->st, g->err.msg,
        (int)cs, cs != VC_OK ? cerr->msg : "");
    if (bad) return bad;
    if (cs != VC_OK) {
        CMP(strcmp(g->err.msg, cerr->msg) == 0, "%s: messages differ: GPU '%s', CPU '%s'", what,
            g->err.msg, cerr->msg);
        return bad;
    }
    const vc_voxels *gv = &g->v;
    CMP(gv->n == cv->n, "%s: n %lld vs %lld", what, (long long)gv->n, (long long)cv->n);
    CMP(gv->channels == cv->channels, "%s: channels %lld vs %lld", what, (long long)gv->channels,
        (long long)cv->channels);
    CMP(memcmp(gv->shape, cv->shape, sizeof gv->shape) == 0, "%s: shape %d %d %d vs %d %d %d",
        what, gv->shape[0], gv->shape[1], gv->shape[2], cv->shape[0], cv->shape[1],
        cv->shape[2]);
    CMP(gv->batch_size == cv->batch_size, "%s: batch_size %d vs %d", what, gv->batch_size,
        cv->batch_size);
    CMP(memcmp(&g->stats, cst, sizeof *cst) == 0,
        "%s: stats (in %lld used %lld oor %lld nonfinite %lld total %lld kept %lld) vs "
        "(%lld %lld %lld %lld %lld %lld)",
        what, (long long)g->stats.points_in, (long long)g->stats.points_used,
        (long long)g->stats.points_out_of_range, (long long)g->stats.points_nonfinite,
        (long long)g->stats.voxels_total, (long long)g->stats.voxels_kept,
        (long long)cst->points_in, (long long)cst->points_used,
        (long long)cst->points_out_of_range, (long long)cst->points_nonfinite,
        (long long)cst->voxels_total, (long long)cst->voxels_kept);
    if (bad || cv->n == 0) return bad;
    int64_t first_c = -1;
    for (int64_t i = 0; i < cv->n * 4; i++)
        if (gv->coords[i] != cv->coords[i]) {
            first_c = i;
            break;
        }
    CMP(first_c < 0, "%s: coordinates differ, first at row %lld: (%d %d %d %d) vs (%d %d %d %d)",
        what, (long long)(first_c / 4), first_c >= 0 ? gv->coords[first_c / 4 * 4] : 0,
        first_c >= 0 ? gv->coords[first_c / 4 * 4 + 1] : 0,
        first_c >= 0 ? gv->coords[first_c / 4 * 4 + 2] : 0,
        first_c >= 0 ? gv->coords[first_c / 4 * 4 + 3] : 0,
        first_c >= 0 ? cv->coords[first_c / 4 * 4] : 0,
        first_c >= 0 ? cv->coords[first_c / 4 * 4 + 1] : 0,
        first_c >= 0 ? cv->coords[first_c / 4 * 4 + 2] : 0,
        first_c >= 0 ? cv->coords[first_c / 4 * 4 + 3] : 0);
    const int64_t elems = cv->n * cv->channels;
    int64_t differ = 0, first_f = -1;
    double max_rel = 0;
    for (int64_t i = 0; i < elems; i++) {
        if (!same_value(gv->features, cv->features, d->dtype, i)) {
            if (first_f < 0) first_f = i;
            differ++;
        }
        if (d->reduce == VC_REDUCE_MEAN) {
            double a = vc_load_f32(gv->features, d->dtype, i);
            double e = vc_load_f32(cv->features, d->dtype, i);
            if (isfinite(a) && isfinite(e) && a != e) {
                double rel = fabs(a - e) / (fabs(e) > 1e-30 ? fabs(e) : 1e-30);
                if (rel > max_rel) max_rel = rel;
            }
        }
    }
    if (d->reduce == VC_REDUCE_MEAN) {
        g_mean_elems += elems;
        g_mean_not_bits += differ;
        if (max_rel > g_mean_max_rel) g_mean_max_rel = max_rel;
        CMP(max_rel <= 1e-6, "%s: MEAN relative error %g over 1e-6", what, max_rel);
    }
    CMP(differ == 0, "%s: %lld of %lld features not bit-identical, first at %lld: %.9g vs %.9g",
        what, (long long)differ, (long long)elems, (long long)first_f,
        first_f >= 0 ? (double)vc_load_f32(gv->features, d->dtype, first_f) : 0.0,
        first_f >= 0 ? (double)vc_load_f32(cv->features, d->dtype, first_f) : 0.0);
#undef CMP
    return bad;
}

/* Voxelizes on both devices and compares. Returns the CPU's voxels_total (or -1 on error) so
 * that callers can pick caps around it. */
static int64_t run_case_opt(const char *what, const vc_voxelize_desc *d, const float *pts,
                            int64_t n, int dim, const int32_t *batch, int default_stream,
                            gpu_run *keep)
{
    vc_points p = make_points(pts, n, dim, batch, VC_MEMORY_HOST);
    vc_voxels cv;
    memset(&cv, 0, sizeof cv);
    vc_voxelize_stats cst;
    memset(&cst, 0, sizeof cst);
    vc_err cerr = {{0}};
    vc_status cs = vc_voxelize_cpu(d, &p, NULL, &cv, &cst, &cerr);
    gpu_run g;
    gpu_voxelize(d, pts, n, dim, batch, default_stream, &g);
    compare(what, d, cs, &cerr, &cv, &cst, &g);
    if (keep) *keep = g;
    else gpu_run_free(&g);
    vc_voxels_free(&cv);
    return cs == VC_OK ? cst.voxels_total : -1;
}

static int64_t run_case(const char *what, const vc_voxelize_desc *d, const float *pts, int64_t n,
                        int dim, const int32_t *batch)
{
    return run_case_opt(what, d, pts, n, dim, batch, 0, NULL);
}

/* ---- clouds ------------------------------------------------------------------------------ */

/* Points clustered on the grid with exact duplicates, points on voxel boundaries (the first six
 * planes) and on the range's min and max, and points up to 10% outside the range on each side
 * (scenes.h). */
static float *random_cloud(vc_rng *rng, const vc_voxelize_desc *d, int64_t n, int dim)
{
    return scene_random_points(rng, d, n, dim, 6);
}

static int32_t *random_batch(vc_rng *rng, int64_t n, int bs)
{
    if (bs <= 1) return NULL;
    int32_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    for (int64_t i = 0; i < n; i++) b[i] = (int32_t)vc_rng_int(rng, bs);
    return b;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_random(vc_rng *rng)
{
    const float range[6] = {-1.0f, -2.0f, 0.5f, 1.2f, 1.0f, 2.0f};
    const vc_dtype dtypes[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    const int64_t sizes_full[] = {0, 1, 31, 33, 5000};
    const int64_t sizes_small[] = {0, 1, 33, 300};
    const int64_t *sizes = g_small ? sizes_small : sizes_full;
    const int nsizes = g_small ? 4 : 5;
    /* voxel sizes: mid, fine (mostly one point per voxel), coarse (hundreds per voxel) */
    const float vsz[3][3] = {{0.25f, 0.3f, 0.2f}, {0.01f, 0.013f, 0.011f}, {1.1f, 1.5f, 0.7f}};
    int iter = 0;
    for (int r = 0; r < 3; r++) {
        for (int bs = 1; bs <= 3; bs++) {
            if (g_small && bs == 2) continue;
            for (int si = 0; si < nsizes; si++) {
                int64_t n = sizes[si];
                int dim = 3 + (int)vc_rng_int(rng, 3);
                const float *v = vsz[iter % 3];
                vc_voxelize_desc d = make_desc(v[0], v[1], v[2], range, (vc_reduce)r);
                d.dtype = dtypes[(iter / 3) % 3];
                d.batch_size = (iter % 2) ? bs : 0; /* given or inferred */
                float *pts = random_cloud(rng, &d, n, dim);
                int32_t *batch = random_batch(rng, n, bs);
                char what[160];
                snprintf(what, sizeof what,
                         "random reduce=%d batch=%d%s n=%lld dim=%d dtype=%d voxel=%g", r, bs,
                         d.batch_size ? "" : "(inferred)", (long long)n, dim, (int)d.dtype,
                         (double)v[0]);
                int64_t total = run_case(what, &d, pts, n, dim, batch);
                /* caps: well below, one below, exactly at and above the voxel count */
                int64_t caps[4] = {1 + vc_rng_int(rng, n > 12 ? n / 4 : 3), total - 1, total,
                                   total + 7};
                for (int c = 0; c < 4; c++) {
                    if (caps[c] < 1 || (g_small && c == 3)) continue;
                    d.max_voxels = caps[c];
                    char w2[200];
                    snprintf(w2, sizeof w2, "%s cap=%lld (of %lld)", what,
                             (long long)d.max_voxels, (long long)total);
                    run_case(w2, &d, pts, n, dim, batch);
                }
                free(pts);
                free(batch);
                iter++;
            }
        }
    }
}

/* 1M points (KITTI-like grid), batch given and inferred, every reduction; determinism: a
 * second GPU run gives the same bits; the default stream works. */
static void test_large(vc_rng *rng)
{
    const int64_t n = g_small ? 20000 : 1000000;
    const float range[6] = {0.0f, -40.0f, -3.0f, 70.4f, 40.0f, 1.0f};
    float *pts = malloc((size_t)n * 4 * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float *p = pts + i * 4;
        p[0] = 35.2f + 36.0f * vc_rng_float(rng);
        p[1] = 41.0f * vc_rng_float(rng);
        p[2] = -1.0f + 2.1f * vc_rng_float(rng);
        p[3] = vc_rng_float(rng);
    }
    int32_t *batch = random_batch(rng, n, 3);
    struct {
        vc_reduce reduce;
        vc_dtype dtype;
        int32_t bs;
        int64_t cap;
        int with_batch;
    } cfg[] = {
        {VC_REDUCE_MEAN, VC_DTYPE_FP32, 0, 0, 0},
        {VC_REDUCE_MEAN, VC_DTYPE_FP32, 3, 0, 1},
        {VC_REDUCE_FIRST, VC_DTYPE_BF16, 0, 20000, 1},
        {VC_REDUCE_COUNT, VC_DTYPE_FP16, 4, 0, 1},
        {VC_REDUCE_MEAN, VC_DTYPE_FP16, 0, 150000, 1},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        vc_voxelize_desc d = make_desc(0.05f, 0.05f, 0.1f, range, cfg[c].reduce);
        d.dtype = cfg[c].dtype;
        d.batch_size = cfg[c].bs;
        d.max_voxels = cfg[c].cap;
        char what[128];
        snprintf(what, sizeof what, "large n=%lld reduce=%d dtype=%d bs=%d cap=%lld",
                 (long long)n, (int)d.reduce, (int)d.dtype, (int)d.batch_size,
                 (long long)d.max_voxels);
        gpu_run g1;
        run_case_opt(what, &d, pts, n, 4, cfg[c].with_batch ? batch : NULL, 0, &g1);
        printf("%s: %lld voxels, GPU %.2f ms (wall time of the call and its completion)\n", what,
               (long long)g1.v.n, g1.ms);
        if (c < 3 && g1.st == VC_OK) {
            gpu_run g2;
            gpu_voxelize(&d, pts, n, 4, cfg[c].with_batch ? batch : NULL, c == 1, &g2);
            size_t esize = d.dtype == VC_DTYPE_FP32 ? 4 : 2;
            int same = g2.st == VC_OK && g2.v.n == g1.v.n &&
                       memcmp(&g2.stats, &g1.stats, sizeof g1.stats) == 0;
            if (same && g1.v.n > 0)
                same = memcmp(g1.v.coords, g2.v.coords, (size_t)g1.v.n * 16) == 0 &&
                       memcmp(g1.v.features, g2.v.features,
                              (size_t)(g1.v.n * g1.v.channels) * esize) == 0;
            CHECK_MSG(same, "%s: second GPU run%s differs", what,
                      c == 1 ? " (default stream)" : "");
            gpu_run_free(&g2);
        }
        gpu_run_free(&g1);
    }
    free(pts);
    free(batch);
}

/* Exact boundaries, rounding of the shape, the division rule; duplicates of one point. */
static void test_boundaries(void)
{
    const float range[6] = {0, 0, 0, 1, 1, 1};
    const float pts[] = {
        0.0f, 0.0f, 0.0f,        1.0f, 0.5f, 0.5f,  0.5f, 1.0f, 0.5f, 0.5f, 0.5f, 1.0f,
        0.25f, 0.5f, 0.75f,      0.99999994f, 0.0f, 0.0f,  -1e-7f, 0.0f, 0.0f,
        -0.0f, -0.0f, -0.0f,
    };
    for (int r = 0; r < 3; r++) {
        vc_voxelize_desc d = make_desc(0.25f, 0.25f, 0.25f, range, (vc_reduce)r);
        run_case("boundaries", &d, pts, 8, 3, NULL);
    }
    const float range2[6] = {-3.0f, -3.0f, -3.0f, 0.0f, 0.0f, 0.0f};
    vc_voxelize_desc d = make_desc(0.7f, 0.5f, 2.0f, range2, VC_REDUCE_FIRST);
    const float pts2[] = {-0.1f, -0.1f, -0.1f, -0.3f, -0.1f, -0.1f};
    run_case("rounded shape", &d, pts2, 2, 3, NULL);

    /* x = one ulp below 1.3f over 0.1f is 12.99999..: voxel 12 (a reciprocal multiply gives 13) */
    const float range3[6] = {0, 0, 0, 2, 2, 2};
    d = make_desc(0.1f, 0.1f, 0.1f, range3, VC_REDUCE_COUNT);
    const float pts3[3] = {0x1.4cccccp+0f, 0.05f, 0.05f};
    gpu_run g;
    run_case_opt("division", &d, pts3, 1, 3, NULL, 0, &g);
    CHECK_MSG(g.st == VC_OK && g.v.n == 1 && g.v.coords && g.v.coords[3] == 12,
              "division rule: x voxel %d, want 12", g.v.coords ? g.v.coords[3] : -1);
    gpu_run_free(&g);

    /* many points on a grid of exact voxel boundaries, with a range that is not a multiple */
    {
        const float r4[6] = {-1.5f, -0.75f, 0.0f, 1.6f, 0.8f, 0.45f};
        vc_voxelize_desc d4 = make_desc(0.05f, 0.15f, 0.03f, r4, VC_REDUCE_MEAN);
        const int64_t n = 64 * 12 * 16;
        float *p = malloc((size_t)n * 4 * sizeof(float));
        int64_t k = 0;
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 12; j++)
                for (int l = 0; l < 16; l++, k++) {
                    p[k * 4 + 0] = r4[0] + (float)i * 0.05f;
                    p[k * 4 + 1] = r4[1] + (float)j * 0.15f;
                    p[k * 4 + 2] = r4[2] + (float)l * 0.03f;
                    p[k * 4 + 3] = (float)k;
                }
        run_case("grid of boundaries", &d4, p, n, 4, NULL);
        d4.reduce = VC_REDUCE_COUNT;
        run_case("grid of boundaries count", &d4, p, n, 4, NULL);
        free(p);
    }

    /* one voxel with many duplicates (a long serial MEAN) */
    {
        const int64_t n = g_small ? 500 : 100000;
        float *p = malloc((size_t)n * 4 * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            p[i * 4 + 0] = 3.3f;
            p[i * 4 + 1] = 4.4f;
            p[i * 4 + 2] = 5.5f;
            p[i * 4 + 3] = 0.1f * (float)(i % 7);
        }
        const float r5[6] = {0, 0, 0, 10, 10, 10};
        for (int r = 0; r < 3; r++) {
            vc_voxelize_desc d5 = make_desc(1.0f, 1.0f, 1.0f, r5, (vc_reduce)r);
            run_case("duplicates", &d5, p, n, 4, NULL);
        }
        free(p);
    }
}

/* NaN / inf in x, y or z: SKIP matches the CPU; ERROR gives the same status and message (the
 * smallest bad index), also when bad points are many and late; NaN in an extra column. */
static void test_nonfinite(vc_rng *rng)
{
    const float range[6] = {0, 0, 0, 2, 2, 2};
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const int64_t sizes[3] = {400, 33, 100000};
    for (int si = 0; si < 3; si++) {
        int64_t n = sizes[si];
        if (g_small && n > 1000) n = 1000;
        vc_voxelize_desc d = make_desc(0.5f, 0.5f, 0.5f, range, VC_REDUCE_MEAN);
        const int dim = 4;
        float *pts = random_cloud(rng, &d, n, dim);
        /* bad points from a random start on: the first one is not at a block boundary */
        int64_t from = vc_rng_int(rng, n / 2 + 1);
        for (int64_t i = from; i < n; i++)
            if (i == from || vc_rng_int(rng, 10) == 0)
                pts[i * dim + vc_rng_int(rng, 3)] = bad[vc_rng_int(rng, 3)];
        int32_t *batch = random_batch(rng, n, 2);
        char what[96];
        for (int r = 0; r < 3; r++) {
            d.reduce = (vc_reduce)r;
            d.nonfinite = VC_NONFINITE_SKIP;
            snprintf(what, sizeof what, "nonfinite skip n=%lld reduce=%d", (long long)n, r);
            run_case(what, &d, pts, n, dim, batch);
        }
        d.nonfinite = VC_NONFINITE_ERROR;
        snprintf(what, sizeof what, "nonfinite error n=%lld first=%lld", (long long)n,
                 (long long)from);
        run_case(what, &d, pts, n, dim, batch);
        d.max_voxels = 3;
        run_case(what, &d, pts, n, dim, batch);
        free(pts);
        free(batch);
    }
    /* a NaN in an extra column is not a non-finite point: the voxel's mean is NaN */
    vc_voxelize_desc d = make_desc(0.5f, 0.5f, 0.5f, range, VC_REDUCE_MEAN);
    const float one[8] = {1.0f, 1.0f, 1.0f, NAN, 1.1f, 1.1f, 1.1f, 2.0f};
    for (int r = 0; r < 3; r++) {
        d.reduce = (vc_reduce)r;
        d.nonfinite = VC_NONFINITE_ERROR;
        run_case("nan extra column", &d, one, 2, 4, NULL);
    }
    /* every point non-finite */
    const float allbad[6] = {NAN, 0, 0, 0, INFINITY, 0};
    d.nonfinite = VC_NONFINITE_SKIP;
    run_case("all non-finite skip", &d, allbad, 2, 3, NULL);
    d.nonfinite = VC_NONFINITE_ERROR;
    run_case("all non-finite error", &d, allbad, 2, 3, NULL);
    /* every point outside */
    const float outside[6] = {5, 0, 0, 0, -1, 0};
    run_case("all outside", &d, outside, 2, 3, NULL);
}

/* Which error wins, as on the CPU: batch index, then batch size and key layout, then
 * coordinates. Also keys that use 61..63 bits. */
static void test_error_order(vc_rng *rng)
{
    const float range[6] = {0, 0, 0, 2, 2, 2};
    vc_voxelize_desc d = make_desc(0.5f, 0.5f, 0.5f, range, VC_REDUCE_MEAN);
    d.nonfinite = VC_NONFINITE_ERROR;
    const int64_t n = g_small ? 3000 : 20000;
    float *pts = random_cloud(rng, &d, n, 3);
    int32_t *batch = malloc((size_t)n * sizeof *batch);
    for (int64_t i = 0; i < n; i++) batch[i] = (int32_t)vc_rng_int(rng, 2);

    pts[3 * 3] = NAN; /* coordinate error at 3 */
    run_case("order: nan only", &d, pts, n, 3, batch);
    batch[10] = -1; /* batch error at 10 wins over the coordinate at 3 */
    run_case("order: negative batch after nan", &d, pts, n, 3, batch);
    batch[n - 1] = -7;
    run_case("order: two negative batches", &d, pts, n, 3, batch);
    d.batch_size = 2;
    batch[7] = 2; /* b >= batch_size at 7 comes before the negative one at 10 */
    run_case("order: batch over size first", &d, pts, n, 3, batch);
    batch[5] = -3;
    run_case("order: negative first", &d, pts, n, 3, batch);
    batch[5] = batch[7] = batch[10] = batch[n - 1] = 0;
    d.batch_size = 0;
    batch[n - 2] = INT32_MAX; /* inferred batch size overflows */
    run_case("order: batch INT32_MAX", &d, pts, n, 3, batch);
    d.batch_size = 5;
    run_case("order: batch INT32_MAX over given size", &d, pts, n, 3, batch);
    batch[n - 2] = 1;
    d.batch_size = 0;

    /* A grid of 2 x 2^30 x 2^30 (z, y, x) uses 61 bits: batch sizes up to 4 fit in 63. */
    const float big[6] = {0, 0, 0, 1073741824.0f, 1073741824.0f, 2.0f};
    vc_voxelize_desc g = make_desc(1.0f, 1.0f, 1.0f, big, VC_REDUCE_FIRST);
    g.nonfinite = VC_NONFINITE_ERROR;
    float *gp = malloc((size_t)n * 3 * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        gp[i * 3 + 0] = (float)vc_rng_int(rng, (int64_t)1 << 31) * 0.5f; /* [0, 2^30) */
        gp[i * 3 + 1] = (float)vc_rng_int(rng, (int64_t)1 << 31) * 0.5f;
        gp[i * 3 + 2] = (float)vc_rng_int(rng, 5) * 0.5f;                /* some z == 2: out */
        if (i % 5 == 0 && i > 0) memcpy(gp + i * 3, gp + (i - 1) * 3, 3 * sizeof(float));
    }
    for (int64_t i = 0; i < n; i++) batch[i] = (int32_t)vc_rng_int(rng, 4);
    run_case("61-bit grid, batch 4 inferred (63 bits)", &g, gp, n, 3, batch);
    g.max_voxels = n / 3;
    run_case("61-bit grid, capped", &g, gp, n, 3, batch);
    g.max_voxels = 0;
    g.batch_size = 4;
    run_case("61-bit grid, batch 4 given", &g, gp, n, 3, batch);
    g.batch_size = 5; /* 64 bits: the layout fails (known before running) */
    run_case("61-bit grid, batch 5 given", &g, gp, n, 3, batch);
    run_case("61-bit grid, batch 5 given, no batch array", &g, gp, n, 3, NULL);
    batch[17] = -1;
    run_case("61-bit grid, batch 5 given, negative batch", &g, gp, n, 3, batch);
    batch[17] = 0;
    g.batch_size = 0;
    batch[n / 2] = 4; /* inferred 5: 64 bits, found after the run; beats a NaN */
    gp[1] = NAN;
    run_case("61-bit grid, batch 5 inferred, nan", &g, gp, n, 3, batch);
    batch[n / 2] = 3;
    run_case("61-bit grid, nan", &g, gp, n, 3, batch);
    g.nonfinite = VC_NONFINITE_SKIP;
    run_case("61-bit grid, nan skipped", &g, gp, n, 3, batch);
    /* 2^30 cubed: 90 bits, no batch size fits */
    const float huge[6] = {0, 0, 0, 1073741824.0f, 1073741824.0f, 1073741824.0f};
    vc_voxelize_desc hd = make_desc(1.0f, 1.0f, 1.0f, huge, VC_REDUCE_MEAN);
    run_case("90-bit grid", &hd, gp, n, 3, NULL);
    run_case("90-bit grid with batch", &hd, gp, n, 3, batch);
    batch[9] = -2;
    run_case("90-bit grid with a negative batch", &hd, gp, n, 3, batch);
    run_case("90-bit grid, no points", &hd, gp, 0, 3, NULL);
    free(gp);
    free(pts);
    free(batch);
}

/* N = 0 and N = 1 with batch indices; bad descriptors and bad points. */
static void test_small_and_bad(void)
{
    const float range[6] = {0, 0, 0, 1, 1, 1};
    vc_voxelize_desc d = make_desc(0.1f, 0.1f, 0.1f, range, VC_REDUCE_MEAN);
    const int32_t b5 = 5;
    const float one[4] = {0.55f, 0.25f, 0.95f, 7.0f};
    run_case("n=0", &d, NULL, 0, 4, NULL);
    run_case("n=0 with batch", &d, one, 0, 4, &b5);
    d.batch_size = 3;
    run_case("n=0 batch 3", &d, NULL, 0, 4, NULL);
    d.batch_size = 0;
    run_case("n=1 batch 5 inferred", &d, one, 1, 4, &b5);
    const float two[6] = {0.5f, 0.5f, 0.5f, 5.0f, 0.5f, 0.5f};
    const int32_t bb[2] = {0, 4};
    run_case("dropped point's batch counts", &d, two, 2, 3, bb);

    /* descriptors the check refuses: same status and message as the CPU */
    struct {
        float v[3];
        float r[6];
    } descs[] = {
        {{0.0f, 0.1f, 0.1f}, {0, 0, 0, 1, 1, 1}},  {{0.1f, 0.1f, NAN}, {0, 0, 0, 1, 1, 1}},
        {{0.1f, 0.1f, 0.1f}, {0, 2, 0, 1, 1, 1}},  {{0.1f, 0.1f, 5.0f}, {0, 0, 0, 1, 1, 1}},
        {{1e-9f, 0.1f, 0.1f}, {0, 0, 0, 1000, 1, 1}},
    };
    for (size_t i = 0; i < sizeof descs / sizeof *descs; i++) {
        vc_voxelize_desc bd = make_desc(descs[i].v[0], descs[i].v[1], descs[i].v[2], descs[i].r,
                                        VC_REDUCE_MEAN);
        run_case("bad descriptor", &bd, two, 2, 3, NULL);
    }
    vc_voxelize_desc bd = d;
    bd.reduce = (vc_reduce)3;
    run_case("bad reduce", &bd, two, 2, 3, NULL);
    bd = d;
    bd.max_voxels = -1;
    run_case("bad max_voxels", &bd, two, 2, 3, NULL);
    bd = d;
    bd.dtype = VC_DTYPE_INT32;
    run_case("bad dtype", &bd, two, 2, 3, NULL);

    /* bad points (GPU only) */
    float *dp = to_device(two, sizeof two);
    vc_voxels out;
    memset(&out, 0x33, sizeof out);
    const vc_voxels before = out;
    vc_voxelize_stats st;
    memset(&st, 0x33, sizeof st);
    const vc_voxelize_stats st_before = st;
    vc_err err;
    struct {
        vc_points p;
        vc_status want;
        const char *what;
    } bp[] = {
        {make_points(two, 2, 3, NULL, VC_MEMORY_HOST), VC_ERR_INVALID_ARGUMENT, "host memory"},
        {make_points(two, 2, 3, NULL, VC_MEMORY_DEVICE), VC_ERR_INVALID_ARGUMENT,
         "host pointer said to be device"},
        {make_points(dp, 2, 3, bb, VC_MEMORY_DEVICE), VC_ERR_INVALID_ARGUMENT,
         "host batch pointer"},
        {make_points(dp, 2, 2, NULL, VC_MEMORY_DEVICE), VC_ERR_INVALID_ARGUMENT, "dim 2"},
        {make_points(dp, -1, 3, NULL, VC_MEMORY_DEVICE), VC_ERR_INVALID_ARGUMENT, "count -1"},
        {make_points(NULL, 2, 3, NULL, VC_MEMORY_DEVICE), VC_ERR_INVALID_ARGUMENT, "NULL data"},
        {make_points(dp, INT64_MAX / 2, 3, NULL, VC_MEMORY_DEVICE), VC_ERR_LIMIT, "huge count"},
    };
    for (size_t i = 0; i < sizeof bp / sizeof *bp; i++) {
        err.msg[0] = 0;
        vc_status s = vc_voxelize_gpu(&d, &bp[i].p, NULL, g_stream, &out, &st, &err);
        CHECK_MSG(s == bp[i].want && err.msg[0] != 0, "%s: status %d (%s), want %d",
                  bp[i].what, (int)s, err.msg, (int)bp[i].want);
    }
    vc_points ok = make_points(dp, 2, 3, NULL, VC_MEMORY_DEVICE);
    CHECK(vc_voxelize_gpu(&d, NULL, NULL, g_stream, &out, &st, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_voxelize_gpu(NULL, &ok, NULL, g_stream, &out, &st, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_voxelize_gpu(&d, &ok, NULL, g_stream, NULL, &st, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&out, &before, sizeof out) == 0 && memcmp(&st, &st_before, sizeof st) == 0);
    /* stats and err may be NULL */
    CHECK(vc_voxelize_gpu(&d, &ok, NULL, g_stream, &out, NULL, NULL) == VC_OK && out.n == 1);
    vc_voxels_free_gpu(&out);
    vc_voxels_free_gpu(NULL);
    cudaFree(dp);
}

/* KITTI (SECOND) preset: shape 40 x 1600 x 1408, a scan-like cloud, capped at 16000 voxels. */
static void test_kitti(vc_rng *rng)
{
    const float range[6] = {0.0f, -40.0f, -3.0f, 70.4f, 40.0f, 1.0f};
    vc_voxelize_desc d = make_desc(0.05f, 0.05f, 0.1f, range, VC_REDUCE_MEAN);
    const int64_t n = g_small ? 5000 : 60000;
    float *pts = malloc((size_t)n * 4 * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float *p = pts + i * 4;
        p[0] = 40.0f + 40.0f * vc_rng_float(rng);
        p[1] = 45.0f * vc_rng_float(rng);
        p[2] = -1.0f + 2.5f * vc_rng_float(rng);
        p[3] = 0.5f + 0.5f * vc_rng_float(rng);
    }
    gpu_run g;
    run_case_opt("kitti mean", &d, pts, n, 4, NULL, 0, &g);
    CHECK_MSG(g.st == VC_OK && g.v.shape[0] == 40 && g.v.shape[1] == 1600 &&
                  g.v.shape[2] == 1408,
              "kitti shape %d %d %d", g.v.shape[0], g.v.shape[1], g.v.shape[2]);
    gpu_run_free(&g);
    d.max_voxels = 16000;
    run_case("kitti capped", &d, pts, n, 4, NULL);
    d.reduce = VC_REDUCE_FIRST;
    d.dtype = VC_DTYPE_FP16;
    run_case("kitti first fp16 capped", &d, pts, n, 4, NULL);
    free(pts);
}

/* ---- real scans -------------------------------------------------------------------------- */

static void scan_cases(const char *name, const float *pts, int64_t n, int dim,
                       const int32_t *batch)
{
    /* a grid fitted to the finite points, 200 voxels along each axis */
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            float v = pts[i * dim + a];
            if (isfinite(v)) {
                if (v < lo[a]) lo[a] = v;
                if (v > hi[a]) hi[a] = v;
            }
        }
    float fit[6], vs[3];
    for (int a = 0; a < 3; a++) {
        if (!(hi[a] > lo[a])) hi[a] = lo[a] + 1.0f;
        fit[a] = lo[a] - 0.01f;
        fit[a + 3] = hi[a] + 0.01f;
        vs[a] = (fit[a + 3] - fit[a]) / 200.0f;
    }
    const float outdoor[6] = {-50.0f, -50.0f, -5.0f, 50.0f, 50.0f, 15.0f};
    const float kitti[6] = {0.0f, -40.0f, -3.0f, 70.4f, 40.0f, 1.0f};
    struct {
        const char *what;
        const float *range;
        float v[3];
        vc_reduce reduce;
        vc_dtype dtype;
        int64_t cap;
    } cfg[] = {
        {"fitted mean", fit, {vs[0], vs[1], vs[2]}, VC_REDUCE_MEAN, VC_DTYPE_FP32, 0},
        {"fitted first bf16 cap 1000", fit, {vs[0], vs[1], vs[2]}, VC_REDUCE_FIRST,
         VC_DTYPE_BF16, 1000},
        {"outdoor mean", outdoor, {0.1f, 0.1f, 0.2f}, VC_REDUCE_MEAN, VC_DTYPE_FP32, 0},
        {"outdoor count fp16", outdoor, {0.1f, 0.1f, 0.2f}, VC_REDUCE_COUNT, VC_DTYPE_FP16, 0},
        {"outdoor mean bf16 cap 5000", outdoor, {0.1f, 0.1f, 0.2f}, VC_REDUCE_MEAN,
         VC_DTYPE_BF16, 5000},
        {"kitti mean cap 16000", kitti, {0.05f, 0.05f, 0.1f}, VC_REDUCE_MEAN, VC_DTYPE_FP32,
         16000},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        vc_voxelize_desc d = make_desc(cfg[c].v[0], cfg[c].v[1], cfg[c].v[2], cfg[c].range,
                                       cfg[c].reduce);
        d.dtype = cfg[c].dtype;
        d.max_voxels = cfg[c].cap;
        char what[160];
        snprintf(what, sizeof what, "%s: %s", name, cfg[c].what);
        gpu_run g;
        int64_t before = vc_t_fail;
        run_case_opt(what, &d, pts, n, dim, batch, 0, &g);
        printf("%s: %lld points -> %lld voxels (%lld in total, %lld points used, %lld outside, "
               "%lld non-finite)%s\n",
               what, (long long)n, (long long)g.stats.voxels_kept,
               (long long)g.stats.voxels_total, (long long)g.stats.points_used,
               (long long)g.stats.points_out_of_range, (long long)g.stats.points_nonfinite,
               vc_t_fail == before ? ", same as the CPU" : ", DIFFERS");
        gpu_run_free(&g);
    }
}

static void test_scans(void)
{
    const char *names[2] = {"vlp16.bin", "octomap_scan.bin"};
    vc_cloud clouds[2];
    int have[2] = {0, 0};
    memset(clouds, 0, sizeof clouds);
    for (int i = 0; i < 2; i++) {
        char path[1200];
        if (!find_scan(names[i], path, sizeof path)) {
            printf("real scan %s: not found (datasets/fetch fetches it; VC_TEST_DATA_ROOT "
                   "points at it), SKIPPED\n", names[i]);
            continue;
        }
        vc_status s = vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &clouds[i]);
        CHECK_MSG(s == VC_OK, "reading %s: status %d", path, (int)s);
        if (s != VC_OK) continue;
        have[i] = 1;
        printf("real scan %s: %lld points, %d columns\n", path, (long long)clouds[i].count,
               (int)clouds[i].dim);
        scan_cases(names[i], clouds[i].data, clouds[i].count, clouds[i].dim, NULL);
    }
    /* both scans as one batch of two (batch size inferred) */
    if (have[0] && have[1] && clouds[0].dim == clouds[1].dim) {
        const int dim = clouds[0].dim;
        const int64_t n = clouds[0].count + clouds[1].count;
        float *pts = malloc((size_t)n * (size_t)dim * sizeof(float));
        int32_t *batch = malloc((size_t)n * sizeof *batch);
        memcpy(pts, clouds[0].data, (size_t)clouds[0].count * (size_t)dim * sizeof(float));
        memcpy(pts + clouds[0].count * dim, clouds[1].data,
               (size_t)clouds[1].count * (size_t)dim * sizeof(float));
        for (int64_t i = 0; i < n; i++) batch[i] = i < clouds[0].count ? 0 : 1;
        scan_cases("both scans, batch 2", pts, n, dim, batch);
        free(pts);
        free(batch);
    }
    vc_cloud_free(&clouds[0]);
    vc_cloud_free(&clouds[1]);
}

int main(void)
{
    if (!gpu_usable()) return 77;
    const char *san = getenv("VC_SANITIZE");
    g_small = san && *san && strcmp(san, "0") != 0;
    vc_rng rng = vc_test_rng("test_gpu_voxelize");
    if (g_small) printf("VC_SANITIZE: small sizes\n");
    CUDA_OK(cudaStreamCreate(&g_stream));
    {
        /* keep freed stream-ordered memory in the pool, so the 0xFF fill reaches the next run */
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess)
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        cudaGetLastError();
    }
    test_boundaries();
    test_small_and_bad();
    test_nonfinite(&rng);
    test_error_order(&rng);
    test_random(&rng);
    test_kitti(&rng);
    if (!g_small) test_scans();
    test_large(&rng);
    printf("test_gpu_voxelize: %lld GPU/CPU comparisons; MEAN: %lld elements, %lld not "
           "bit-identical, largest relative error %g\n",
           (long long)g_cases, (long long)g_mean_elems, (long long)g_mean_not_bits,
           g_mean_max_rel);
    cudaStreamDestroy(g_stream);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_voxelize: built without CUDA, skipped\n");
    return 77;
}
#endif
