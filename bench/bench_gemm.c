/* bench/bench_gemm.c - benchmark of vc_gemm_run (gemm/gemm.h) against cuBLAS (not a ctest).
 * Usage: bench_gemm [runs] [tune]
 *        bench_gemm one fp16|bf16|tf32 M k n [config name|cublas]   (5 launches of one problem,
 *        ours or cuBLAS's, for a profiler: ncu --launch-skip 4 --launch-count 1 ...)
 *        bench_gemm tune fp16|bf16|tf32 M k n [name part]   (cuBLAS and every fitting
 *        configuration on one problem, or those whose names contain the part)
 *   - ceilings first: a device-to-device copy (bytes read + written) and cuBLAS 8192^3 in fp16,
 *     bf16 and tf32; they give each row's floor, max(FLOPs / cuBLAS 8192^3 rate, bytes / copy
 *     bandwidth);
 *   - dense C[M, n] = A[M, k] W[n, k]^T for M in {100k, 1M}, (k, n) in {(16,16), (32,32),
 *     (64,64), (128,128), (256,256), (64,96), (256,384)} and 8192^3, in fp16, bf16 (C in the
 *     same dtype) and tf32 (C fp32): ours (config -1) and cublasGemmEx with the same dtypes;
 *   - a gathered GEMM like a subm k3 layer: ~100k voxels of a half-filled height field (3-8
 *     neighbours each), out_in [N, 27] as the gather, C in fp16, with and without the per-output
 *     masks, and with masks and the rows sorted by mask (gather_rows = row_map = the sorting
 *     permutation, as the implicit GEMM runs); useful FLOPs = 2 x pairs x k x n;
 *   - with `tune`: every configuration of the table on the fp16 and tf32 suite shapes (but the
 *     scalar-load ones, which exist for k that 16-byte loads do not fit).
 * Timing: CUDA events around a batch that cycles over enough input sets to pass twice the L2
 * (so no launch finds its inputs in the cache); 3 warm-up batches; the median over `runs`
 * (default 25, at least 20) batches, divided by the batch length. With VC_BENCH_GRAPH=1 each
 * batch (ours and cuBLAS's alike) is captured once as a CUDA graph and replayed: the GPU's
 * time without the host's cost of each call. Prints a markdown table last. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "gemm/gemm.h"
#include "rng.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "bench_util.h"

#define WARMUP 3

static int g_runs = 25;
static cudaStream_t g_stream;

/* vc_gemm_plan, then vc_gemm_run on g_stream; the message of a failure into msg. */
static vc_status gemm_run(const vc_gemm_args *a, int32_t config, char *msg, size_t len)
{
    vc_gemm_launch_plan plan;
    vc_err e = {{0}};
    vc_status st = vc_gemm_plan(a, config, &plan, &e);
    if (st == VC_OK) st = vc_gemm_run(&plan, g_stream, &e);
    if (st != VC_OK) snprintf(msg, len, "%s", e.msg);
    return st;
}
static cublasHandle_t g_blas;
static double g_bw = 3.0e12;                   /* measured copy bandwidth, bytes/s */
static double g_peak[3] = {748e12, 748e12, 374e12}; /* measured cuBLAS 8192^3 per dtype mode */

#define BLAS_CHECK(call)                                                                       \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        DIE_IF(s_ != CUBLAS_STATUS_SUCCESS, "%s: cublas status %d", #call, (int)s_);           \
    } while (0)

/* ---- random device data ---------------------------------------------------------------------- */

#define PATTERN_BYTES ((size_t)32 << 20)
static uint8_t *g_pattern[3]; /* host: 32 MB of random values of each dtype in [-1, 1) */

static void make_patterns(void)
{
    vc_rng rng = {0x1234567887654321ull};
    for (int d = 0; d < 3; d++) {
        g_pattern[d] = malloc(PATTERN_BYTES);
        size_t n = PATTERN_BYTES / (d == VC_GEMM_F32 ? 4 : 2);
        for (size_t i = 0; i < n; i++)
            vc_store_f32(g_pattern[d], (vc_dtype)d, (int64_t)i, vc_rng_float(&rng));
    }
}

/* A device buffer of `bytes` filled with random values of dtype d (the pattern tiled, shifted). */
static void *rand_device(int d, size_t bytes, size_t shift)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
    shift = (shift * 4096) % (PATTERN_BYTES / 2);
    for (size_t at = 0; at < bytes;) {
        size_t len = bytes - at < PATTERN_BYTES - shift ? bytes - at : PATTERN_BYTES - shift;
        CUDA_CHECK(cudaMemcpy((uint8_t *)p + at, g_pattern[d] + shift, len,
                              cudaMemcpyHostToDevice));
        at += len;
        shift = 0;
    }
    return p;
}

/* ---- timing -------------------------------------------------------------------------------- */

typedef void (*run_fn)(void *ctx, int set);

/* Median seconds per call of fn over `sets` rotating input sets. */
static double time_it(run_fn fn, void *ctx, int sets)
{
    bench_timer tm;
    bench_timer_init(&tm, g_stream);
    int per = sets < 4 ? 4 : sets; /* calls per batch */
    float *ms = malloc((size_t)g_runs * sizeof *ms);
    /* VC_BENCH_GRAPH=1: the batch captured once as a CUDA graph after the warm-up batches and
     * replayed, so that the time is the GPU's alone, without the host's cost of each call */
    const char *ge = getenv("VC_BENCH_GRAPH");
    cudaGraphExec_t gx = NULL;
    for (int r = -WARMUP; r < g_runs; r++) {
        if (r == 0 && ge && atoi(ge)) {
            cudaGraph_t g;
            CUDA_CHECK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
            for (int i = 0; i < per; i++) fn(ctx, i % sets);
            CUDA_CHECK(cudaStreamEndCapture(g_stream, &g));
            CUDA_CHECK(cudaGraphInstantiate(&gx, g, 0));
            CUDA_CHECK(cudaGraphDestroy(g));
            CUDA_CHECK(cudaGraphLaunch(gx, g_stream));
        }
        bench_timer_start(&tm);
        if (gx)
            CUDA_CHECK(cudaGraphLaunch(gx, g_stream));
        else
            for (int i = 0; i < per; i++) fn(ctx, i % sets);
        bench_timer_stop(&tm, r >= 0 ? &ms[r] : NULL);
    }
    if (gx) CUDA_CHECK(cudaGraphExecDestroy(gx));
    CUDA_CHECK(cudaGetLastError());
    double t = median(ms, g_runs) / per * 1e-3;
    free(ms);
    bench_timer_free(&tm);
    return t;
}

/* ---- dense problems ------------------------------------------------------------------------- */

enum { MODE_F16, MODE_BF16, MODE_TF32 };
static const char *mode_name[3] = {"fp16", "bf16", "tf32"};
/* The mode a command line names: bf16, tf32, else fp16. */
static int mode_of(const char *s)
{
    return !strcmp(s, "bf16") ? MODE_BF16 : !strcmp(s, "tf32") ? MODE_TF32 : MODE_F16;
}

typedef struct dense {
    int mode;
    int64_t M;
    int32_t k, n;
    int sets;
    void *A[64], *W[64], *C[64];
    int config;
    int bad; /* vc_gemm_run failed */
    char msg[200];
} dense;

static int ab_of(int mode)
{
    return mode == MODE_F16 ? VC_GEMM_F16 : mode == MODE_BF16 ? VC_GEMM_BF16 : VC_GEMM_F32;
}
static size_t es_of(int mode) { return mode == MODE_TF32 ? 4 : 2; }

/* A problem C[M, n] = A[M, k] W[n, k]^T of the given mode, run with the planner's choice
 * (config -1); dense_alloc then makes its input sets. */
static void dense_init(dense *d, int mode, int64_t M, int32_t k, int32_t n)
{
    memset(d, 0, sizeof *d);
    d->mode = mode;
    d->M = M;
    d->k = k;
    d->n = n;
    d->config = -1;
}

static void dense_alloc(dense *d)
{
    const size_t es = es_of(d->mode);
    const size_t bytes = ((size_t)d->M * d->k + (size_t)d->n * d->k + (size_t)d->M * d->n) * es;
    d->sets = (int)((2 * 50e6 * 2) / (double)bytes) + 1; /* twice the 50 MB L2, with margin */
    if (d->sets > 64) d->sets = 64;
    int ab = ab_of(d->mode);
    for (int s = 0; s < d->sets; s++) {
        d->A[s] = rand_device(ab, (size_t)d->M * d->k * es, (size_t)s * 7 + 1);
        d->W[s] = rand_device(ab, (size_t)d->n * d->k * es, (size_t)s * 13 + 5);
        CUDA_CHECK(cudaMalloc(&d->C[s], (size_t)d->M * d->n * es));
    }
}

static void dense_free(dense *d)
{
    for (int s = 0; s < d->sets; s++) {
        cudaFree(d->A[s]);
        cudaFree(d->W[s]);
        cudaFree(d->C[s]);
    }
}

static void run_ours(void *ctx, int s)
{
    dense *d = ctx;
    vc_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = d->M;
    a.n_cols = d->n;
    a.k = d->k;
    a.taps = 1;
    a.a = d->A[s];
    a.a_rows = d->M;
    a.w = d->W[s];
    a.b_taps = 1;
    a.ab_dtype = (vc_gemm_dtype)ab_of(d->mode);
    a.math = d->mode == MODE_TF32 ? VC_GEMM_MATH_TF32 : VC_GEMM_MATH_DEFAULT;
    a.c = d->C[s];
    a.c_dtype = a.ab_dtype;
    if (gemm_run(&a, d->config, d->msg, sizeof d->msg) != VC_OK) d->bad = 1;
}

static void run_cublas(void *ctx, int s)
{
    dense *d = ctx;
    /* row-major C[M, n] = A[M, k] W[n, k]^T is column-major C' (n x M) = op_T(W')(n x k) A'
     * (k x M), where W' and A' are the column-major views (k x n, k x M) of W and A */
    cudaDataType_t t = d->mode == MODE_F16    ? CUDA_R_16F
                       : d->mode == MODE_BF16 ? CUDA_R_16BF
                                              : CUDA_R_32F;
    cublasComputeType_t ct =
        d->mode == MODE_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1.f, zero = 0.f;
    BLAS_CHECK(cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, d->n, (int)d->M, d->k, &one,
                            d->W[s], t, d->k, d->A[s], t, d->k, &zero, d->C[s], t, d->n, ct,
                            CUBLAS_GEMM_DEFAULT));
}

typedef struct row {
    char shape[48];
    const char *dtype;
    double ours, blas, floor_s, flops, bytes;
    int config;
} row;

static row g_rows[128];
static int g_nrows;

static void bench_dense(int mode, int64_t M, int32_t k, int32_t n)
{
    dense d;
    dense_init(&d, mode, M, k, n);
    dense_alloc(&d);
    const double es = (double)es_of(mode);
    double flops = 2.0 * M * k * n, bytes = ((double)M * k + (double)n * k + (double)M * n) * es;
    double t_ours = time_it(run_ours, &d, d.sets);
    DIE_IF(d.bad, "vc_gemm_run failed: %s", d.msg);
    double t_blas = time_it(run_cublas, &d, d.sets);
    double fl = flops / g_peak[mode], by = bytes / g_bw;
    row *r = &g_rows[g_nrows++];
    if (M == 8192 && k == 8192)
        snprintf(r->shape, sizeof r->shape, "8192^3");
    else
        snprintf(r->shape, sizeof r->shape, "M=%lldk k=%d n=%d", (long long)(M / 1000), k, n);
    r->dtype = mode_name[mode];
    r->ours = t_ours;
    r->blas = t_blas;
    r->floor_s = fl > by ? fl : by;
    r->flops = flops;
    r->bytes = bytes;
    printf("%-22s %-5s ours %9.1f us %7.1f TFLOP/s %7.0f GB/s | cuBLAS %9.1f us | floor %8.1f"
           " us | ours/cuBLAS %5.1f%%\n",
           r->shape, r->dtype, t_ours * 1e6, flops / t_ours * 1e-12, bytes / t_ours * 1e-9,
           t_blas * 1e6, r->floor_s * 1e6, 100.0 * t_blas / t_ours);
    fflush(stdout);
    dense_free(&d);
}

/* Every fitting configuration on one shape (tune mode). */
static const char *g_tune_only; /* tune: only configurations whose names contain it (or all) */
static void tune_dense(int mode, int64_t M, int32_t k, int32_t n)
{
    const vc_gemm_config *t;
    int32_t nc = vc_gemm_configs(&t);
    dense d;
    dense_init(&d, mode, M, k, n);
    dense_alloc(&d);
    const double es = (double)es_of(mode);
    double bytes = ((double)M * k + (double)n * k + (double)M * n) * es;
    printf("tune %s M=%lld k=%d n=%d:", mode_name[mode], (long long)M, k, n);
    double t_auto = time_it(run_ours, &d, d.sets);
    printf(" auto %.1f us;", t_auto * 1e6);
    if (g_blas) printf(" cuBLAS %.1f us;", time_it(run_cublas, &d, d.sets) * 1e6);
    for (int32_t i = 0; i < nc; i++) {
        if ((int)t[i].ab_dtype != ab_of(mode)) continue;
        if (mode == MODE_TF32 && t[i].math != VC_GEMM_MATH_TF32) continue;
        if (strstr(t[i].name, "scalar") || strstr(t[i].name, "_a4")) continue; /* odd k only */
        if (g_tune_only && !strstr(t[i].name, g_tune_only)) continue;
        d.config = i;
        d.bad = 0;
        run_ours(&d, 0);
        if (d.bad) continue;
        double ti = time_it(run_ours, &d, d.sets);
        printf(" %s %.1f us (%.0f GB/s);", t[i].name, ti * 1e6, bytes / ti * 1e-9);
    }
    printf("\n");
    fflush(stdout);
    dense_free(&d);
}

/* ---- the gathered (subm k3) problem --------------------------------------------------------- */

typedef struct gathered {
    int64_t n_vox;
    int32_t k, n;
    void *A[8], *W, *C[8];
    int32_t *out_in[8], *perm;
    uint32_t *masks[8];
    int sets, use_masks;
    char msg[200];
    int bad;
} gathered;

static void run_gathered(void *ctx, int s)
{
    gathered *g = ctx;
    vc_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = g->n_vox;
    a.n_cols = g->n;
    a.k = g->k;
    a.taps = 27;
    a.a = g->A[s];
    a.a_rows = g->n_vox;
    a.gather = g->out_in[s];
    a.gather_rows = g->perm;
    a.row_map = g->perm;
    a.masks = g->use_masks ? g->masks[s] : NULL;
    a.mask_words = 1;
    a.w = g->W;
    a.b_taps = 27;
    a.ab_dtype = VC_GEMM_F16;
    a.c = g->C[s];
    a.c_dtype = VC_GEMM_F16;
    if (gemm_run(&a, -1, g->msg, sizeof g->msg) != VC_OK) g->bad = 1;
}

/* A half-filled height field of about 2 x target sites in raster order: out_in of its subm k3
 * map, masks, and the number of (output, tap) pairs. */
static int64_t make_field(vc_rng *rng, int64_t target, int32_t **out_in, uint32_t **masks,
                          int64_t *n_vox)
{
    int side = (int)ceil(sqrt(2.0 * target));
    int32_t *id = malloc((size_t)side * side * 4);
    int32_t *zs = malloc((size_t)side * side * 4);
    int64_t n = 0;
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++) {
            int on = vc_rng_next(rng) % 2 == 0;
            id[y * side + x] = on ? (int32_t)n++ : -1;
            zs[y * side + x] = (int32_t)floor(8 + 3 * sin(x / 9.0) + 2 * cos(y / 11.0));
        }
    int32_t *oi = malloc((size_t)n * 27 * 4);
    uint32_t *mk = calloc((size_t)n, 4);
    int64_t pairs = 0;
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++) {
            int32_t i = id[y * side + x];
            if (i < 0) continue;
            for (int t = 0; t < 27; t++) {
                int dz = t / 9 - 1, dy = (t / 3) % 3 - 1, dx = t % 3 - 1;
                int yy = y + dy, xx = x + dx;
                int32_t j = -1;
                if (yy >= 0 && yy < side && xx >= 0 && xx < side && id[yy * side + xx] >= 0 &&
                    zs[yy * side + xx] == zs[y * side + x] + dz)
                    j = id[yy * side + xx];
                oi[(int64_t)i * 27 + t] = j;
                if (j >= 0) {
                    mk[i] |= 1u << t;
                    pairs++;
                }
            }
        }
    free(id);
    free(zs);
    *out_in = oi;
    *masks = mk;
    *n_vox = n;
    return pairs;
}

static const uint32_t *g_sort_masks;
static int cmp_by_mask(const void *a, const void *b)
{
    uint32_t x = g_sort_masks[*(const int32_t *)a], y = g_sort_masks[*(const int32_t *)b];
    if (x != y) return x < y ? -1 : 1;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    return (i > j) - (i < j);
}

/* use_masks: 0 none, 1 masks, 2 masks and rows sorted by mask (gather_rows = row_map = perm) */
static void bench_gathered(int32_t k, int32_t n, int use_masks)
{
    vc_rng rng = {0xfeedfacecafebeefull};
    gathered g;
    memset(&g, 0, sizeof g);
    int32_t *oi;
    uint32_t *mk;
    int64_t pairs = make_field(&rng, 100000, &oi, &mk, &g.n_vox);
    g.k = k;
    g.n = n;
    g.use_masks = use_masks;
    g.sets = 8;
    g.W = rand_device(VC_GEMM_F16, (size_t)n * 27 * k * 2, 3);
    for (int s = 0; s < g.sets; s++) {
        g.A[s] = rand_device(VC_GEMM_F16, (size_t)g.n_vox * k * 2, (size_t)s * 11 + 2);
        CUDA_CHECK(cudaMalloc((void **)&g.C[s], (size_t)g.n_vox * n * 2));
        CUDA_CHECK(cudaMalloc((void **)&g.out_in[s], (size_t)g.n_vox * 27 * 4));
        CUDA_CHECK(cudaMemcpy(g.out_in[s], oi, (size_t)g.n_vox * 27 * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMalloc((void **)&g.masks[s], (size_t)g.n_vox * 4));
        CUDA_CHECK(cudaMemcpy(g.masks[s], mk, (size_t)g.n_vox * 4, cudaMemcpyHostToDevice));
    }
    int32_t *perm = NULL;
    if (use_masks == 2) {
        perm = malloc((size_t)g.n_vox * 4);
        for (int64_t i = 0; i < g.n_vox; i++) perm[i] = (int32_t)i;
        g_sort_masks = mk;
        qsort(perm, (size_t)g.n_vox, 4, cmp_by_mask);
        CUDA_CHECK(cudaMalloc((void **)&g.perm, (size_t)g.n_vox * 4));
        CUDA_CHECK(cudaMemcpy(g.perm, perm, (size_t)g.n_vox * 4, cudaMemcpyHostToDevice));
    }
    double t = time_it(run_gathered, &g, g.sets);
    DIE_IF(g.bad, "vc_gemm_run failed: %s", g.msg);
    /* the yardstick: cuBLAS on a dense GEMM over as many rows as pairs */
    dense d;
    dense_init(&d, MODE_F16, pairs, k, n);
    dense_alloc(&d);
    double tb = time_it(run_cublas, &d, d.sets);
    dense_free(&d);
    double flops = 2.0 * pairs * k * n;
    double bytes = ((double)g.n_vox * (k + n) + 27.0 * k * n) * 2 + g.n_vox * 27.0 * 4 +
                   (use_masks ? g.n_vox * 4.0 : 0) + (use_masks == 2 ? g.n_vox * 8.0 : 0);
    row *r = &g_rows[g_nrows++];
    snprintf(r->shape, sizeof r->shape, "subm k3 %lldk %.1f nb %d->%d%s",
             (long long)(g.n_vox / 1000), (double)pairs / g.n_vox, k, n,
             use_masks == 2 ? " mask sorted" : use_masks ? " mask" : "");
    r->dtype = "fp16";
    r->ours = t;
    r->blas = tb;
    double fl = flops / g_peak[MODE_F16], by = bytes / g_bw;
    r->floor_s = fl > by ? fl : by;
    r->flops = flops;
    r->bytes = bytes;
    printf("%-34s ours %8.1f us, useful %6.1f TFLOP/s, %6.0f GB/s (min bytes) | cuBLAS dense "
           "M=pairs %8.1f us | floor %6.1f us\n",
           r->shape, t * 1e6, flops / t * 1e-12, bytes / t * 1e-9, tb * 1e6, r->floor_s * 1e6);
    fflush(stdout);
    for (int s = 0; s < g.sets; s++) {
        cudaFree(g.A[s]);
        cudaFree(g.C[s]);
        cudaFree(g.out_in[s]);
        cudaFree(g.masks[s]);
    }
    cudaFree(g.W);
    cudaFree(g.perm);
    free(perm);
    free(oi);
    free(mk);
}

/* ---- ceilings ------------------------------------------------------------------------------- */

static void *g_cp_src, *g_cp_dst;
static size_t g_cp_bytes;
static void run_copy(void *ctx, int s)
{
    (void)ctx;
    (void)s;
    CUDA_CHECK(cudaMemcpyAsync(g_cp_dst, g_cp_src, g_cp_bytes, cudaMemcpyDeviceToDevice, g_stream));
}

static void measure_ceilings(void)
{
    g_cp_bytes = (size_t)1 << 30;
    CUDA_CHECK(cudaMalloc(&g_cp_src, g_cp_bytes));
    CUDA_CHECK(cudaMalloc(&g_cp_dst, g_cp_bytes));
    CUDA_CHECK(cudaMemset(g_cp_src, 1, g_cp_bytes));
    double t = time_it(run_copy, NULL, 1);
    g_bw = 2.0 * g_cp_bytes / t;
    cudaFree(g_cp_src);
    cudaFree(g_cp_dst);
    printf("device-to-device copy: %.0f GB/s (bytes read + written)\n", g_bw * 1e-9);
    for (int mode = 0; mode < 3; mode++) {
        dense d;
        dense_init(&d, mode, 8192, 8192, 8192);
        dense_alloc(&d);
        double tb = time_it(run_cublas, &d, d.sets);
        g_peak[mode] = 2.0 * 8192.0 * 8192.0 * 8192.0 / tb;
        printf("cuBLAS 8192^3 %s: %.1f TFLOP/s\n", mode_name[mode], g_peak[mode] * 1e-12);
        dense_free(&d);
    }
}

/* The run's stream, its cuBLAS handle on it (with_blas) and the value patterns. */
static void open_run(int with_blas)
{
    CUDA_CHECK(cudaStreamCreate(&g_stream));
    if (with_blas) {
        BLAS_CHECK(cublasCreate(&g_blas));
        BLAS_CHECK(cublasSetStream(g_blas, g_stream));
    }
    make_patterns();
}

static void close_run(void)
{
    if (g_blas) cublasDestroy(g_blas);
    cudaStreamDestroy(g_stream);
}

int main(int argc, char **argv)
{
    if (!bench_have_device("bench_gemm")) return 77;
    int tune = 0;
    if (argc >= 6 && !strcmp(argv[1], "one")) {
        const int mode = mode_of(argv[2]);
        dense d;
        dense_init(&d, mode, atoll(argv[3]), atoi(argv[4]), atoi(argv[5]));
        const int blas = argc >= 7 && !strcmp(argv[6], "cublas");
        if (argc >= 7 && !blas) {
            const int32_t named = vc_gemm_config_named(argv[6], strlen(argv[6]));
            if (named >= 0) d.config = named;
        }
        open_run(blas);
        dense_alloc(&d);
        for (int i = 0; i < 5; i++) (blas ? run_cublas : run_ours)(&d, i % d.sets);
        CUDA_CHECK(cudaStreamSynchronize(g_stream));
        DIE_IF(d.bad, "vc_gemm_run failed: %s", d.msg);
        printf("one: %s M=%lld k=%d n=%d config %d%s\n", argv[2], (long long)d.M, d.k, d.n,
               d.config, blas ? " (cuBLAS)" : "");
        dense_free(&d);
        close_run();
        return 0;
    }
    if (argc >= 6 && !strcmp(argv[1], "tune")) {
        open_run(1);
        if (argc >= 7) g_tune_only = argv[6];
        tune_dense(mode_of(argv[2]), atoll(argv[3]), atoi(argv[4]), atoi(argv[5]));
        close_run();
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "tune"))
            tune = 1;
        else
            g_runs = atoi(argv[i]) < 20 ? 20 : atoi(argv[i]);
    }
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB; runs %d (median), warm-up %d\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, g_runs, WARMUP);
    open_run(1);
    measure_ceilings();

    static const int32_t kn[][2] = {{16, 16}, {32, 32}, {64, 64}, {128, 128},
                                    {256, 256}, {64, 96}, {256, 384}};
    const int nkn = (int)(sizeof kn / sizeof kn[0]);
    const int64_t Ms[] = {100000, 1000000};
    if (tune)
        for (int mode = 0; mode < 3; mode += 2)
            for (int mi = 0; mi < 2; mi++)
                for (int s = 0; s < nkn; s++) tune_dense(mode, Ms[mi], kn[s][0], kn[s][1]);
    for (int mode = 0; mode < 3; mode++) {
        for (int mi = 0; mi < 2; mi++)
            for (int s = 0; s < nkn; s++) bench_dense(mode, Ms[mi], kn[s][0], kn[s][1]);
        bench_dense(mode, 8192, 8192, 8192);
    }
    bench_gathered(32, 32, 0);
    bench_gathered(32, 32, 1);
    bench_gathered(32, 32, 2);
    bench_gathered(64, 64, 0);
    bench_gathered(64, 64, 1);
    bench_gathered(64, 64, 2);

    printf("\n| problem | dtype | ours us | TFLOP/s | GB/s | cuBLAS us | floor us | ours/cuBLAS | "
           "ours/floor |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < g_nrows; i++) {
        row *r = &g_rows[i];
        printf("| %s | %s | %.1f | %.1f | %.0f | %.1f | %.1f | %.0f%% | %.0f%% |\n", r->shape,
               r->dtype, r->ours * 1e6, r->flops / r->ours * 1e-12, r->bytes / r->ours * 1e-9,
               r->blas * 1e6, r->floor_s * 1e6, 100.0 * r->blas / r->ours,
               100.0 * r->floor_s / r->ours);
    }
    close_run();
    return 0;
}

#else
int main(void)
{
    printf("bench_gemm: built without CUDA\n");
    return 77;
}
#endif
