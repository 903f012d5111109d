/* tests/gpu/test_gpu_conv.c - GPU convolution and pooling (conv/conv_gpu.h) against their CPU
 * twins (vc_conv_cpu, vc_pool_cpu, vc_global_pool_cpu) on the same random inputs.
 * Every case builds its map twice, with vc_kmap_build_cpu on host coordinates and
 * vc_kmap_build_gpu on device coordinates (bit-identical, checked by test_gpu_kmap; here the
 * counts are compared), runs the CPU twin on the host map and the GPU on the device map, and
 * compares ||gpu - cpu|| / ||cpu|| with the suite's tolerances: 1e-6 fp32, 5e-4 tf32, 1e-2 when
 * the features or the output are fp16 / bf16 (for tf32 the CPU twin gets the fp32 operands rounded
 * to tf32 as the tensor cores round them). GPU outputs are poisoned with NaN (0xFF bytes)
 * before each run, so an unwritten element fails; each GPU run is done twice and the two results
 * must be bit-identical (determinism).
 * Coverage: every map type (SUBM k1/k3/k5/k7, dilation, 3x1x1, STRIDED, DOWNSAMPLE, TRANSPOSED,
 * INVERSE of strided and downsample maps), both algorithms and AUTO, the implicit GEMM's tap split
 * forced through the engine options (3 groups on every map type, 2/3/7 on ~50k voxels) besides
 * the planner's own choice, the planner's mid-level wgmma tiles by name (~30k voxels),
 * fp32 (exact and tf32), fp16,
 * bf16, weights / output / residual in other dtypes, bias, ReLU, LeakyReLU, residual, channels
 * 1..384 incl. 1, 3, 4, 5, 7, 17, 96, 384, N = 0, 1, 31, 33, thousands and ~50k, batch > 1,
 * coordinates on the faces of the grid, the real scans in datasets/data when present (skipped
 * with a message otherwise; VC_DATASETS names another folder), bad arguments.
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

#include "gpu_testutil.h"

static cudaStream_t g_stream;
/* the engine options of every GPU convolution here (core/options.h) */
static vc_engine_options g_opt = VC_ENGINE_OPTIONS_INIT;
static int g_with_order; /* conv runs whose map had a tile order (then compared without) */
static int g_cases;
static int g_quick; /* VC_SANITIZE set: a reduced run for compute-sanitizer */

static size_t dsize(vc_dtype t) { return t == VC_DTYPE_FP32 ? 4 : 2; }

static const char *dname(vc_dtype t)
{
    return t == VC_DTYPE_FP32 ? "f32" : t == VC_DTYPE_FP16 ? "f16" : "bf16";
}

/* n random values in [-scale, scale) stored as dtype t. */
static void *host_rand(vc_rng *r, vc_dtype t, int64_t n, float scale)
{
    void *p = malloc((size_t)(n > 0 ? n : 1) * dsize(t));
    for (int64_t i = 0; i < n; i++) vc_store_f32(p, t, i, vc_rng_float(r) * scale);
    return p;
}

static float *host_f32(const void *p, vc_dtype t, int64_t n)
{
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) f[i] = vc_load_f32(p, t, i);
    return f;
}

/* ---- clouds (scenes.h) ------------------------------------------------------------------- */

typedef scene_cloud cloud;
#define make_cloud scene_random_cloud

/* ---- maps on both sides ------------------------------------------------------------------ */

typedef struct map_pair {
    vc_kmap_data cpu, gpu;
    int ok;
} map_pair;

static void free_pair(map_pair *m)
{
    vc_kmap_data_free(&m->cpu);
    vc_kmap_data_free_gpu(&m->gpu);
    m->ok = 0;
}

static void check_counts(const char *label, const map_pair *m)
{
    CHECK_MSG(m->cpu.n_out == m->gpu.n_out && m->cpu.n_pairs == m->gpu.n_pairs &&
                  m->cpu.n_in == m->gpu.n_in && m->cpu.volume == m->gpu.volume,
              "%s: cpu map n_out %lld pairs %lld, gpu n_out %lld pairs %lld", label,
              (long long)m->cpu.n_out, (long long)m->cpu.n_pairs, (long long)m->gpu.n_out,
              (long long)m->gpu.n_pairs);
}

static map_pair build_pair(const cloud *c, const int32_t *d_rows, const vc_map_desc *d,
                           const char *label)
{
    map_pair m;
    memset(&m, 0, sizeof m);
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_kmap_build_cpu(c->rows, c->n, c->shape, c->batch, d, NULL, 0, &m.cpu, &ce);
    vc_status gs =
        vc_kmap_build_gpu(d_rows, c->n, c->shape, c->batch, d, NULL, g_stream, &m.gpu, &ge);
    /* both may reject a kernel that does not fit a tiny grid; they must agree */
    CHECK_MSG(cs == gs, "%s: map build: cpu %s (%s), gpu %s (%s)", label, vc_status_string(cs),
              ce.msg, vc_status_string(gs), ge.msg);
    if (cs != VC_OK || gs != VC_OK) {
        if (cs == VC_OK) vc_kmap_data_free(&m.cpu);
        if (gs == VC_OK) vc_kmap_data_free_gpu(&m.gpu);
        memset(&m, 0, sizeof m);
        return m;
    }
    m.ok = 1;
    check_counts(label, &m);
    return m;
}

static map_pair inverse_pair(const map_pair *fwd, const cloud *c, const char *label)
{
    map_pair m;
    memset(&m, 0, sizeof m);
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_kmap_inverse_cpu(&fwd->cpu, c->shape, c->batch, NULL, &m.cpu, &ce);
    vc_status gs = vc_kmap_inverse_gpu(&fwd->gpu, c->shape, c->batch, NULL, g_stream, &m.gpu, &ge);
    CHECK_MSG(cs == VC_OK && gs == VC_OK, "%s: inverse: cpu %s (%s), gpu %s (%s)", label,
              vc_status_string(cs), ce.msg, vc_status_string(gs), ge.msg);
    if (cs != VC_OK || gs != VC_OK) {
        if (cs == VC_OK) vc_kmap_data_free(&m.cpu);
        if (gs == VC_OK) vc_kmap_data_free_gpu(&m.gpu);
        memset(&m, 0, sizeof m);
        return m;
    }
    m.ok = 1;
    check_counts(label, &m);
    return m;
}

/* ---- convolution ------------------------------------------------------------------------- */

typedef struct conv_opts {
    int64_t c_in, c_out;
    vc_dtype in_dt, w_dt, out_dt, res_dt;
    int bias, res, tf32;
    vc_activation act;
    vc_algo algo;
} conv_opts;

static conv_opts opts(int64_t c_in, int64_t c_out, vc_dtype dt, vc_algo algo)
{
    conv_opts o;
    memset(&o, 0, sizeof o);
    o.c_in = c_in;
    o.c_out = c_out;
    o.in_dt = o.w_dt = o.out_dt = o.res_dt = dt;
    o.algo = algo;
    return o;
}

static const char *algo_name(vc_algo a)
{
    return a == VC_ALGO_IMPLICIT_GEMM                 ? "implicit"
           : a == VC_ALGO_GATHER_GEMM_SCATTER         ? "ggs"
           : a == VC_ALGO_GATHER_GEMM_SCATTER_GROUPED ? "grouped"
                                                      : "auto";
}

/* Runs one layer on both sides and compares. */
/* Returns the relative error against the CPU twin (-1 when not compared). */
static double run_conv(const char *label, const map_pair *m, conv_opts o, vc_rng *rng)
{
    double err = -1;
    if (!m->ok) return err;
    g_cases++;
    const vc_kmap_data *cm = &m->cpu;
    const int64_t n_in = cm->n_in, n_out = cm->n_out, K = cm->volume;
    const int64_t nw = o.c_out * K * o.c_in, n_o = n_out * o.c_out;
    char lab[512];
    snprintf(lab, sizeof lab, "%s | %lld->%lld in %s w %s out %s%s%s%s act %d %s%s | n_in %lld "
             "n_out %lld pairs %lld", label, (long long)o.c_in, (long long)o.c_out,
             dname(o.in_dt), dname(o.w_dt), dname(o.out_dt), o.bias ? " bias" : "",
             o.res ? " res " : "", o.res ? dname(o.res_dt) : "", (int)o.act, algo_name(o.algo),
             o.tf32 ? " tf32" : "", (long long)n_in, (long long)n_out, (long long)cm->n_pairs);
    void *in_h = host_rand(rng, o.in_dt, n_in * o.c_in, 1.0f);
    void *w_h = host_rand(rng, o.w_dt, nw, 1.0f / sqrtf((float)o.c_in));
    float *bias_h = o.bias ? host_rand(rng, VC_DTYPE_FP32, o.c_out, 0.5f) : NULL;
    void *res_h = o.res ? host_rand(rng, o.res_dt, n_o, 1.0f) : NULL;
    void *out_c = malloc((size_t)(n_o > 0 ? n_o : 1) * dsize(o.out_dt));
    void *out_g = malloc((size_t)(n_o > 0 ? n_o : 1) * dsize(o.out_dt));
    void *out_g2 = malloc((size_t)(n_o > 0 ? n_o : 1) * dsize(o.out_dt));

    vc_conv_args a;
    memset(&a, 0, sizeof a);
    a.map = cm;
    a.in = in_h;
    a.in_dtype = o.in_dt;
    a.c_in = o.c_in;
    a.out = out_c;
    a.out_dtype = o.out_dt;
    a.c_out = o.c_out;
    a.weights = w_h;
    a.w_dtype = o.w_dt;
    a.bias = bias_h;
    a.residual = res_h;
    a.res_dtype = o.res_dt;
    a.act = o.act;
    a.slope = 0.1f;
    /* TF32 math: the CPU reference takes the fp32 operands rounded as the tensor cores take them */
    float *in_r = NULL, *w_r = NULL;
    if (o.tf32 && o.in_dt == VC_DTYPE_FP32) {
        in_r = malloc((size_t)(n_in * o.c_in > 0 ? n_in * o.c_in : 1) * sizeof *in_r);
        for (int64_t i = 0; i < n_in * o.c_in; i++) in_r[i] = vc_round_tf32(((float *)in_h)[i]);
        a.in = in_r;
        if (o.w_dt == VC_DTYPE_FP32) {
            w_r = malloc((size_t)(nw > 0 ? nw : 1) * sizeof *w_r);
            for (int64_t i = 0; i < nw; i++) w_r[i] = vc_round_tf32(((float *)w_h)[i]);
            a.weights = w_r;
        }
    }
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_conv_cpu(&a, NULL, &ce);

    void *in_d = to_device(in_h, (size_t)(n_in * o.c_in) * dsize(o.in_dt));
    void *w_d = to_device(w_h, (size_t)nw * dsize(o.w_dt));
    void *bias_d = bias_h ? to_device(bias_h, (size_t)o.c_out * 4) : NULL;
    void *res_d = res_h ? to_device(res_h, (size_t)n_o * dsize(o.res_dt)) : NULL;
    void *out_d = to_device(NULL, (size_t)n_o * dsize(o.out_dt));
    vc_conv_args g = a;
    g.map = &m->gpu;
    g.in = in_d;
    g.weights = w_d;
    g.bias = bias_d;
    g.residual = res_d;
    g.out = out_d;
    /* The first run lets the implicit GEMM build the map's tile order (as src/conv_op.c does; taken
     * whatever the waves here: g_opt.force_order), the second runs without one
     * (a schedule only): the same bits. */
    g.map_cache = (vc_kmap_data *)&m->gpu; /* the test's own map, which the GEMM may extend */
    vc_kmap_data unordered;
    for (int rep = 0; rep < 2; rep++) {
        if (rep == 1) {
            g_with_order += m->gpu.tile_order != NULL;
            unordered = m->gpu;
            unordered.tile_order = NULL;
            unordered.order_blocks = 0;
            g.map = &unordered;
            g.map_cache = NULL;
        }
        CUDA_OK(cudaMemsetAsync(out_d, 0xff, (size_t)(n_o > 0 ? n_o : 1) * dsize(o.out_dt),
                                g_stream));
        vc_status gs = vc_conv_gpu(&g, o.algo, o.tf32, &g_opt, g_stream, &ge);
        CUDA_OK(cudaStreamSynchronize(g_stream));
        CHECK_MSG(gs == cs, "%s: cpu %s (%s), gpu %s (%s)", lab, vc_status_string(cs), ce.msg,
                  vc_status_string(gs), ge.msg);
        if (gs != VC_OK || cs != VC_OK) break;
        CUDA_OK(cudaMemcpy(rep ? out_g2 : out_g, out_d, (size_t)n_o * dsize(o.out_dt),
                           cudaMemcpyDeviceToHost));
    }
    if (cs == VC_OK && n_o > 0) {
        float *gf = host_f32(out_g, o.out_dt, n_o);
        float *cf = host_f32(out_c, o.out_dt, n_o);
        double *ref = malloc((size_t)n_o * sizeof(double));
        for (int64_t i = 0; i < n_o; i++) ref[i] = cf[i];
        double tol = 1e-6;
        if (o.in_dt == VC_DTYPE_FP32 && o.tf32) tol = 5e-4;
        if (o.in_dt != VC_DTYPE_FP32 || o.out_dt != VC_DTYPE_FP32) tol = 1e-2;
        double e = vc_rel_err(gf, ref, n_o);
        err = e;
        int64_t nan_at = -1;
        for (int64_t i = 0; i < n_o && nan_at < 0; i++)
            if (isnan(gf[i])) nan_at = i;
        CHECK_MSG(e <= tol, "%s: rel err %.3g > %.1g (first NaN at %lld)", lab, e, tol,
                  (long long)nan_at);
        CHECK_MSG(memcmp(out_g, out_g2, (size_t)n_o * dsize(o.out_dt)) == 0,
                  "%s: two GPU runs (with and without the tile order) differ", lab);
        if (getenv("VC_TEST_VERBOSE")) printf("  %.3g  %s\n", e, lab);
        free(gf);
        free(cf);
        free(ref);
    }
    cudaFree(in_d);
    cudaFree(w_d);
    cudaFree(bias_d);
    cudaFree(res_d);
    cudaFree(out_d);
    free(in_h);
    free(w_h);
    free(in_r);
    free(w_r);
    free(bias_h);
    free(res_h);
    free(out_c);
    free(out_g);
    free(out_g2);
    return err;
}

/* Every algorithm (and AUTO) with the same options. */
static void run_algos(const char *label, const map_pair *m, conv_opts o, vc_rng *rng)
{
    const vc_algo algos[4] = {VC_ALGO_IMPLICIT_GEMM, VC_ALGO_GATHER_GEMM_SCATTER,
                              VC_ALGO_GATHER_GEMM_SCATTER_GROUPED, VC_ALGO_AUTO};
    for (int i = 0; i < 4; i++) {
        o.algo = algos[i];
        run_conv(label, m, o, rng);
    }
}

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

/* The planner's mid-size-level wgmma tiles (conv/tiles.cu: wg96_first, wg32_first,
 * wg96_for_64) on a k3 level of ~30k outputs: to 96 channels from c_in 96 and 64 (32 deep, 6
 * stages) and 128 (64 deep), 32 -> 32 on two tap sets (where the level has fewer than 9 pairs an
 * output), and 32 -> 64 on the 96-column tile (its last 32 columns past c_out); fp16 and bf16,
 * bias + residual + ReLU once each kind. The planner must name them where the build has them. */
static void mid_level_tiles(vc_rng *rng, const int32_t shape[3])
{
    cloud c = make_cloud(rng, 30000, 1, shape, 3);
    int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
    vc_map_desc d = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
    map_pair m = build_pair(&c, d_rows, &d, "30k subm k3");
    const int sparse = m.gpu.n_pairs < 9 * m.gpu.n_out;
    const struct {
        int64_t c_in, c_out;
        vc_dtype dt;
        const char *tile;
        int named; /* the rule applies to this level */
    } cases[] = {{96, 96, VC_DTYPE_FP16, "f16_64x96x32_s6_wg", 1},
                 {64, 96, VC_DTYPE_BF16, "bf16_64x96x32_s6_wg", 1},
                 {128, 96, VC_DTYPE_FP16, "f16_64x96x64_s3_wg", 1},
                 {128, 96, VC_DTYPE_BF16, "bf16_64x96x64_s3_wg", 1},
                 {32, 32, VC_DTYPE_FP16, "f16_64x32x32_s4_wg2", sparse},
                 {32, 32, VC_DTYPE_BF16, "bf16_64x32x32_s4_wg2", sparse},
                 {32, 64, VC_DTYPE_FP16, "f16_64x96x32_s6_wg", 1},
                 {32, 64, VC_DTYPE_BF16, "bf16_64x96x32_s6_wg", 1}};
    const int in_range = m.gpu.n_out >= 25000 && m.gpu.n_out < 45000;
    CHECK_MSG(!m.ok || in_range, "30k subm k3: %lld outputs, outside the rules' 25k-45k",
              (long long)m.gpu.n_out);
    for (size_t i = 0; m.ok && i < sizeof cases / sizeof cases[0]; i++) {
        const char *cfg = NULL;
        int32_t split = 0, tuned = 0;
        vc_conv_gpu_describe(&m.gpu, cases[i].c_in, cases[i].c_out, cases[i].dt, 0, &g_opt, &cfg,
                             &split, &tuned);
        const int built = gemm_config_named(cases[i].tile, strlen(cases[i].tile)) >= 0;
        CHECK_MSG(!in_range || !cases[i].named || !built || !strcmp(cfg, cases[i].tile),
                  "30k subm k3 %lld->%lld: the planner names %s, not %s (%lld outputs, %lld "
                  "pairs)", (long long)cases[i].c_in, (long long)cases[i].c_out, cfg,
                  cases[i].tile, (long long)m.gpu.n_out, (long long)m.gpu.n_pairs);
        conv_opts o = opts(cases[i].c_in, cases[i].c_out, cases[i].dt, VC_ALGO_AUTO);
        if (i == 0 || i == 4 || i == 7) {
            o.bias = o.res = 1;
            o.act = VC_ACT_RELU;
        }
        const double e = run_conv("30k subm k3, mid-level tiles", &m, o, rng);
        printf("30k subm k3 (%.1f pairs an output) %lld->%lld %s on %s: rel err %.2e\n",
               m.gpu.n_out ? (double)m.gpu.n_pairs / (double)m.gpu.n_out : 0.0,
               (long long)cases[i].c_in, (long long)cases[i].c_out, dname(cases[i].dt), cfg, e);
    }
    free_pair(&m);
    cudaFree(d_rows);
    free(c.rows);
}

/* Dense (SUBM 1x1x1) layers either side of a wave (conv/tiles.cu: dense_wave_first): 384 ->
 * 256 at 7.4k and at 4.7k rows, fp16 and bf16, bias + residual + ReLU once, against the CPU
 * twin. Whether a layer passes a wave depends on the device's SM count, so the planner's name is
 * checked only on the Hopper parts these rows were chosen for (114-132 SMs): there the rows'
 * tile (64x64x64_s3) takes two waves at 7.4k rows and one at 4.7k, and 128x128x32_s5_wg one
 * at both, so the planner must name 128x128 for the first and not for the second. */
static void dense_wave_tiles(vc_rng *rng, const int32_t shape[3])
{
    int dev = 0, sms = 0, major = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    const int hopper = major == 9 && sms >= 114 && sms <= 132;
    const int64_t rows[2] = {7400, 4700};
    for (int r = 0; r < 2; r++) {
        cloud c = make_cloud(rng, rows[r], 1, shape, 1);
        int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
        vc_map_desc d = mkdesc(VC_MAP_SUBM, 1, 1, 0, 1);
        map_pair m = build_pair(&c, d_rows, &d, "dense k1");
        for (int i = 0; m.ok && i < 2; i++) {
            const vc_dtype dt = i == 0 ? VC_DTYPE_FP16 : VC_DTYPE_BF16;
            const char *big = i == 0 ? "f16_128x128x32_s5_wg" : "bf16_128x128x32_s5_wg";
            const char *cfg = NULL;
            int32_t split = 0, tuned = 0;
            vc_conv_gpu_describe(&m.gpu, 384, 256, dt, 0, &g_opt, &cfg, &split, &tuned);
            const int built = gemm_config_named(big, strlen(big)) >= 0;
            const int want = r == 0; /* two waves of the rows' tile at 7.4k rows, one at 4.7k */
            CHECK_MSG(!hopper || !built || (strcmp(cfg, big) == 0) == want,
                      "dense k1 384->256 at %lld rows (%d SMs): the planner names %s",
                      (long long)m.gpu.n_out, sms, cfg);
            conv_opts o = opts(384, 256, dt, VC_ALGO_AUTO);
            if (i == 0) {
                o.bias = o.res = 1;
                o.act = VC_ACT_RELU;
            }
            const double e = run_conv("dense k1, either side of a wave", &m, o, rng);
            printf("dense k1 %lld rows 384->256 %s on %s: rel err %.2e\n",
                   (long long)m.gpu.n_out, dname(dt), cfg, e);
        }
        free_pair(&m);
        cudaFree(d_rows);
        free(c.rows);
    }
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
    if (!g_quick) mid_level_tiles(&rng, big);
    if (!g_quick) dense_wave_tiles(&rng, big);
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
