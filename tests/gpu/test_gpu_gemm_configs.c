/* tests/gpu/test_gpu_gemm_configs.c - every compiled configuration of gemm/'s table
 * (vc_gemm_configs) through vc_gemm_plan and vc_gemm_run against the CPU reference of
 * gemm_harness.h: each on a case it fits, and -2 where it does not (the wgmma configurations
 * fit a compute capability 9.0 device only, the dense TMA ones dense problems only); dense with
 * several tiles a CTA, gathered over 27 taps with masks and permutations, a tap range
 * accumulated with a residual, the tap split (or -2 where a configuration has none); the
 * tap-packed tiles' own cases; the automatic split's groups; the dense TMA kernel's own cases;
 * the direct epilogue's bits; and misaligned A and W. Prints its seed (VC_TEST_SEED replays);
 * VC_SANITIZE=1 shrinks the sizes for compute-sanitizer. Exits 77 without a usable device. */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include "gemm_harness.h"

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

/* Configuration i (t) on a gathered problem over 27 taps, each present with probability
 * `present`: masks, gather rows and a row map, n past one tile, bias and ReLU, C in fp32. */
static gcase gathered(const vc_gemm_config *t, int i, int32_t k, int math, double present)
{
    gcase g = base(g_small ? 150 : 1500, t->tile_n + 24, k, t->ab_dtype, math, VC_GEMM_F32);
    g.config = i;
    g.gather = g.masks = g.grows = g.rmap = 1;
    g.taps = g.b_taps = 27;
    g.present = present;
    g.bias = 1;
    g.act = VC_GEMM_ACT_RELU;
    return g;
}

/* A tap-packed tile (gemm/gemm_packed.h: tap_pack taps a stage, k = tile_k / tap_pack) on
 * gathered problems over 27 taps with masks, gather rows and a row map: sparse (tiles of a few
 * taps, so a pack's last slots run past the walk's end), dense (every tap: whole packs), without
 * masks (every tap of every tile), a tap range [9, 18) accumulated with a residual, 3 taps
 * (fewer than a pack), an automatic tap split (one group); and the cases it must refuse (-2):
 * another k, no gather table, an explicit tap split, 33 taps computed. */
static void test_packed(vc_rng *rng, const vc_gemm_config *t, int i)
{
    const int32_t kt = t->tile_k / t->tap_pack;
    gcase g = gathered(t, i, kt, VC_GEMM_MATH_DEFAULT, 0.15);
    const double es = run_case(rng, &g, 0);
    gcase d = g;
    d.present = 0.95;
    d.cdt = t->ab_dtype;
    const double ed = run_case(rng, &d, 0);
    gcase u = g;
    u.masks = 0;
    u.present = 0.5;
    const double eu = run_case(rng, &u, 0);
    gcase h = g;
    h.present = 0.4;
    h.tap_lo = 9;
    h.tap_hi = 18;
    h.accumulate = h.residual = 1;
    h.cdt = h.res_dt = t->ab_dtype;
    const double eh = run_case(rng, &h, 0);
    gcase f = g;
    f.taps = f.b_taps = 3;
    f.present = 0.7;
    const double ef = run_case(rng, &f, 0);
    gcase a = g;
    a.splits = -6;
    run_case(rng, &a, 0);
    gcase no = g;
    no.k = 2 * kt;
    run_case(rng, &no, -2);
    no = g;
    no.gather = no.masks = 0;
    no.taps = no.b_taps = 1;
    run_case(rng, &no, -2);
    no = g;
    no.splits = 2;
    run_case(rng, &no, -2);
    no = g;
    no.taps = no.b_taps = 33;
    run_case(rng, &no, -2);
    no.tap_lo = 1;
    run_case(rng, &no, 0);
    printf("config %2d %-26s %d taps a stage, k %d, n %d: sparse %.2e, dense %.2e, no masks "
           "%.2e, taps [9, 18) accumulated %.2e, 3 taps %.2e\n",
           i, t->name, t->tap_pack, kt, g.n, es, ed, eu, eh, ef);
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
        if (t[i].tap_pack > 1) { /* tap-packed: its own cases */
            test_packed(rng, &t[i], i);
            continue;
        }
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
        gcase g = gathered(&t[i], i, 2 * t[i].tile_k, math, 0.3);
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

int main(void)
{
    if (!gpu_usable()) return 77;
    g_small = getenv("VC_SANITIZE") != NULL;
    vc_rng rng = vc_test_rng("test_gpu_gemm_configs");
    CUDA_OK(cudaStreamCreate(&g_stream));
    test_split_groups();
    test_configs(&rng);
    cudaStreamDestroy(g_stream);
    print_summary("test_gpu_gemm_configs");
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_gemm_configs: built without CUDA, skipped\n");
    return 77;
}
#endif
