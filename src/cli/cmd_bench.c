/*
 * cmd_bench.c - voxconv bench: times convolution and pooling layers (--layer specs or a suite
 * file, layers.c) on a scene (a .vxt, a point file voxelized, or a synthetic scene), the map
 * builds apart, each layer against its floor, and the layers back to back. The reports are
 * bench_report.c's; docs/bench.md documents the method and the fields.
 *
 * Timing goes through vc_timer (CUDA events on the context's stream, the host clock on CPU):
 * this file sees only voxconv.h. Every layer gets fresh random inputs on its level (not the
 * previous layer's output: a suite's concatenations have no producer here), weights and a bias
 * in the compute dtype and the context's memory, bias + ReLU, a prebuilt map; a timed run is
 * one vc_conv_forward (or vc_pool_forward) call, its output allocation included, as a caller
 * would see it.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "suite_levels.h"

static const char *const BENCH_DTYPES[] = {"fp32", "tf32", "fp16", "bf16", NULL};
static const char *const BENCH_ALGOS[] = {"auto", "implicit", "ggs", "grouped", NULL};
static const vc_algo ALGO_VALUES[] = {VC_ALGO_AUTO, VC_ALGO_IMPLICIT_GEMM,
                                      VC_ALGO_GATHER_GEMM_SCATTER,
                                      VC_ALGO_GATHER_GEMM_SCATTER_GROUPED};
static const char *const GRIDS[] = {"kitti", "nuscenes", NULL};
#define MAX_LAYER_SPECS 256

static const char BENCH_HELP[] =
    "usage: voxconv bench SCENE|--synth KIND[:N] (--layer SPEC ... | --suite FILE |\n"
    "                     --model FILE.json) [options]\n"
    "       voxconv bench --plot OUT.svg --compare A.json B.json\n"
    "\n"
    "Times sparse convolution and pooling layers on a scene: per layer the voxels in and out,\n"
    "pairs, median / p10 / p90 ms of --runs timed calls after --warmup, TFLOP/s, GB/s, the\n"
    "floor (docs/benchmarks.md) and the ratio to it, and the algorithm the planner chose; the\n"
    "map builds timed apart; the whole suite as a sum and back to back. See docs/bench.md.\n"
    "\n"
    "SCENE is a .vxt tensor or a point file (.bin .pcd .ply .npy) voxelized at --voxel-size\n"
    "over its bounding box widened by 0.5 m (as bench/bench_conv.c does with scans).\n"
    "  --synth KIND[:N]        a synthetic scene instead: lidar, indoor or uniform, N voxels\n"
    "                          to aim at (voxconv synth; --seed, --grid as there)\n"
    "  --layer \"TYPE K S P CIN COUT [D]\"   one layer (repeat for several, run in order);\n"
    "                          TYPE subm|strided|downsample|inverse|transposed|maxpool|avgpool;\n"
    "                          K, S, P, D one number or z,y,x\n"
    "  --suite FILE            the layers of a suite file (datasets/layers/*.txt)\n"
    "  --model FILE.json       a whole network (models/*.json, docs/networks.md) instead: the\n"
    "                          frame timed, then each step profiled; a point scene or --synth\n"
    "                          is voxelized by the model; --weights W.safetensors or\n"
    "                          --random-weights SEED (default 1)\n"
    "  --bounds N0[,N1,...]|auto[:MARGIN]   with --model: then the frame as a CUDA graph\n"
    "                          replay too (voxconv run --help), beside the per-call time\n"
    "  --dilation D            the dilation of --layer specs that give none (default 1)\n"
    "  --dtype fp32|tf32|fp16|bf16   features and weights (default fp16 on CUDA, fp32 on CPU;\n"
    "                          tf32: fp32 data on tensor cores)\n"
    "  --algo auto|implicit|ggs|grouped   the convolution algorithm (default auto)\n"
    "  --runs N                timed runs per layer (default 25)\n"
    "  --warmup N              untimed runs before them (default 3)\n"
    "  --flush-l2              evict the caches before every timed run (256 MB written)\n"
    "  --peak TFLOPS,TBPS      the rates of the floor (default: the H100's for fp16/bf16;\n"
    "                          none elsewhere)\n"
    "  --csv FILE, --json FILE one row per layer / the whole result ('-': stdout)\n"
    "  --plot FILE.svg         a chart of the per-layer times; with --compare A.json B.json,\n"
    "                          two results side by side\n"
    "  --voxel-size X,Y,Z      voxel size of a point-file scene (default 0.05,0.05,0.1)\n"
    CLI_READ_OPTIONS_HELP
    "  --tune-cache FILE       the planner's tuned choices (voxconv tune --out)\n"
    "  --ab-cache FILE         each conv layer as the planner's own choice (A) against the\n"
    "                          choice with tune cache FILE (B), interleaved in one process:\n"
    "                          --ab-rounds rounds, each the median of --runs calls per side,\n"
    "                          ABBA...; reports both medians, the median per-round ratio A/B\n"
    "                          (the gain) and its spread; the layer's time is B's\n"
    "  --ab-rounds N           A/B rounds per layer (default 7; only with --ab-cache)\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

typedef struct bench_opts {
    const char *suite, *dilation, *synth, *seed, *grid, *dtype, *algo, *backend, *runs;
    const char *warmup, *csv, *json, *plot, *peak, *vsize, *model, *weights, *net_seed;
    const char *ab_cache, *ab_rounds;
    const char *bounds_text;
    cli_bounds bounds;
    int flush, compare;
    const char *tune_cache;
    const char *layers[MAX_LAYER_SPECS];
    int n_layers;
    cli_read_opts read;
} bench_opts;

/* The parsed settings. */
typedef struct bench_cfg {
    vc_dtype dtype;
    int tf32, dtype_set, runs, warmup, ab_rounds;
    vc_algo algo;
    double peak[2];
    int have_peak;
    vc_synth_desc synth;
    int use_synth;
    float vsize[3];
    uint64_t net_seed; /* --random-weights (default 1) */
} bench_cfg;

/* Everything a run holds on the context. */
typedef struct bench_state {
    vc_context *ctx;
    const cli_suite *s;
    const bench_cfg *c;
    cli_suite_levels lv;         /* every layer's map, every level's coordinates           */
    vc_tensor **in, **w, **bias; /* per layer (NULL for repeats: they use dup_of's)        */
    vc_timer *timer;
    double t_start;              /* progress: the host clock at the start                  */
    int untuned;                 /* the calls ignore the tune cache (--ab-cache's A side)  */
} bench_state;

/* Moves every "--layer SPEC" / "--layer=SPEC" before a "--" into o->layers; the other
 * arguments stay, in order, in rest (argc of them in *nrest). */
static int take_layers(const char *cmd, int argc, char **argv, bench_opts *o, char **rest,
                       int *nrest)
{
    int n = 0, only_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i > 0 && !only_pos && !strcmp(a, "--")) only_pos = 1;
        const char *v = NULL;
        if (i > 0 && !only_pos && !strcmp(a, "--layer")) {
            if (i + 1 >= argc) return cli_usage_error(cmd, "--layer needs a value");
            v = argv[++i];
        } else if (i > 0 && !only_pos && !strncmp(a, "--layer=", 8)) {
            v = a + 8;
        }
        if (!v) {
            rest[n++] = argv[i];
            continue;
        }
        if (o->n_layers == MAX_LAYER_SPECS)
            return cli_usage_error(cmd, "--layer: at most %d layers (use a --suite file)",
                                   MAX_LAYER_SPECS);
        o->layers[o->n_layers++] = v;
    }
    *nrest = n;
    return CLI_OK;
}

static int parse_counts(const char *cmd, const bench_opts *o, bench_cfg *c)
{
    int64_t v = 0;
    c->runs = 25;
    c->warmup = 3;
    if (o->runs) {
        if (cli_parse_i64(cmd, "--runs", o->runs, 1, 100000, &v)) return CLI_USAGE;
        c->runs = (int)v;
    }
    if (o->warmup) {
        if (cli_parse_i64(cmd, "--warmup", o->warmup, 0, 100000, &v)) return CLI_USAGE;
        c->warmup = (int)v;
    }
    c->ab_rounds = o->ab_cache ? 7 : 0;
    if (o->ab_rounds) {
        if (!o->ab_cache) return cli_usage_error(cmd, "--ab-rounds: only with --ab-cache");
        if (cli_parse_i64(cmd, "--ab-rounds", o->ab_rounds, 1, 1000, &v)) return CLI_USAGE;
        c->ab_rounds = (int)v;
    }
    if (o->peak) {
        float pk[2];
        if (cli_parse_floats(cmd, "--peak", o->peak, 2, pk)) return CLI_USAGE;
        if (!(pk[0] >= 0) || !(pk[1] > 0))
            return cli_usage_error(cmd, "--peak: expected TFLOPS >= 0 and TBPS > 0, got '%s'",
                                   o->peak);
        c->peak[0] = pk[0] * 1e12;
        c->peak[1] = pk[1] * 1e12;
        c->have_peak = 1;
    }
    return CLI_OK;
}

/* The options other than the layers, into c. */
static int parse_cfg(const char *cmd, const bench_opts *o, bench_cfg *c)
{
    int v = 0;
    memset(c, 0, sizeof *c);
    c->dtype = VC_DTYPE_FP32;
    if (o->dtype) {
        if (cli_parse_choice(cmd, "--dtype", o->dtype, BENCH_DTYPES, &v)) return CLI_USAGE;
        c->dtype = v == 0 || v == 1 ? VC_DTYPE_FP32 : v == 2 ? VC_DTYPE_FP16 : VC_DTYPE_BF16;
        c->tf32 = v == 1;
        c->dtype_set = 1;
    }
    c->algo = VC_ALGO_AUTO;
    if (o->algo) {
        if (cli_parse_choice(cmd, "--algo", o->algo, BENCH_ALGOS, &v)) return CLI_USAGE;
        c->algo = ALGO_VALUES[v];
    }
    if (parse_counts(cmd, o, c)) return CLI_USAGE;
    c->synth = (vc_synth_desc)VC_SYNTH_DESC_INIT;
    if (o->synth) {
        c->use_synth = 1;
        if (cli_parse_synth(cmd, "--synth", o->synth, &c->synth)) return CLI_USAGE;
    } else if (o->seed || o->grid) {
        return cli_usage_error(cmd, "%s: only with --synth", o->seed ? "--seed" : "--grid");
    }
    if (o->seed && cli_parse_u64(cmd, "--seed", o->seed, &c->synth.seed)) return CLI_USAGE;
    if (o->grid) {
        if (cli_parse_choice(cmd, "--grid", o->grid, GRIDS, &v)) return CLI_USAGE;
        c->synth.grid = (vc_synth_grid)v;
    }
    c->vsize[0] = c->vsize[1] = 0.05f;
    c->vsize[2] = 0.1f;
    if (o->vsize && cli_parse_floats(cmd, "--voxel-size", o->vsize, 3, c->vsize))
        return CLI_USAGE;
    for (int a = 0; a < 3; a++)
        if (!(c->vsize[a] > 0))
            return cli_usage_error(cmd, "--voxel-size: sizes must be > 0, got '%s'", o->vsize);
    c->net_seed = 1;
    if (o->net_seed && cli_parse_u64(cmd, "--random-weights", o->net_seed, &c->net_seed))
        return CLI_USAGE;
    if (o->model && c->tf32) return cli_usage_error(cmd, "--dtype tf32: not with --model");
    return CLI_OK;
}

/* The layers of the --layer specs (parsed and resolved here: no file is read). */
static int parse_specs(const char *cmd, const bench_opts *o, cli_suite *s)
{
    int32_t dil[3] = {1, 1, 1};
    char err[512];
    if (o->dilation &&
        cli_parse_int3(cmd, "--dilation", o->dilation, 1, CLI_LAYER_MAX_STRIDE,
                       "D or DZ,DY,DX", dil))
        return CLI_USAGE;
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "layers");
    for (int i = 0; i < o->n_layers; i++) {
        cli_layer l;
        if (cli_layer_parse(o->layers[i], 0, dil, &l, err, sizeof err) ||
            cli_suite_add(s, &l, err, sizeof err)) {
            cli_suite_free(s);
            return cli_usage_error(cmd, "--layer '%s': %s", o->layers[i], err);
        }
    }
    if (cli_suite_resolve(s, err, sizeof err)) {
        cli_suite_free(s);
        return cli_usage_error(cmd, "--layer: %s", err);
    }
    return CLI_OK;
}


/* ---- the scene --------------------------------------------------------------------------- */

/* A point file voxelized at c->vsize over its finite points' bounding box widened by 0.5 m. */
static int voxelize_file(const char *cmd, vc_context *ctx, const char *path, const bench_cfg *c,
                         const cli_read_opts *r, vc_tensor **t)
{
    vc_cloud cl;
    memset(&cl, 0, sizeof cl);
    int rc = cli_read_cloud(cmd, ctx, path, 0, r, &cl);
    if (rc) return rc;
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    for (int a = 0; a < 3; a++) {
        d.voxel_size[a] = c->vsize[a];
        d.range[a] = INFINITY;
        d.range[a + 3] = -INFINITY;
    }
    for (int64_t i = 0; i < cl.count; i++) {
        const float *p = cl.data + i * cl.dim;
        if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) continue;
        for (int a = 0; a < 3; a++) {
            d.range[a] = fminf(d.range[a], p[a]);
            d.range[a + 3] = fmaxf(d.range[a + 3], p[a]);
        }
    }
    if (!(d.range[0] <= d.range[3])) {
        vc_cloud_free(&cl);
        return cli_error(cmd, "'%s' holds no finite point", path);
    }
    for (int a = 0; a < 3; a++) {
        d.range[a] -= 0.5f;
        d.range[a + 3] += 0.5f;
    }
    vc_points pts = {cl.data, cl.count, cl.dim, NULL, VC_MEMORY_HOST};
    vc_status st = vc_voxelize(ctx, &d, &pts, t, NULL);
    vc_cloud_free(&cl);
    return st == VC_OK ? CLI_OK : cli_vc_error(cmd, ctx, st, "voxelization failed");
}

/* The scene's coordinate set (a reference), described in run->scene. */
static int load_scene(const char *cmd, vc_context *ctx, const char *path, const bench_cfg *c,
                      const cli_read_opts *r, vc_coords **out, bench_run *run)
{
    vc_tensor *t = NULL;
    int rc = CLI_OK;
    size_t n = path ? strlen(path) : 0;
    if (c->use_synth) {
        vc_status st = vc_synth_voxels(ctx, &c->synth, &t);
        if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot make the scene");
        snprintf(run->scene, sizeof run->scene, "synth %s%s seed %llu",
                 CLI_SYNTH_KINDS[c->synth.kind],
                 c->synth.kind == VC_SYNTH_INDOOR ? ""
                 : c->synth.grid == VC_SYNTH_GRID_NUSCENES ? " nuscenes" : " kitti",
                 (unsigned long long)c->synth.seed);
    } else if (n > 4 && !strcmp(path + n - 4, ".vxt")) {
        if ((rc = cli_load_tensor(cmd, ctx, path, &t))) return rc;
        snprintf(run->scene, sizeof run->scene, "%s", path);
    } else {
        if ((rc = voxelize_file(cmd, ctx, path, c, r, &t))) return rc;
        snprintf(run->scene, sizeof run->scene, "%s at %g,%g,%g m", path, c->vsize[0],
                 c->vsize[1], c->vsize[2]);
    }
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    vc_coords_retain(ti.coords);
    *out = ti.coords;
    run->voxels = ci.count;
    memcpy(run->shape, ci.spatial_shape, sizeof run->shape);
    vc_tensor_destroy(t);
    return CLI_OK;
}

/* ---- maps -------------------------------------------------------------------------------- */

/* A layer's map description (INVERSE: over `inverse_of`). */
static vc_map_desc layer_map_desc(const cli_layer *l, const vc_kmap *inverse_of)
{
    vc_map_desc d;
    cli_layer_map_desc(l, &d);
    d.inverse_of = inverse_of;
    return d;
}

/* "layer NAME (TYPE K S P CIN COUT)" for error lines. */
static void layer_label(const cli_layer *l, char *buf, size_t len)
{
    char spec[128];
    cli_layer_format(l, spec, sizeof spec);
    snprintf(buf, len, "layer %s (%s)", l->name, spec);
}

/* Every layer's map and the levels (suite_levels.c; the context caches maps: repeats share
 * one), the distinct maps and the repeated layers into run. */
static int build_maps(const char *cmd, bench_state *st, vc_coords *scene, bench_run *run)
{
    const cli_suite *s = st->s;
    int rc = cli_suite_levels_build(cmd, st->ctx, s, scene, &st->lv);
    for (int i = 0; rc == CLI_OK && i < s->n; i++) {
        const cli_layer *l = &s->layers[i];
        vc_kmap_info mi;
        vc_kmap_get_info(st->lv.maps[i], &mi);
        int m = 0;
        while (m < run->n_maps && st->lv.maps[run->maps[m].first_layer] != st->lv.maps[i]) m++;
        if (m == run->n_maps) {
            bench_map *bm = &run->maps[run->n_maps++];
            bm->type = mi.type;
            memcpy(bm->kernel, mi.kernel, sizeof bm->kernel);
            memcpy(bm->stride, mi.stride, sizeof bm->stride);
            memcpy(bm->padding, mi.padding, sizeof bm->padding);
            memcpy(bm->dilation, mi.dilation, sizeof bm->dilation);
            bm->n_in = mi.in_count;
            bm->n_out = mi.out_count;
            bm->pairs = mi.pair_count;
            bm->first_layer = i;
        }
        bench_layer *bl = &run->layers[i];
        bl->map = m;
        bl->n_in = mi.in_count;
        bl->n_out = mi.out_count;
        bl->pairs = mi.pair_count;
        bl->dup_of = -1;
        for (int j = 0; j < i && bl->dup_of < 0; j++)
            if (run->layers[j].map == m && s->layers[j].type == l->type &&
                s->layers[j].cin == l->cin && s->layers[j].cout == l->cout)
                bl->dup_of = j;
    }
    return rc;
}

/* ---- timing ------------------------------------------------------------------------------ */

/* One call of layer i (a repeat runs on its original's operands); the output is destroyed. */
static vc_status run_layer(bench_state *st, int i, const bench_run *run)
{
    const cli_layer *l = &st->s->layers[i];
    const int o = run->layers[i].dup_of >= 0 ? run->layers[i].dup_of : i;
    vc_tensor *out = NULL;
    vc_status r;
    if (cli_layer_is_pool(l)) {
        vc_pool_desc p = VC_POOL_DESC_INIT;
        p.kmap = st->lv.maps[i];
        p.mode = l->type == CLI_LAYER_MAXPOOL ? VC_POOL_MAX : VC_POOL_AVG;
        r = vc_pool_forward(st->ctx, &p, st->in[o], &out);
    } else {
        vc_tensor_info w, b;
        vc_tensor_get_info(st->w[o], &w);
        vc_tensor_get_info(st->bias[o], &b);
        vc_conv_desc d = VC_CONV_DESC_INIT;
        d.kmap = st->lv.maps[i];
        d.in_channels = l->cin;
        d.out_channels = l->cout;
        d.weights = w.data;
        d.weight_dtype = w.dtype;
        d.weight_memory = w.memory;
        d.bias = b.data;
        d.activation = VC_ACT_RELU;
        d.algo = st->c->algo;
        d.allow_tf32 = st->c->tf32;
        d.untuned = st->untuned;
        r = vc_conv_forward(st->ctx, &d, st->in[o], &out);
    }
    vc_tensor_destroy(out);
    return r;
}

/* Times `fn` (warm-up runs, then runs, each after a cache flush with --flush-l2). */
typedef vc_status (*bench_call)(bench_state *st, int i, const bench_run *run);

static vc_status time_calls_w(bench_state *st, int i, const bench_run *run, bench_call fn,
                              int warmup, bench_stats *out)
{
    double *v = malloc(sizeof(double) * (size_t)st->c->runs);
    if (!v) return VC_ERR_OUT_OF_MEMORY;
    vc_status r = VC_OK;
    for (int k = -warmup; k < st->c->runs && r == VC_OK; k++) {
        double ms = 0;
        if (run->flush) r = vc_timer_flush_cache(st->timer);
        if (r == VC_OK) r = vc_timer_start(st->timer);
        if (r == VC_OK) r = fn(st, i, run);
        if (r == VC_OK) r = vc_timer_stop(st->timer, &ms);
        if (k >= 0) v[k] = ms;
    }
    if (r == VC_OK) *out = bench_stats_of(v, st->c->runs);
    free(v);
    return r;
}

static vc_status time_calls(bench_state *st, int i, const bench_run *run, bench_call fn,
                            bench_stats *out)
{
    return time_calls_w(st, i, run, fn, st->c->warmup, out);
}

/* --ab-cache: layer i as the planner's own choice (A: untuned) and the cache's (B), in
 * rounds ABBA... (a drift weighs on both alike), each side the median of --runs calls after
 * one untimed; per round the ratio A / B. bl->t becomes B's statistics over the rounds'
 * medians, bl->ab_a A's. */
static vc_status time_ab(bench_state *st, int i, const bench_run *run, bench_layer *bl)
{
    const int n = run->ab_rounds;
    double *v = malloc(sizeof(double) * (size_t)(4 * n));
    if (!v) return VC_ERR_OUT_OF_MEMORY;
    double *a = v, *b = v + n, *ratio = v + 2 * n, *dev = v + 3 * n;
    bench_stats s;
    vc_status r = VC_OK;
    for (int w = 0; w < 2 && r == VC_OK; w++) { /* --warmup calls of each side first */
        st->untuned = w == 0;
        r = time_calls_w(st, i, run, run_layer, st->c->warmup, &s);
    }
    for (int k = 0; k < n && r == VC_OK; k++) {
        for (int side = 0; side < 2 && r == VC_OK; side++) {
            const int cached = (side == 1) != (k % 2 == 1);
            st->untuned = !cached;
            r = time_calls_w(st, i, run, run_layer, 1, &s);
            (cached ? b : a)[k] = s.median;
        }
        ratio[k] = b[k] > 0 ? a[k] / b[k] : 0.0;
    }
    st->untuned = 0;
    if (r == VC_OK) {
        bl->ab = 1;
        bl->gain = bench_stats_of(ratio, n).median;
        for (int k = 0; k < n; k++) dev[k] = fabs(ratio[k] - bl->gain);
        bl->spread = bl->gain > 0 ? bench_stats_of(dev, n).median / bl->gain : 0.0;
        bl->ab_a = bench_stats_of(a, n);
        bl->t = bench_stats_of(b, n);
    }
    free(v);
    return r;
}

/* One build of layer i's map on a fresh copy of its input level (the context caches maps per
 * coordinate set: the level itself would return the cached map), *ms its time alone; an
 * inverse's forward map is built on the copy first, untimed. */
static vc_status build_once(bench_state *st, int i, double *ms)
{
    const cli_layer *l = &st->s->layers[i];
    const cli_layer *src = l->forward >= 0 ? &st->s->layers[l->forward] : l;
    vc_coords_info ci;
    vc_coords_get_info(st->lv.levels[src->in_level], &ci);
    vc_coords *copy = NULL;
    vc_kmap *fwd = NULL, *m = NULL;
    vc_status r = vc_coords_create(st->ctx, ci.data, ci.count, ci.memory, ci.spatial_shape,
                                   ci.batch_size, &copy);
    vc_coords *in = copy;
    if (r == VC_OK && l->forward >= 0) {
        vc_map_desc fd = layer_map_desc(src, NULL);
        vc_kmap_info fi;
        r = vc_kmap_build(st->ctx, copy, &fd, &fwd);
        if (r == VC_OK) r = vc_kmap_get_info(fwd, &fi);
        if (r == VC_OK) in = fi.out_coords;
    }
    vc_map_desc d = layer_map_desc(l, fwd);
    if (r == VC_OK) r = vc_timer_start(st->timer);
    if (r == VC_OK) r = vc_kmap_build(st->ctx, in, &d, &m);
    if (r == VC_OK) r = vc_timer_stop(st->timer, ms);
    vc_kmap_destroy(m);
    vc_kmap_destroy(fwd);
    vc_coords_destroy(copy);
    return r;
}

/* Every distinct map's build: warm-up, then runs (no cache flush: each build starts from
 * coordinates just copied, as a frame's would arrive). */
static int time_maps(const char *cmd, bench_state *st, bench_run *run)
{
    double *v = malloc(sizeof(double) * (size_t)st->c->runs);
    if (!v) return cli_error(cmd, "out of memory");
    int rc = CLI_OK;
    for (int m = 0; m < run->n_maps && rc == CLI_OK; m++) {
        const int i = run->maps[m].first_layer;
        vc_status r = VC_OK;
        for (int k = -st->c->warmup; k < st->c->runs && r == VC_OK; k++) {
            double ms = 0;
            r = build_once(st, i, &ms);
            if (k >= 0) v[k] = ms;
        }
        if (r == VC_OK) {
            run->maps[m].t = bench_stats_of(v, st->c->runs);
            run->sum_maps_ms += run->maps[m].t.median;
        } else {
            char what[256];
            layer_label(&st->s->layers[i], what, sizeof what);
            rc = cli_vc_error(cmd, st->ctx, r, what);
        }
    }
    free(v);
    return rc;
}

/* ---- operands ---------------------------------------------------------------------------- */

/* splitmix64: the operands' values (their values do not matter to the timings, only that they
 * are not all zero and are the same from run to run). */
static float next_value(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* A tensor of `channels` random values (times scale) per row of `coords`, in dtype. */
static vc_status random_tensor(vc_context *ctx, vc_coords *coords, int64_t channels,
                               vc_dtype dtype, float scale, uint64_t seed, vc_tensor **out)
{
    vc_coords_info ci;
    vc_coords_get_info(coords, &ci);
    size_t n = (size_t)ci.count * (size_t)channels;
    float *h = malloc(n ? n * sizeof(float) : 1);
    if (!h) return VC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) h[i] = scale * next_value(&seed);
    vc_tensor *t = NULL;
    vc_status r = vc_tensor_create(ctx, coords, channels, VC_DTYPE_FP32, h, VC_MEMORY_HOST, &t);
    free(h);
    if (r == VC_OK && dtype != VC_DTYPE_FP32) {
        vc_tensor *c = NULL;
        r = vc_tensor_cast(ctx, t, dtype, &c);
        vc_tensor_destroy(t);
        t = c;
    }
    if (r == VC_OK) *out = t;
    return r;
}

/* A dense [rows, cols] array in the context's memory, held by a tensor (the API's way to put
 * caller data there and convert it to a dtype): rows become coordinates (0, 0, r / 65536,
 * r % 65536). */
static vc_status device_array(vc_context *ctx, int64_t rows, int64_t cols, vc_dtype dtype,
                              float scale, uint64_t seed, vc_tensor **out)
{
    int32_t *c = malloc((size_t)rows * 16);
    if (!c) return VC_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < rows; r++) {
        c[4 * r] = c[4 * r + 1] = 0;
        c[4 * r + 2] = (int32_t)(r / 65536);
        c[4 * r + 3] = (int32_t)(r % 65536);
    }
    const int32_t shape[3] = {1, (int32_t)(rows / 65536 + 1), 65536};
    vc_coords *cs = NULL;
    vc_status st = vc_coords_create(ctx, c, rows, VC_MEMORY_HOST, shape, 1, &cs);
    free(c);
    if (st == VC_OK) st = random_tensor(ctx, cs, cols, dtype, scale, seed, out);
    vc_coords_destroy(cs);
    return st;
}

/* Inputs, weights ([C_out * K rows, C_in], scaled by 1 / sqrt(K C_in) to keep 16-bit outputs
 * O(1)) and an fp32 bias for every layer that is not a repeat. */
static int make_operands(const char *cmd, bench_state *st, const bench_run *run)
{
    for (int i = 0; i < st->s->n; i++) {
        const cli_layer *l = &st->s->layers[i];
        if (run->layers[i].dup_of >= 0) continue;
        const int64_t K = (int64_t)l->kernel[0] * l->kernel[1] * l->kernel[2];
        vc_status r = random_tensor(st->ctx, st->lv.levels[l->in_level], l->cin, st->c->dtype,
                                    1.0f, 11 + (uint64_t)i, &st->in[i]);
        if (r == VC_OK && !cli_layer_is_pool(l))
            r = device_array(st->ctx, l->cout * K, l->cin, st->c->dtype,
                             (float)(1.0 / sqrt((double)K * (double)l->cin)), 1000 + (uint64_t)i,
                             &st->w[i]);
        if (r == VC_OK && !cli_layer_is_pool(l))
            r = device_array(st->ctx, l->cout, 1, VC_DTYPE_FP32, 0.01f, 2000 + (uint64_t)i,
                             &st->bias[i]);
        if (r != VC_OK) {
            char what[256];
            layer_label(l, what, sizeof what);
            return cli_vc_error(cmd, st->ctx, r, what);
        }
    }
    return CLI_OK;
}

/* ---- the layers -------------------------------------------------------------------------- */

/* The plan and floor of layer i. */
static vc_status describe_layer(bench_state *st, int i, bench_layer *bl)
{
    const cli_layer *l = &st->s->layers[i];
    const int pool = cli_layer_is_pool(l);
    vc_status r = vc_layer_floor_get(st->ctx, st->lv.maps[i], l->cin, l->cout, st->c->dtype,
                                     st->c->tf32, pool, &bl->floor);
    if (r == VC_OK && st->c->have_peak)
        r = vc_layer_floor_rates(&bl->floor, st->c->peak[0], st->c->peak[1]);
    memset(&bl->plan, 0, sizeof bl->plan);
    if (r != VC_OK || pool) {
        snprintf(bl->plan.config, sizeof bl->plan.config, "pool");
        return r;
    }
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.in_channels = l->cin;
    d.out_channels = l->cout;
    d.allow_tf32 = st->c->tf32;
    r = vc_conv_plan(st->ctx, &d, st->lv.maps[i], st->c->dtype, &bl->plan);
    d.untuned = 1;
    if (r == VC_OK) r = vc_conv_plan(st->ctx, &d, st->lv.maps[i], st->c->dtype, &bl->plan_a);
    if (r == VC_OK && st->c->algo != VC_ALGO_AUTO) { /* forced */
        vc_backend b = VC_BACKEND_CPU;
        vc_context_backend(st->ctx, &b);
        if (b == VC_BACKEND_CUDA && st->c->algo != bl->plan.algo) bl->plan.config[0] = 0;
        if (b == VC_BACKEND_CUDA && st->c->algo != bl->plan_a.algo) bl->plan_a.config[0] = 0;
        bl->plan.algo = bl->plan_a.algo = st->c->algo;
    }
    return r;
}

static void progress(bench_state *st, const char *what, int i, int n, const char *name,
                     double ms)
{
    if (cli_now_ms() - st->t_start < 2000.0) return;
    fprintf(stderr, "voxconv bench: %s %d/%d %s: %.4f ms\n", what, i + 1, n, name, ms);
}

static int time_layers(const char *cmd, bench_state *st, bench_run *run)
{
    for (int i = 0; i < st->s->n; i++) {
        const cli_layer *l = &st->s->layers[i];
        bench_layer *bl = &run->layers[i];
        vc_status r = describe_layer(st, i, bl);
        const int ab = run->ab_rounds > 0 && !cli_layer_is_pool(l);
        if (r == VC_OK && bl->dup_of < 0 && ab) r = time_ab(st, i, run, bl);
        else if (r == VC_OK && bl->dup_of < 0) r = time_calls(st, i, run, run_layer, &bl->t);
        if (r != VC_OK) {
            char what[256];
            layer_label(l, what, sizeof what);
            return cli_vc_error(cmd, st->ctx, r, what);
        }
        if (bl->dup_of >= 0) bl->t = run->layers[bl->dup_of].t;
        run->sum_ms += bl->t.median;
        run->sum_floor_ms += bl->floor.ms;
        if (!(bl->floor.ms > 0)) run->floor_known = 0;
        progress(st, "layer", i, st->s->n, l->name, bl->t.median);
    }
    return CLI_OK;
}

/* Every layer in order, one call each: the suite back to back, maps prebuilt. */
static vc_status run_network(bench_state *st, int unused, const bench_run *run)
{
    (void)unused;
    vc_status r = VC_OK;
    for (int i = 0; i < st->s->n && r == VC_OK; i++) r = run_layer(st, i, run);
    return r;
}

/* ---- the command ------------------------------------------------------------------------- */

static void state_free(bench_state *st)
{
    for (int i = 0; st->s && i < st->s->n; i++) {
        if (st->in) vc_tensor_destroy(st->in[i]);
        if (st->w) vc_tensor_destroy(st->w[i]);
        if (st->bias) vc_tensor_destroy(st->bias[i]);
    }
    cli_suite_levels_free(&st->lv);
    vc_timer_destroy(st->timer);
    free(st->in);
    free(st->w);
    free(st->bias);
}

/* Maps, map builds, operands, layers and the whole suite, into run. */
static int bench_all(const char *cmd, bench_state *st, vc_coords *scene, bench_run *run)
{
    int rc = build_maps(cmd, st, scene, run);
    if (rc == CLI_OK) rc = time_maps(cmd, st, run);
    if (rc == CLI_OK) rc = make_operands(cmd, st, run);
    if (rc == CLI_OK) rc = time_layers(cmd, st, run);
    if (rc == CLI_OK) {
        vc_status r = time_calls(st, 0, run, run_network, &run->network);
        if (r != VC_OK) rc = cli_vc_error(cmd, st->ctx, r, "the layers back to back");
    }
    return rc;
}

/* The run on an open context: the scene, the suite (from the specs or the file), the timings,
 * the reports. */
/* The settings of a run (the dtype's default is the backend's: fp16 on CUDA, fp32 on CPU). */
static void run_settings(vc_context *ctx, const bench_opts *o, bench_cfg *c, bench_run *run)
{
    memset(run, 0, sizeof *run);
    vc_backend b = VC_BACKEND_CPU;
    vc_context_backend(ctx, &b);
    if (!c->dtype_set && b == VC_BACKEND_CUDA) c->dtype = VC_DTYPE_FP16;
    vc_context_device_name(ctx, run->device, sizeof run->device);
    run->backend = b == VC_BACKEND_CUDA ? "cuda" : "cpu";
    run->dtype = c->tf32 ? "tf32" : cli_dtype_name(c->dtype);
    run->algo = o->algo ? o->algo : "auto";
    run->runs = c->runs;
    run->warmup = c->warmup;
    run->flush = o->flush;
    run->ab_rounds = c->ab_rounds;
    run->ab_cache = o->ab_cache;
}

/* --model: a whole network on the scene (bench_net.c). */
static int bench_model_on(const char *cmd, vc_context *ctx, const bench_opts *o,
                          const char *scene, bench_cfg *c)
{
    bench_run run;
    run_settings(ctx, o, c, &run);
    run.model = 1;
    const bench_model_opts m = {o->model, o->weights, scene,
                                c->use_synth ? &c->synth : NULL, &o->read, c->net_seed,
                                c->dtype, c->algo, o->csv, o->json, o->plot,
                                o->bounds.set ? &o->bounds : NULL};
    return bench_model(cmd, ctx, &m, &run);
}

static int bench_on(const char *cmd, vc_context *ctx, const bench_opts *o, const char *scene,
                    bench_cfg *c, cli_suite *suite)
{
    char err[512];
    if (o->suite && cli_suite_read(o->suite, suite, err, sizeof err))
        return cli_error(cmd, "--suite: %s", err);
    bench_run run;
    run_settings(ctx, o, c, &run);
    bench_state st;
    memset(&st, 0, sizeof st);
    run.suite = suite;
    run.floor_known = 1;
    st.ctx = ctx;
    st.s = suite;
    st.c = c;
    st.t_start = cli_now_ms();
    size_t n = (size_t)suite->n;
    run.layers = calloc(n, sizeof *run.layers);
    run.maps = calloc(n, sizeof *run.maps);
    st.in = calloc(n, sizeof *st.in);
    st.w = calloc(n, sizeof *st.w);
    st.bias = calloc(n, sizeof *st.bias);
    int rc = CLI_OK;
    if (!run.layers || !run.maps || !st.in || !st.w || !st.bias)
        rc = cli_error(cmd, "out of memory");
    vc_status r = rc ? VC_OK : vc_timer_create(ctx, &st.timer);
    if (r != VC_OK) rc = cli_vc_error(cmd, ctx, r, "cannot create a timer");
    vc_coords *coords = NULL;
    if (rc == CLI_OK) rc = load_scene(cmd, ctx, scene, c, &o->read, &coords, &run);
    if (rc == CLI_OK) rc = bench_all(cmd, &st, coords, &run);
    vc_coords_destroy(coords);
    state_free(&st);
    if (rc == CLI_OK) rc = bench_report_all(cmd, ctx, &run, o->csv, o->json, o->plot);
    free(run.layers);
    free(run.maps);
    return rc;
}

/* What the command line must hold besides the option values (no file is read yet). */
static int check_args(const char *cmd, const bench_opts *o, int npos)
{
    if (o->csv && o->json && !strcmp(o->csv, "-") && !strcmp(o->json, "-"))
        return cli_usage_error(cmd, "--csv and --json cannot both go to stdout");
    if (o->plot && cli_check_extension(cmd, "--plot", o->plot, ".svg")) return CLI_USAGE;
    if (o->plot && !strcmp(o->plot, "-")) return cli_usage_error(cmd, "--plot needs a file");
    if (o->compare) {
        if (npos != 2 || !o->plot)
            return cli_usage_error(cmd, "--compare: expected --plot OUT.svg and two result "
                                   "files A.json B.json");
        if (o->n_layers || o->suite || o->synth || o->csv || o->json || o->ab_cache)
            return cli_usage_error(cmd, "--compare draws two results: give no layers, scene "
                                   "or other output");
        return CLI_OK;
    }
    if (o->ab_cache && (o->model || o->tune_cache))
        return cli_usage_error(cmd, "--ab-cache: not with %s (it loads the cache itself and "
                               "times suite layers)", o->model ? "--model" : "--tune-cache");
    if ((o->weights || o->net_seed) && !o->model)
        return cli_usage_error(cmd, "%s: only with --model",
                               o->weights ? "--weights" : "--random-weights");
    if (o->model && (o->n_layers || o->suite))
        return cli_usage_error(cmd, "give --model, --layer specs or --suite, one of them");
    if (o->model && o->weights && o->net_seed)
        return cli_usage_error(cmd, "give --weights or --random-weights, not both");
    if (o->n_layers && o->suite)
        return cli_usage_error(cmd, "give --layer specs or --suite, not both");
    if (!o->model && !o->n_layers && !o->suite)
        return cli_usage_error(cmd, "no layers: give --layer \"TYPE K S P CIN COUT\" or --suite "
                               "FILE (see voxconv bench --help)");
    if (o->synth && npos != 0)
        return cli_usage_error(cmd, "give a SCENE file or --synth, not both");
    if (!o->synth && npos != 1)
        return cli_usage_error(cmd, "expected one SCENE (a .vxt or point file) or --synth KIND");
    return CLI_OK;
}

int cmd_bench(int argc, char **argv)
{
    const char *cmd = "bench";
    bench_opts o;
    memset(&o, 0, sizeof o);
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!rest) return cli_error(cmd, "out of memory");
    int nrest = 0, done = 0, npos = 0;
    const char *pos[2] = {NULL, NULL}, *backend = NULL;
    cli_opt opts[] = {{"--suite", &o.suite, NULL},     {"--dilation", &o.dilation, NULL},
                      {"--synth", &o.synth, NULL},     {"--seed", &o.seed, NULL},
                      {"--grid", &o.grid, NULL},       {"--dtype", &o.dtype, NULL},
                      {"--algo", &o.algo, NULL},       {"--backend", &backend, NULL},
                      {"--runs", &o.runs, NULL},       {"--warmup", &o.warmup, NULL},
                      {"--csv", &o.csv, NULL},         {"--json", &o.json, NULL},
                      {"--plot", &o.plot, NULL},       {"--peak", &o.peak, NULL},
                      {"--voxel-size", &o.vsize, NULL}, {"--flush-l2", NULL, &o.flush},
                      {"--compare", NULL, &o.compare}, {"--tune-cache", &o.tune_cache, NULL},
                      {"--model", &o.model, NULL},     {"--weights", &o.weights, NULL},
                      {"--random-weights", &o.net_seed, NULL},
                      {"--ab-cache", &o.ab_cache, NULL}, {"--ab-rounds", &o.ab_rounds, NULL},
                      {"--bounds", &o.bounds_text, NULL},
                      CLI_READ_OPTIONS(o.read)};
    int rc = take_layers(cmd, argc, argv, &o, rest, &nrest);
    if (rc == CLI_OK)
        rc = cli_parse_command(cmd, nrest, rest, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               2, &npos, BENCH_HELP, &done);
    bench_cfg c;
    cli_suite suite;
    memset(&suite, 0, sizeof suite);
    if (rc == CLI_OK && !done) rc = check_args(cmd, &o, npos);
    if (rc == CLI_OK && !done && o.bounds_text) {
        if (!o.model) rc = cli_usage_error(cmd, "--bounds: only with --model");
        else if (cli_parse_bounds(cmd, o.bounds_text, &o.bounds)) rc = CLI_USAGE;
    }
    if (rc == CLI_OK && !done && !o.compare) rc = parse_cfg(cmd, &o, &c);
    if (rc == CLI_OK && !done && !o.compare && o.n_layers) rc = parse_specs(cmd, &o, &suite);
    if (rc == CLI_OK && !done && !o.compare) rc = cli_parse_read_opts(cmd, &o.read);
    vc_context *ctx = NULL;
    if (rc == CLI_OK && !done)
        rc = cli_open_context_tuned(cmd, backend, o.ab_cache ? o.ab_cache : o.tune_cache, &ctx);
    if (rc == CLI_OK && !done) {
        if (o.compare) rc = bench_compare(cmd, ctx, pos[0], pos[1], o.plot);
        else if (o.model) rc = bench_model_on(cmd, ctx, &o, pos[0], &c);
        else rc = bench_on(cmd, ctx, &o, pos[0], &c, &suite);
    }
    cli_suite_free(&suite);
    cli_read_opts_free(&o.read);
    vc_context_destroy(ctx);
    free(rest);
    return rc;
}
