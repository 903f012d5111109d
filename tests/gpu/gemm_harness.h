/* tests/gpu/gemm_harness.h - the GPU GEMM tests' harness (test_gpu_gemm, test_gpu_gemm_configs):
 * a case (gcase: sizes, dtypes, gather table with holes, gather rows, row map, masks, tap range,
 * epilogue, configuration, tap split) run through vc_gemm_plan and vc_gemm_run against a CPU
 * double-precision reference written here, on inputs rounded to the stored dtype (run_case: the
 * relative Frobenius error, checked against the case's tolerance; C poisoned with NaN first,
 * unmapped rows must keep their bits, a second run the same bits, a random tile order the same
 * bits, and a tile whose rows sum their own taps only the same bits with its rows reversed).
 * Each check counts through testutil.h. Include once per program, after VOXCONV_HAVE_CUDA is
 * known. */
#ifndef VC_TESTS_GPU_GEMM_HARNESS_H
#define VC_TESTS_GPU_GEMM_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "gemm/gemm.h"
#include "gpu_testutil.h"
#include "testutil.h"

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

/* Whether each row of configuration t sums its own taps only, in an order no other row changes:
 * a warp or tap-set tile, or a tap-packed tile whose taps are whole MMA k steps (k a multiple
 * of 16; at k = 8 a step holds two taps, which the tile's walk pairs). */
static int rows_own_taps(const vc_gemm_config *t)
{
    return taps_in_cta(t->name) || (t->tap_pack > 1 && t->tile_k / t->tap_pack % 16 == 0);
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
             * of its value; where they cancel (one output and a long k can miss 1e-6 against
             * the value) the error is measured against the magnitude, which still flags any
             * wrong term (~1 / (k x taps) of it) */
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
        /* where a row sums its own taps only, in an order no other row changes (rows_own_taps):
         * with the rows taken in reverse (other rows sharing each tile), the same bits */
        const vc_gemm_config *cfgs = NULL;
        vc_gemm_configs(&cfgs);
        if (c->config >= 0 && rows_own_taps(&cfgs[c->config]) && grows && rmap &&
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

/* The last line of a GEMM test program: its cases and the harness's counts of tap splits and
 * tile-ordered runs. */
static void print_summary(const char *test)
{
    printf("%s: %d cases; tap splits: %d as clusters (each matched bit for bit by the two-pass "
           "form), %d two-pass; %d masked runs repeated taking a random tile order, the same "
           "bits\n", test, g_cases, g_split_cluster, g_split_two_pass, g_ordered);
}

#endif
