/* bench/bench_conv.c - benchmark of the GPU convolution layers (not a ctest).
 * Usage: bench_conv [--runs N] [--layers DIR] [--csv FILE] [--dump[-only] DIR] [--net NAME]
 *                   [--tune] [--tune-splits "1 2 4"] [scan[@size] ...]
 *
 * Scenes: a synthetic spinning 128-beam LiDAR sweep over a ground plane, walls and parked cars
 * (fixed seed, ~100k voxels at 0.05 x 0.05 x 0.1 m on the SECOND / KITTI grid 41x1600x1408;
 * three frames with different yaw and noise, rotated between runs), plus every scan given on
 * the command line (read with vc_cloud_read, voxelized on the host at the same voxel size, or at
 * `size` metres: "s" or "sx,sy,sz" after an @; one frame).
 * Layers: the suites in datasets/layers/ (format in datasets/layers/README.md; built-in
 * copies when the folder is absent): subm k3 C->C at 16..256, MinkUNet, CenterPoint
 * VoxelResBackBone8x, spconv's benchmark net. fp16 features and weights, bias + ReLU epilogue.
 * For each distinct layer and each algorithm (implicit GEMM, gather-GEMM-scatter per offset
 * and grouped): median time
 * of `runs` (default 25, at least 20) after 3 warm-up runs, CUDA events around the one call
 * (GGS's internal read-back of the pair counts included), L2 flushed (a 256 MB memset) before
 * every run and the 3 frames rotated; useful TFLOP/s = 2 * pairs * Cin * Cout / time; GB/s =
 * the fewest bytes (input features, output features, weights, out_in, all once) / time; the
 * floor = max(FLOPs / peak, bytes / bandwidth) at the H100 rates of docs/benchmarks.md
 * (Floors), the model voxconv bench uses (core/floor.h, one copy). The outputs of
 * frame 0 of both GGS variants are compared with the implicit GEMM's (relative Frobenius, the
 * larger difference is printed) as a sanity check.
 * Map builds are timed apart (vc_kmap_build_gpu_timed, median), with the tile order
 * (vc_kmap_tile_order_gpu) of each map whose layers had the implicit GEMM build one (as the
 * library's conv does, in the warm-up runs here: a frame pays for it once per map, so the map
 * column carries it; VC_BENCH_TILE_ORDER=0: no orders, an A/B of the schedule alone;
 * VC_BENCH_DENSE=-1: the new-output maps through the output hash table, an A/B of the dense
 * output path, vc_engine_options.kmap_dense). Each network is also run as a whole (layers back to
 * back on one stream, maps prebuilt, L2 flushed before the network) per algorithm and with the
 * best algorithm per layer. The summary tables come last.
 * --dump DIR writes each scene's frame-0 voxel coordinates (int32 [N, 4] b, z, y, x) as
 * DIR/sceneI.npy and one line per scene in DIR/scenes.tsv (file, grid z y x, name as in the CSV),
 * so that a peer engine can be timed on the same voxels (bench/peers/spconv_bench.py);
 * --dump-only DIR writes them and exits (no GPU needed: the scenes are made before the device is
 * touched). --net NAME runs only the networks whose name contains NAME (e.g. "sweep",
 * "CenterPoint"). --tune also times each conv layer's implicit GEMM with every fp16 GEMM
 * configuration and prints a "tune" line per layer: "name/S ms" for each tap split S of
 * --tune-splits (default "0": the planner's split for that configuration);
 * VC_BENCH_TUNE_CONFIGS="f16_64x32x32_s3 ..." keeps only the configurations it names.
 * VC_BENCH_IMPLICIT_ONLY=1 in the environment skips both GGS variants (their columns then repeat
 * the implicit GEMM's): for A/B runs of the implicit path, which take a third of the time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv.h"
#include "conv/conv_gpu.h"
#include "core/dtype.h"
#include "core/floor.h"
#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "gemm/gemm.h"
#include "hash/hash.h"
#include "scenes.h"
#include "src/cli/layers.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "bench_util.h"
#include "frame_maps.h"
#include "pool/pool.h"
#include "voxelize/voxelize.h"

#define NFRAMES 3
#define WARMUP 3
#define MAX_LAYERS 96
#define MAX_NETS 16
#define MAX_SCENES 8

static int g_runs = 25;
static cudaStream_t g_s;
/* the engine options of every map and convolution run here (--tune, VC_BENCH_TILE_ORDER and
 * VC_BENCH_DENSE set them) */
static vc_engine_options g_opt = VC_ENGINE_OPTIONS_INIT;
static FILE *g_csv;
static int g_tune;
static int g_impl_only; /* VC_BENCH_IMPLICIT_ONLY=1: time the implicit GEMM (and pools) only */
static int g_tune_splits[8] = {0}, g_n_tune_splits = 1; /* --tune-splits; 0 = the planner's */


/* ---- layer suites ------------------------------------------------------------------------ */

/* cli_layer_type's values, in its order (src/cli/layers.h) */
enum { L_SUBM, L_STRIDED, L_DOWN, L_INVERSE, L_TRANSPOSED, L_MAXPOOL, L_AVGPOOL };

typedef struct layer {
    char name[32];
    int type;
    int k[3], s[3], p[3];
    int64_t cin, cout;
} layer;

typedef struct net {
    char name[64];
    layer l[MAX_LAYERS];
    int n;
} net;

static const char *kBuiltinSweep =
    "subm16 subm 3 1 0 16 16\nsubm32 subm 3 1 0 32 32\nsubm64 subm 3 1 0 64 64\n"
    "subm128 subm 3 1 0 128 128\nsubm256 subm 3 1 0 256 256\n";
static const char *kBuiltinMink =
    "stem1 subm 3 1 0 4 32\nstem2 subm 3 1 0 32 32\ndown1 downsample 2 2 0 32 32\n"
    "s1b1c1 subm 3 1 0 32 32\ns1b1c2 subm 3 1 0 32 32\ns1b2c1 subm 3 1 0 32 32\n"
    "s1b2c2 subm 3 1 0 32 32\ndown2 downsample 2 2 0 32 32\ns2b1c1 subm 3 1 0 32 64\n"
    "s2b1c2 subm 3 1 0 64 64\ns2b1sc subm 1 1 0 32 64\ns2b2c1 subm 3 1 0 64 64\n"
    "s2b2c2 subm 3 1 0 64 64\ndown3 downsample 2 2 0 64 64\ns3b1c1 subm 3 1 0 64 128\n"
    "s3b1c2 subm 3 1 0 128 128\ns3b1sc subm 1 1 0 64 128\ns3b2c1 subm 3 1 0 128 128\n"
    "s3b2c2 subm 3 1 0 128 128\ndown4 downsample 2 2 0 128 128\ns4b1c1 subm 3 1 0 128 256\n"
    "s4b1c2 subm 3 1 0 256 256\ns4b1sc subm 1 1 0 128 256\ns4b2c1 subm 3 1 0 256 256\n"
    "s4b2c2 subm 3 1 0 256 256\nup1 inverse 2 2 0 256 256\nu1b1c1 subm 3 1 0 384 256\n"
    "u1b1c2 subm 3 1 0 256 256\nu1b1sc subm 1 1 0 384 256\nu1b2c1 subm 3 1 0 256 256\n"
    "u1b2c2 subm 3 1 0 256 256\nup2 inverse 2 2 0 256 128\nu2b1c1 subm 3 1 0 192 128\n"
    "u2b1c2 subm 3 1 0 128 128\nu2b1sc subm 1 1 0 192 128\nu2b2c1 subm 3 1 0 128 128\n"
    "u2b2c2 subm 3 1 0 128 128\nup3 inverse 2 2 0 128 96\nu3b1c1 subm 3 1 0 128 96\n"
    "u3b1c2 subm 3 1 0 96 96\nu3b1sc subm 1 1 0 128 96\nu3b2c1 subm 3 1 0 96 96\n"
    "u3b2c2 subm 3 1 0 96 96\nup4 inverse 2 2 0 96 96\nu4b1c1 subm 3 1 0 128 96\n"
    "u4b1c2 subm 3 1 0 96 96\nu4b1sc subm 1 1 0 128 96\nu4b2c1 subm 3 1 0 96 96\n"
    "u4b2c2 subm 3 1 0 96 96\n";
static const char *kBuiltinCenter =
    "conv_in subm 3 1 0 5 16\nc1b1c1 subm 3 1 0 16 16\nc1b1c2 subm 3 1 0 16 16\n"
    "c1b2c1 subm 3 1 0 16 16\nc1b2c2 subm 3 1 0 16 16\nconv2 strided 3 2 1 16 32\n"
    "c2b1c1 subm 3 1 0 32 32\nc2b1c2 subm 3 1 0 32 32\nc2b2c1 subm 3 1 0 32 32\n"
    "c2b2c2 subm 3 1 0 32 32\nconv3 strided 3 2 1 32 64\nc3b1c1 subm 3 1 0 64 64\n"
    "c3b1c2 subm 3 1 0 64 64\nc3b2c1 subm 3 1 0 64 64\nc3b2c2 subm 3 1 0 64 64\n"
    "conv4 strided 3 2 0,1,1 64 128\nc4b1c1 subm 3 1 0 128 128\nc4b1c2 subm 3 1 0 128 128\n"
    "c4b2c1 subm 3 1 0 128 128\nc4b2c2 subm 3 1 0 128 128\n"
    "conv_out strided 3,1,1 2,1,1 0 128 128\n";
static const char *kBuiltinSpconv =
    "c1 subm 3 1 0 3 64\nc2 subm 3 1 0 64 64\np1 maxpool 2 2 0 64 64\n"
    "c3 subm 3 1 0 64 96\nc4 subm 3 1 0 96 96\np2 maxpool 2 2 0 96 96\n"
    "c5 subm 3 1 0 96 128\nc6 subm 3 1 0 128 128\np3 maxpool 2 2 0 128 128\n"
    "c7 subm 3 1 0 128 160\nc8 subm 3 1 0 160 160\np4 maxpool 2 2 0 160 160\n"
    "c9 subm 3 1 0 160 192\nc10 subm 3 1 0 192 192\np5 maxpool 2 2 0 192 192\n"
    "c11 subm 3 1 0 192 224\nc12 subm 3 1 0 224 224\np6 maxpool 2 2 0 224 224\n"
    "c13 subm 3 1 0 224 256\nc14 subm 3 1 0 256 256\n";

/* The suite text through the parser of voxconv bench (src/cli/layers.c, one copy); returns 0
 * or -1 (with a message) on a malformed suite. Dilations other than 1 are not timed here. */
static int parse_net(const char *text, const char *name, net *out)
{
    cli_suite s;
    char err[512];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    if (cli_suite_parse(text, name, &s, err, sizeof err)) {
        fprintf(stderr, "bench_conv: %s\n", err);
        return -1;
    }
    if (s.n > MAX_LAYERS) {
        fprintf(stderr, "bench_conv: %s: %d layers (at most %d)\n", name, s.n, MAX_LAYERS);
        cli_suite_free(&s);
        return -1;
    }
    for (int i = 0; i < s.n; i++) {
        const cli_layer *c = &s.layers[i];
        layer *l = &out->l[i];
        snprintf(l->name, sizeof l->name, "%.31s", c->name);
        l->type = (int)c->type; /* the same order as L_SUBM .. L_AVGPOOL */
        for (int a = 0; a < 3; a++) {
            l->k[a] = c->kernel[a];
            l->s[a] = c->stride[a];
            l->p[a] = c->padding[a];
        }
        l->cin = c->cin;
        l->cout = c->cout;
    }
    out->n = s.n;
    cli_suite_free(&s);
    return 0;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    if (fread(t, 1, (size_t)n, f) != (size_t)n) n = 0;
    t[n] = 0;
    fclose(f);
    return t;
}

/* ---- scenes ------------------------------------------------------------------------------ */

typedef struct scene {
    char name[256];
    int32_t shape[3];
    int32_t *rows[NFRAMES];
    int64_t n[NFRAMES];
    int nframes;
} scene;

/* A scan argument "path[@size]" (synth/scenes.h: scene_scan_arg), voxelized; named by the
 * argument as given, so that a scan at two sizes is two scenes. */
static int load_scan(const char *arg, scene *sc)
{
    char path[256];
    float size[3];
    if (scene_scan_arg(arg, path, sizeof path, size) != 0) {
        fprintf(stderr, "bench_conv: %s: expected path[@size] (size s or sx,sy,sz, metres)\n",
                arg);
        return -1;
    }
    vc_cloud pc;
    memset(&pc, 0, sizeof pc);
    if (vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &pc) != VC_OK) return -1;
    vc_voxels vox;
    vc_err err = {{0}};
    vc_status st = scene_voxelize_padded(&pc, size, &vox, &err);
    vc_cloud_free(&pc);
    if (st != VC_OK || vox.n == 0) return -1;
    snprintf(sc->name, sizeof sc->name, "%s", arg);
    memcpy(sc->shape, vox.shape, sizeof sc->shape);
    sc->rows[0] = vox.coords;
    sc->n[0] = vox.n;
    sc->nframes = 1;
    vox.coords = NULL;
    vc_voxels_free(&vox);
    return 0;
}

/* Frame 0 of every scene as DIR/sceneI.npy, listed in DIR/scenes.tsv. */
static void dump_scenes(const char *dir, const scene *scenes, int ns)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/scenes.tsv", dir);
    FILE *f = fopen(path, "w");
    DIE_IF(!f, "bench_conv: cannot write %s", path);
    for (int i = 0; i < ns; i++) {
        vc_array a;
        memset(&a, 0, sizeof a);
        a.data = scenes[i].rows[0];
        a.dtype = VC_DTYPE_INT32;
        a.ndim = 2;
        a.shape[0] = scenes[i].n[0];
        a.shape[1] = 4;
        snprintf(path, sizeof path, "%s/scene%d.npy", dir, i);
        DIE_IF(vc_npy_write(NULL, path, &a) != VC_OK, "bench_conv: cannot write %s", path);
        fprintf(f, "scene%d.npy\t%d\t%d\t%d\t%s\n", i, (int)scenes[i].shape[0],
                (int)scenes[i].shape[1], (int)scenes[i].shape[2], scenes[i].name);
    }
    fclose(f);
}

/* ---- per-frame state: coordinate levels and maps (frame_state.h) -------------------------- */

/* Finds or builds the map of (level, type, k, s, p) (or the inverse of entry fwd); -1 when the
 * build fails (e.g. a kernel that no longer fits a coarse level). */
static int get_map(frame_state *fs, int lvl, int type, const int k[3], const int s[3],
                   const int p[3], int fwd)
{
    for (int i = 0; i < fs->nmaps; i++) {
        map_entry *e = &fs->maps[i];
        if (type == VC_MAP_INVERSE) {
            if (e->type == VC_MAP_INVERSE && e->fwd == fwd) return i;
        } else if (e->type == type && e->in_level == lvl && !memcmp(e->k, k, sizeof e->k) &&
                   !memcmp(e->s, s, sizeof e->s) && !memcmp(e->p, p, sizeof e->p)) {
            return i;
        }
    }
    DIE_IF(fs->nmaps >= MAX_MAPS || fs->nlv >= MAX_LEVELS, "too many maps or levels");
    map_entry *e = &fs->maps[fs->nmaps];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->fwd = fwd;
    memcpy(e->k, k, sizeof e->k);
    memcpy(e->s, s, sizeof e->s);
    memcpy(e->p, p, sizeof e->p);
    vc_err err = {{0}};
    if (type == VC_MAP_INVERSE) {
        const map_entry *f = &fs->maps[fwd];
        const level *li = &fs->lv[f->in_level];
        e->in_level = f->out_level;
        e->out_level = f->in_level;
        if (vc_kmap_inverse_gpu(&f->m, li->shape, 1, NULL, g_s, &e->m, &err) != VC_OK) {
            printf("inverse map: %s\n", err.msg);
            return -1;
        }
    } else {
        const level *l = &fs->lv[lvl];
        vc_map_desc d = desc_of(type, k, s, p);
        e->in_level = lvl;
        if (vc_kmap_build_gpu(l->coords, l->n, l->shape, 1, &d, &g_opt, g_s, &e->m, &err) !=
            VC_OK) {
            printf("map build: %s\n", err.msg);
            return -1;
        }
        if (type == VC_MAP_SUBM) {
            e->out_level = lvl;
        } else {
            level *o = &fs->lv[fs->nlv];
            o->coords = e->m.out_coords;
            o->n = e->m.n_out;
            memcpy(o->shape, e->m.out_shape, sizeof o->shape);
            e->out_level = fs->nlv++;
        }
    }
    return fs->nmaps++;
}

/* Resolves every layer of a net to a map index per frame (walking the level stack); returns 0,
 * or -1 when a map cannot be built. */
static int resolve_net(const net *nt, frame_state *fs, int *map_of)
{
    int cur = 0, stack[MAX_LAYERS], sp = 0;
    for (int i = 0; i < nt->n; i++) {
        const layer *l = &nt->l[i];
        /* pools use Minkowski semantics (ceil(in / 2) per axis): on a 41-high grid spconv's
           strided k2s2 pool would run out of z after five pools */
        int type = l->type == L_SUBM ? VC_MAP_SUBM
                   : l->type == L_STRIDED ? VC_MAP_STRIDED
                   : l->type == L_DOWN || l->type == L_MAXPOOL || l->type == L_AVGPOOL
                       ? VC_MAP_DOWNSAMPLE
                   : l->type == L_TRANSPOSED ? VC_MAP_TRANSPOSED : VC_MAP_INVERSE;
        int e;
        if (type == VC_MAP_INVERSE) {
            DIE_IF(sp == 0, "%s: layer %s inverts nothing", nt->name, l->name);
            e = get_map(fs, cur, type, l->k, l->s, l->p, stack[--sp]);
        } else {
            e = get_map(fs, cur, type, l->k, l->s, l->p, -1);
            if (e >= 0 && type != VC_MAP_SUBM && type != VC_MAP_TRANSPOSED) stack[sp++] = e;
        }
        if (e < 0) {
            printf("%s: layer %s cannot be built on this scene; network skipped\n", nt->name,
                   l->name);
            return -1;
        }
        map_of[i] = e;
        cur = fs->maps[e].out_level;
    }
    return 0;
}

/* ---- timing ------------------------------------------------------------------------------ */

typedef struct buffers {
    void *in[NFRAMES], *out[NFRAMES], *out2, *w;
    float *bias;
    int64_t in_elems, out_elems;
} buffers;

static vc_conv_args conv_args(const vc_kmap_data *m, const buffers *b, int f, const layer *l)
{
    vc_conv_args a;
    memset(&a, 0, sizeof a);
    a.map = m;
    a.in = b->in[f];
    a.in_dtype = VC_DTYPE_FP16;
    a.c_in = l->cin;
    a.out = b->out[f];
    a.out_dtype = VC_DTYPE_FP16;
    a.c_out = l->cout;
    a.weights = b->w;
    a.w_dtype = VC_DTYPE_FP16;
    a.bias = b->bias;
    a.act = VC_ACT_RELU;
    /* as the library's conv does (src/conv_op.c): the implicit GEMM may add a tile order to the map
     * (kmap/kmap.h), built in the warm-up runs, one for each frame's map */
    a.map_cache = (vc_kmap_data *)m;
    return a;
}

static int is_pool(const layer *l) { return l->type == L_MAXPOOL || l->type == L_AVGPOOL; }

static vc_status run_layer(const vc_kmap_data *m, const buffers *b, int f, const layer *l,
                           vc_algo algo, vc_err *err)
{
    if (is_pool(l))
        return vc_pool_gpu(m, l->type == L_MAXPOOL ? VC_POOL_MAX : VC_POOL_AVG, b->in[f],
                           VC_DTYPE_FP16, l->cin, b->out[f], NULL, g_s, err);
    vc_conv_args a = conv_args(m, b, f, l);
    return vc_conv_gpu(&a, algo, 0, &g_opt, g_s, err);
}

static float time_layer(frame_state *fs, int nf, int *const *map_of, int li,
                        const layer *l, const buffers *b, vc_algo algo)
{
    bench_timer tm;
    bench_timer_init(&tm, g_s);
    float *t = malloc(sizeof(float) * (size_t)g_runs);
    for (int r = -WARMUP; r < g_runs; r++) {
        int f = (r + WARMUP) % nf;
        const vc_kmap_data *m = &fs[f].maps[map_of[f][li]].m;
        bench_flush_l2(g_s);
        vc_err err = {{0}};
        bench_timer_start(&tm);
        vc_status st = run_layer(m, b, f, l, algo, &err);
        DIE_IF(st != VC_OK, "layer %s: %s", l->name, err.msg);
        bench_timer_stop(&tm, r >= 0 ? &t[r] : NULL);
    }
    float med = median(t, g_runs);
    free(t);
    bench_timer_free(&tm);
    return med;
}

/* Relative Frobenius difference of two fp16 device buffers. */
static double rel_diff(const void *a, const void *b, int64_t n)
{
    uint16_t *ha = malloc((size_t)n * 2 + 2), *hb = malloc((size_t)n * 2 + 2);
    CUDA_CHECK(cudaMemcpy(ha, a, (size_t)n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hb, b, (size_t)n * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = vc_f16_to_f32(ha[i]), y = vc_f16_to_f32(hb[i]);
        if (isnan(x) || isnan(y)) {
            num = INFINITY;
            break;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    free(ha);
    free(hb);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Whether name is one of the space-separated words of list. */
static int name_listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        if ((size_t)(e - p) == n && !strncmp(p, name, n)) return 1;
        p = e;
    }
    return 0;
}

/* --tune: times the layer's implicit GEMM with every fp16 GEMM configuration that fits, at each
 * tap split of --tune-splits, and prints one line per layer: each median and the fastest. */
static void tune_layer(frame_state *fs, int nf, int *const *map_of, int li, const layer *l,
                       const buffers *b, float auto_ms)
{
    const vc_gemm_config *cfg = NULL;
    const int ncfg = vc_gemm_configs(&cfg);
    const vc_kmap_data *m = &fs[0].maps[map_of[0][li]].m;
    float best = 1e30f;
    int best_i = -1, best_w = 1;
    printf("tune %s %lld->%lld auto %.4f:", l->name, (long long)l->cin, (long long)l->cout,
           auto_ms);
    const char *only = getenv("VC_BENCH_TUNE_CONFIGS"); /* names to keep, space-separated */
    for (int c = 0; c < ncfg; c++) {
        if (cfg[c].ab_dtype != VC_GEMM_F16) continue;
        if (only && !name_listed(only, cfg[c].name)) continue;
        g_opt.gemm_config = c;
        for (int si = 0; si < g_n_tune_splits; si++) {
            const int w = g_tune_splits[si];
            g_opt.tap_split = w;
            vc_err err = {{0}};
            vc_status st = run_layer(m, b, 0, l, VC_ALGO_IMPLICIT_GEMM, &err);
            if (st == VC_OK) {
                float ms = time_layer(fs, nf, map_of, li, l, b, VC_ALGO_IMPLICIT_GEMM);
                printf(" %s/%d %.4f", cfg[c].name, w, ms);
                if (ms < best) best = ms, best_i = c, best_w = w;
            }
            cudaGetLastError();
        }
    }
    g_opt.gemm_config = -1;
    g_opt.tap_split = 0;
    printf(" | best %s/%d %.4f\n", best_i >= 0 ? cfg[best_i].name : "-", best_w, best);
}

/* The algorithms timed per layer, in layer_result.ms order. */
static const vc_algo kAlgos[3] = {VC_ALGO_IMPLICIT_GEMM, VC_ALGO_GATHER_GEMM_SCATTER,
                                  VC_ALGO_GATHER_GEMM_SCATTER_GROUPED};
static const char *const kAlgoNames[3] = {"impl", "ggs", "grouped"};

static int algo_slot(vc_algo a)
{
    for (int i = 0; i < 3; i++)
        if (kAlgos[i] == a) return i;
    return 0;
}

typedef struct layer_result {
    float ms[3];        /* implicit, ggs, grouped ggs                                         */
    double diff;        /* the larger of implicit vs ggs and vs grouped ggs, frame 0          */
    int dup_of;         /* -1, or the earlier identical layer                                 */
    int64_t n_in, n_out, pairs;
    vc_algo plan;
} layer_result;

static int best_algo(const layer_result *r)
{
    int b = 0;
    for (int i = 1; i < 3; i++)
        if (r->ms[i] < r->ms[b]) b = i;
    return b;
}

/* Summary rows gathered over scenes and nets. */
typedef struct summary {
    char scene[64], net[64];
    int layers;
    float ms_impl, ms_ggs, ms_grp, ms_best, ms_auto, e2e[3], floor_ms, build_ms, fm_serial,
        fm_forked;
} summary;

static summary g_sum[MAX_SCENES * MAX_NETS];
static int g_nsum;

static void fill_random_f16(void *dev, int64_t n, uint64_t seed)
{
    uint16_t *h = malloc((size_t)n * 2 + 2);
    vc_rng r = {seed * 0x9E3779B97F4A7C15ull + 7};
    for (int64_t i = 0; i < n; i++) h[i] = vc_f32_to_f16(vc_rng_float(&r));
    CUDA_CHECK(cudaMemcpy(dev, h, (size_t)n * 2, cudaMemcpyHostToDevice));
    free(h);
}

/* The whole network, layers back to back on g_s (maps prebuilt, L2 flushed before each run),
 * median ms: e2e[0] implicit GEMM, e2e[1] ggs per offset, e2e[2] each layer's fastest (res). */
static void time_network(frame_state *fs, int nf, const net *nt, int *const *map_of,
                         const buffers *b, const layer_result *res, float e2e[3])
{
    bench_timer et;
    bench_timer_init(&et, g_s);
    float *t = malloc(sizeof(float) * (size_t)g_runs);
    for (int mode = 0; mode < 3; mode++) {
        if (g_impl_only && mode > 0) { /* the GGS columns repeat the implicit GEMM's */
            e2e[mode] = e2e[0];
            continue;
        }
        for (int r = -WARMUP; r < g_runs; r++) {
            int f = (r + WARMUP) % nf;
            bench_flush_l2(g_s);
            bench_timer_start(&et);
            for (int i = 0; i < nt->n; i++) {
                vc_algo algo = mode == 0 ? VC_ALGO_IMPLICIT_GEMM
                               : mode == 1 ? VC_ALGO_GATHER_GEMM_SCATTER
                                           : kAlgos[best_algo(&res[i])];
                vc_err err = {{0}};
                DIE_IF(run_layer(&fs[f].maps[map_of[f][i]].m, b, f, &nt->l[i], algo, &err) !=
                           VC_OK, "%s: %s", nt->l[i].name, err.msg);
            }
            bench_timer_stop(&et, r >= 0 ? &t[r] : NULL);
        }
        e2e[mode] = median(t, g_runs);
    }
    free(t);
    bench_timer_free(&et);
}

/* A row of the summary (g_sum): sums of the layer medians (implicit, ggs, grouped, best, auto,
 * floor), map builds and the whole-network times. */
static void add_summary(const scene *sc, const net *nt, const double sums[6], double build,
                        const float e2e[3], const frame_maps_result *fm)
{
    if (g_nsum >= MAX_SCENES * MAX_NETS) return;
    summary *s = &g_sum[g_nsum++];
    snprintf(s->scene, sizeof s->scene, "%.63s", sc->name);
    snprintf(s->net, sizeof s->net, "%s", nt->name);
    s->layers = nt->n;
    s->ms_impl = (float)sums[0];
    s->ms_ggs = (float)sums[1];
    s->ms_grp = (float)sums[2];
    s->ms_best = (float)sums[3];
    s->ms_auto = (float)sums[4];
    s->floor_ms = (float)sums[5];
    s->build_ms = (float)build;
    s->fm_serial = (float)fm->serial_ms;
    s->fm_forked = (float)fm->forked_ms;
    memcpy(s->e2e, e2e, sizeof s->e2e);
}

/* Times one network on one scene; map_of[f][i] is layer i's map in frame f. */
static void bench_net(const scene *sc, frame_state *fs, const net *nt, int *const *map_of,
                      const buffers *b)
{
    const int nf = sc->nframes;
    layer_result *res = calloc((size_t)nt->n, sizeof *res);
    printf("\n### %s on %s\n\n", nt->name, sc->name);
    printf("| layer | type | k | s | voxels in -> out | pairs | Cin->Cout | implicit ms | ggs ms |"
           " grouped ms | impl TFLOP/s | impl GB/s | floor ms | impl/floor | ggs/impl |"
           " grouped/impl | impl vs ggs | auto |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    double sum_impl = 0, sum_ggs = 0, sum_grp = 0, sum_best = 0, sum_auto = 0, sum_floor = 0;
    for (int i = 0; i < nt->n; i++) {
        const layer *l = &nt->l[i];
        layer_result *r = &res[i];
        int dup = -1;
        for (int j = 0; j < i && dup < 0; j++)
            if (map_of[0][j] == map_of[0][i] && nt->l[j].cin == l->cin &&
                nt->l[j].cout == l->cout && nt->l[j].type == l->type)
                dup = j;
        const vc_kmap_data *m0 = &fs[0].maps[map_of[0][i]].m;
        r->n_in = m0->n_in;
        r->n_out = m0->n_out;
        r->pairs = m0->n_pairs;
        /* the floor model of voxconv bench and docs/benchmarks.md (core/floor.h), fp16 */
        const vc_layer_floor fl = vc_floor_layer(r->n_in, r->n_out, r->pairs, m0->volume, l->cin,
                                                 l->cout, 2.0, is_pool(l),
                                                 VC_FLOOR_H100_FLOPS_16BIT, VC_FLOOR_H100_BYTES);
        const double flops = fl.flops, bytes = fl.bytes, floor_ms = fl.ms;
        if (dup >= 0) {
            *r = res[dup];
        } else {
            DIE_IF(l->cin * (int64_t)(r->n_in + 1) > b->in_elems ||
                       l->cout * (int64_t)(r->n_out + 1) > b->out_elems,
                   "buffers too small for layer %s", l->name);
            r->plan = is_pool(l) ? VC_ALGO_IMPLICIT_GEMM
                                 : vc_conv_gpu_plan(m0, l->cin, l->cout, VC_DTYPE_FP16, &g_opt);
            r->ms[0] = time_layer(fs, nf, map_of, i, l, b, VC_ALGO_IMPLICIT_GEMM);
            r->ms[1] = is_pool(l) || g_impl_only ? r->ms[0]
                                  : time_layer(fs, nf, map_of, i, l, b,
                                               VC_ALGO_GATHER_GEMM_SCATTER);
            r->ms[2] = is_pool(l) || g_impl_only ? r->ms[0]
                                  : time_layer(fs, nf, map_of, i, l, b,
                                               VC_ALGO_GATHER_GEMM_SCATTER_GROUPED);
            if (g_tune && !is_pool(l)) tune_layer(fs, nf, map_of, i, l, b, r->ms[0]);
            r->diff = 0;
            if (!is_pool(l) && !g_impl_only) {
                /* frame 0: implicit into out[0], each GGS into out2 */
                vc_err err = {{0}};
                DIE_IF(run_layer(m0, b, 0, l, VC_ALGO_IMPLICIT_GEMM, &err) != VC_OK, "%s",
                       err.msg);
                vc_conv_args a = conv_args(m0, b, 0, l);
                a.out = b->out2;
                const vc_algo other[2] = {VC_ALGO_GATHER_GEMM_SCATTER,
                                          VC_ALGO_GATHER_GEMM_SCATTER_GROUPED};
                for (int q = 0; q < 2; q++) {
                    DIE_IF(vc_conv_gpu(&a, other[q], 0, &g_opt, g_s, &err) != VC_OK, "%s", err.msg);
                    CUDA_CHECK(cudaStreamSynchronize(g_s));
                    const double d = rel_diff(b->out[0], b->out2, r->n_out * l->cout);
                    if (d > r->diff || d != d) r->diff = d;
                }
            }
        }
        r->dup_of = dup;
        const int bi = best_algo(r);
        sum_impl += r->ms[0];
        sum_ggs += r->ms[1];
        sum_grp += r->ms[2];
        sum_best += r->ms[bi];
        sum_auto += r->ms[algo_slot(r->plan)];
        sum_floor += floor_ms;
        char ks[32], ss[32];
        snprintf(ks, sizeof ks, "%d,%d,%d", l->k[0], l->k[1], l->k[2]);
        snprintf(ss, sizeof ss, "%d,%d,%d", l->s[0], l->s[1], l->s[2]);
        printf("| %s%s | %s | %s | %s | %lld -> %lld | %lld | %lld->%lld | %.4f | %.4f | %.4f |"
               " %.1f | %.0f | %.4f | %.1f | %.2f | %.2f | %.1e%s | %s |\n",
               l->name, r->dup_of >= 0 ? " (=)" : "", CLI_LAYER_TYPES[l->type], ks, ss,
               (long long)r->n_in, (long long)r->n_out, (long long)r->pairs,
               (long long)l->cin, (long long)l->cout, r->ms[0], r->ms[1], r->ms[2],
               flops / (r->ms[0] * 1e-3) * 1e-12, bytes / (r->ms[0] * 1e-3) * 1e-9, floor_ms,
               r->ms[0] / floor_ms, r->ms[1] / r->ms[0], r->ms[2] / r->ms[0], r->diff,
               r->diff > 1e-2 ? " MISMATCH" : "", is_pool(l) ? "pool" : kAlgoNames[algo_slot(r->plan)]);
        if (g_csv)
            fprintf(g_csv, "\"%s\",\"%s\",%s,%s,\"%s\",\"%s\",%lld,%lld,%lld,%lld,%lld,"
                    "%.5f,%.5f,%.5f,%.5f,%.3g,%s\n",
                    sc->name, nt->name, l->name, CLI_LAYER_TYPES[l->type], ks, ss,
                    (long long)r->n_in, (long long)r->n_out, (long long)r->pairs,
                    (long long)l->cin, (long long)l->cout, r->ms[0], r->ms[1], r->ms[2],
                    floor_ms, r->diff, is_pool(l) ? "pool" : kAlgoNames[algo_slot(r->plan)]);
    }

    /* whole network, layers back to back: implicit, ggs (per offset), best per layer */
    float e2e[3];
    time_network(fs, nf, nt, map_of, b, res, e2e);

    /* map builds of this network (frame 0): every distinct map it uses, median of runs */
    double build = 0;
    {
        int seen[MAX_MAPS] = {0};
        bench_timer bt;
        bench_timer_init(&bt, g_s);
        for (int i = 0; i < nt->n; i++) {
            int e = map_of[0][i];
            if (seen[e]) continue;
            seen[e] = 1;
            const map_entry *me = &fs[0].maps[e];
            float *tb = malloc(sizeof(float) * (size_t)g_runs);
            for (int r = -1; r < g_runs; r++) {
                vc_kmap_data m;
                vc_kmap_gpu_timing tm;
                vc_err err = {{0}};
                vc_status st;
                if (me->type == VC_MAP_INVERSE) {
                    const map_entry *fw = &fs[0].maps[me->fwd];
                    bench_timer_start(&bt);
                    st = vc_kmap_inverse_gpu(&fw->m, fs[0].lv[fw->in_level].shape, 1, NULL, g_s, &m,
                                             &err);
                    tm.total_ms = bench_timer_stop(&bt, NULL);
                } else {
                    const level *lv = &fs[0].lv[me->in_level];
                    vc_map_desc d = desc_of(me->type, me->k, me->s, me->p);
                    st = vc_kmap_build_gpu_timed(lv->coords, lv->n, lv->shape, 1, &d, &g_opt,
                                                 g_s, &m, &tm, &err);
                }
                DIE_IF(st != VC_OK, "map build: %s", err.msg);
                if (me->m.tile_order) { /* the layers had one built: so would a frame's */
                    bench_timer_start(&bt);
                    DIE_IF(vc_kmap_tile_order_gpu(&m, g_s, &err) != VC_OK, "tile order: %s",
                           err.msg);
                    tm.total_ms += bench_timer_stop(&bt, NULL);
                }
                vc_kmap_data_free_gpu(&m);
                if (r >= 0) tb[r] = tm.total_ms;
            }
            build += median(tb, g_runs);
            free(tb);
        }
        bench_timer_free(&bt);
    }
    printf("\nwhole network, layers back to back (maps prebuilt): implicit %.3f ms, ggs %.3f "
           "ms, best per layer %.3f ms; sum of layer medians: implicit %.3f, ggs %.3f, grouped "
           "ggs %.3f, best %.3f, auto %.3f, floor %.3f ms; map builds %.3f ms\n", e2e[0], e2e[1],
           e2e[2], sum_impl, sum_ggs, sum_grp, sum_best, sum_auto, sum_floor, build);
    frame_maps_result fm = {0, 0, 0};
    frame_maps_of(&fs[0], map_of[0], nt->n, g_runs, &g_opt, g_s, &fm);
    printf("frame maps, one CUDA graph of bounded builds: serial %.3f ms, forked %.3f ms%s\n",
           fm.serial_ms, fm.forked_ms, fm.mismatches ? " MISMATCH" : "");
    const double sums[6] = {sum_impl, sum_ggs, sum_grp, sum_best, sum_auto, sum_floor};
    add_summary(sc, nt, sums, build, e2e, &fm);
    free(res);
}

/* ---- main ------------------------------------------------------------------------------- */

/* The command line (usage at the top of the file); sets g_runs, g_tune and the tune splits. */
typedef struct cmdline {
    const char *layers_dir, *csv, *dump, *only_net;
    int dump_only;
    const char *files[MAX_SCENES];
    int nfiles;
} cmdline;

static void parse_args(int argc, char **argv, cmdline *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            g_runs = atoi(argv[++i]);
            if (g_runs < 20) g_runs = 20;
        } else if (!strcmp(argv[i], "--layers") && i + 1 < argc) {
            o->layers_dir = argv[++i];
        } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            o->csv = argv[++i];
        } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
            o->dump = argv[++i];
        } else if (!strcmp(argv[i], "--tune")) {
            g_tune = 1;
        } else if (!strcmp(argv[i], "--tune-splits") && i + 1 < argc) {
            char *e = argv[++i];
            g_n_tune_splits = 0;
            while (*e && g_n_tune_splits < 8) {
                long v = strtol(e, &e, 10);
                g_tune_splits[g_n_tune_splits++] = (int)(v < 0 ? 0 : v);
                while (*e == ' ' || *e == ',') e++;
            }
            if (g_n_tune_splits == 0) g_tune_splits[g_n_tune_splits++] = 0;
        } else if (!strcmp(argv[i], "--net") && i + 1 < argc) {
            o->only_net = argv[++i];
        } else if (!strcmp(argv[i], "--dump-only") && i + 1 < argc) {
            o->dump = argv[++i];
            o->dump_only = 1;
        } else if (o->nfiles < MAX_SCENES - 1) {
            o->files[o->nfiles++] = argv[i];
        }
    }
}

/* The synthetic LiDAR (three frames) and the scans given, in scenes[]; returns their count. No
 * GPU needed (--dump-only runs on any machine). */
static int make_scenes(scene *scenes, const char *const *files, int nfiles)
{
    int ns = 0;
    {
        scene *s = &scenes[ns++];
        snprintf(s->name, sizeof s->name, "synthetic 128-beam LiDAR");
        s->shape[0] = 41;
        s->shape[1] = 1600;
        s->shape[2] = 1408;
        s->nframes = NFRAMES;
        vc_rng rng = {0x5eed5eed12345ull};
        for (int f = 0; f < NFRAMES; f++)
            scene_lidar_boxes(&rng, f, &s->rows[f], &s->n[f], s->shape);
    }
    for (int i = 0; i < nfiles; i++) {
        if (load_scan(files[i], &scenes[ns]) != 0) {
            fprintf(stderr, "bench_conv: cannot read %s, skipped\n", files[i]);
            continue;
        }
        ns++;
    }
    return ns;
}

/* The four layer suites, from layers_dir or datasets/layers (as seen from the repository root
 * or a build folder), else the built-in copies. */
static void load_suites(net nets[4], const char *layers_dir)
{
    const char *fnames[4] = {"subm_sweep.txt", "centerpoint.txt", "minkunet.txt",
                             "spconv_bench.txt"};
    const char *netnames[4] = {"subm k3 sweep", "CenterPoint VoxelResBackBone8x",
                               "MinkUNet (SparseResUNet42)", "spconv benchmark net"};
    const char *builtin[4] = {kBuiltinSweep, kBuiltinCenter, kBuiltinMink, kBuiltinSpconv};
    const char *dirs[] = {layers_dir ? layers_dir : "", "datasets/layers", "../datasets/layers",
                          "../../datasets/layers"};
    for (int i = 0; i < 4; i++) {
        char *text = NULL;
        char path[1024];
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && !text; d++) {
            if (!dirs[d][0]) continue;
            snprintf(path, sizeof path, "%s/%s", dirs[d], fnames[i]);
            text = read_text(path);
        }
        int rc = parse_net(text ? text : builtin[i], netnames[i], &nets[i]);
        DIE_IF(rc != 0, "bad layer suite %s", fnames[i]);
        printf("suite %s: %d layers from %s\n", netnames[i], nets[i].n,
               text ? path : "the built-in copy");
        free(text);
    }
}

/* Feature buffers of in_max / out_max fp16 elements per frame (inputs random), the weights of
 * the largest layer (27 x 384 x 384) and a bias. */
static void alloc_buffers(buffers *b, int nframes, int64_t in_max, int64_t out_max)
{
    memset(b, 0, sizeof *b);
    b->in_elems = in_max;
    b->out_elems = out_max;
    for (int f = 0; f < nframes; f++) {
        CUDA_CHECK(cudaMalloc(&b->in[f], (size_t)b->in_elems * 2));
        CUDA_CHECK(cudaMalloc(&b->out[f], (size_t)b->out_elems * 2));
        fill_random_f16(b->in[f], b->in_elems, 11 + (uint64_t)f);
    }
    CUDA_CHECK(cudaMalloc(&b->out2, (size_t)b->out_elems * 2));
    CUDA_CHECK(cudaMalloc(&b->w, (size_t)27 * 384 * 384 * 2));
    /* weights ~ 1/sqrt(27 * C) keep fp16 outputs O(1) */
    {
        int64_t nw = 27 * 384 * 384;
        uint16_t *h = malloc((size_t)nw * 2);
        vc_rng r = {0xbadc0ffeeull};
        for (int64_t i = 0; i < nw; i++) h[i] = vc_f32_to_f16(vc_rng_float(&r) * 0.02f);
        CUDA_CHECK(cudaMemcpy(b->w, h, (size_t)nw * 2, cudaMemcpyHostToDevice));
        free(h);
        float hb[384];
        for (int i = 0; i < 384; i++) hb[i] = 0.01f * (float)(i % 7);
        CUDA_CHECK(cudaMalloc((void **)&b->bias, sizeof hb));
        CUDA_CHECK(cudaMemcpy(b->bias, hb, sizeof hb, cudaMemcpyHostToDevice));
    }
}

/* The summary table of every (scene, network) run, gathered in g_sum by bench_net. */
static void print_summary(void)
{
    printf("\n## Summary (fp16, ms; layer sums are medians of single layers with L2 flushed; "
           "'net' runs the layers back to back)\n\n");
    printf("| scene | network | layers | sum impl | sum ggs | sum grouped | sum best | sum auto |"
           " sum floor | net impl | net ggs | net best | map builds | frame maps serial | frame maps"
           " forked |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < g_nsum; i++) {
        const summary *s = &g_sum[i];
        printf("| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | "
               "%.3f | %.3f | %.3f |\n", s->scene, s->net, s->layers, s->ms_impl, s->ms_ggs,
               s->ms_grp, s->ms_best, s->ms_auto, s->floor_ms, s->e2e[0], s->e2e[1], s->e2e[2],
               s->build_ms, s->fm_serial, s->fm_forked);
    }
}

int main(int argc, char **argv)
{
    g_opt.cache = vc_engine_cache_new(); /* the read-back block, as a context keeps it */
    g_impl_only = getenv("VC_BENCH_IMPLICIT_ONLY") && atoi(getenv("VC_BENCH_IMPLICIT_ONLY"));
    if (getenv("VC_BENCH_TILE_ORDER") && atoi(getenv("VC_BENCH_TILE_ORDER")) == 0)
        g_opt.tile_order = 0; /* no tile orders built or used */
    vc_bench_map_switches(&g_opt); /* VC_BENCH_DENSE: the new-output maps' output path */
    cmdline o;
    parse_args(argc, argv, &o);
    if (o.csv) {
        g_csv = fopen(o.csv, "w");
        if (g_csv)
            fprintf(g_csv, "scene,net,layer,type,kernel,stride,n_in,n_out,pairs,cin,cout,"
                    "implicit_ms,ggs_ms,grouped_ms,floor_ms,impl_vs_ggs,plan\n");
    }
    /* scenes (no GPU needed: --dump-only runs on any machine) */
    static scene scenes[MAX_SCENES];
    const int ns = make_scenes(scenes, o.files, o.nfiles);
    if (o.dump) dump_scenes(o.dump, scenes, ns);
    if (o.dump_only) return 0;
    if (!bench_have_device("bench_conv")) return 77;
    CUDA_CHECK(cudaStreamCreate(&g_s));
    bench_flush_l2_init();
    printf("# bench_conv\n\n");
    bench_print_device();
    printf("; fp16, bias + ReLU; median of %d runs after %d warm-up, CUDA events, L2 flushed "
           "before each run, %d frames rotated\n", g_runs, WARMUP, NFRAMES);

    static net nets[4];
    load_suites(nets, o.layers_dir);

    for (int si = 0; si < ns; si++) {
        scene *sc = &scenes[si];
        static frame_state fs[NFRAMES];
        for (int f = 0; f < sc->nframes; f++) {
            memset(&fs[f], 0, sizeof fs[f]);
            int32_t *d = NULL;
            CUDA_CHECK(cudaMalloc((void **)&d, (size_t)(sc->n[f] + 1) * 16));
            CUDA_CHECK(cudaMemcpy(d, sc->rows[f], (size_t)sc->n[f] * 16,
                                  cudaMemcpyHostToDevice));
            fs[f].lv[0].coords = d;
            fs[f].lv[0].n = sc->n[f];
            memcpy(fs[f].lv[0].shape, sc->shape, sizeof sc->shape);
            fs[f].nlv = 1;
        }
        /* every map of every network first, then buffers of the largest layer */
        int *map_of[4][NFRAMES], ok[4] = {1, 1, 1, 1};
        int64_t in_max = 1, out_max = 1;
        for (int i = 0; i < 4; i++)
            for (int f = 0; f < sc->nframes; f++) {
                map_of[i][f] = malloc(sizeof(int) * (size_t)nets[i].n);
                if (!ok[i] || resolve_net(&nets[i], &fs[f], map_of[i][f]) != 0) {
                    ok[i] = 0;
                    continue;
                }
                for (int j = 0; j < nets[i].n; j++) {
                    const vc_kmap_data *m = &fs[f].maps[map_of[i][f][j]].m;
                    if ((m->n_in + 1) * nets[i].l[j].cin > in_max)
                        in_max = (m->n_in + 1) * nets[i].l[j].cin;
                    if ((m->n_out + 1) * nets[i].l[j].cout > out_max)
                        out_max = (m->n_out + 1) * nets[i].l[j].cout;
                }
            }
        {
            vc_map_desc d = VC_MAP_DESC_INIT;
            vc_kmap_data m;
            vc_err err = {{0}};
            DIE_IF(vc_kmap_build_gpu(fs[0].lv[0].coords, sc->n[0], sc->shape, 1, &d, &g_opt,
                                     g_s, &m, &err) != VC_OK, "%s", err.msg);
            printf("\n## Scene: %s, %lld voxels (frame 0), grid %dx%dx%d, subm k3: %.2f "
                   "neighbours per voxel (centre included)\n", sc->name, (long long)sc->n[0],
                   (int)sc->shape[0], (int)sc->shape[1], (int)sc->shape[2],
                   (double)m.n_pairs / (double)(sc->n[0] > 0 ? sc->n[0] : 1));
            vc_kmap_data_free_gpu(&m);
        }
        buffers b;
        alloc_buffers(&b, sc->nframes, in_max, out_max);
        for (int i = 0; i < 4; i++)
            if (ok[i] && (!o.only_net || strstr(nets[i].name, o.only_net)))
                bench_net(sc, fs, &nets[i], map_of[i], &b);
        for (int i = 0; i < 4; i++)
            for (int f = 0; f < sc->nframes; f++) free(map_of[i][f]);
        for (int f = 0; f < sc->nframes; f++) {
            for (int e = 0; e < fs[f].nmaps; e++) vc_kmap_data_free_gpu(&fs[f].maps[e].m);
            cudaFree((void *)fs[f].lv[0].coords);
            cudaFree(b.in[f]);
            cudaFree(b.out[f]);
            free(sc->rows[f]);
        }
        cudaFree(b.out2);
        cudaFree(b.w);
        cudaFree(b.bias);
    }

    print_summary();
    if (g_csv) fclose(g_csv);
    bench_flush_l2_free();
    cudaStreamDestroy(g_s);
    return 0;
}

#else
int main(void)
{
    printf("bench_conv: built without CUDA\n");
    return 77;
}
#endif
