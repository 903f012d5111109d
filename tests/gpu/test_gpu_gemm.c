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
 *   - every compiled configuration on its own, and misaligned A: test_gpu_gemm_configs;
 *   - bad arguments: -1 and a message.
 * C is poisoned with NaN before each run (random values for accumulate); rows that no logical row
 * maps to must keep their bits. Tolerances (relative Frobenius norm): fp32 1e-6, tf32 5e-4,
 * fp16/bf16 1e-2, raised to the rounding of a 16-bit C. The TF32 reference rounds its operands
 * to tf32 as cvt.rna does (a tiny output, m = 1, can otherwise miss 5e-4 by chance alone);
 * exact fp32 that misses 1e-6 against the values is measured against the terms' magnitudes.
 * Prints its seed (VC_TEST_SEED replays); VC_SANITIZE=1 shrinks the sizes for
 * compute-sanitizer. Exits 77 without a usable device. */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include "gemm_harness.h"

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
    test_masks_equal(&rng);
    test_per_offset(&rng);
    test_gathered(&rng);
    test_dense_sweep(&rng);
    test_many_taps(&rng);
    test_sizes(&rng);
    cudaStreamDestroy(g_stream);
    print_summary("test_gpu_gemm");
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_gemm: built without CUDA, skipped\n");
    return 77;
}
#endif
