/* tests/gpu/conv_harness.h - the GPU convolution tests' harness (test_gpu_conv,
 * test_gpu_conv_tiles): maps built on both sides (vc_kmap_build_cpu on host coordinates,
 * vc_kmap_build_gpu on device coordinates; their counts compared), and run_conv, which runs one
 * layer through the CPU twin on the host map and the GPU on the device map and compares
 * ||gpu - cpu|| / ||cpu|| with the suite's tolerances: 1e-6 fp32, 5e-4 tf32, 1e-2 when the
 * features or the output are fp16 / bf16 (for tf32 the CPU twin gets the fp32 operands rounded
 * to tf32 as the tensor cores round them). GPU outputs are poisoned with NaN (0xFF bytes) before
 * each run, so an unwritten element fails; each GPU run is done twice, with and without the
 * tile order the GEMM built for the map, and the two results must be bit-identical. Each check
 * counts through testutil.h. Include once per program, after VOXCONV_HAVE_CUDA is known. */
#ifndef VC_TESTS_GPU_CONV_HARNESS_H
#define VC_TESTS_GPU_CONV_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "conv/conv.h"
#include "conv/conv_gpu.h"
#include "core/dtype.h"
#include "gemm/gemm.h"
#include "gpu_testutil.h"
#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"

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

/* A pair both sides built (ok, counts compared), or none: what either side built is freed. */
static map_pair settle_pair(map_pair m, vc_status cs, vc_status gs, const char *label)
{
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
    return settle_pair(m, cs, gs, label);
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
    return settle_pair(m, cs, gs, label);
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

#endif
