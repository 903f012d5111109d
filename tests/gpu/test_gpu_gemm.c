/* tests/gpu/test_gpu_gemm.c - vc_gemm_plan and vc_gemm_run (gemm/gemm.h) against a CPU
 * double-precision reference written here, on inputs rounded to the stored dtype.
 *   - dense GEMMs over k, n_cols in {1, 3, 4, 5, 8, 16, 17, 32, 64, 96, 128, 256, 384} for fp16,
 *     bf16, fp32 through tf32 and exact fp32; m in {0, 1, 31, 33, 1000, 100000};
 *   - gathered GEMMs with taps 1 and 27, random -1 holes (whole taps absent over runs of rows so
 *     that CTA masks skip work), gather_rows and row_map permutations, masks (the result must
 *     equal the unmasked one), accumulate, every epilogue option, C in fp32/fp16/bf16, residual
 *     in every dtype; per-offset gather-GEMM-scatter (taps 1, b_tap0 = t, accumulate);
 *   - the tap split (2 to 7 groups, empty groups included; the workspace poisoned with NaN),
 *     exact and automatic, gathered and dense, accumulate and residual in its second pass; on
 *     sm_90, where the split runs as thread-block clusters (the workspace then stays poisoned),
 *     the two-pass form (vc_gemm_args.two_pass_split) must give the same bits;
 *   - every compiled configuration, the -2 answer of one that does not fit, misaligned A;
 *   - bad arguments: -1 and a message.
 * C is poisoned with NaN before each run (random values for accumulate); rows that no logical row
 * maps to must keep their bits. Tolerances (relative Frobenius norm): fp32 1e-6, tf32 5e-4,
 * fp16/bf16 1e-2, raised to the rounding of a 16-bit C. The TF32 reference rounds its operands
 * to tf32 as cvt.rna does (a tiny output, m = 1, can otherwise miss 5e-4 by chance alone);
 * exact fp32 that misses 1e-6 against the values is measured against the terms' magnitudes.
 * Prints its seed (VC_TEST_SEED replays); VC_SANITIZE=1 shrinks the sizes for
 * compute-sanitizer. Exits 77 without a usable device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "gemm/gemm.h"
#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

static cudaStream_t g_stream;
static int g_small; /* VC_SANITIZE: small sizes only */
static int g_cases;
static int g_split_cluster, g_split_two_pass; /* tap splits run each way (the workspace tells) */
static int g_ordered;                         /* runs repeated with a tile order */

/* A status of gemm/ as the codes the cases expect: 0, -1 bad arguments, -2 no configuration
 * fits, -3 a CUDA error; the message into msg (may be NULL; cut to len - 1 characters). */
static int code_of(vc_status st, const vc_err *e, char *msg, size_t len)
{
    if (st == VC_OK) return 0;
    if (msg && len > 0) snprintf(msg, len, "%s", e->msg);
    return st == VC_ERR_INVALID_ARGUMENT ? -1 : st == VC_ERR_UNSUPPORTED ? -2 : -3;
}

/* vc_gemm_plan, then vc_gemm_run of the plan (as the convolution calls them). */
static int gemm_run(const vc_gemm_args *a, int32_t config, cudaStream_t s, char *msg, size_t len)
{
    vc_gemm_launch_plan plan;
    vc_err e = {{0}};
    vc_status st = vc_gemm_plan(a, config, &plan, &e);
    if (st == VC_OK) st = vc_gemm_run(&plan, s, &e);
    return code_of(st, &e, msg, len);
}

/* The plan's tap-split groups (*groups) and whether it takes a tile order (*takes). */
static int gemm_planned(const vc_gemm_args *a, int32_t config, int32_t *groups, int *takes,
                        char *msg, size_t len)
{
    vc_gemm_launch_plan plan;
    vc_err e = {{0}};
    const vc_status st = vc_gemm_plan(a, config, &plan, &e);
    if (groups) *groups = plan.groups;
    if (takes) *takes = st == VC_OK && plan.takes_order;
    return code_of(st, &e, msg, len);
}

static const char *dt_name(int d)
{
    return d == VC_GEMM_F16 ? "f16" : d == VC_GEMM_BF16 ? "bf16" : "f32";
}
static size_t dt_size(int d) { return d == VC_GEMM_F32 ? 4 : 2; }

static float round_to(int d, float v)
{
    if (d == VC_GEMM_F16) return vc_f16_to_f32(vc_f32_to_f16(v));
    if (d == VC_GEMM_BF16) return vc_bf16_to_f32(vc_f32_to_bf16(v));
    return v;
}

static void round_tf32_all(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) v[i] = vc_round_tf32(v[i]);
}

/* Packs n floats into a host buffer of dtype d. */
static void *pack(int d, const float *v, int64_t n)
{
    void *b = malloc((size_t)n * dt_size(d) + 16);
    for (int64_t i = 0; i < n; i++) vc_store_f32(b, (vc_dtype)d, i, v[i]);
    return b;
}

/* Whether device C (after the work queued on g_stream) holds the same bytes as host copy hc. */
static int same_bits(const void *hc, const void *dC, size_t bytes)
{
    CUDA_OK(cudaStreamSynchronize(g_stream));
    void *h = malloc(bytes + 16);
    CUDA_OK(cudaMemcpy(h, dC, bytes, cudaMemcpyDeviceToHost));
    const int same = memcmp(hc, h, bytes) == 0;
    free(h);
    return same;
}

/* Whether configuration `name` keeps a tile's taps within one CTA: a warp tile (its warps
 * divide them) or a tap-set tile (_wg2, its warpgroups do): each row sums its own taps only, and
 * there is no tap split (an automatic one is one group, an explicit one is refused). */
static int taps_in_cta(const char *name)
{
    return strstr(name, "_warp") != NULL || strstr(name, "_wg2") != NULL;
}

/* Random values in [-1, 1) rounded to dtype d. */
static float *rand_vals(vc_rng *rng, int d, int64_t n)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = round_to(d, vc_rng_float(rng));
    return v;
}

/* A random permutation of [0, n). */
static int32_t *perm(vc_rng *rng, int64_t n)
{
    int32_t *p = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1);
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

typedef struct gcase {
    int64_t m;
    int32_t n, k, taps, b_taps, b_tap0;
    int ab, math, cdt;
    int gather;      /* gather table with holes */
    double present;  /* probability that a tap of a row is present */
    int grows;       /* gather_rows: random rows of the gather table */
    int rmap;        /* row_map: a permutation into more C rows than m */
    int masks;       /* per-output masks built from the gather table */
    int accumulate, bias, residual, res_dt, act;
    int tap_lo, tap_hi; /* the taps computed (0, 0: all) */
    float slope;
    int config;      /* -1: the library picks */
    int misalign;    /* A and W start one element past an aligned address */
    int cmis;        /* C starts one element past an aligned address */
    int splits;      /* tap split groups (0: none); the workspace is poisoned with NaN */
} gcase;

static gcase base(int64_t m, int32_t n, int32_t k, int ab, int math, int cdt)
{
    gcase c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.n = n;
    c.k = k;
    c.taps = 1;
    c.b_taps = 1;
    c.ab = ab;
    c.math = math;
    c.cdt = cdt;
    c.present = 1.0;
    c.config = -1;
    c.res_dt = VC_GEMM_F32;
    c.slope = 0.1f;
    return c;
}

static double tol_of(const gcase *c)
{
    double t = c->ab == VC_GEMM_F32 ? (c->math == VC_GEMM_MATH_TF32 ? 5e-4 : 1e-6) : 1e-2;
    double tc = c->cdt == VC_GEMM_F16 ? 1e-3 : c->cdt == VC_GEMM_BF16 ? 8e-3 : 0;
    return t > tc ? t : tc;
}

static void describe(const gcase *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "m %lld n %d k %d taps %d (b %d/%d) ab %s math %d c %s gather %d(%.2f) grows %d "
             "rmap %d masks %d acc %d bias %d res %d(%s) act %d cfg %d mis %d range [%d,%d) "
             "splits %d",
             (long long)c->m, c->n, c->k, c->taps, c->b_tap0, c->b_taps, dt_name(c->ab), c->math,
             dt_name(c->cdt), c->gather, c->present, c->grows, c->rmap, c->masks, c->accumulate,
             c->bias, c->residual, dt_name(c->res_dt), c->act, c->config, c->misalign, c->tap_lo,
             c->tap_hi, c->splits);
}

/* Runs one case; returns the relative error (or -1 when gemm_run did not return 0). */
static double run_case(vc_rng *rng, const gcase *c, int expect_rc)
{
    char what[400];
    describe(c, what, sizeof what);
    g_cases++;
    const int64_t m = c->m;
    const int32_t n = c->n, k = c->k, taps = c->taps;
    const int64_t g_rows = c->grows ? m + 5 : m;
    int64_t a_rows = c->gather ? (m / 2 + 3) : (c->grows ? g_rows : m + 3);
    const int64_t c_rows = c->rmap ? m + m / 3 + 7 : m;

    float *A = rand_vals(rng, c->ab, a_rows * k);
    float *W = rand_vals(rng, c->ab, (int64_t)n * c->b_taps * k);
    int32_t *gather = NULL, *grows = NULL, *rmap = NULL;
    uint32_t *masks = NULL;
    int32_t mask_words = (taps + 31) / 32 + (c->masks == 2);
    if (c->gather) {
        gather = malloc((size_t)(g_rows * taps > 0 ? g_rows * taps : 1) * 4);
        for (int64_t g = 0; g < g_rows; g++)
            for (int32_t t = 0; t < taps; t++) {
                /* whole taps absent over runs of 256 rows, random holes elsewhere */
                int absent = taps > 1 && ((g / 256) + t) % 3 == 0;
                int on = !absent && (vc_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) <
                                        c->present;
                gather[g * taps + t] = on ? (int32_t)vc_rng_int(rng, a_rows) : -1;
            }
    }
    if (c->grows) {
        grows = malloc((size_t)(m > 0 ? m : 1) * 4);
        for (int64_t i = 0; i < m; i++) grows[i] = (int32_t)vc_rng_int(rng, g_rows);
    }
    if (c->rmap) rmap = perm(rng, c_rows);
    if (c->masks) {
        masks = malloc((size_t)c_rows * mask_words * 4);
        for (int64_t i = 0; i < c_rows * mask_words; i++) masks[i] = (uint32_t)vc_rng_next(rng);
        for (int64_t i = 0; i < m; i++) {
            int64_t r = rmap ? rmap[i] : i, g = grows ? grows[i] : i;
            uint32_t *mr = masks + r * mask_words;
            memset(mr, 0, (size_t)mask_words * 4);
            for (int32_t t = 0; t < taps; t++)
                if (gather[g * taps + t] >= 0) mr[t >> 5] |= 1u << (t & 31);
        }
    }
    float *bias = c->bias ? rand_vals(rng, VC_GEMM_F32, n) : NULL;
    float *res = c->residual ? rand_vals(rng, c->res_dt, c_rows * n) : NULL;
    /* C before the run: poison (NaN) or random fp32 values to accumulate into */
    float *c0 = malloc((size_t)(c_rows * n > 0 ? c_rows * n : 1) * 4);
    for (int64_t i = 0; i < c_rows * n; i++) c0[i] = c->accumulate ? vc_rng_float(rng) : NAN;
    if (c->accumulate && c->cdt != VC_GEMM_F32) { /* the reference adds what C holds */
        void *t = pack(c->cdt, c0, c_rows * n);
        for (int64_t i = 0; i < c_rows * n; i++) c0[i] = vc_load_f32(t, (vc_dtype)c->cdt, i);
        free(t);
    }

    const size_t es = dt_size(c->ab), off = c->misalign ? es : 0;
    void *hA = pack(c->ab, A, a_rows * k), *hW = pack(c->ab, W, (int64_t)n * c->b_taps * k);
    if (c->ab == VC_GEMM_F32 && c->math == VC_GEMM_MATH_TF32) {
        round_tf32_all(A, a_rows * k);
        round_tf32_all(W, (int64_t)n * c->b_taps * k);
    }

    /* the reference, in double */
    double *ref = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof *ref);
    /* mag: the same sums over |terms|, the scale of fp32 rounding (see the check) */
    double *mag = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof *mag);
    double *acc = malloc((size_t)n * sizeof *acc), *accm = malloc((size_t)n * sizeof *accm);
    for (int64_t i = 0; i < m; i++) {
        int64_t r = rmap ? rmap[i] : i, g = grows ? grows[i] : i;
        for (int32_t j = 0; j < n; j++) acc[j] = accm[j] = 0;
        for (int32_t t = c->tap_lo; t < (c->tap_hi ? c->tap_hi : taps); t++) {
            int64_t idx = gather ? gather[g * taps + t] : g;
            if (idx < 0) continue;
            const float *ar = A + idx * k;
            for (int32_t j = 0; j < n; j++) {
                const float *wr = W + ((int64_t)j * c->b_taps + c->b_tap0 + t) * k;
                double s = 0, sm = 0;
                for (int32_t q = 0; q < k; q++) {
                    s += (double)ar[q] * wr[q];
                    sm += fabs((double)ar[q] * wr[q]);
                }
                acc[j] += s;
                accm[j] += sm;
            }
        }
        for (int32_t j = 0; j < n; j++) {
            double v = acc[j];
            if (c->accumulate) v += c0[r * n + j];
            if (bias) v += bias[j];
            if (res) v += res[r * n + j];
            if (c->act == VC_GEMM_ACT_RELU && v < 0) v = 0;
            if (c->act == VC_GEMM_ACT_LEAKY && v < 0) v *= c->slope;
            ref[i * n + j] = v;
            mag[i * n + j] = accm[j] + (c->accumulate ? fabs(c0[r * n + j]) : 0) +
                             (bias ? fabs(bias[j]) : 0) + (res ? fabs(res[r * n + j]) : 0);
        }
    }

    /* device buffers */
    uint8_t *dA = to_device(NULL, (size_t)a_rows * k * es + 16);
    uint8_t *dW = to_device(NULL, (size_t)n * c->b_taps * k * es + 16);
    if (a_rows > 0)
        CUDA_OK(cudaMemcpy(dA + off, hA, (size_t)a_rows * k * es, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dW + off, hW, (size_t)n * c->b_taps * k * es, cudaMemcpyHostToDevice));
    int32_t *dg = gather ? to_device(gather, (size_t)g_rows * taps * 4) : NULL;
    int32_t *dgr = grows ? to_device(grows, (size_t)m * 4) : NULL;
    int32_t *drm = rmap ? to_device(rmap, (size_t)m * 4) : NULL;
    uint32_t *dmk = masks ? to_device(masks, (size_t)c_rows * mask_words * 4) : NULL;
    float *dbias = bias ? to_device(bias, (size_t)n * 4) : NULL;
    void *hres = res ? pack(c->res_dt, res, c_rows * n) : NULL;
    void *dres = res ? to_device(hres, (size_t)c_rows * n * dt_size(c->res_dt)) : NULL;
    const size_t cbytes = (size_t)c_rows * n * dt_size(c->cdt);
    void *hc0 = pack(c->cdt, c0, c_rows * n);
    uint8_t *dCb = to_device(NULL, cbytes + 16);
    void *dC = dCb + (c->cmis ? dt_size(c->cdt) : 0);
    CUDA_OK(cudaMemcpy(dC, hc0, cbytes, cudaMemcpyHostToDevice));

    vc_gemm_args a;
    memset(&a, 0, sizeof a);
    a.m = m;
    a.n_cols = n;
    a.k = k;
    a.taps = taps;
    a.a = dA + off;
    a.a_rows = a_rows;
    a.gather = dg;
    a.gather_rows = dgr;
    a.row_map = drm;
    a.masks = dmk;
    a.mask_words = mask_words;
    a.w = dW + off;
    a.b_taps = c->b_taps;
    a.b_tap0 = c->b_tap0;
    a.ab_dtype = (vc_gemm_dtype)c->ab;
    a.math = (vc_gemm_math)c->math;
    a.c = dC;
    a.c_dtype = (vc_gemm_dtype)c->cdt;
    a.accumulate = c->accumulate;
    a.bias = dbias;
    a.residual = dres;
    a.residual_dtype = (vc_gemm_dtype)c->res_dt;
    a.act = (vc_gemm_act)c->act;
    a.slope = c->slope;
    a.tap_lo = c->tap_lo;
    a.tap_hi = c->tap_hi;
    float *dpart = NULL;
    const int groups = c->splits < 0 ? -c->splits : c->splits; /* < 0: automatic, at most */
    if (groups > 1) {
        const size_t pb = (size_t)groups * (size_t)(m > 0 ? m : 1) * n * 4;
        CUDA_OK(cudaMalloc((void **)&dpart, pb));
        CUDA_OK(cudaMemset(dpart, 0xff, pb)); /* NaN: a sum read before it is written shows */
    }
    a.splits = c->splits;
    a.partial = dpart;

    double err = -1;
    char msg[256] = "";
    int rc = gemm_run(&a, c->config, g_stream, msg, sizeof msg);
    CHECK_MSG(rc == expect_rc, "%s: rc %d, expected %d (%s)", what, rc, expect_rc, msg);
    if (rc == 0 && expect_rc == 0) {
        CUDA_OK(cudaStreamSynchronize(g_stream));
        CUDA_OK(cudaGetLastError());
        void *hc = malloc(cbytes + 16);
        CUDA_OK(cudaMemcpy(hc, dC, cbytes, cudaMemcpyDeviceToHost));
        float *got = malloc((size_t)(m * n > 0 ? m * n : 1) * 4);
        char *mapped = calloc((size_t)c_rows + 1, 1);
        for (int64_t i = 0; i < m; i++) {
            int64_t r = rmap ? rmap[i] : i;
            mapped[r] = 1;
            for (int32_t j = 0; j < n; j++)
                got[i * n + j] = vc_load_f32(hc, (vc_dtype)c->cdt, r * n + j);
        }
        err = vc_rel_err(got, ref, m * n);
        if (c->ab == VC_GEMM_F32 && c->math != VC_GEMM_MATH_TF32 && err > tol_of(c)) {
            /* exact fp32: a sum of k x taps terms rounds to ~1e-7 of its terms' magnitude, not
             * of its value; where they cancel (one output, k = 384: 1.25e-6 seen on the H100)
             * the error is measured against the magnitude, which still flags any wrong term
             * (~1 / (k x taps) of it) */
            double num = 0, den = 0;
            for (int64_t i = 0; i < m * n; i++) {
                double d = (double)got[i] - ref[i];
                num += d * d;
                den += mag[i] * mag[i];
            }
            err = den > 0 ? sqrt(num / den) : err;
        }
        CHECK_MSG(err <= tol_of(c), "%s: rel err %.3g > %.3g", what, err, tol_of(c));
        /* rows outside the map keep their bits */
        int64_t touched = 0;
        const size_t rb = (size_t)n * dt_size(c->cdt);
        for (int64_t r = 0; r < c_rows; r++)
            if (!mapped[r] && memcmp((uint8_t *)hc + r * rb, (uint8_t *)hc0 + r * rb, rb))
                touched++;
        CHECK_MSG(touched == 0, "%s: %lld unmapped rows written", what, (long long)touched);
        /* determinism: a second run gives the same bits */
        if (!c->accumulate && m > 0 && (c->gather || m >= 1000)) {
            CHECK(gemm_run(&a, c->config, g_stream, msg, sizeof msg) == 0);
            CHECK_MSG(same_bits(hc, dC, cbytes), "%s: second run differs", what);
        }
        /* a warp tile's or a tap-set tile's row sums its own taps only, in an order no other row
         * changes: with the rows taken in reverse (other rows sharing each tile), the same bits */
        const vc_gemm_config *cfgs = NULL;
        vc_gemm_configs(&cfgs);
        if (c->config >= 0 && taps_in_cta(cfgs[c->config].name) && grows && rmap &&
            !c->accumulate && m > 1) {
            int32_t *rg = malloc((size_t)m * 4), *rr = malloc((size_t)m * 4);
            for (int64_t i = 0; i < m; i++) rg[i] = grows[m - 1 - i], rr[i] = rmap[m - 1 - i];
            int32_t *drg = to_device(rg, (size_t)m * 4), *drr = to_device(rr, (size_t)m * 4);
            CUDA_OK(cudaMemcpy(dC, hc0, cbytes, cudaMemcpyHostToDevice));
            a.gather_rows = drg;
            a.row_map = drr;
            CHECK(gemm_run(&a, c->config, g_stream, msg, sizeof msg) == 0);
            CHECK_MSG(same_bits(hc, dC, cbytes), "%s: rows in reverse order differ", what);
            a.gather_rows = dgr;
            a.row_map = drm;
            cudaFree(drg);
            cudaFree(drr);
            free(rg);
            free(rr);
        }
        /* a tile order (a random permutation of the row blocks) is a schedule only: from the
         * same C, the same bits (taken whatever the waves: force_order) */
        if (c->masks && !c->accumulate && m > 0) {
            const int64_t nb = (m + VC_GEMM_ORDER_ROWS - 1) / VC_GEMM_ORDER_ROWS;
            int32_t *ord = perm(rng, nb);
            int32_t *dord = to_device(ord, (size_t)nb * 4);
            CUDA_OK(cudaMemcpy(dC, hc0, cbytes, cudaMemcpyHostToDevice));
            a.tile_order = dord;
            a.order_blocks = nb;
            a.force_order = 1;
            int takes = 0;
            CHECK(gemm_planned(&a, c->config, NULL, &takes, msg, sizeof msg) == 0);
            const int rc2 = gemm_run(&a, c->config, g_stream, msg, sizeof msg);
            a.force_order = 0;
            a.tile_order = NULL;
            a.order_blocks = 0;
            g_ordered += takes;
            CHECK_MSG(rc2 == 0, "%s: tile order rc %d (%s)", what, rc2, msg);
            CHECK_MSG(same_bits(hc, dC, cbytes), "%s: a tile order changed the result", what);
            free(ord);
            cudaFree(dord);
        }
        /* a tap split that ran as clusters left the workspace as poisoned; the two-pass form
         * (the workspace, then a second kernel) must then give the same bits from the same C */
        int32_t ran = 1; /* the groups this split resolved to (an automatic one may not split) */
        if (groups > 1 && m > 0)
            CHECK(gemm_planned(&a, c->config, &ran, NULL, msg, sizeof msg) == 0);
        if (ran > 1) {
            const size_t pb = (size_t)groups * (size_t)m * n * 4;
            uint8_t *hp = malloc(pb);
            CUDA_OK(cudaMemcpy(hp, dpart, pb, cudaMemcpyDeviceToHost));
            size_t untouched = 0;
            while (untouched < pb && hp[untouched] == 0xff) untouched++;
            free(hp);
            if (untouched == pb) {
                g_split_cluster++;
                CUDA_OK(cudaMemcpy(dC, hc0, cbytes, cudaMemcpyHostToDevice));
                a.two_pass_split = 1;
                /* the same groups: an automatic split rounds down to one wave as clusters and
                 * to the nearest in two passes */
                const int32_t asked = a.splits;
                a.splits = ran;
                const int rc2 = gemm_run(&a, c->config, g_stream, msg, sizeof msg);
                a.splits = asked;
                a.two_pass_split = 0;
                CHECK_MSG(rc2 == 0, "%s: two-pass split rc %d (%s)", what, rc2, msg);
                CHECK_MSG(same_bits(hc, dC, cbytes),
                          "%s: the two-pass split differs from the cluster split", what);
            } else {
                g_split_two_pass++;
            }
        }
        free(hc);
        free(got);
        free(mapped);
    }
    cudaFree(dA);
    cudaFree(dW);
    cudaFree(dg);
    cudaFree(dgr);
    cudaFree(drm);
    cudaFree(dmk);
    cudaFree(dbias);
    cudaFree(dres);
    cudaFree(dCb);
    cudaFree(dpart);
    free(A);
    free(W);
    free(gather);
    free(grows);
    free(rmap);
    free(masks);
    free(bias);
    free(res);
    free(hres);
    free(c0);
    free(hc0);
    free(hA);
    free(hW);
    free(ref);
    free(acc);
    free(accm);
    free(mag);
    return err;
}

static const int32_t kDims[] = {1, 3, 4, 5, 8, 16, 17, 32, 64, 96, 128, 256, 384};
#define NDIMS ((int)(sizeof kDims / sizeof kDims[0]))

typedef struct abmode {
    int ab, math;
} abmode;
static const abmode kModes[] = {{VC_GEMM_F16, VC_GEMM_MATH_DEFAULT},
                                {VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT},
                                {VC_GEMM_F32, VC_GEMM_MATH_TF32},
                                {VC_GEMM_F32, VC_GEMM_MATH_FP32}};
#define NMODES 4

/* Dense GEMMs over every (k, n) pair, each dtype; m varies with the pair. */
static void test_dense_sweep(vc_rng *rng)
{
    const int64_t ms[] = {1, 31, 33, 257, 1000};
    double worst[NMODES] = {0};
    int step = g_small ? 3 : 1;
    for (int mo = 0; mo < NMODES; mo++)
        for (int ki = 0; ki < NDIMS; ki += step)
            for (int ni = 0; ni < NDIMS; ni += step) {
                int64_t m = ms[(ki + ni + mo) % 5];
                int cdt = (ki + ni) % 3 == 0 ? VC_GEMM_F32 : kModes[mo].ab;
                gcase c = base(m, kDims[ni], kDims[ki], kModes[mo].ab, kModes[mo].math, cdt);
                double e = run_case(rng, &c, 0);
                if (e > worst[mo]) worst[mo] = e;
            }
    printf("dense sweep: worst rel err f16 %.2e bf16 %.2e tf32 %.2e fp32 %.2e\n", worst[0],
           worst[1], worst[2], worst[3]);
}

/* m = 0 returns 0 and writes nothing; m = 100000 dense and gathered. */
static void test_sizes(vc_rng *rng)
{
    for (int mo = 0; mo < NMODES; mo++) {
        gcase c = base(0, 64, 64, kModes[mo].ab, kModes[mo].math, VC_GEMM_F32);
        run_case(rng, &c, 0);
        c.gather = 1;
        c.taps = c.b_taps = 27;
        run_case(rng, &c, 0);
    }
    if (g_small) return;
    for (int mo = 0; mo < NMODES; mo++) {
        gcase c = base(100000, 64, 64, kModes[mo].ab, kModes[mo].math, kModes[mo].ab);
        double e = run_case(rng, &c, 0);
        gcase g = base(100000, 32, 32, kModes[mo].ab, kModes[mo].math, VC_GEMM_F32);
        g.gather = g.masks = g.grows = g.rmap = 1;
        g.taps = g.b_taps = 27;
        g.present = 0.25;
        g.bias = g.residual = 1;
        g.res_dt = kModes[mo].ab;
        g.act = VC_GEMM_ACT_RELU;
        double eg = run_case(rng, &g, 0);
        /* one iteration per tile, many tiles per CTA of the persistent grid */
        gcase d = base(100000, 16, 16, kModes[mo].ab, kModes[mo].math, kModes[mo].ab);
        double e16 = run_case(rng, &d, 0);
        d.k = 3;
        d.n = 5;
        d.rmap = d.grows = 1;
        double e3 = run_case(rng, &d, 0);
        /* taps = 1 with a gather (one offset of gather-GEMM-scatter) over many tiles */
        gcase o = base(100000, 64, 32, kModes[mo].ab, kModes[mo].math, VC_GEMM_F32);
        o.gather = o.rmap = o.accumulate = 1;
        o.b_taps = 27;
        o.b_tap0 = 26;
        o.present = 0.9;
        double eo = run_case(rng, &o, 0);
        printf("m 100000 %s%s: dense 64x64 %.2e, 16x16 %.2e, 3x5 %.2e; gathered 27 taps 32x32 "
               "%.2e, one offset %.2e\n",
               dt_name(kModes[mo].ab), kModes[mo].math == VC_GEMM_MATH_TF32 ? "/tf32" : "", e,
               e16, e3, eg, eo);
    }
}

/* Many taps (gather indices reloaded 32 taps at a time; 11 mask words) and tiles whose taps are
 * all masked (one iteration of zeros, then the epilogue). */
static void test_many_taps(vc_rng *rng)
{
    for (int mo = 0; mo < NMODES; mo++) {
        const int32_t taps[] = {64, 125, 343};
        for (int i = 0; i < 3; i++) {
            gcase c = base(g_small ? 200 : 3000, 8 + 8 * i, 8 * (i + 1), kModes[mo].ab,
                           kModes[mo].math, VC_GEMM_F32);
            c.gather = c.masks = 1;
            c.taps = c.b_taps = taps[i];
            c.present = 0.05;
            c.rmap = i == 1;
            c.bias = 1;
            run_case(rng, &c, 0);
        }
        gcase z = base(g_small ? 300 : 2000, 24, 16, kModes[mo].ab, kModes[mo].math,
                       kModes[mo].ab);
        z.gather = z.masks = z.bias = z.residual = 1;
        z.taps = z.b_taps = 27;
        z.present = 0;
        z.act = VC_GEMM_ACT_LEAKY;
        run_case(rng, &z, 0);
        z.present = 0.02; /* a few rows with taps, most tiles empty or nearly */
        run_case(rng, &z, 0);
    }
}

/* Gathered GEMMs: taps 1 and 27, holes, permutations, masks, every epilogue option. */
static void test_gathered(vc_rng *rng)
{
    const int32_t shapes[][2] = {{4, 32}, {3, 16}, {5, 17}, {16, 16}, {17, 5}, {32, 64},
                                 {64, 96}, {96, 128}, {128, 128}, {1, 8}, {64, 384}, {256, 256}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int count = 0;
    double worst[NMODES] = {0};
    for (int mo = 0; mo < NMODES; mo++)
        for (int s = 0; s < nshapes; s += g_small ? 3 : 1)
            for (int v = 0; v < 6; v++) {
                int taps = v % 2 ? 27 : 1;
                int64_t m = g_small ? 33 + v * 50 : (v == 4 ? 33 : 1000 + 700 * v);
                if (shapes[s][0] * shapes[s][1] > 16384) m /= 2;
                if (shapes[s][0] * shapes[s][1] > 32768) m /= 2;
                int cdt = v % 3 == 0 ? VC_GEMM_F32 : (v % 3 == 1 ? VC_GEMM_F16 : VC_GEMM_BF16);
                gcase c = base(m, shapes[s][1], shapes[s][0], kModes[mo].ab, kModes[mo].math, cdt);
                c.gather = 1;
                c.taps = taps;
                c.b_taps = taps == 1 ? 27 : 27 + v;
                c.b_tap0 = taps == 1 ? (s * 7 + v) % 27 : v;
                c.present = taps == 1 ? 0.8 : 0.3;
                c.grows = (v + s) % 2;
                c.rmap = (v / 2 + s) % 2;
                c.masks = taps > 1 ? 1 + (v == 5) : (v == 2);
                c.accumulate = s % 3 == 1; /* into fp32, fp16 or bf16 C */
                if (taps > 1 && s % 2 == 0) { /* one group of a three-way mask split */
                    c.tap_lo = 9 * (v / 2);
                    c.tap_hi = c.tap_lo + 9;
                }
                c.bias = (v + s) % 3 != 0;
                c.residual = (v + s) % 4 == 1 || v == 3;
                c.res_dt = (s + v) % 3;
                c.act = (v + s + mo) % 3;
                c.slope = 0.2f;
                /* tap split on the tensor-core paths: 2 to 5 groups, more than a tile's taps
                 * at times (empty groups) */
                if (kModes[mo].math != VC_GEMM_MATH_FP32 && v % 3 != 0) c.splits = 2 + (v + s) % 4;
                double e = run_case(rng, &c, 0);
                if (e > worst[mo]) worst[mo] = e;
                count++;
            }
    printf("gathered: %d cases, worst rel err f16 %.2e bf16 %.2e tf32 %.2e fp32 %.2e\n", count,
           worst[0], worst[1], worst[2], worst[3]);
}

/* Masks do not change the result: the same case with and without masks. */
static void test_masks_equal(vc_rng *rng)
{
    for (int mo = 0; mo < NMODES; mo++) {
        uint64_t save = rng->s;
        gcase c = base(g_small ? 300 : 3000, 32, 32, kModes[mo].ab, kModes[mo].math, VC_GEMM_F32);
        c.gather = 1;
        c.taps = c.b_taps = 27;
        c.present = 0.15;
        c.rmap = 1;
        double e0 = run_case(rng, &c, 0);
        rng->s = save; /* same inputs */
        c.masks = 1;
        double e1 = run_case(rng, &c, 0);
        CHECK_MSG(e0 == e1, "masks changed the result (%s): %.3g vs %.3g", dt_name(c.ab), e0,
                  e1);
        /* a tap range, with and without masks */
        c.tap_lo = 5;
        c.tap_hi = 20;
        rng->s = save;
        double e2 = run_case(rng, &c, 0);
        rng->s = save;
        c.masks = 0;
        double e3 = run_case(rng, &c, 0);
        CHECK_MSG(e2 == e3, "masks changed a tap range's result (%s): %.3g vs %.3g",
                  dt_name(c.ab), e2, e3);
    }
}

/* Gather-GEMM-scatter: one launch per offset into an fp32 C, accumulate. Uses one C buffer. */
static void test_per_offset(vc_rng *rng)
{
    for (int mo = 0; mo < NMODES; mo++) {
        const int64_t n_in = g_small ? 200 : 5000, n_out = n_in;
        const int32_t k = 32, n = 48, K = 27;
        int ab = kModes[mo].ab;
        float *A = rand_vals(rng, ab, n_in * k), *W = rand_vals(rng, ab, (int64_t)n * K * k);
        double *ref = calloc((size_t)n_out * n, sizeof *ref);
        void *hA = pack(ab, A, n_in * k), *hW = pack(ab, W, (int64_t)n * K * k);
        if (kModes[mo].math == VC_GEMM_MATH_TF32) {
            round_tf32_all(A, n_in * k);
            round_tf32_all(W, (int64_t)n * K * k);
        }
        void *dA = to_device(hA, (size_t)n_in * k * dt_size(ab));
        void *dW = to_device(hW, (size_t)n * K * k * dt_size(ab));
        float *dC = to_device(NULL, (size_t)n_out * n * 4);
        CUDA_OK(cudaMemset(dC, 0, (size_t)n_out * n * 4));
        int32_t *in_rows = malloc((size_t)n_out * 4), *out_rows = malloc((size_t)n_out * 4);
        int32_t *d_in = to_device(NULL, (size_t)n_out * 4);
        int32_t *d_out = to_device(NULL, (size_t)n_out * 4);
        int ok = 1;
        for (int32_t t = 0; t < K; t++) {
            int32_t *p = perm(rng, n_out);
            int64_t cnt = vc_rng_int(rng, n_out / 2 + 1);
            if (t == 13) cnt = n_out;
            for (int64_t i = 0; i < cnt; i++) {
                out_rows[i] = p[i];
                in_rows[i] = (int32_t)vc_rng_int(rng, n_in);
                for (int32_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int32_t q = 0; q < k; q++)
                        s += (double)A[(int64_t)in_rows[i] * k + q] *
                             W[((int64_t)j * K + t) * k + q];
                    ref[(int64_t)p[i] * n + j] += s;
                }
            }
            free(p);
            CUDA_OK(cudaMemcpy(d_in, in_rows, (size_t)cnt * 4, cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemcpy(d_out, out_rows, (size_t)cnt * 4, cudaMemcpyHostToDevice));
            vc_gemm_args a;
            memset(&a, 0, sizeof a);
            a.m = cnt;
            a.n_cols = n;
            a.k = k;
            a.taps = 1;
            a.a = dA;
            a.a_rows = n_in;
            a.gather = d_in;
            a.row_map = d_out;
            a.w = dW;
            a.b_taps = K;
            a.b_tap0 = t;
            a.ab_dtype = (vc_gemm_dtype)ab;
            a.math = (vc_gemm_math)kModes[mo].math;
            a.c = dC;
            a.c_dtype = VC_GEMM_F32;
            a.accumulate = 1;
            char msg[200];
            if (gemm_run(&a, -1, g_stream, msg, sizeof msg) != 0) {
                ok = 0;
                fprintf(stderr, "per-offset t %d: %s\n", t, msg);
            }
            /* the index buffers are rewritten next iteration */
            CUDA_OK(cudaStreamSynchronize(g_stream));
        }
        CHECK(ok);
        float *got = malloc((size_t)n_out * n * 4);
        CUDA_OK(cudaMemcpy(got, dC, (size_t)n_out * n * 4, cudaMemcpyDeviceToHost));
        gcase c = base(1, n, k, ab, kModes[mo].math, VC_GEMM_F32);
        double e = vc_rel_err(got, ref, n_out * n);
        CHECK_MSG(e <= tol_of(&c), "per-offset %s: rel err %.3g", dt_name(ab), e);
        printf("per-offset scatter %s%s: rel err %.2e\n", dt_name(ab),
               kModes[mo].math == VC_GEMM_MATH_TF32 ? "/tf32" : "", e);
        free(A), free(W), free(ref), free(hA), free(hW), free(in_rows), free(out_rows), free(got);
        cudaFree(dA), cudaFree(dW), cudaFree(dC), cudaFree(d_in), cudaFree(d_out);
    }
}

/* vc_gemm_plan's groups: what an automatic tap split resolves to - groups in [1, max], more
 * groups for fewer tiles, 1 for a problem that fills the device, the exact count as given, and
 * -2 from a configuration without the split. */
static void test_split_groups(void)
{
    static char buf[64];
    vc_gemm_args a;
    memset(&a, 0, sizeof a);
    a.n_cols = 64;
    a.k = 64;
    a.taps = a.b_taps = 27;
    a.a = a.w = a.c = buf;
    a.a_rows = 10;
    a.gather = (const int32_t *)buf;
    a.ab_dtype = VC_GEMM_F16;
    a.c_dtype = VC_GEMM_F16;
    const vc_gemm_config *t = NULL;
    const int32_t nc = vc_gemm_configs(&t);
    int cfg = -1, fma = -1;
    for (int32_t i = 0; i < nc; i++) {
        if (!strcmp(t[i].name, "f16_64x64x32_s4")) cfg = i;
        if (strstr(t[i].name, "fma")) fma = i;
    }
    CHECK(cfg >= 0 && fma >= 0);
    int32_t small = 0, big = 0, exact = 0, none = 0;
    char msg[200] = "";
    a.splits = -8;
    a.m = 640; /* 10 tiles */
    CHECK_MSG(gemm_planned(&a, cfg, &small, NULL, msg, sizeof msg) == 0, "%s", msg);
    a.m = 64 * 100000; /* 100k tiles */
    CHECK_MSG(gemm_planned(&a, cfg, &big, NULL, msg, sizeof msg) == 0, "%s", msg);
    a.splits = 5;
    CHECK_MSG(gemm_planned(&a, cfg, &exact, NULL, msg, sizeof msg) == 0, "%s", msg);
    a.splits = 0;
    CHECK_MSG(gemm_planned(&a, cfg, &none, NULL, msg, sizeof msg) == 0, "%s", msg);
    CHECK_MSG(small == 8 && big == 1 && exact == 5 && none == 1,
              "split groups: 10 tiles %d (8), 100k tiles %d (1), exact %d (5), none %d (1)",
              (int)small, (int)big, (int)exact, (int)none);
    a.ab_dtype = a.c_dtype = VC_GEMM_F32;
    a.math = VC_GEMM_MATH_FP32;
    a.splits = -4;
    CHECK(gemm_planned(&a, fma, &none, NULL, msg, sizeof msg) == -2 && msg[0]);
    printf("split groups: 10 tiles -> %d, 100k tiles -> %d, exact 5 -> %d\n", (int)small,
           (int)big, (int)exact);
}

/* The dense TMA kernel (gemm/gemm_sm90.h), beyond the dense case d of test_configs: many tiles
 * per CTA so that the ring of stages wraps and every consumer warpgroup takes several tiles (n
 * narrow, to keep the reference quick; d covers wide slices), with a row_map into a larger fp32
 * C and accumulate; W taken from one tap of several (b_tap0) with n short of a slice; one row;
 * and the cases it must refuse (-2): gathers, a tap split, a k too long for its W slice. */
static void test_dense_tma(vc_rng *rng, const vc_gemm_config *t, int i, const gcase *d, double ed)
{
    const int math = t->ab_dtype != VC_GEMM_F32 ? VC_GEMM_MATH_DEFAULT : t->math;
    /* k 256 (fp32: 128, which tf32's 192-row slice still fits): 4 to 8 k blocks a tile */
    const int32_t wk = t->ab_dtype == VC_GEMM_F32 ? 128 : 256;
    gcase w = base(g_small ? 3000 + 13 : 50000 + 13, 24, wk, t->ab_dtype, math, VC_GEMM_F32);
    w.config = i;
    w.rmap = w.accumulate = w.bias = 1;
    w.act = VC_GEMM_ACT_RELU;
    const double ew = run_case(rng, &w, 0);
    gcase b = base(g_small ? 700 : 20000 + 1, t->tile_n - 24, 40, t->ab_dtype, math,
                   t->ab_dtype);
    b.config = i;
    b.b_taps = 3;
    b.b_tap0 = 2;
    const double eb = run_case(rng, &b, 0);
    /* C of the inputs' dtype with bias, ReLU and a row_map, n a multiple of 8 past one slice:
     * the direct epilogue of the wide 16-bit slices (gemm/epilogue.cuh) on a partial slice */
    gcase f = base(g_small ? 900 : 30000 + 5, t->tile_n + 40, 64, t->ab_dtype, math,
                   t->ab_dtype);
    f.config = i;
    f.rmap = f.bias = 1;
    f.act = VC_GEMM_ACT_RELU;
    const double ef = run_case(rng, &f, 0);
    gcase one = base(1, 8, 8, t->ab_dtype, math, VC_GEMM_F32);
    one.config = i;
    const double e1 = run_case(rng, &one, 0);
    gcase g = *d;
    g.gather = 1;
    g.present = 0.5;
    run_case(rng, &g, -2);
    gcase sp = *d;
    sp.splits = 2;
    run_case(rng, &sp, -2);
    gcase lk = base(100, 64, 8192, t->ab_dtype, math, VC_GEMM_F32);
    lk.config = i;
    run_case(rng, &lk, -2);
    printf("config %2d %-26s dense m %lld n %d k %d: %.2e; m %lld n %d k %d, row_map, "
           "accumulate: %.2e; b_tap0 2 of 3, n %d: %.2e; n %d, C of the inputs' dtype, "
           "bias, row_map: %.2e; m 1: %.2e\n",
           i, t->name, (long long)d->m, d->n, d->k, ed, (long long)w.m, w.n, w.k, ew, b.n, eb,
           f.n, ef, e1);
}

/* The direct epilogue of the 16-bit wgmma kernels (gemm/epilogue.cuh, epilogue_direct: C of the
 * inputs' dtype, bias and activation only, C 16-byte aligned; the dense kernel's slices of 192
 * columns and more, the implicit GEMM's tiles of 128 and more) against the general path, which
 * the same problem takes when C starts one element later (no 16-byte or pair accesses): the
 * same bits (the same inputs give the same error). On the other 16-bit wgmma configurations the
 * same comparison holds the general path's 16-byte form to its element-wise one. Dense (the
 * dense kernel) or gathered over 27 taps with masks (the implicit GEMM's wgmma tiles); n past
 * one tile and short of the second, a row_map, ReLU and LeakyReLU. */
static void test_direct_bits(vc_rng *rng, const vc_gemm_config *t, int i, int dense)
{
    for (int act = VC_GEMM_ACT_RELU; act <= VC_GEMM_ACT_LEAKY; act++) {
        const uint64_t save = rng->s;
        gcase c = base(dense ? (g_small ? 2000 + 5 : 30000 + 5) : (g_small ? 300 : 3000),
                       t->tile_n + 40, dense ? 72 : 64, t->ab_dtype, VC_GEMM_MATH_DEFAULT,
                       t->ab_dtype);
        c.config = i;
        c.rmap = c.bias = 1;
        c.act = act;
        c.slope = 0.125f;
        if (!dense) {
            c.gather = c.masks = c.grows = 1;
            c.taps = c.b_taps = 27;
            c.present = 0.3;
        }
        const double e0 = run_case(rng, &c, 0);
        rng->s = save; /* the same inputs */
        c.cmis = 1;
        const double e1 = run_case(rng, &c, 0);
        CHECK_MSG(e0 == e1, "%s: C 16-byte aligned and not give different results (act %d): "
                  "%.6g vs %.6g", t->name, act, e0, e1);
        if (act == VC_GEMM_ACT_RELU)
            printf("config %2d %-26s C 16-byte aligned or not, %s m %lld n %d k %d: the same "
                   "result\n", i, t->name, dense ? "dense" : "gathered", (long long)c.m, c.n,
                   c.k);
    }
}

/* Every configuration of the table on a case it fits, and -2 where it does not (the wgmma
 * configurations, "_wg", and the dense TMA ones, "_tma", fit a compute capability 9.0 device only;
 * the "_tma" ones fit dense problems only: test_dense_tma). Then each on larger cases:
 * dense with several tiles per CTA of the persistent grid (more tiles than SMs), k not a
 * multiple of the tile's k, n past one tile and not a multiple of it, the whole epilogue; and
 * gathered over 27 taps with masks and permutations. */
static void test_configs(vc_rng *rng)
{
    const vc_gemm_config *t = NULL;
    int32_t nc = vc_gemm_configs(&t);
    CHECK(nc > 0 && t != NULL);
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    const int sm90 = prop.major == 9 && prop.minor == 0;
    for (int32_t i = 0; i < nc; i++) {
        CHECK(t[i].name && t[i].tile_m > 0 && t[i].tile_n > 0 && t[i].tile_k > 0);
        int math = t[i].ab_dtype != VC_GEMM_F32 ? VC_GEMM_MATH_DEFAULT : t[i].math;
        const int wg = strstr(t[i].name, "_wg") != NULL;
        const int tma = strstr(t[i].name, "_tma") != NULL; /* dense problems, sm 9.0 only */
        int32_t ks[] = {64, 3, 24, 8};
        for (int j = 0; j < 4; j++) {
            gcase c = base(g_small ? 100 : 777, 40 + 24 * j, ks[j], t[i].ab_dtype, math,
                           VC_GEMM_F32);
            c.config = i;
            c.gather = j % 2;
            c.taps = c.b_taps = j % 2 ? 27 : 1;
            c.present = 0.4;
            c.masks = j == 1;
            c.bias = 1;
            int narrow = strstr(t[i].name, "scalar") || strstr(t[i].name, "_a4") ||
                         strstr(t[i].name, "fma");
            int fits = (narrow || ks[j] % (t[i].ab_dtype == VC_GEMM_F32 ? 4 : 8) == 0) &&
                       (!wg || sm90) && (!tma || (sm90 && !c.gather));
            double e = run_case(rng, &c, fits ? 0 : -2);
            if (j == 0) printf("config %2d %-26s k %d: rel err %.2e\n", i, t[i].name, ks[j], e);
        }
        if ((wg || tma) && !sm90) continue;
        /* dense: two waves of tiles at one CTA per SM (several tiles per CTA) */
        int64_t tiles = g_small ? 24 : 2 * (int64_t)prop.multiProcessorCount;
        gcase d = base(tiles * t[i].tile_m / 2 + 17, 2 * t[i].tile_n + 8, 3 * t[i].tile_k / 2 + 8,
                       t[i].ab_dtype, math, t[i].ab_dtype);
        d.config = i;
        d.bias = d.residual = 1;
        d.res_dt = VC_GEMM_BF16;
        d.act = VC_GEMM_ACT_LEAKY;
        d.slope = 0.25f;
        double ed = run_case(rng, &d, 0);
        if (tma) {
            test_dense_tma(rng, &t[i], i, &d, ed);
            if (t[i].ab_dtype != VC_GEMM_F32) test_direct_bits(rng, &t[i], i, 1);
            continue;
        }
        if (wg && t[i].ab_dtype != VC_GEMM_F32) test_direct_bits(rng, &t[i], i, 0);
        /* gathered, 27 taps (masks, gather_rows, row_map), C in fp32 */
        gcase g = base(g_small ? 150 : 1500, t[i].tile_n + 24, 2 * t[i].tile_k, t[i].ab_dtype,
                       math, VC_GEMM_F32);
        g.config = i;
        g.gather = g.masks = g.grows = g.rmap = 1;
        g.taps = g.b_taps = 27;
        g.present = 0.3;
        g.bias = 1;
        g.act = VC_GEMM_ACT_RELU;
        double eg = run_case(rng, &g, 0);
        /* the middle group of a three-way mask split (taps [9, 18)) added into a C of the
         * features' dtype, with a residual: the convolution's mask-split passes */
        gcase h = g;
        h.tap_lo = 9;
        h.tap_hi = 18;
        h.accumulate = h.residual = 1;
        h.cdt = h.res_dt = t[i].ab_dtype;
        double eh = run_case(rng, &h, 0);
        /* the tap split: the gathered case in 4 groups and in as many as fill the device (at
         * most 6), then the taps [9, 18) case in 7 (accumulate and residual in the second
         * pass), and a dense case in 3 groups (taps 1: two empty groups); the fp32 FMA kernel
         * has none (-2) */
        const int fma = strstr(t[i].name, "fma") != NULL;
        const int nosplit = fma || taps_in_cta(t[i].name);
        const int sets = strstr(t[i].name, "_wg2") != NULL;
        gcase gs = g;
        gs.splits = -6;
        run_case(rng, &gs, fma ? -2 : 0);
        gs.splits = 4;
        double es = run_case(rng, &gs, nosplit ? -2 : 0);
        gcase hs = h;
        hs.splits = 7;
        double ehs = run_case(rng, &hs, nosplit ? -2 : 0);
        gcase ds = d;
        ds.splits = 3;
        run_case(rng, &ds, nosplit ? -2 : 0);
        /* a tap-set tile copies the gather indices of all a tile's taps at once: 33 taps
         * computed are refused, 32 run */
        if (sets) {
            gcase w = g;
            w.taps = w.b_taps = 33;
            run_case(rng, &w, -2);
            w.tap_lo = 1;
            run_case(rng, &w, 0);
        }
        printf("config %2d %-26s dense m %lld n %d k %d: %.2e; gathered n %d k %d: %.2e, taps "
               "[9, 18) accumulated: %.2e; tap split 4: %.2e, 7: %.2e\n", i, t[i].name,
               (long long)d.m, d.n, d.k, ed, g.n, g.k, eg, eh, es, ehs);
    }
    /* misaligned A and W: the library must pick a path that fits */
    for (int mo = 0; mo < NMODES; mo++) {
        gcase c = base(500, 64, 64, kModes[mo].ab, kModes[mo].math, VC_GEMM_F32);
        c.misalign = 1;
        run_case(rng, &c, 0);
    }
}

static void test_bad_args(void)
{
    static char buf[64];
    vc_gemm_args ok;
    memset(&ok, 0, sizeof ok);
    ok.m = 10;
    ok.n_cols = 8;
    ok.k = 8;
    ok.taps = 1;
    ok.a = buf;
    ok.a_rows = 10;
    ok.w = buf;
    ok.b_taps = 1;
    ok.c = buf;
    ok.ab_dtype = VC_GEMM_F16;
    ok.c_dtype = VC_GEMM_F32;
    struct {
        const char *what;
        vc_gemm_args a;
        int config;
    } bad[40];
    int nb = 0;
#define BAD_CASE(name, field_stmt)                                                            \
    do {                                                                                       \
        bad[nb].what = name;                                                                   \
        bad[nb].a = ok;                                                                        \
        bad[nb].config = -1;                                                                   \
        {                                                                                      \
            vc_gemm_args *x = &bad[nb].a;                                                      \
            field_stmt;                                                                        \
        }                                                                                      \
        nb++;                                                                                  \
    } while (0)
    BAD_CASE("m < 0", x->m = -1);
    BAD_CASE("n_cols 0", x->n_cols = 0);
    BAD_CASE("k 0", x->k = 0);
    BAD_CASE("k past 2^27", x->k = (1 << 27) + 1);
    BAD_CASE("taps 0", x->taps = 0);
    BAD_CASE("ab dtype", x->ab_dtype = (vc_gemm_dtype)7);
    BAD_CASE("c dtype", x->c_dtype = (vc_gemm_dtype)-2);
    BAD_CASE("math", x->math = (vc_gemm_math)9);
    BAD_CASE("act", x->act = (vc_gemm_act)5);
    BAD_CASE("tap range empty", (x->tap_lo = 1, x->tap_hi = 1));
    BAD_CASE("tap range past taps", x->tap_hi = 2);
    BAD_CASE("tap_lo < 0", (x->tap_lo = -1, x->tap_hi = 1));
    BAD_CASE("b_tap0 past b_taps", (x->b_taps = 4, x->b_tap0 = 4));
    BAD_CASE("taps past b_taps", (x->gather = (const int32_t *)buf, x->taps = 3, x->b_taps = 2));
    BAD_CASE("dense taps 2", (x->taps = 2, x->b_taps = 2));
    BAD_CASE("dense m > a_rows", x->a_rows = 5);
    BAD_CASE("mask words",
             (x->gather = (const int32_t *)buf, x->taps = 40, x->b_taps = 40,
              x->masks = (const uint32_t *)buf, x->mask_words = 1));
    BAD_CASE("A NULL", x->a = NULL);
    BAD_CASE("W NULL", x->w = NULL);
    BAD_CASE("C NULL", x->c = NULL);
    BAD_CASE("residual dtype", (x->residual = buf, x->residual_dtype = (vc_gemm_dtype)3));
    BAD_CASE("a_rows < 0", x->a_rows = -3);
    BAD_CASE("splits too many", x->splits = VC_GEMM_MAX_SPLITS + 1);
    BAD_CASE("splits too many (automatic)", x->splits = -VC_GEMM_MAX_SPLITS - 1);
    BAD_CASE("automatic split without workspace", x->splits = -3);
    BAD_CASE("split of too many taps",
             (x->gather = (const int32_t *)buf, x->taps = x->b_taps = 1025, x->splits = 2,
              x->partial = (float *)buf));
    BAD_CASE("split without workspace", x->splits = 2);
    BAD_CASE("split workspace misaligned",
             (x->splits = 2,
              x->partial = (float *)((((uintptr_t)buf + 15) & ~(uintptr_t)15) + 4)));
    BAD_CASE("tile order of the wrong block count",
             (x->tile_order = (const int32_t *)buf, x->order_blocks = 2));
    BAD_CASE("config too big", (void)x);
    bad[nb - 1].config = 1000;
    BAD_CASE("config -2", (void)x);
    bad[nb - 1].config = -2;
#undef BAD_CASE
    for (int i = 0; i < nb; i++) {
        char msg[200] = "";
        int rc = gemm_run(&bad[i].a, bad[i].config, g_stream, msg, sizeof msg);
        CHECK_MSG(rc == -1 && msg[0], "%s: rc %d msg '%s'", bad[i].what, rc, msg);
    }
    char msg[200] = "";
    CHECK(gemm_run(NULL, -1, g_stream, msg, sizeof msg) == -1 && msg[0]);
    CHECK(gemm_run(NULL, -1, g_stream, NULL, 0) == -1); /* NULL msg is fine */
    char shortmsg[8] = "1234567";
    CHECK(gemm_run(&bad[0].a, -1, g_stream, shortmsg, 4) == -1 && strlen(shortmsg) == 3 &&
          shortmsg[4] == '5'); /* a short buffer is not overrun */
    printf("bad arguments: %d cases, e.g. '%s'\n", nb, msg);
    CUDA_OK(cudaGetLastError());
}

int main(void)
{
    if (!gpu_usable()) return 77;
    g_small = getenv("VC_SANITIZE") != NULL;
    vc_rng rng = vc_test_rng("test_gpu_gemm");
    CUDA_OK(cudaStreamCreate(&g_stream));
    test_bad_args();
    test_split_groups();
    test_configs(&rng);
    test_masks_equal(&rng);
    test_per_offset(&rng);
    test_gathered(&rng);
    test_dense_sweep(&rng);
    test_many_taps(&rng);
    test_sizes(&rng);
    cudaStreamDestroy(g_stream);
    printf("test_gpu_gemm: %d cases; tap splits: %d as clusters (each matched bit for bit by "
           "the two-pass form), %d two-pass; %d masked runs repeated taking a random tile order, "
           "the same bits\n", g_cases, g_split_cluster, g_split_two_pass, g_ordered);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_gemm: built without CUDA, skipped\n");
    return 77;
}
#endif
