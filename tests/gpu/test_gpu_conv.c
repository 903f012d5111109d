/* tests/gpu/test_gpu_conv.c - GPU convolution and pooling (conv/conv_gpu.h) against their CPU
 * twins (vc_conv_cpu, vc_pool_cpu, vc_global_pool_cpu) on the same random inputs, each map built
 * on both sides and each layer compared as conv_harness.h says (tolerances, NaN-poisoned
 * outputs, two bit-identical GPU runs). The planner's tile rules are test_gpu_conv_tiles'.
 * Coverage: every map type (SUBM k1/k3/k5/k7, dilation, 3x1x1, STRIDED, DOWNSAMPLE, TRANSPOSED,
 * INVERSE of strided and downsample maps), both algorithms and AUTO, the implicit GEMM's tap split
 * forced through the engine options (3 groups on every map type, 2/3/7 on ~50k voxels) besides
 * the planner's own choice, fp32 (exact and tf32), fp16, bf16, weights / output / residual
 * in other dtypes, bias, ReLU, LeakyReLU, residual, channels 1..384 incl. 1, 3, 4, 5, 7, 17,
 * 96, 384, N = 0, 1, 31, 33, thousands and ~50k, batch > 1, coordinates on the faces of the
 * grid, the real scans in datasets/data when present (skipped with a message otherwise;
 * VC_DATASETS names another folder), bad arguments.
 * Pooling: max / avg over maps (max exact, avg 1e-6, NaN where the CPU has NaN), global max / avg
 * with empty batch items, NaN inputs, a bad batch index (same status, dst untouched).
 * VC_SANITIZE (set by tests/gpu/run for compute-sanitizer) runs a reduced set.
 * Prints its seed (VC_TEST_SEED replays). Exits 77 without a CUDA build or a usable device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv.h"
#include "conv/conv_gpu.h"
#include "core/dtype.h"
#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "map_desc.h"
#include "gemm/gemm.h"
#include "hash/hash.h"
#include "real_scans.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"
#include "pool/pool.h"
#include "voxelize/voxelize.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "conv_harness.h"

/* A random epilogue and dtype mix on top of o. */
static conv_opts random_opts(vc_rng *rng, conv_opts o)
{
    const vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    o.in_dt = dts[vc_rng_int(rng, 3)];
    o.w_dt = vc_rng_int(rng, 2) ? o.in_dt : dts[vc_rng_int(rng, 3)];
    o.out_dt = vc_rng_int(rng, 2) ? o.in_dt : dts[vc_rng_int(rng, 3)];
    o.res = (int)vc_rng_int(rng, 2);
    o.res_dt = dts[vc_rng_int(rng, 3)];
    o.bias = (int)vc_rng_int(rng, 2);
    o.act = (vc_activation)vc_rng_int(rng, 3);
    o.tf32 = o.in_dt == VC_DTYPE_FP32 && vc_rng_int(rng, 3) == 0;
    o.algo = (vc_algo)vc_rng_int(rng, 3);
    return o;
}

/* Every map type on one cloud: fp16 and fp32, all algorithms, plus random epilogues. */
static void sweep_maps(const cloud *c, vc_rng *rng, int with_k7)
{
    int32_t *d_rows = to_device(c->rows, (size_t)c->n * 16);
    const int k311[3] = {3, 1, 1}, s211[3] = {2, 1, 1}, p000[3] = {0, 0, 0}, d111[3] = {1, 1, 1},
              p011[3] = {0, 1, 1}, k333[3] = {3, 3, 3}, s222[3] = {2, 2, 2};
    struct {
        const char *name;
        vc_map_desc d;
        int inverse;
    } maps[] = {
        {"subm k3", mkdesc(VC_MAP_SUBM, 3, 1, 0, 1), 0},
        {"subm k1", mkdesc(VC_MAP_SUBM, 1, 1, 0, 1), 0},
        {"subm k5", mkdesc(VC_MAP_SUBM, 5, 1, 0, 1), 0},
        {"subm k3 dil2", mkdesc(VC_MAP_SUBM, 3, 1, 0, 2), 0},
        {"subm 3x1x1", mkdesc3(VC_MAP_SUBM, k311, d111, p000, d111), 0},
        {"strided k3 s2 p1", mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1), 1},
        {"strided k3 s2 p(0,1,1)", mkdesc3(VC_MAP_STRIDED, k333, s222, p011, d111), 0},
        {"strided 3x1x1 s(2,1,1)", mkdesc3(VC_MAP_STRIDED, k311, s211, p000, d111), 0},
        {"strided k2 s2", mkdesc(VC_MAP_STRIDED, 2, 2, 0, 1), 0},
        {"downsample k2 s2", mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1), 1},
        {"downsample k3 s2", mkdesc(VC_MAP_DOWNSAMPLE, 3, 2, 0, 1), 0},
        {"transposed k2 s2", mkdesc(VC_MAP_TRANSPOSED, 2, 2, 0, 1), 0},
        {"transposed k3 s2 p1", mkdesc(VC_MAP_TRANSPOSED, 3, 2, 1, 1), 0},
        {"subm k7", mkdesc(VC_MAP_SUBM, 7, 1, 0, 1), 0},
    };
    const int nmaps = (int)(sizeof maps / sizeof maps[0]) - (with_k7 ? 0 : 1);
    for (int i = 0; i < nmaps; i++) {
        char label[256];
        snprintf(label, sizeof label, "%s | n %lld batch %d shape %dx%dx%d", maps[i].name,
                 (long long)c->n, (int)c->batch, (int)c->shape[0], (int)c->shape[1],
                 (int)c->shape[2]);
        map_pair m = build_pair(c, d_rows, &maps[i].d, label);
        if (!m.ok) continue;
        run_algos(label, &m, opts(16, 32, VC_DTYPE_FP16, VC_ALGO_AUTO), rng);
        run_algos(label, &m, opts(5, 7, VC_DTYPE_FP32, VC_ALGO_AUTO), rng);
        for (int r = 0; r < 2; r++) run_conv(label, &m, random_opts(rng, opts(8, 24, 0, 0)), rng);
        /* the tap split forced to 3 groups (16-bit features), whatever the planner would do */
        g_opt.tap_split = 3;
        conv_opts ts = opts(16, 40, VC_DTYPE_BF16, VC_ALGO_IMPLICIT_GEMM);
        ts.bias = ts.res = 1;
        ts.act = VC_ACT_LEAKY_RELU;
        run_conv(label, &m, ts, rng);
        g_opt.tap_split = 0;
        if (maps[i].inverse) {
            char l2[300];
            snprintf(l2, sizeof l2, "inverse of %s", label);
            map_pair inv = inverse_pair(&m, c, l2);
            if (inv.ok) {
                run_algos(l2, &inv, opts(32, 16, VC_DTYPE_FP16, VC_ALGO_AUTO), rng);
                run_algos(l2, &inv, opts(3, 4, VC_DTYPE_FP32, VC_ALGO_AUTO), rng);
                run_conv(l2, &inv, random_opts(rng, opts(17, 9, 0, 0)), rng);
            }
            free_pair(&inv);
        }
        free_pair(&m);
    }
    cudaFree(d_rows);
}

/* Dtypes, epilogues and channel counts on a subm k3 and a strided map of one cloud. */
static void sweep_options(const cloud *c, vc_rng *rng)
{
    int32_t *d_rows = to_device(c->rows, (size_t)c->n * 16);
    vc_map_desc ds[2] = {mkdesc(VC_MAP_SUBM, 3, 1, 0, 1), mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1)};
    const char *names[2] = {"subm k3", "strided k3 s2 p1"};
    for (int i = 0; i < 2; i++) {
        char label[256];
        snprintf(label, sizeof label, "%s | n %lld batch %d", names[i], (long long)c->n,
                 (int)c->batch);
        map_pair m = build_pair(c, d_rows, &ds[i], label);
        if (!m.ok) continue;
        const vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
        for (int t = 0; t < 3; t++) {
            conv_opts o = opts(24, 40, dts[t], VC_ALGO_AUTO);
            run_algos(label, &m, o, rng);
            if (dts[t] == VC_DTYPE_FP32) {
                o.tf32 = 1;
                run_algos(label, &m, o, rng);
                o.tf32 = 0;
            }
            /* weights in each other dtype */
            for (int u = 0; u < 3; u++) {
                if (u == t) continue;
                o.w_dt = dts[u];
                run_algos(label, &m, o, rng);
            }
            o.w_dt = dts[t];
            /* every epilogue: bias, residual (each dtype), activations, output in each dtype */
            for (int act = 0; act < 3; act++) {
                o.act = (vc_activation)act;
                o.bias = act != 1;
                o.res = act != 0;
                o.res_dt = dts[(t + act) % 3];
                o.out_dt = dts[(t + act + 1) % 3];
                run_algos(label, &m, o, rng);
            }
        }
        /* channel counts that break kernels */
        const int64_t ch[][2] = {{1, 1},  {1, 3},  {3, 4},   {4, 5},   {5, 17}, {17, 3},
                                 {7, 7},  {3, 64}, {64, 3},  {96, 96}, {8, 8},  {16, 16},
                                 {33, 65}, {128, 128}, {17, 384}, {384, 17}};
        for (size_t j = 0; j < sizeof ch / sizeof ch[0]; j++) {
            run_algos(label, &m, opts(ch[j][0], ch[j][1], VC_DTYPE_FP16, VC_ALGO_AUTO), rng);
            run_conv(label, &m, opts(ch[j][0], ch[j][1], VC_DTYPE_FP32, VC_ALGO_IMPLICIT_GEMM),
                     rng);
            run_conv(label, &m,
                     opts(ch[j][0], ch[j][1], VC_DTYPE_BF16, VC_ALGO_GATHER_GEMM_SCATTER), rng);
            run_conv(label, &m,
                     opts(ch[j][0], ch[j][1], VC_DTYPE_BF16, VC_ALGO_GATHER_GEMM_SCATTER_GROUPED),
                     rng);
        }
        for (int r = 0; r < 12; r++) {
            conv_opts o = random_opts(rng, opts(1 + vc_rng_int(rng, 70), 1 + vc_rng_int(rng, 70),
                                                0, 0));
            run_conv(label, &m, o, rng);
        }
        free_pair(&m);
    }
    cudaFree(d_rows);
}

/* 384 -> 384 on a small cloud (the CPU twin is slow at these widths). */
static void wide_channels(vc_rng *rng)
{
    const int32_t shape[3] = {20, 30, 40};
    cloud c = make_cloud(rng, 500, 2, shape, 1);
    int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
    vc_map_desc d = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
    map_pair m = build_pair(&c, d_rows, &d, "wide subm k3");
    run_algos("wide subm k3", &m, opts(384, 384, VC_DTYPE_FP16, VC_ALGO_AUTO), rng);
    run_conv("wide subm k3", &m, opts(384, 384, VC_DTYPE_FP32, VC_ALGO_IMPLICIT_GEMM), rng);
    run_conv("wide subm k3", &m, opts(256, 384, VC_DTYPE_BF16, VC_ALGO_IMPLICIT_GEMM), rng);
    free_pair(&m);
    cudaFree(d_rows);
    free(c.rows);
}

/* ---- real scans -------------------------------------------------------------------------- */

static void real_scans(vc_rng *rng)
{
    for (size_t f = 0; f < sizeof real_scan_files / sizeof real_scan_files[0]; f++) {
        char path[1024];
        vc_voxels vox;
        if (!real_scan_voxels(real_scan_files[f], &vox, path, sizeof path)) continue;
        if (vox.n > 0) {
            cloud c;
            c.rows = vox.coords;
            c.n = vox.n;
            c.batch = vox.batch_size;
            memcpy(c.shape, vox.shape, sizeof c.shape);
            int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
            vc_map_desc ds[3] = {mkdesc(VC_MAP_SUBM, 3, 1, 0, 1),
                                 mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1),
                                 mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1)};
            for (int i = 0; i < 3; i++) {
                char label[1200];
                snprintf(label, sizeof label, "%s map %d", path, i);
                map_pair m = build_pair(&c, d_rows, &ds[i], label);
                run_algos(label, &m, opts(16, 32, VC_DTYPE_FP16, VC_ALGO_AUTO), rng);
                run_algos(label, &m, opts(32, 32, VC_DTYPE_FP32, VC_ALGO_AUTO), rng);
                run_conv(label, &m, random_opts(rng, opts(64, 64, 0, 0)), rng);
                free_pair(&m);
            }
            cudaFree(d_rows);
        }
        vc_voxels_free(&vox);
    }
}

/* ---- bad arguments ----------------------------------------------------------------------- */

static void bad_args(vc_rng *rng)
{
    const int32_t shape[3] = {8, 8, 8};
    cloud c = make_cloud(rng, 50, 1, shape, 0);
    int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
    vc_map_desc d = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
    map_pair m = build_pair(&c, d_rows, &d, "bad args");
    if (m.ok) {
        void *in_d = to_device(NULL, (size_t)c.n * 4 * 4), *w_d = to_device(NULL, 27 * 16 * 4);
        void *out_d = to_device(NULL, (size_t)c.n * 4 * 4);
        vc_conv_args a;
        memset(&a, 0, sizeof a);
        a.map = &m.gpu;
        a.in = in_d;
        a.c_in = 4;
        a.out = out_d;
        a.c_out = 4;
        a.weights = w_d;
        vc_err e = {{0}};
        vc_conv_args b = a;
        b.c_in = 0;
        CHECK(vc_conv_gpu(&b, VC_ALGO_AUTO, 0, &g_opt, g_stream, &e) == VC_ERR_INVALID_ARGUMENT);
        b = a;
        b.in_dtype = VC_DTYPE_INT32;
        CHECK(vc_conv_gpu(&b, VC_ALGO_AUTO, 0, &g_opt, g_stream, &e) == VC_ERR_INVALID_ARGUMENT);
        b = a;
        b.weights = NULL;
        CHECK(vc_conv_gpu(&b, VC_ALGO_AUTO, 0, &g_opt, g_stream, &e) == VC_ERR_INVALID_ARGUMENT);
        b = a;
        b.act = (vc_activation)9;
        CHECK(vc_conv_gpu(&b, VC_ALGO_AUTO, 0, &g_opt, g_stream, &e) == VC_ERR_INVALID_ARGUMENT);
        CHECK(vc_conv_gpu(&a, (vc_algo)9, 0, &g_opt, g_stream, &e) == VC_ERR_INVALID_ARGUMENT);
        CHECK(vc_conv_gpu(NULL, VC_ALGO_AUTO, 0, &g_opt, g_stream, &e) == VC_ERR_INVALID_ARGUMENT);
        CHECK(vc_pool_gpu(&m.gpu, (vc_pool_mode)5, in_d, VC_DTYPE_FP32, 4, out_d, NULL, g_stream, &e) ==
              VC_ERR_INVALID_ARGUMENT);
        CHECK(vc_pool_gpu(&m.gpu, VC_POOL_MAX, in_d, VC_DTYPE_FP32, 0, out_d, NULL, g_stream, &e) ==
              VC_ERR_INVALID_ARGUMENT);
        CHECK(vc_conv_gpu(&a, VC_ALGO_AUTO, 0, &g_opt, g_stream, &e) == VC_OK);
        CUDA_OK(cudaStreamSynchronize(g_stream));
        cudaFree(in_d);
        cudaFree(w_d);
        cudaFree(out_d);
    }
    free_pair(&m);
    cudaFree(d_rows);
    free(c.rows);
}

/* ---- graph capture ----------------------------------------------------------------------- */

/* The algorithms that promise no host synchronisation (implicit GEMM, grouped GGS) are captured
 * in a CUDA graph (a synchronisation inside would end the capture with an error) and replayed
 * twice over a poisoned output; the replays must equal a direct call bit for bit. */
static void graph_capture(vc_rng *rng)
{
    const int32_t shape[3] = {20, 30, 40};
    cloud c = make_cloud(rng, 3000, 2, shape, 1);
    int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
    vc_map_desc d = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
    map_pair m = build_pair(&c, d_rows, &d, "graph capture");
    const int64_t ci = 32, co = 48, n_in = m.gpu.n_in, n_out = m.gpu.n_out;
    const vc_algo algos[2] = {VC_ALGO_IMPLICIT_GEMM, VC_ALGO_GATHER_GEMM_SCATTER_GROUPED};
    if (m.ok && n_out > 0) {
        void *h_in = host_rand(rng, VC_DTYPE_FP16, n_in * ci, 1.0f);
        void *h_w = host_rand(rng, VC_DTYPE_FP16, co * 27 * ci, 0.2f);
        void *in_d = to_device(h_in, (size_t)(n_in * ci * 2));
        void *w_d = to_device(h_w, (size_t)(co * 27 * ci * 2));
        void *out_a = to_device(NULL, (size_t)(n_out * co * 2));
        void *out_b = to_device(NULL, (size_t)(n_out * co * 2));
        uint16_t *ha = malloc((size_t)(n_out * co * 2)), *hb = malloc((size_t)(n_out * co * 2));
        for (int i = 0; i < 2; i++) {
            vc_conv_args a;
            memset(&a, 0, sizeof a);
            a.map = &m.gpu;
            a.in = in_d;
            a.in_dtype = a.w_dtype = a.out_dtype = a.res_dtype = VC_DTYPE_FP16;
            a.c_in = ci;
            a.c_out = co;
            a.weights = w_d;
            a.act = VC_ACT_RELU;
            /* The map may take a tile order (map_cache), but not under capture (its allocation
             * would belong to the graph): the capture comes first and must leave the map as it
             * was; the direct call after it may build one (g_opt.force_order). */
            a.map_cache = &m.gpu;
            a.out = out_b;
            vc_err e = {{0}};
            cudaGraph_t graph = NULL;
            cudaGraphExec_t exec = NULL;
            const int had_order = m.gpu.tile_order != NULL;
            CUDA_OK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
            const vc_status st = vc_conv_gpu(&a, algos[i], 0, &g_opt, g_stream, &e);
            const cudaError_t ce = cudaStreamEndCapture(g_stream, &graph);
            CHECK_MSG(st == VC_OK && ce == cudaSuccess, "%s: capture failed: %s / %s",
                      algo_name(algos[i]), e.msg, cudaGetErrorString(ce));
            CHECK_MSG((m.gpu.tile_order != NULL) == had_order,
                      "%s: a captured convolution changed the map's tile order",
                      algo_name(algos[i]));
            a.out = out_a;
            CHECK(vc_conv_gpu(&a, algos[i], 0, &g_opt, g_stream, &e) == VC_OK);
            CUDA_OK(cudaStreamSynchronize(g_stream));
            if (st == VC_OK && ce == cudaSuccess &&
                cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
                for (int r = 0; r < 2; r++) {
                    CUDA_OK(cudaMemsetAsync(out_b, 0xff, (size_t)(n_out * co * 2), g_stream));
                    CUDA_OK(cudaGraphLaunch(exec, g_stream));
                    CUDA_OK(cudaStreamSynchronize(g_stream));
                    CUDA_OK(cudaMemcpy(ha, out_a, (size_t)(n_out * co * 2), cudaMemcpyDeviceToHost));
                    CUDA_OK(cudaMemcpy(hb, out_b, (size_t)(n_out * co * 2), cudaMemcpyDeviceToHost));
                    CHECK_MSG(memcmp(ha, hb, (size_t)(n_out * co * 2)) == 0,
                              "%s: graph replay %d differs from the direct call",
                              algo_name(algos[i]), r);
                }
                cudaGraphExecDestroy(exec);
            } else {
                cudaGetLastError();
            }
            if (graph) cudaGraphDestroy(graph);
        }
        free(ha);
        free(hb);
        free(h_in);
        free(h_w);
        cudaFree(in_d);
        cudaFree(w_d);
        cudaFree(out_a);
        cudaFree(out_b);
    }
    free_pair(&m);
    cudaFree(d_rows);
    free(c.rows);
}

/* ---- pooling ----------------------------------------------------------------------------- */

/* Elementwise: both NaN, or (max) equal / (avg) summed into the error. */
static void cmp_pool(const char *label, const float *g, const float *c, int64_t n, int exact,
                     double tol)
{
    int64_t nan_diff = 0, neq = 0;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(g[i]) || isnan(c[i])) {
            nan_diff += isnan(g[i]) != isnan(c[i]);
            continue;
        }
        neq += g[i] != c[i];
        double d = (double)g[i] - c[i];
        num += d * d;
        den += (double)c[i] * c[i];
    }
    double e = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK_MSG(nan_diff == 0, "%s: %lld elements NaN on one side only", label, (long long)nan_diff);
    if (exact)
        CHECK_MSG(neq == 0, "%s: %lld of %lld elements differ", label, (long long)neq,
                  (long long)n);
    else
        CHECK_MSG(e <= tol, "%s: rel err %.3g > %.1g", label, e, tol);
}

static void run_pool(const char *label, const map_pair *m, vc_pool_mode mode, vc_dtype dt,
                     int64_t C, int nans, vc_rng *rng)
{
    if (!m->ok) return;
    g_cases++;
    const int64_t n_in = m->cpu.n_in, n_out = m->cpu.n_out;
    char lab[400];
    snprintf(lab, sizeof lab, "pool %s %s C %lld%s | %s", mode == VC_POOL_MAX ? "max" : "avg",
             dname(dt), (long long)C, nans ? " NaNs" : "", label);
    void *in_h = host_rand(rng, dt, n_in * C, 2.0f);
    if (nans)
        for (int64_t i = 0; i < n_in * C; i += 1 + vc_rng_int(rng, 97))
            vc_store_f32(in_h, dt, i, NAN);
    void *out_c = malloc((size_t)(n_out * C + 1) * dsize(dt));
    void *out_g = malloc((size_t)(n_out * C + 1) * dsize(dt));
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_pool_cpu(&m->cpu, mode, in_h, dt, C, out_c, 0, &ce);
    void *in_d = to_device(in_h, (size_t)(n_in * C) * dsize(dt));
    void *out_d = to_device(NULL, (size_t)(n_out * C + 1) * dsize(dt));
    CUDA_OK(cudaMemsetAsync(out_d, 0xff, (size_t)(n_out * C + 1) * dsize(dt), g_stream));
    vc_status gs = vc_pool_gpu(&m->gpu, mode, in_d, dt, C, out_d, NULL, g_stream, &ge);
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CHECK_MSG(cs == gs, "%s: cpu %s (%s), gpu %s (%s)", lab, vc_status_string(cs), ce.msg,
              vc_status_string(gs), ge.msg);
    if (cs == VC_OK && gs == VC_OK && n_out > 0) {
        CUDA_OK(cudaMemcpy(out_g, out_d, (size_t)(n_out * C) * dsize(dt),
                           cudaMemcpyDeviceToHost));
        float *gf = host_f32(out_g, dt, n_out * C), *cf = host_f32(out_c, dt, n_out * C);
        if (!nans) { /* nothing unwritten: no NaN at all */
            int64_t k = 0;
            for (int64_t i = 0; i < n_out * C; i++) k += isnan(gf[i]);
            CHECK_MSG(k == 0, "%s: %lld NaN outputs", lab, (long long)k);
        }
        cmp_pool(lab, gf, cf, n_out * C, mode == VC_POOL_MAX, 1e-6);
        free(gf);
        free(cf);
    }
    cudaFree(in_d);
    cudaFree(out_d);
    free(in_h);
    free(out_c);
    free(out_g);
}

static void run_global(const char *label, const cloud *c, int32_t batch, vc_pool_mode mode,
                       vc_dtype dt, int64_t C, int nans, int bad_row, vc_rng *rng)
{
    g_cases++;
    const int64_t n = c->n, nb = (int64_t)batch * C;
    char lab[400];
    snprintf(lab, sizeof lab, "global %s %s C %lld batch %d n %lld%s%s | %s",
             mode == VC_POOL_MAX ? "max" : "avg", dname(dt), (long long)C, (int)batch,
             (long long)n, nans ? " NaNs" : "", bad_row >= 0 ? " bad batch index" : "", label);
    int32_t *rows = malloc((size_t)(n > 0 ? n : 1) * 16);
    memcpy(rows, c->rows, (size_t)n * 16);
    if (bad_row >= 0 && bad_row < n) rows[4 * bad_row] = bad_row % 2 ? batch : -1;
    void *in_h = host_rand(rng, dt, n * C, 3.0f);
    if (nans)
        for (int64_t i = 0; i < n * C; i += 1 + vc_rng_int(rng, 2000))
            vc_store_f32(in_h, dt, i, NAN);
    float *dc = malloc((size_t)nb * 4), *dg = malloc((size_t)nb * 4);
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_global_pool_cpu(rows, n, batch, mode, in_h, dt, C, dc, NULL, &ce);
    int32_t *rows_d = to_device(rows, (size_t)n * 16);
    void *in_d = to_device(in_h, (size_t)(n * C) * dsize(dt));
    float *dst_d = to_device(NULL, (size_t)nb * 4);
    CUDA_OK(cudaMemset(dst_d, 0xff, (size_t)nb * 4));
    vc_status gs = vc_global_pool_gpu(rows_d, n, batch, mode, in_d, dt, C, dst_d, NULL, g_stream, &ge);
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CHECK_MSG(cs == gs, "%s: cpu %s (%s), gpu %s (%s)", lab, vc_status_string(cs), ce.msg,
              vc_status_string(gs), ge.msg);
    CUDA_OK(cudaMemcpy(dg, dst_d, (size_t)nb * 4, cudaMemcpyDeviceToHost));
    if (cs == VC_OK && gs == VC_OK) {
        if (!nans) {
            int64_t k = 0;
            for (int64_t i = 0; i < nb; i++) k += isnan(dg[i]);
            CHECK_MSG(k == 0, "%s: %lld NaN outputs", lab, (long long)k);
        }
        cmp_pool(lab, dg, dc, nb, mode == VC_POOL_MAX, 1e-6);
        /* determinism: a second run gives the same bits */
        float *dg2 = malloc((size_t)nb * 4);
        CHECK(vc_global_pool_gpu(rows_d, n, batch, mode, in_d, dt, C, dst_d, NULL, g_stream, &ge) ==
              VC_OK);
        CUDA_OK(cudaMemcpy(dg2, dst_d, (size_t)nb * 4, cudaMemcpyDeviceToHost));
        CHECK_MSG(memcmp(dg, dg2, (size_t)nb * 4) == 0, "%s: two runs differ", lab);
        free(dg2);
    } else if (gs != VC_OK) {
        /* dst untouched */
        int64_t k = 0;
        const uint32_t *u = (const uint32_t *)dg;
        for (int64_t i = 0; i < nb; i++) k += u[i] != 0xffffffffu;
        CHECK_MSG(k == 0, "%s: failed call wrote %lld elements of dst", lab, (long long)k);
    }
    cudaFree(rows_d);
    cudaFree(in_d);
    cudaFree(dst_d);
    free(rows);
    free(in_h);
    free(dc);
    free(dg);
}

static void sweep_pool(vc_rng *rng)
{
    const int32_t shape[3] = {20, 30, 40};
    cloud c = make_cloud(rng, 3000, 2, shape, 1);
    int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
    vc_map_desc ds[5] = {mkdesc(VC_MAP_SUBM, 3, 1, 0, 1), mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1),
                         mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1),
                         mkdesc(VC_MAP_TRANSPOSED, 2, 2, 0, 1), mkdesc(VC_MAP_SUBM, 5, 1, 0, 1)};
    const vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    /* 64 and 48: whole 16-byte rows in every dtype, the vector kernel where outputs x channels
     * reach 2^17 (the SUBM and transposed maps of 3000 voxels); 48 with NaNs */
    const int64_t chs[4] = {1, 5, 64, 48};
    for (int i = 0; i < 5; i++) {
        char label[64];
        snprintf(label, sizeof label, "map %d", i);
        map_pair m = build_pair(&c, d_rows, &ds[i], label);
        for (int t = 0; t < 3; t++)
            for (int j = 0; j < 4; j++)
                for (int mode = 0; mode < 2; mode++)
                    run_pool(label, &m, (vc_pool_mode)mode, dts[t], chs[j], j == 1 || j == 3,
                             rng);
        if (i == 2 && m.ok) {
            map_pair inv = inverse_pair(&m, &c, "pool inverse");
            for (int mode = 0; mode < 2; mode++)
                run_pool("inverse of downsample", &inv, (vc_pool_mode)mode, VC_DTYPE_FP16, 17,
                         mode, rng);
            free_pair(&inv);
        }
        free_pair(&m);
    }
    cudaFree(d_rows);
    free(c.rows);

    /* global pooling: batch items, one empty (batch size one more than used), NaNs, bad rows */
    const int32_t big[3] = {41, 400, 400};
    struct {
        int64_t n;
        int32_t used, batch;
    } gc[] = {{0, 1, 2}, {1, 1, 1}, {33, 2, 3}, {3000, 1, 1}, {5000, 3, 4}, {200000, 2, 2},
              {20000, 7, 9}};
    for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++) {
        if (g_quick && gc[i].n > 5000) continue;
        cloud g = make_cloud(rng, gc[i].n, gc[i].used, big, 3);
        for (int t = 0; t < 3; t++)
            for (int mode = 0; mode < 2; mode++) {
                run_global("", &g, gc[i].batch, (vc_pool_mode)mode, dts[t], t == 0 ? 64 : 33,
                           t == 2, -1, rng);
                if (t == 1) run_global("", &g, gc[i].batch, (vc_pool_mode)mode, dts[t], 1, 0, -1,
                                       rng);
            }
        if (g.n > 10) {
            run_global("", &g, gc[i].batch, VC_POOL_AVG, VC_DTYPE_FP32, 8, 0, g.n / 2, rng);
            run_global("", &g, gc[i].batch, VC_POOL_MAX, VC_DTYPE_FP32, 8, 0, g.n - 1, rng);
        }
        free(g.rows);
    }
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_conv");
    g_quick = getenv("VC_SANITIZE") != NULL;
    if (g_quick) printf("VC_SANITIZE: reduced run\n");
    CUDA_OK(cudaStreamCreate(&g_stream));
    g_opt.force_order = 1; /* the small layers here take tile orders too */

    const int32_t big[3] = {41, 1600, 1408}, small[3] = {5, 6, 7}, mid[3] = {20, 30, 40},
                  one[3] = {1, 1, 1};
    /* every map type on a few clouds */
    struct {
        int64_t n;
        int32_t batch;
        const int32_t *shape;
        int style, k7;
    } clouds[] = {
        {2500, 2, mid, 1, 1}, {3000, 3, big, 3, 0}, {1500, 2, small, 2, 0}, {0, 1, mid, 0, 0},
        {1, 1, mid, 0, 0},    {1, 2, one, 0, 0},    {31, 2, small, 0, 1},   {33, 3, big, 2, 0},
    };
    for (size_t i = 0; i < sizeof clouds / sizeof clouds[0]; i++) {
        if (g_quick && i != 0 && i != 4 && i != 6) continue;
        cloud c = make_cloud(&rng, clouds[i].n, clouds[i].batch, clouds[i].shape,
                             clouds[i].style);
        sweep_maps(&c, &rng, clouds[i].k7);
        free(c.rows);
    }
    printf("map sweep done: %d cases\n", g_cases);
    if (!g_quick) {
        cloud c = make_cloud(&rng, 4000, 2, mid, 1);
        sweep_options(&c, &rng);
        free(c.rows);
    }
    printf("option sweep done: %d cases\n", g_cases);
    if (!g_quick) wide_channels(&rng);
    if (!g_quick) {
        /* a larger scan-like cloud: many CTAs, long pair lists */
        cloud c = make_cloud(&rng, 50000, 1, big, 3);
        int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
        vc_map_desc d = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
        map_pair m = build_pair(&c, d_rows, &d, "50k subm k3");
        run_algos("50k subm k3", &m, opts(64, 64, VC_DTYPE_FP16, VC_ALGO_AUTO), &rng);
        run_conv("50k subm k3", &m, opts(32, 32, VC_DTYPE_FP32, VC_ALGO_IMPLICIT_GEMM), &rng);
        /* the planner's tiles for wide layers on large levels (conv/tiles.cu, implicit_configs):
         * 256-wide (wgmma 128x256x64 on Hopper), 96-wide (128x96), 128-wide bf16 (wgmma
         * 128x128) */
        run_conv("50k subm k3", &m, opts(128, 256, VC_DTYPE_FP16, VC_ALGO_AUTO), &rng);
        run_conv("50k subm k3", &m, opts(96, 96, VC_DTYPE_FP16, VC_ALGO_AUTO), &rng);
        run_conv("50k subm k3", &m, opts(128, 128, VC_DTYPE_BF16, VC_ALGO_AUTO), &rng);
        /* stems: features and weights widened to 8 channels by a kernel that the GEMM overlaps
         * (vc_gemm_args.overlap_prev): a warp tile at 5 -> 16, tap packs at 4 -> 32 and 3 -> 64,
         * and a weight dtype cast before a 16 -> 16 layer */
        run_conv("50k subm k3 stem", &m, opts(5, 16, VC_DTYPE_FP16, VC_ALGO_AUTO), &rng);
        run_conv("50k subm k3 stem", &m, opts(4, 32, VC_DTYPE_BF16, VC_ALGO_AUTO), &rng);
        run_conv("50k subm k3 stem", &m, opts(3, 64, VC_DTYPE_FP16, VC_ALGO_AUTO), &rng);
        {
            conv_opts o = opts(16, 16, VC_DTYPE_FP16, VC_ALGO_AUTO);
            o.w_dt = VC_DTYPE_FP32;
            run_conv("50k subm k3, fp32 weights", &m, o, &rng);
        }
        /* bias + residual + ReLU, 16-bit and fp32 outputs */
        {
            double e[3];
            const vc_dtype dts[3] = {VC_DTYPE_FP16, VC_DTYPE_BF16, VC_DTYPE_FP16};
            const int64_t ch[3][2] = {{64, 64}, {32, 48}, {16, 128}};
            for (int i = 0; i < 3; i++) {
                conv_opts o = opts(ch[i][0], ch[i][1], dts[i], VC_ALGO_IMPLICIT_GEMM);
                o.bias = o.res = 1;
                o.act = VC_ACT_RELU;
                if (i == 2) o.out_dt = VC_DTYPE_FP32;
                e[i] = run_conv("50k subm k3 epilogue", &m, o, &rng);
            }
            printf("epilogue: rel err fp16 64->64 %.2e, bf16 32->48 %.2e, fp16 in / fp32 out "
                   "16->128 %.2e\n", e[0], e[1], e[2]);
        }
        /* the tap split forced to 2, 3 and 7 groups (the planner splits small levels only) */
        for (int sp = 2; sp <= 7; sp += sp == 3 ? 4 : 1) {
            g_opt.tap_split = sp;
            conv_opts o = opts(64, 128, VC_DTYPE_FP16, VC_ALGO_IMPLICIT_GEMM);
            o.bias = o.res = 1;
            o.act = VC_ACT_RELU;
            const double e0 = run_conv("50k subm k3 tap split", &m, o, &rng);
            const double e1 = run_conv("50k subm k3 tap split", &m,
                                       opts(24, 256, VC_DTYPE_BF16, VC_ALGO_IMPLICIT_GEMM), &rng);
            printf("tap split %d groups: rel err fp16 64->128 %.2e, bf16 24->256 %.2e\n", sp, e0,
                   e1);
        }
        g_opt.tap_split = 0;
        free_pair(&m);
        cudaFree(d_rows);
        free(c.rows);
    }
    if (!g_quick) real_scans(&rng);
    bad_args(&rng);
    graph_capture(&rng);
    sweep_pool(&rng);
    cudaStreamDestroy(g_stream);
    printf("test_gpu_conv: %d pool/pool cases; %d convolutions ran with a tile order the GEMM "
           "built for the map, each the same bits without it\n", g_cases, g_with_order);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_conv: built without CUDA, skipped\n");
    return 77;
}
#endif
