/*
 * cmd_tune.c - voxconv tune: times every compiled GEMM configuration and tap split of each
 * convolution layer of the given suites on the given scenes (vc_conv_tune), and writes the
 * fastest per layer bucket as a tune cache (vc_tune_cache_save_output) for --tune-cache.
 * docs/tune.md describes the buckets and what tuning can change.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "layers.h"
#include "suite_levels.h"

#define MAX_INPUTS 16

static const char *const TUNE_DTYPES[] = {"fp16", "bf16", "tf32", "fp32", NULL};

static const char TUNE_HELP[] =
    "usage: voxconv tune SUITE.txt... (SCENE.vxt... | --synth KIND[:N]) --out CACHE.json\n"
    "                    [options]\n"
    "\n"
    "Times every compiled GEMM configuration and tap split of the convolution layers of the\n"
    "suites, on each scene, on the GPU at hand, per layer bucket (math, map type, kernel\n"
    "volume, C_in, C_out, outputs and taps per output by octave; docs/tune.md): candidates\n"
    "found on the bucket's first layer are ranked by their worst ratio to the planner over all\n"
    "its layers, and the finalist is confirmed on each layer by interleaved A/B rounds against\n"
    "the planner's choice. A bucket keeps it only where every layer gains more than\n"
    "max(--margin, 2 x the spread of its rounds); otherwise the planner's rule stays. Writes\n"
    "a tune cache keyed by the GPU, its SM count, the CUDA runtime and driver and the library\n"
    "version; give it to conv or bench with --tune-cache (bench --ab-cache checks it). Layers\n"
    "doing the same work as an earlier one are not timed again. Pooling layers are not tuned.\n"
    "The CPU backend has nothing to tune: tune says so, writes nothing and exits 0.\n"
    "\n"
    "  SUITE.txt               layer suites (datasets/layers/*.txt format)\n"
    "  SCENE.vxt               voxel tensors to run them on (voxconv voxelize, voxconv synth)\n"
    "  --layer \"TYPE K S P CIN COUT [D]\"  one more layer, on the scene itself\n"
    "  --synth KIND[:N]        a generated scene too: lidar, indoor or uniform, N voxels\n"
    "  --seed N                seed of --synth (default 0: the generator's own)\n"
    "  --out CACHE.json        the cache to write (required)\n"
    "  --dtype fp16|bf16|tf32|fp32   features the layers run in (default fp16; tf32: fp32\n"
    "                          features on tensor cores; exact fp32 has one configuration)\n"
    "  --runs N                timed launches of each choice, their median (default 5)\n"
    "  --rounds N              A/B rounds confirming a finalist on each layer (default 7)\n"
    "  --margin F              least gain a kept choice shows on every layer of its bucket\n"
    "                          (default 0.03; twice the spread of its rounds where larger)\n"
    "  --json                  a JSON summary on stdout instead of the table\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n"
    "\n"
    "example: voxconv tune datasets/layers/minkunet.txt --synth lidar --out h100.json\n";

typedef struct tune_opts {
    const char *out, *layer, *synth, *seed, *dtype, *runs, *rounds, *margin, *backend;
    int json;
    const char *suites[MAX_INPUTS], *scenes[MAX_INPUTS];
    int n_suites, n_scenes;
} tune_opts;

/* What the options say, parsed. */
typedef struct tune_plan {
    vc_dtype dtype;
    int tf32;
    vc_tune_options to;
    vc_synth_desc synth;
    cli_suite suites[MAX_INPUTS + 1];
    int n_suites;
} tune_plan;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Positional arguments into suites (.txt) and scenes (.vxt). */
static int sort_inputs(const char *cmd, const char *const *pos, int npos, tune_opts *o)
{
    for (int i = 0; i < npos; i++) {
        if ((ends_with(pos[i], ".txt") ? o->n_suites : o->n_scenes) >= MAX_INPUTS)
            return cli_usage_error(cmd, "more than %d suites or scenes", MAX_INPUTS);
        if (ends_with(pos[i], ".txt")) o->suites[o->n_suites++] = pos[i];
        else if (ends_with(pos[i], ".vxt")) o->scenes[o->n_scenes++] = pos[i];
        else
            return cli_usage_error(cmd, "'%s': expected a layer suite (.txt) or a scene (.vxt)",
                                   pos[i]);
    }
    if (o->n_suites == 0 && !o->layer)
        return cli_usage_error(cmd, "no layers: give a suite (.txt) or --layer");
    if (o->n_scenes == 0 && !o->synth)
        return cli_usage_error(cmd, "no scene: give a .vxt or --synth KIND[:N]");
    if (!o->out) return cli_usage_error(cmd, "--out CACHE.json is required");
    return cli_check_extension(cmd, "--out", o->out, ".json");
}

static int parse_tune_opts(const char *cmd, const tune_opts *o, tune_plan *p)
{
    int d = 0;
    int64_t v = 0;
    vc_tune_options to = VC_TUNE_OPTIONS_INIT;
    vc_synth_desc sd = VC_SYNTH_DESC_INIT;
    if (o->dtype && cli_parse_choice(cmd, "--dtype", o->dtype, TUNE_DTYPES, &d)) return CLI_USAGE;
    p->dtype = d == 0 ? VC_DTYPE_FP16 : d == 1 ? VC_DTYPE_BF16 : VC_DTYPE_FP32;
    p->tf32 = d == 2;
    if (o->runs) {
        if (cli_parse_i64(cmd, "--runs", o->runs, 1, 64, &v)) return CLI_USAGE;
        to.runs = (int32_t)v;
    }
    if (o->rounds) {
        if (cli_parse_i64(cmd, "--rounds", o->rounds, 1, 64, &v)) return CLI_USAGE;
        to.rounds = (int32_t)v;
    }
    if (o->margin) {
        if (cli_parse_float(cmd, "--margin", o->margin, &to.margin)) return CLI_USAGE;
        if (!(to.margin >= 0.0f && to.margin <= 0.5f))
            return cli_usage_error(cmd, "--margin: expected 0..0.5, got '%s'", o->margin);
    }
    to.skip_known = 1;
    if (o->synth && cli_parse_synth(cmd, "--synth", o->synth, &sd)) return CLI_USAGE;
    if (o->seed && cli_parse_u64(cmd, "--seed", o->seed, &sd.seed)) return CLI_USAGE;
    p->to = to;
    p->synth = sd;
    if (o->layer) {
        cli_layer l;
        char err[512];
        if (cli_layer_parse(o->layer, 0, NULL, &l, err, sizeof err))
            return cli_usage_error(cmd, "--layer: %s", err);
        cli_suite *s = &p->suites[p->n_suites++];
        snprintf(s->name, sizeof s->name, "layer");
        snprintf(l.name, sizeof l.name, "layer");
        if (cli_suite_add(s, &l, err, sizeof err) || cli_suite_resolve(s, err, sizeof err))
            return cli_usage_error(cmd, "--layer: %s", err);
    }
    return CLI_OK;
}

/* Deterministic weights in [-a, a), a = sqrt(1 / (K * C_in)) (their values do not change what
 * is timed). */
static float *layer_weights(int64_t n, int64_t fan_in)
{
    float *w = cli_xcalloc((size_t)n, sizeof *w);
    uint64_t z = 0x9E3779B97F4A7C15ull;
    const float a = 1.0f / sqrtf((float)fan_in);
    for (int64_t i = 0; w && i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = a * ((float)(z >> 40) / 8388608.0f - 1.0f);
    }
    return w;
}

/* A conv layer of the run: where it is (scene, suite, index), its map's counts and bucket;
 * dup: an earlier layer of the same scene, bucket and counts (the same work: not timed again);
 * done: its bucket is tuned. */
typedef struct tune_layer {
    int scene, suite, index, dup, done;
    int64_t n_in, n_out, pairs;
    char bucket[96];
} tune_layer;

/* Everything a run holds: the scenes, every (scene, suite)'s maps, the conv layers. */
typedef struct tune_state {
    vc_tensor *scenes[MAX_INPUTS + 1];
    const char *names[MAX_INPUTS + 1];
    cli_suite_levels *lv; /* [n_scenes * n_suites] */
    int n_scenes;
    tune_layer *layers;
    int n_layers, first;
} tune_state;

/* One result line (or JSON object) of a layer; `note` replaces the figures of a layer not
 * timed ("tuned already", "same as ..."). */
static void print_layer(const tune_opts *o, const tune_state *ts, const tune_plan *p,
                        const tune_layer *tl, const vc_tune_report *r, const char *note,
                        int *first)
{
    char spec[96];
    const cli_suite *s = &p->suites[tl->suite];
    const cli_layer *l = &s->layers[tl->index];
    const char *scene = ts->names[tl->scene];
    cli_layer_format(l, spec, sizeof spec);
    if (o->json) {
        printf("%s\n    {\"scene\": ", *first ? "" : ",");
        cli_json_string(stdout, scene);
        printf(", \"suite\": ");
        cli_json_string(stdout, s->name);
        printf(", \"layer\": ");
        cli_json_string(stdout, l->name);
        printf(", \"spec\": ");
        cli_json_string(stdout, spec);
        printf(", \"bucket\": ");
        cli_json_string(stdout, tl->bucket);
        printf(", \"known\": %s, \"candidates\": %d, \"members\": %d, \"planner\": ",
               note ? "true" : "false", (int)r->candidates, (int)r->members);
        cli_json_string(stdout, r->planner);
        printf(", \"planner_ms\": %.6f, \"finalist\": ", r->planner_ms);
        cli_json_string(stdout, r->finalist);
        printf(", \"rounds\": %d, \"gain\": %.4f, \"spread\": %.4f, \"tuned\": ", (int)r->rounds,
               r->gain, r->spread);
        cli_json_string(stdout, r->tuned);
        printf(", \"tuned_ms\": %.6f, \"changed\": %s}", r->tuned_ms,
               r->changed ? "true" : "false");
    } else if (note) {
        printf("%-10s %-12s %-8s %-26s %s: %s\n", scene, s->name, l->name, spec, tl->bucket,
               note);
    } else if (r->rounds > 0) {
        printf("%-10s %-12s %-8s %-26s %s: %d choices, %d layers; planner %s %.4f ms, finalist "
               "%s: gain %.3f +- %.3f over %d rounds, %s\n",
               scene, s->name, l->name, spec, tl->bucket, (int)r->candidates, (int)r->members,
               r->planner, r->planner_ms, r->finalist, r->gain, r->spread, (int)r->rounds,
               r->changed ? "tuned" : "planner kept");
    } else {
        printf("%-10s %-12s %-8s %-26s %s: %d choices, %d layers; planner %s %.4f ms kept (none "
               "faster by the margin)\n",
               scene, s->name, l->name, spec, tl->bucket, (int)r->candidates, (int)r->members,
               r->planner, r->planner_ms);
    }
    *first = 0;
}

/* The descriptor and input of layer tl (weights into *w, the input tensor into *in). */
static vc_status layer_operands(vc_context *ctx, const tune_state *ts, const tune_plan *p,
                                const tune_layer *tl, vc_conv_desc *cd, float **w,
                                vc_tensor **in)
{
    const cli_layer *l = &p->suites[tl->suite].layers[tl->index];
    vc_kmap *m = ts->lv[tl->scene * p->n_suites + tl->suite].maps[tl->index];
    vc_kmap_info ki;
    vc_kmap_get_info(m, &ki);
    *w = layer_weights(l->cout * ki.volume * l->cin, ki.volume * l->cin);
    vc_status st = *w ? vc_tensor_create(ctx, ki.in_coords, l->cin, p->dtype, NULL,
                                         VC_MEMORY_HOST, in)
                      : VC_ERR_OUT_OF_MEMORY;
    if (st == VC_OK) st = vc_tensor_fill(ctx, *in, 0.25f);
    vc_conv_desc d = VC_CONV_DESC_INIT;
    cli_layer_map_desc(l, &d.map);
    d.kmap = m;
    d.in_channels = l->cin;
    d.out_channels = l->cout;
    d.weights = *w;
    d.weight_dtype = VC_DTYPE_FP32;
    d.allow_tf32 = p->tf32;
    d.activation = VC_ACT_RELU;
    *cd = d;
    return st;
}

/* Tunes the bucket of layer `lead` over its members (distinct layers of that bucket, in the
 * order met, at most VC_TUNE_MAX_MEMBERS; the others are listed as tuned already). */
static int tune_bucket(const char *cmd, vc_context *ctx, const tune_opts *o, const tune_plan *p,
                       tune_state *ts, int lead)
{
    int idx[VC_TUNE_MAX_MEMBERS], n = 0, rc = CLI_OK;
    vc_conv_desc cd[VC_TUNE_MAX_MEMBERS];
    const vc_tensor *in[VC_TUNE_MAX_MEMBERS];
    float *w[VC_TUNE_MAX_MEMBERS];
    vc_tune_report rep[VC_TUNE_MAX_MEMBERS];
    vc_status st = VC_OK;
    for (int i = lead; i < ts->n_layers && n < VC_TUNE_MAX_MEMBERS; i++) {
        tune_layer *tl = &ts->layers[i];
        if (tl->done || tl->dup >= 0 || strcmp(tl->bucket, ts->layers[lead].bucket)) continue;
        if (i != lead && !tl->bucket[0]) continue; /* no bucket: tuned alone */
        vc_tensor *t = NULL;
        w[n] = NULL;
        st = layer_operands(ctx, ts, p, tl, &cd[n], &w[n], &t);
        in[n] = t;
        idx[n++] = i;
        if (st != VC_OK) break;
    }
    if (st == VC_OK) st = vc_conv_tune_layers(ctx, n, cd, in, &p->to, rep);
    if (st != VC_OK) {
        const tune_layer *tl = &ts->layers[idx[0]];
        char what[256];
        snprintf(what, sizeof what, "%s: %s: layer '%s'", ts->names[tl->scene],
                 p->suites[tl->suite].name, p->suites[tl->suite].layers[tl->index].name);
        rc = cli_vc_error(cmd, ctx, st, what);
    }
    for (int j = 0; j < n; j++) {
        if (rc == CLI_OK) print_layer(o, ts, p, &ts->layers[idx[j]], &rep[j], NULL, &ts->first);
        ts->layers[idx[j]].done = 1;
        vc_tensor_destroy((vc_tensor *)in[j]);
        free(w[j]);
    }
    fflush(stdout);
    return rc;
}

/* Every (scene, suite)'s maps, and the conv layers with their buckets. */
static int tune_collect(const char *cmd, vc_context *ctx, const tune_plan *p, tune_state *ts)
{
    int total = 0;
    for (int k = 0; k < p->n_suites; k++) total += p->suites[k].n;
    ts->lv = cli_xcalloc((size_t)(ts->n_scenes * p->n_suites), sizeof *ts->lv);
    ts->layers = cli_xcalloc((size_t)(total * ts->n_scenes) + 1, sizeof *ts->layers);
    if (!ts->lv || !ts->layers) return cli_error(cmd, "out of memory");
    for (int sc = 0; sc < ts->n_scenes; sc++) {
        vc_tensor_info ti;
        vc_tensor_get_info(ts->scenes[sc], &ti);
        for (int k = 0; k < p->n_suites; k++) {
            cli_suite_levels *lv = &ts->lv[sc * p->n_suites + k];
            int rc = cli_suite_levels_build(cmd, ctx, &p->suites[k], ti.coords, lv);
            if (rc) return rc;
            for (int i = 0; i < p->suites[k].n; i++) {
                const cli_layer *l = &p->suites[k].layers[i];
                if (cli_layer_is_pool(l)) continue;
                tune_layer *tl = &ts->layers[ts->n_layers];
                vc_kmap_info ki;
                vc_kmap_get_info(lv->maps[i], &ki);
                *tl = (tune_layer){sc, k, i, -1, 0, ki.in_count, ki.out_count, ki.pair_count,
                                   ""};
                vc_conv_desc d = VC_CONV_DESC_INIT;
                d.in_channels = l->cin;
                d.out_channels = l->cout;
                d.allow_tf32 = p->tf32;
                vc_status st = vc_conv_bucket(ctx, &d, lv->maps[i], p->dtype, tl->bucket,
                                              sizeof tl->bucket);
                if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "the layer's bucket");
                for (int j = 0; j < ts->n_layers && tl->dup < 0 && tl->bucket[0]; j++) {
                    const tune_layer *u = &ts->layers[j];
                    if (u->dup < 0 && u->scene == sc && u->n_in == tl->n_in &&
                        u->n_out == tl->n_out && u->pairs == tl->pairs &&
                        !strcmp(u->bucket, tl->bucket))
                        tl->dup = j;
                }
                ts->n_layers++;
            }
        }
    }
    return CLI_OK;
}

/* Tunes every bucket in the order its first layer is met, then lists the layers not timed. */
static int tune_all(const char *cmd, vc_context *ctx, const tune_opts *o, const tune_plan *p,
                    tune_state *ts)
{
    int rc = tune_collect(cmd, ctx, p, ts);
    for (int i = 0; !rc && i < ts->n_layers; i++)
        if (!ts->layers[i].done && ts->layers[i].dup < 0)
            rc = tune_bucket(cmd, ctx, o, p, ts, i);
    vc_tune_report none;
    memset(&none, 0, sizeof none);
    for (int i = 0; !rc && i < ts->n_layers; i++) {
        const tune_layer *tl = &ts->layers[i];
        if (tl->done) continue;
        char note[160];
        if (tl->dup >= 0) {
            const tune_layer *u = &ts->layers[tl->dup];
            snprintf(note, sizeof note, "tuned already (the same work as %s %s)",
                     p->suites[u->suite].name, p->suites[u->suite].layers[u->index].name);
        } else {
            snprintf(note, sizeof note, "tuned already (more than %d layers in the bucket)",
                     VC_TUNE_MAX_MEMBERS);
        }
        print_layer(o, ts, p, tl, &none, note, &ts->first);
    }
    return rc;
}

static void tune_state_free(tune_state *ts, int n_suites)
{
    for (int i = 0; ts->lv && i < ts->n_scenes * n_suites; i++)
        cli_suite_levels_free(&ts->lv[i]);
    for (int i = 0; i < ts->n_scenes; i++) vc_tensor_destroy(ts->scenes[i]);
    free(ts->lv);
    free(ts->layers);
}

/* Reads the suites and the scenes, tunes every bucket, then writes the cache. */
static int tune_run(const char *cmd, vc_context *ctx, const tune_opts *o, tune_plan *p)
{
    int rc = CLI_OK;
    for (int i = 0; i < o->n_suites; i++) {
        char err[512];
        if (cli_suite_read(o->suites[i], &p->suites[p->n_suites], err, sizeof err))
            return cli_error(cmd, "%s", err);
        p->n_suites++;
    }
    vc_backend b = VC_BACKEND_CPU;
    vc_context_backend(ctx, &b);
    if (b != VC_BACKEND_CUDA) {
        const char *msg = "the CPU backend has nothing to tune (it runs one algorithm in one "
                          "order); no cache written";
        if (o->json) printf("{\"layers\": [], \"buckets\": 0, \"written\": false, "
                            "\"message\": \"%s\"}\n", msg);
        else printf("voxconv tune: %s\n", msg);
        return CLI_OK;
    }
    tune_state ts;
    memset(&ts, 0, sizeof ts);
    ts.first = 1;
    for (int i = 0; !rc && i < o->n_scenes; i++) {
        rc = cli_load_tensor(cmd, ctx, o->scenes[i], &ts.scenes[ts.n_scenes]);
        const char *base = strrchr(o->scenes[i], '/');
        if (!rc) ts.names[ts.n_scenes++] = base ? base + 1 : o->scenes[i];
    }
    if (!rc && o->synth) {
        vc_status st = vc_synth_voxels(ctx, &p->synth, &ts.scenes[ts.n_scenes]);
        if (st != VC_OK) rc = cli_vc_error(cmd, ctx, st, "cannot generate the --synth scene");
        else ts.names[ts.n_scenes++] = o->synth;
    }
    if (!rc && o->json) printf("{\"layers\": [");
    if (!rc) rc = tune_all(cmd, ctx, o, p, &ts);
    tune_state_free(&ts, p->n_suites);
    if (rc) return rc;
    int32_t n = 0;
    vc_tune_cache_count(ctx, &n);
    if ((rc = cli_write_tune_cache(cmd, ctx, o->out))) return rc;
    if (o->json) printf("\n], \"buckets\": %d, \"written\": true, \"out\": ", (int)n);
    if (o->json) cli_json_string(stdout, o->out);
    if (o->json) printf("}\n");
    else printf("%d buckets written to %s\n", (int)n, o->out);
    return CLI_OK;
}

int cmd_tune(int argc, char **argv)
{
    const char *cmd = "tune";
    tune_opts o;
    memset(&o, 0, sizeof o);
    const char *pos[2 * MAX_INPUTS];
    int done = 0, npos = 0;
    cli_opt opts[] = {{"--out", &o.out, NULL},         {"--layer", &o.layer, NULL},
                      {"--synth", &o.synth, NULL},     {"--seed", &o.seed, NULL},
                      {"--dtype", &o.dtype, NULL},     {"--runs", &o.runs, NULL},
                      {"--margin", &o.margin, NULL},   {"--json", NULL, &o.json},
                      {"--rounds", &o.rounds, NULL},
                      {"--backend", &o.backend, NULL}};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               2 * MAX_INPUTS, &npos, TUNE_HELP, &done);
    if (rc || done) return rc;
    if ((rc = sort_inputs(cmd, pos, npos, &o))) return rc;
    tune_plan *p = cli_xcalloc(1, sizeof *p);
    if (!p) return cli_error(cmd, "out of memory");
    if (!(rc = parse_tune_opts(cmd, &o, p))) {
        vc_context *ctx = NULL;
        if (!(rc = cli_open_context(cmd, o.backend, &ctx))) rc = tune_run(cmd, ctx, &o, p);
        vc_context_destroy(ctx);
    }
    for (int i = 0; i < p->n_suites; i++) cli_suite_free(&p->suites[i]);
    free(p);
    return rc;
}
