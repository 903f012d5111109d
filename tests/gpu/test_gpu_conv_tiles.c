/* tests/gpu/test_gpu_conv_tiles.c - the implicit GEMM's tile planner (conv/tiles.cu) on the
 * layers its rules were measured on: the planner must name the rule's tile where the build has
 * it (and, for the rules that count CTA waves, on the Hopper parts the layers were sized for),
 * and every layer runs against its CPU twin as conv_harness.h compares them (fp16 and bf16,
 * bias + residual + ReLU on some). Rules: the mid-size-level wgmma tiles (wg96_first,
 * wg32_first, wg96_for_64) on a ~30k k3 level; the waves of the maps of one pair an output
 * (wave_first) on dense k1 layers and k2 inverses either side of a wave; the rules of the
 * 2026-11-28 tune (dense TMA slices, 3x1x1 waves, k2 32 -> 32 downsamples, wide strided maps
 * of few channels, sparse 256-column levels); the tap-packed tiles of stems and strided levels
 * of 16 and 32 channels. VC_SANITIZE (set by
 * tests/gpu/run for compute-sanitizer) runs the inverses only.
 * Prints its seed (VC_TEST_SEED replays). Exits 77 without a CUDA build or a usable device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map_desc.h"
#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include "conv_harness.h"

/* Whether the device is a Hopper part of 114-132 SMs, on which the wave rules' layers below
 * fall either side of a wave as their comments say (*sms: its SM count). */
static int sized_hopper(int *sms)
{
    int dev = 0, major = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    return major == 9 && *sms >= 114 && *sms <= 132;
}

/* One layer of a rule on map m: the planner's tile for c_in -> c_out in dt is checked against
 * `tile` (a full name, "f16_..."), where the build has that tile, as `named` says (1: it must
 * name it; 0: it must not; -1: no check, the layer is outside the rule's sizing here); where
 * `run`, the layer runs against its CPU twin, with bias + residual + ReLU where `full`. */
static void rule_layer(const char *label, const map_pair *m, int64_t c_in, int64_t c_out,
                       vc_dtype dt, const char *tile, int named, int run, int full, vc_rng *rng)
{
    const char *cfg = NULL;
    int32_t split = 0, tuned = 0;
    vc_conv_gpu_describe(&m->gpu, c_in, c_out, dt, 0, &g_opt, &cfg, &split, &tuned);
    const int built = vc_gemm_config_named(tile, strlen(tile)) >= 0;
    const long long n = (long long)m->gpu.n_out, p = (long long)m->gpu.n_pairs;
    CHECK_MSG(named < 0 || !built || (strcmp(cfg, tile) == 0) == named,
              "%s %lld->%lld %s, %lld outputs, %lld pairs: the planner names %s (%s %s)", label,
              (long long)c_in, (long long)c_out, dname(dt), n, p, cfg,
              named ? "wanted" : "not wanted", tile);
    double e = -1;
    if (run) {
        conv_opts o = opts(c_in, c_out, dt, VC_ALGO_AUTO);
        if (full) {
            o.bias = o.res = 1;
            o.act = VC_ACT_RELU;
        }
        e = run_conv(label, m, o, rng);
    }
    printf("%s, %lld outputs (%.2f pairs an output) %lld->%lld %s on %s: rel err %.2e\n", label,
           n, n ? (double)p / (double)n : 0.0, (long long)c_in, (long long)c_out, dname(dt), cfg,
           e);
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
    for (size_t i = 0; m.ok && i < sizeof cases / sizeof cases[0]; i++)
        rule_layer("30k subm k3, mid-level tiles", &m, cases[i].c_in, cases[i].c_out,
                   cases[i].dt, cases[i].tile, in_range && cases[i].named ? 1 : -1, 1,
                   i == 0 || i == 4 || i == 7, rng);
    free_pair(&m);
    cudaFree(d_rows);
    free(c.rows);
}

/* Dense (SUBM 1x1x1) layers either side of a wave (conv/tiles.cu: wave_first): 128 -> 256 at
 * 7.4k and at 4.7k rows, fp16 and bf16, bias + residual + ReLU once, against the CPU twin.
 * Whether a layer passes a wave depends on the device's SM count, so the planner's name is
 * checked only on the Hopper parts these rows were chosen for (114-132 SMs): there the rows'
 * tile (64x64x64_s3) takes two waves at 7.4k rows and one at 4.7k, and 128x128x32_s5_wg one at
 * both, so the planner must name 128x128 for the first and not for the second. (From 192 input
 * channels a dense layer takes the dense TMA kernel first: rule_tiles.) */
static void dense_wave_tiles(vc_rng *rng, const int32_t shape[3])
{
    int sms = 0;
    const int hopper = sized_hopper(&sms);
    const int64_t rows[2] = {7400, 4700};
    for (int r = 0; r < 2; r++) {
        cloud c = make_cloud(rng, rows[r], 1, shape, 1);
        int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
        vc_map_desc d = mkdesc(VC_MAP_SUBM, 1, 1, 0, 1);
        map_pair m = build_pair(&c, d_rows, &d, "dense k1");
        /* two waves of the rows' tile at 7.4k rows, one at 4.7k */
        for (int i = 0; m.ok && i < 2; i++)
            rule_layer("dense k1, either side of a wave", &m, 128, 256,
                       i == 0 ? VC_DTYPE_FP16 : VC_DTYPE_BF16,
                       i == 0 ? "f16_128x128x32_s5_wg" : "bf16_128x128x32_s5_wg",
                       hopper ? r == 0 : -1, 1, i == 0, rng);
        free_pair(&m);
        cudaFree(d_rows);
        free(c.rows);
    }
}

/* k2 inverses (conv/tiles.cu: wave_first), fp16 and bf16, bias + residual + ReLU once, against
 * the CPU twin: the inverse of a 2x2x2 downsample has one pair an output, so each CTA walks one
 * tap. On a Hopper of 114-132 SMs (three CTAs of wgmma 64x64x64 an SM): 256 -> 256 at 7.4k
 * outputs makes 464 tiles of 64x64, two waves, so the planner must not name that tile; 256 ->
 * 128 at 10.5k outputs makes 330, one wave, so it must name it. */
static void inverse_wave_tiles(vc_rng *rng, const int32_t shape[3])
{
    int sms = 0;
    const int hopper = sized_hopper(&sms);
    const struct {
        int64_t rows, c_in, c_out;
        int named; /* whether the planner must name the 64x64 wgmma tile, or must not */
    } cases[2] = {{7400, 256, 256, 0}, {10500, 256, 128, 1}};
    for (int r = 0; r < 2; r++) {
        cloud c = make_cloud(rng, cases[r].rows, 1, shape, 1);
        int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
        vc_map_desc d = mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1);
        map_pair fwd = build_pair(&c, d_rows, &d, "k2 downsample");
        map_pair m;
        memset(&m, 0, sizeof m);
        if (fwd.ok) m = inverse_pair(&fwd, &c, "k2 inverse");
        CHECK_MSG(!m.ok || m.gpu.n_pairs == m.gpu.n_out, "k2 inverse: %lld pairs for %lld outputs",
                  (long long)m.gpu.n_pairs, (long long)m.gpu.n_out);
        for (int i = 0; m.ok && i < 2; i++)
            rule_layer("k2 inverse, either side of a wave", &m, cases[r].c_in, cases[r].c_out,
                       i == 0 ? VC_DTYPE_FP16 : VC_DTYPE_BF16,
                       i == 0 ? "f16_64x64x64_s4_wg" : "bf16_64x64x64_s4_wg",
                       hopper ? cases[r].named : -1, 1, i == 0, rng);
        free_pair(&m);
        free_pair(&fwd);
        cudaFree(d_rows);
        free(c.rows);
    }
}

/* The rules of the 2026-11-28 tune (conv/tiles.cu), each layer against the CPU twin in fp16 and
 * bf16 (bias + residual + ReLU on the fp16 run) where the CPU twin is quick, and the planner's
 * name checked where the build has the tile: dense k1 layers from 192 input channels, or to 96
 * columns from 30k rows, on the dense TMA kernel's slice; a 3x1x1 strided 128 -> 128 map of
 * one wave on wgmma 64x64x64 (wave_first: on a Hopper of 114-132 SMs only); a k2 32 -> 32
 * downsample under 25k outputs on the 64x32 two-tap-set tile; a strided k3 16 -> 32 map past
 * the warp tiles' bound (3000 tiles of 32 x 16) on 64x32x16_s4 from 8 input channels and on
 * the tap-packed 64x32x32_s3_p2 (two taps a stage) from 16; by name only (its CPU twin takes
 * seconds), a sparse subm 256 -> 256 level of 30k-50k outputs on 128x256, not wgmma 64x64; and
 * the other tap-packed tiles (packed_first): subm stems 3 -> 64 and, from 30k outputs, 4 -> 32
 * (features widened to 8 channels, four taps a stage), a strided k3 32 -> 64 map (two taps
 * a 64-deep stage) and a subm 16 -> 16 level past the warp tiles' bound (two taps a stage). */
typedef struct {
    const char *label;
    int64_t points;
    int style;
    vc_map_desc d;
    int64_t c_in, c_out;
    const char *tile; /* without the dtype prefix */
    int run;          /* against the CPU twin */
} rule_case;

/* Whether the planner's rule applies to the map as built (its outputs and pairs). */
static int rule_applies(const rule_case *k, const vc_kmap_data *m, int hopper)
{
    const int64_t n = m->n_out, p = m->n_pairs;
    if (strstr(k->tile, "_s3_p")) /* packed_first */
        return k->c_in <= 8    ? k->c_out > 32 || n >= 30000
               : k->c_in == 32 ? 1
                               : (n + 31) / 32 * ((k->c_out + 15) / 16) > 3000;
    if (k->d.type == VC_MAP_SUBM && m->volume == 1)
        return n < 50000 && (k->c_out != 96 || n >= 30000);
    if (k->d.type == VC_MAP_STRIDED && m->volume == 3) return hopper && n * 2 <= 300 * 64;
    if (k->d.type == VC_MAP_DOWNSAMPLE) return n < 25000;
    if (k->d.type == VC_MAP_STRIDED) return n >= 30000 && (n + 31) / 32 * 2 > 3000;
    return n >= 30000 && n < 50000 && p < 5 * n;
}

static void rule_tiles(vc_rng *rng, const int32_t shape[3])
{
    int sms = 0;
    const int hopper = sized_hopper(&sms);
    const int k311[3] = {3, 1, 1}, s211[3] = {2, 1, 1}, p000[3] = {0, 0, 0}, d111[3] = {1, 1, 1};
    const rule_case cases[] = {
        {"dense k1", 4700, 1, mkdesc(VC_MAP_SUBM, 1, 1, 0, 1), 384, 256, "dense_64x64_tma", 1},
        {"dense k1", 4700, 1, mkdesc(VC_MAP_SUBM, 1, 1, 0, 1), 192, 128, "dense_64x64_tma", 1},
        {"dense k1", 32000, 1, mkdesc(VC_MAP_SUBM, 1, 1, 0, 1), 128, 96, "dense_64x96_tma",
         1},
        {"strided 3x1x1", 6000, 1, mkdesc3(VC_MAP_STRIDED, k311, s211, p000, d111), 128, 128,
         "64x64x64_s4_wg", 1},
        {"downsample k2", 12000, 1, mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1), 32, 32,
         "64x32x32_s4_wg2", 1},
        {"strided k3", 36000, 1, mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1), 8, 32, "64x32x16_s4", 1},
        {"sparse subm k3", 40000, 1, mkdesc(VC_MAP_SUBM, 3, 1, 1, 1), 256, 256,
         "128x256x64_s3_wg", 0},
        {"subm k3 stem", 20000, 1, mkdesc(VC_MAP_SUBM, 3, 1, 1, 1), 3, 64, "64x64x32_s3_p4", 1},
        {"subm k3 stem", 40000, 3, mkdesc(VC_MAP_SUBM, 3, 1, 1, 1), 4, 32, "64x32x32_s3_p4", 1},
        {"strided k3", 36000, 1, mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1), 16, 32, "64x32x32_s3_p2",
         1},
        {"strided k3", 30000, 3, mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1), 32, 64, "64x64x64_s3_p2",
         1},
        {"subm k3", 110000, 3, mkdesc(VC_MAP_SUBM, 3, 1, 1, 1), 16, 16, "64x16x32_s3_p2", 1},
    };
    for (size_t r = 0; r < sizeof cases / sizeof cases[0]; r++) {
        const rule_case *k = &cases[r];
        cloud c = make_cloud(rng, k->points, 1, shape, k->style);
        int32_t *d_rows = to_device(c.rows, (size_t)c.n * 16);
        map_pair m = build_pair(&c, d_rows, &k->d, k->label);
        const int applies = m.ok && rule_applies(k, &m.gpu, hopper);
        CHECK_MSG(!m.ok || applies || (k->d.type == VC_MAP_STRIDED && m.gpu.volume == 3 && !hopper),
                  "%s: %lld outputs, %lld pairs: outside the rule this case was sized for",
                  k->label, (long long)m.gpu.n_out, (long long)m.gpu.n_pairs);
        for (int i = 0; m.ok && i < 2; i++) {
            char want[64];
            snprintf(want, sizeof want, "%s%s", i == 0 ? "f16_" : "bf16_", k->tile);
            rule_layer(k->label, &m, k->c_in, k->c_out, i == 0 ? VC_DTYPE_FP16 : VC_DTYPE_BF16,
                       want, applies ? 1 : -1, k->run, i == 0, rng);
        }
        free_pair(&m);
        cudaFree(d_rows);
        free(c.rows);
    }
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_conv_tiles");
    g_quick = getenv("VC_SANITIZE") != NULL;
    if (g_quick) printf("VC_SANITIZE: reduced run (the inverses only)\n");
    CUDA_OK(cudaStreamCreate(&g_stream));
    g_opt.force_order = 1; /* as test_gpu_conv: tile orders wherever the GEMM would take one */
    const int32_t big[3] = {41, 1600, 1408};
    if (!g_quick) mid_level_tiles(&rng, big);
    if (!g_quick) dense_wave_tiles(&rng, big);
    if (!g_quick) rule_tiles(&rng, big);
    inverse_wave_tiles(&rng, big);
    cudaStreamDestroy(g_stream);
    printf("test_gpu_conv_tiles: %d convolutions\n", g_cases);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_conv_tiles: built without CUDA, skipped\n");
    return 77;
}
#endif
