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
    "Times every compiled GEMM configuration and tap split of each convolution layer of the\n"
    "suites, on each scene, on the GPU at hand, and writes the fastest choice of each layer\n"
    "bucket (math, map type, kernel volume, C_in, C_out, outputs and taps per output by\n"
    "octave; docs/tune.md) where it beats the planner's, as a tune cache keyed by the GPU,\n"
    "its SM count, the CUDA runtime and driver and the library version. Give the cache to\n"
    "conv or bench with --tune-cache. A layer whose bucket an earlier layer tuned is not timed\n"
    "again. Pooling layers are not tuned. The CPU backend has nothing to tune: tune says so,\n"
    "writes nothing and exits 0.\n"
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
    "  --margin F              a choice replaces the planner's only when faster by more than\n"
    "                          this fraction, twice (default 0.03)\n"
    "  --json                  a JSON summary on stdout instead of the table\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n"
    "\n"
    "example: voxconv tune datasets/layers/minkunet.txt --synth lidar --out h100.json\n";

typedef struct tune_opts {
    const char *out, *layer, *synth, *seed, *dtype, *runs, *margin, *backend;
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

/* One result line (or JSON object) of a layer. */
static void print_layer(const tune_opts *o, const char *scene, const cli_suite *s,
                        const cli_layer *l, const vc_tune_report *r, int *first)
{
    char spec[96];
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
        cli_json_string(stdout, r->bucket);
        printf(", \"known\": %s, \"candidates\": %d, \"planner\": ", r->known ? "true" : "false",
               (int)r->candidates);
        cli_json_string(stdout, r->planner);
        printf(", \"planner_ms\": %.6f, \"tuned\": ", r->planner_ms);
        cli_json_string(stdout, r->tuned);
        printf(", \"tuned_ms\": %.6f, \"changed\": %s}", r->tuned_ms,
               r->changed ? "true" : "false");
    } else if (r->known) {
        printf("%-10s %-12s %-8s %-26s %s: tuned already\n", scene, s->name, l->name, spec,
               r->bucket);
    } else {
        printf("%-10s %-12s %-8s %-26s %s: %d choices, planner %s %.4f ms, %s %s %.4f ms "
               "(x%.2f)\n",
               scene, s->name, l->name, spec, r->bucket, (int)r->candidates, r->planner,
               r->planner_ms, r->changed ? "tuned" : "kept", r->tuned, r->tuned_ms,
               r->tuned_ms > 0 ? r->planner_ms / r->tuned_ms : 1.0);
    }
    *first = 0;
}

/* Tunes every conv layer of suite s over the scene (its coordinates and name). */
static int tune_suite(const char *cmd, vc_context *ctx, const tune_opts *o, const tune_plan *p,
                      const cli_suite *s, vc_coords *scene, const char *scene_name, int *first)
{
    cli_suite_levels lv;
    int rc = cli_suite_levels_build(cmd, ctx, s, scene, &lv);
    for (int i = 0; !rc && i < s->n; i++) {
        const cli_layer *l = &s->layers[i];
        if (cli_layer_is_pool(l)) continue;
        vc_kmap_info ki;
        vc_kmap_get_info(lv.maps[i], &ki);
        vc_tensor *in = NULL;
        float *w = layer_weights(l->cout * ki.volume * l->cin, ki.volume * l->cin);
        vc_status st = w ? vc_tensor_create(ctx, ki.in_coords, l->cin, p->dtype, NULL,
                                            VC_MEMORY_HOST, &in)
                         : VC_ERR_OUT_OF_MEMORY;
        if (st == VC_OK) st = vc_tensor_fill(ctx, in, 0.25f);
        vc_tune_report r;
        if (st == VC_OK) {
            vc_conv_desc cd = VC_CONV_DESC_INIT;
            cli_layer_map_desc(l, &cd.map);
            cd.kmap = lv.maps[i];
            cd.in_channels = l->cin;
            cd.out_channels = l->cout;
            cd.weights = w;
            cd.weight_dtype = VC_DTYPE_FP32;
            cd.allow_tf32 = p->tf32;
            cd.activation = VC_ACT_RELU;
            st = vc_conv_tune(ctx, &cd, in, &p->to, &r);
        }
        vc_tensor_destroy(in);
        free(w);
        if (st != VC_OK) {
            char what[256];
            snprintf(what, sizeof what, "%s: %s: layer '%s'", scene_name, s->name, l->name);
            rc = cli_vc_error(cmd, ctx, st, what);
        } else {
            print_layer(o, scene_name, s, l, &r, first);
            fflush(stdout);
        }
    }
    cli_suite_levels_free(&lv);
    return rc;
}

/* Every suite over one scene tensor. */
static int tune_scene(const char *cmd, vc_context *ctx, const tune_opts *o, const tune_plan *p,
                      vc_tensor *t, const char *name, int *first)
{
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    int rc = CLI_OK;
    for (int k = 0; !rc && k < p->n_suites; k++)
        rc = tune_suite(cmd, ctx, o, p, &p->suites[k], ti.coords, name, first);
    return rc;
}

/* Reads the suites, then tunes them over every scene, then writes the cache. */
static int tune_run(const char *cmd, vc_context *ctx, const tune_opts *o, tune_plan *p)
{
    int rc = CLI_OK, first = 1;
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
    if (o->json) printf("{\"layers\": [");
    for (int i = 0; !rc && i < o->n_scenes; i++) {
        vc_tensor *t = NULL;
        if ((rc = cli_load_tensor(cmd, ctx, o->scenes[i], &t))) break;
        const char *base = strrchr(o->scenes[i], '/');
        rc = tune_scene(cmd, ctx, o, p, t, base ? base + 1 : o->scenes[i], &first);
        vc_tensor_destroy(t);
    }
    if (!rc && o->synth) {
        vc_tensor *t = NULL;
        vc_status st = vc_synth_voxels(ctx, &p->synth, &t);
        if (st != VC_OK) rc = cli_vc_error(cmd, ctx, st, "cannot generate the --synth scene");
        else rc = tune_scene(cmd, ctx, o, p, t, o->synth, &first);
        vc_tensor_destroy(t);
    }
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
