/* tests/gpu/test_gpu_conv_bounded.c - the implicit GEMM over a bounded map's view
 * (vc_conv_gpu_bounded, conv/conv_gpu.h) given the map's live output count: tiles of tail rows
 * are skipped. On a SUBM k3 map, a STRIDED k3 s2 p1 map and the bounded INVERSE of the latter,
 * built over a device count (0; a typical count in an extent half again larger; the whole
 * extent), for fp16, bf16, tf32 and fp32, with tap splits none / 2 / 3 / the planner's, as
 * clusters and in two passes, planned on the extent and on the live rows (plan_rows): the live
 * rows are bit for bit those of the same call without the count; the tail rows past the tiles
 * that hold live rows keep the poison the output was filled with (16-bit and tf32; exact fp32
 * runs the FMA kernel, which computes every row); and without the count the tail rows are
 * written (so that the poison check can tell). The same for the warp tiles (one warp a tile,
 * and four sharing its taps), forced, at c_in 16, and on sm 9.0 for the wgmma tile whose two
 * warpgroups divide its taps (_wg2), at c_in 64. Prints its seed (VC_TEST_SEED replays).
 * Exits 77 without a CUDA build or a usable device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include "conv/conv_gpu.h"
#include "core/options.h"
#include "gemm/gemm.h"
#include "gpu_testutil.h"
#include "kmap/kmap_gpu.h"
#include "map_desc.h"
#include "oracle.h"

static cudaStream_t g_s;

typedef struct layer_io {
    void *in, *w, *out_a, *out_b;
    float *bias;
    int64_t c_in, c_out, rows_in, rows_out;
    vc_dtype dt;
} layer_io;

/* Random input [rows_in, c_in] (tail rows included), weights and bias on the device. */
static void io_make(layer_io *io, vc_rng *rng, const vc_kmap_data *view, vc_dtype dt,
                    int64_t c_in, int64_t c_out)
{
    memset(io, 0, sizeof *io);
    io->dt = dt;
    io->c_in = c_in;
    io->c_out = c_out;
    io->rows_in = view->n_in;
    io->rows_out = view->n_out;
    const int64_t n_in = io->rows_in * c_in, n_w = c_out * (int64_t)view->volume * c_in;
    double *vals = malloc(sizeof(double) * (size_t)(n_in > n_w ? n_in : n_w));
    void *h = rand_buffer(rng, n_in, dt, 1.0, vals);
    io->in = to_device(h, (size_t)n_in * dt_size(dt));
    free(h);
    h = rand_buffer(rng, n_w, dt, 0.2, vals);
    io->w = to_device(h, (size_t)n_w * dt_size(dt));
    free(h);
    float hb[64];
    for (int i = 0; i < 64; i++) hb[i] = 0.05f + 0.01f * (float)(i % 5);
    io->bias = to_device(hb, sizeof hb);
    const size_t out_bytes = (size_t)(io->rows_out * c_out) * dt_size(dt);
    io->out_a = to_device(NULL, out_bytes);
    io->out_b = to_device(NULL, out_bytes);
    free(vals);
}

static void io_free(layer_io *io)
{
    cudaFree(io->in);
    cudaFree(io->w);
    cudaFree(io->bias);
    cudaFree(io->out_a);
    cudaFree(io->out_b);
}

/* One layer on the view, into out (poisoned first), with or without the live count. */
static vc_status run(const layer_io *io, vc_kmap_data *view, void *out, const int64_t *d_live,
                     int64_t plan, int tf32, const vc_engine_options *o, int *stale, vc_err *err)
{
    CUDA_OK(cudaMemsetAsync(out, 0x7f, (size_t)(io->rows_out * io->c_out) * dt_size(io->dt),
                            g_s));
    vc_conv_args a;
    memset(&a, 0, sizeof a);
    a.map = view;
    a.map_cache = view;
    a.in = io->in;
    a.in_dtype = io->dt;
    a.c_in = io->c_in;
    a.out = out;
    a.out_dtype = io->dt;
    a.c_out = io->c_out;
    a.weights = io->w;
    a.w_dtype = io->dt;
    a.bias = io->bias;
    a.act = VC_ACT_RELU;
    return vc_conv_gpu_bounded(&a, tf32, o, d_live, plan, stale, g_s, err);
}

/* Both runs of one case; checks as the header says. live: the map's live output rows. */
static void check_case(const char *what, const layer_io *io, vc_kmap_data *view,
                       const int64_t *d_live, int64_t live, int64_t plan, int tf32,
                       const vc_engine_options *o)
{
    int stale = 1;
    vc_err err = {{0}};
    vc_status sa = run(io, view, io->out_a, NULL, plan, tf32, o, &stale, &err);
    CHECK_MSG(sa == VC_OK, "%s: without the count: %s", what, err.msg);
    vc_status sb = run(io, view, io->out_b, d_live, plan, tf32, o, &stale, &err);
    CHECK_MSG(sb == VC_OK, "%s: with the count: %s", what, err.msg);
    if (sa != VC_OK || sb != VC_OK) return;
    const size_t row = (size_t)io->c_out * dt_size(io->dt);
    const size_t bytes = row * (size_t)io->rows_out;
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    CUDA_OK(cudaStreamSynchronize(g_s));
    CUDA_OK(cudaMemcpy(a, io->out_a, bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(b, io->out_b, bytes, cudaMemcpyDeviceToHost));
    CHECK_MSG(memcmp(a, b, row * (size_t)live) == 0, "%s: live rows differ with the count",
              what);
    const int skips = io->dt != VC_DTYPE_FP32 || tf32; /* the FMA kernel computes every row */
    /* The tail rows are the positions past `live` of perm, in row order, so row r >= live is
       position r; a tile (at most 128 rows) holding live rows computes its tail rows too. */
    int64_t first = (live + 127) / 128 * 128, kept = 0, written = 0;
    if (first > io->rows_out) first = io->rows_out;
    for (size_t i = row * (size_t)first; i < bytes; i++) kept += b[i] == 0x7f;
    for (size_t i = row * (size_t)live; i < bytes; i++) written += a[i] != 0x7f;
    const int64_t tail = (int64_t)(bytes - row * (size_t)first);
    if (skips) CHECK_MSG(kept == tail, "%s: %lld of %lld tail bytes written with the count", what,
                         (long long)(tail - kept), (long long)tail);
    if (live < io->rows_out)
        CHECK_MSG(written > 0, "%s: no tail byte written without the count", what);
    free(a);
    free(b);
}

/* Every dtype and split of one map view. */
static void check_view(const char *name, vc_rng *rng, vc_kmap_data *view, const int64_t *d_live)
{
    int64_t live = -1;
    CUDA_OK(cudaMemcpy(&live, d_live, sizeof live, cudaMemcpyDeviceToHost));
    const struct {
        vc_dtype dt;
        int tf32;
    } dts[] = {{VC_DTYPE_FP16, 0}, {VC_DTYPE_BF16, 0}, {VC_DTYPE_FP32, 1}, {VC_DTYPE_FP32, 0}};
    const int32_t splits[] = {0, 2, 3, -1};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        layer_io io;
        io_make(&io, rng, view, dts[d].dt, 24, 40);
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
            for (int cl = 0; cl < 2; cl++) {
                if (dts[d].dt == VC_DTYPE_FP32 && (splits[s] != 0 || cl)) continue;
                vc_engine_options o = vc_engine_options_default();
                o.tap_split = splits[s] > 0 ? splits[s] : 0;
                o.cluster_split = cl;
                o.force_order = splits[s] < 0; /* the planner's split, a forced tile order */
                for (int pl = 0; pl < 2; pl++) { /* planned on the extent, on the live rows */
                    char what[160];
                    snprintf(what, sizeof what, "%s, live %lld of %lld, %s%s, split %d, %s, plan "
                             "%s", name, (long long)live, (long long)view->n_out,
                             dt_name(dts[d].dt), dts[d].tf32 ? " tf32" : "", (int)splits[s],
                             cl ? "clusters" : "2 passes", pl ? "live" : "extent");
                    check_case(what, &io, view, d_live, live, pl ? live : 0, dts[d].tf32, &o);
                }
            }
        }
        io_free(&io);
    }
    /* the warp tiles (gemm/warp_tile.cuh, c_in <= 16: the planner's tiles for narrow layers),
     * one warp a tile and four sharing its taps, and the two-warpgroup wgmma tile (sm 9.0),
     * forced: tiles past the live rows are skipped, the live rows exact */
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    for (size_t d = 0; d < 6; d++) {
        static const char *const kWarpCfgs[6] = {"f16_32x16x16_warp", "bf16_32x16x16_warp",
                                                 "f16_32x16x16_warp4", "bf16_32x16x16_warp4",
                                                 "f16_64x64x64_s3_wg2", "bf16_64x64x64_s3_wg2"};
        const char *cfg = kWarpCfgs[d];
        const int wg2 = d >= 4;
        if (wg2 && !(prop.major == 9 && prop.minor == 0)) continue;
        const vc_dtype dt = d % 2 ? VC_DTYPE_BF16 : VC_DTYPE_FP16;
        vc_engine_options o = vc_engine_options_default();
        o.gemm_config = vc_gemm_config_named(cfg, strlen(cfg));
        CHECK_MSG(o.gemm_config >= 0, "%s is not in the GEMM table", cfg);
        layer_io io;
        io_make(&io, rng, view, dt, wg2 ? 64 : 16, wg2 ? 40 : 24);
        for (int pl = 0; pl < 2; pl++) {
            char what[160];
            snprintf(what, sizeof what, "%s, live %lld of %lld, %s, plan %s", name,
                     (long long)live, (long long)view->n_out, cfg, pl ? "live" : "extent");
            check_case(what, &io, view, d_live, live, pl ? live : 0, 0, &o);
        }
        io_free(&io);
    }
}

/* A SUBM k3 and a STRIDED k3 s2 p1 map over `count` of the rows in an extent of max_in, and the
 * bounded inverse of the strided one; each view through check_view. */
static void check_count(vc_rng *rng, const int32_t *d_coords, int64_t max_in, int64_t count,
                        const int32_t shape[3])
{
    int64_t *d_count = to_device(&count, sizeof count);
    const vc_map_desc subm = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
    const vc_map_desc strided = mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1);
    vc_kmap_gpu_bounded bs, bt, bi;
    vc_err err = {{0}};
    CHECK_MSG(vc_kmap_gpu_bounded_create(&subm, shape, 1, max_in, max_in, max_in * 27, NULL, &bs,
                                         &err) == VC_OK, "subm create: %s", err.msg);
    /* an input row has at most 2 x 2 x 2 outputs of a k3 s2 map */
    CHECK_MSG(vc_kmap_gpu_bounded_create(&strided, shape, 1, max_in, 8 * max_in, max_in * 27,
                                         NULL, &bt, &err) == VC_OK, "strided create: %s",
              err.msg);
    CHECK_MSG(vc_kmap_gpu_bounded_create_inverse(&bt, NULL, &bi, &err) == VC_OK,
              "inverse create: %s", err.msg);
    CHECK(vc_kmap_build_gpu_bounded_dev(&bs, d_coords, d_count, g_s, &err) == VC_OK);
    CHECK(vc_kmap_build_gpu_bounded_dev(&bt, d_coords, d_count, g_s, &err) == VC_OK);
    CHECK(vc_kmap_build_gpu_bounded_inverse(&bi, &bt, g_s, &err) == VC_OK);
    CHECK_MSG(vc_kmap_gpu_bounded_check(&bs, g_s, &err) == VC_OK, "subm: %s", err.msg);
    CHECK_MSG(vc_kmap_gpu_bounded_check(&bt, g_s, &err) == VC_OK, "strided: %s", err.msg);
    CHECK_MSG(vc_kmap_gpu_bounded_check(&bi, g_s, &err) == VC_OK, "inverse: %s", err.msg);
    vc_kmap_gpu_bounded *maps[3] = {&bs, &bt, &bi};
    const char *names[3] = {"subm k3", "strided k3 s2", "inverse of strided"};
    for (int i = 0; i < 3 && !vc_t_fail; i++) {
        vc_kmap_data view;
        vc_kmap_gpu_bounded_view(maps[i], &view);
        check_view(names[i], rng, &view, vc_kmap_gpu_bounded_out_count(maps[i]));
    }
    vc_kmap_gpu_bounded_destroy(&bi);
    vc_kmap_gpu_bounded_destroy(&bt);
    vc_kmap_gpu_bounded_destroy(&bs);
    cudaFree(d_count);
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_conv_bounded");
    const char *san = getenv("VC_SANITIZE");
    const int64_t n_max = san && atoi(san) ? 700 : 6000;
    CUDA_OK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    const int32_t shape[3] = {24, 40, 48};
    int64_t n = 0;
    int32_t *c = rand_coords(&rng, shape, 1, n_max, 0, &n);
    const int64_t extent = n + n / 2 + 37;
    int32_t *d_coords = to_device(NULL, (size_t)extent * 16);
    CUDA_OK(cudaMemset(d_coords, 0, (size_t)extent * 16)); /* the rows past a count: ignored */
    CUDA_OK(cudaMemcpy(d_coords, c, (size_t)n * 16, cudaMemcpyHostToDevice));
    check_count(&rng, d_coords, extent, 0, shape); /* an empty frame: every row a tail row */
    check_count(&rng, d_coords, extent, n, shape);
    check_count(&rng, d_coords, n, n, shape); /* every input row live (subm: no tail) */
    cudaFree(d_coords);
    free(c);
    cudaStreamDestroy(g_s);
    TEST_END();
}
#else
int main(void)
{
    printf("test_gpu_conv_bounded: built without CUDA, skipped\n");
    return 77;
}
#endif
