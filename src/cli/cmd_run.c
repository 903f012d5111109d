/*
 * cmd_run.c - voxconv run: loads a network (model description + safetensors weights, or random
 * weights from a seed), runs it on a point file or a .vxt tensor, and writes every named output
 * into a directory (NAME.vxt for sparse outputs, NAME.npy for dense ones), all or none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char RUN_HELP[] =
    "usage: voxconv run MODEL.json WEIGHTS.safetensors IN OUT_DIR [options]\n"
    "       voxconv run MODEL.json --random-weights SEED IN OUT_DIR [options]\n"
    "\n"
    "Runs a network (docs/networks.md) on IN: a point file (raw .bin, .pcd, .ply, .npy),\n"
    "voxelized per the description's \"voxelize\" block, or a .vxt voxel tensor (placed in the\n"
    "description's spatial shape). Writes each named output into OUT_DIR (made if missing):\n"
    "NAME.vxt for a sparse output, NAME.npy for a dense one ([B, C*D, H, W] BEV, [B, C, D, H, W]\n"
    "or [B, C]), all files or none.\n"
    "\n"
    "  --random-weights SEED   deterministic random weights (BatchNorm statistics included)\n"
    "                          instead of WEIGHTS\n"
    "  --dtype fp32|fp16|bf16  feature dtype of the layers (default fp16 on CUDA, fp32 on CPU);\n"
    "                          bf16 outputs are written as float32 .npy\n"
    "  --profile               print each step's time, voxels and pairs, and the maps' time\n"
    "                          (a synchronisation around each step: slower frames)\n"
    "  --runs N                run the frame N times (default 1): the outputs are the last\n"
    "                          run's, the frame time printed is the median. On CUDA, runs\n"
    "                          after the first go through graph mode with bounds the net\n"
    "                          grows itself: one synchronisation a frame\n"
    "  --step-by-step          every run step by step instead (a synchronisation per map)\n"
    "  --bounds N0[,N1,...]|auto[:MARGIN]   graph mode (CUDA): voxels per level (a level\n"
    "                          without a number takes the previous one's); auto: one per-call\n"
    "                          frame first, each level's rows (and the points) x MARGIN\n"
    "                          (default 1.25). The frame is captured as a CUDA graph once,\n"
    "                          then replayed (docs/networks.md \"Graph mode\")\n"
    "  --repeat N              then run N more frames, each timed alone (run + the output\n"
    "                          check), and N back to back; print both per frame\n"
    "  --format F              input format: auto|kitti|pcd|ply|npy|vxt (default auto)\n"
    CLI_READ_OPTIONS_HELP
    "  --json                  print the summary (and the profile) as one JSON object\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

typedef struct run_opts {
    const char *seed, *dtype, *format, *backend, *runs_text, *bounds_text, *repeat_text;
    int64_t runs, repeat;
    double frame_ms, repeat_ms, repeat_p90_ms, back_to_back_ms;
    cli_bounds bounds;
    int profile, json, steps;
    cli_read_opts r;
} run_opts;

static int ends_with_vxt(const char *p)
{
    size_t n = strlen(p);
    return n >= 4 && (strcmp(p + n - 4, ".vxt") == 0 || strcmp(p + n - 4, ".VXT") == 0);
}


static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One frame and its outputs' check: per call the run waits for the frame; in graph mode the
 * first output call does (the frame's one synchronisation, which reports its errors). */
static vc_status frame(vc_context *ctx, vc_net *net, const vc_tensor *t, const vc_points *pts)
{
    vc_status st = t ? vc_net_run(net, t) : vc_net_run_points(net, pts);
    vc_net_output o;
    if (st == VC_OK) st = vc_net_get_output(net, 0, &o);
    if (st == VC_OK) st = vc_context_synchronize(ctx);
    return st;
}

/* `n` frames, each timed alone, into ms[]. */
static vc_status time_frames(vc_context *ctx, vc_net *net, const vc_tensor *t,
                             const vc_points *pts, int64_t n, double *ms)
{
    vc_status st = VC_OK;
    for (int64_t k = 0; k < n && st == VC_OK; k++) {
        double t0 = cli_now_ms();
        st = frame(ctx, net, t, pts);
        ms[k] = cli_now_ms() - t0;
    }
    return st;
}

/* --repeat: n frames timed alone (median, p90), then n back to back (one check at the end). */
static vc_status repeat_frames(vc_context *ctx, vc_net *net, const vc_tensor *t,
                               const vc_points *pts, run_opts *o, double *ms)
{
    vc_status st = time_frames(ctx, net, t, pts, o->repeat, ms);
    if (st != VC_OK) return st;
    qsort(ms, (size_t)o->repeat, sizeof *ms, dcmp);
    o->repeat_ms = ms[o->repeat / 2];
    o->repeat_p90_ms = ms[(o->repeat * 9) / 10 < o->repeat ? (o->repeat * 9) / 10 : o->repeat - 1];
    double t0 = cli_now_ms();
    for (int64_t k = 0; k < o->repeat && st == VC_OK; k++)
        st = t ? vc_net_run(net, t) : vc_net_run_points(net, pts);
    vc_net_output out;
    if (st == VC_OK) st = vc_net_get_output(net, 0, &out);
    if (st == VC_OK) st = vc_context_synchronize(ctx);
    o->back_to_back_ms = (cli_now_ms() - t0) / (double)o->repeat;
    return st;
}

/* Runs the net on IN (points or .vxt): graph mode first where --bounds is given, then `runs`
 * frames (o->frame_ms: the median wall time of a frame, its check included; points:
 * voxelization included), then --repeat's. */
static int run_input(const char *cmd, vc_context *ctx, vc_net *net, const char *in, int fmt,
                     run_opts *o)
{
    vc_status st = VC_OK;
    vc_tensor *t = NULL;
    vc_cloud cl;
    memset(&cl, 0, sizeof cl);
    int vxt = fmt == VC_FORMAT_VXT || (fmt == VC_FORMAT_AUTO && ends_with_vxt(in));
    int rc = vxt ? cli_load_tensor(cmd, ctx, in, &t) : cli_read_cloud(cmd, ctx, in, fmt, &o->r, &cl);
    if (rc) return rc;
    vc_points pts = {cl.data, cl.count, cl.dim, NULL, VC_MEMORY_HOST};
    const vc_points *p = vxt ? NULL : &pts;
    if (o->bounds.set) rc = cli_set_bounds(cmd, ctx, net, &o->bounds, t, p, o->json);
    int64_t most = o->runs > o->repeat ? o->runs : o->repeat;
    double *ms = cli_xcalloc((size_t)most, sizeof *ms);
    if (!ms && rc == CLI_OK) rc = cli_error(cmd, "out of memory");
    if (rc == CLI_OK) st = time_frames(ctx, net, t, p, o->runs, ms);
    if (rc == CLI_OK && st == VC_OK) {
        qsort(ms, (size_t)o->runs, sizeof *ms, dcmp);
        o->frame_ms = ms[o->runs / 2];
        if (o->repeat > 0) st = repeat_frames(ctx, net, t, p, o, ms);
    }
    free(ms);
    vc_tensor_destroy(t);
    vc_cloud_free(&cl);
    if (rc != CLI_OK) return rc;
    return st == VC_OK ? CLI_OK : cli_vc_error(cmd, ctx, st, "the network failed");
}

/* Host copies of the outputs, then every file written, or none. */
static int write_outputs(const char *cmd, vc_context *ctx, vc_net *net, const char *dir,
                         int32_t n)
{
    cli_output outs[CLI_MAX_OUTPUTS];
    char *paths[CLI_MAX_OUTPUTS] = {NULL};
    void *bufs[CLI_MAX_OUTPUTS] = {NULL};
    int rc = CLI_OK;
    memset(outs, 0, sizeof outs);
    if (n > CLI_MAX_OUTPUTS) return cli_error(cmd, "%d outputs (at most %d)", n, CLI_MAX_OUTPUTS);
    for (int32_t i = 0; i < n && rc == CLI_OK; i++) {
        vc_net_output o;
        vc_net_get_output(net, i, &o);
        size_t len = strlen(dir) + strlen(o.name) + 8;
        paths[i] = cli_xcalloc(len, 1);
        if (!paths[i]) {
            rc = cli_error(cmd, "out of memory");
            break;
        }
        snprintf(paths[i], len, "%s/%s.%s", dir, o.name, o.kind == VC_NET_SPARSE ? "vxt" : "npy");
        memset(&outs[i], 0, sizeof outs[i]);
        outs[i].path = paths[i];
        if (o.kind == VC_NET_SPARSE) {
            outs[i].tensor = o.tensor;
            continue;
        }
        size_t count = 1;
        for (int k = 0; k < o.ndim; k++) count *= (size_t)o.shape[k];
        size_t es = vc_dtype_size(o.dtype);
        bufs[i] = cli_xcalloc(count ? count : 1, es > 4 ? es : 4);
        vc_status st = bufs[i] ? vc_net_copy_output(net, i, bufs[i], count * es, VC_MEMORY_HOST)
                               : VC_ERR_OUT_OF_MEMORY;
        if (st != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "cannot read a dense output");
            break;
        }
        vc_dtype dt = o.dtype;
        if (dt == VC_DTYPE_BF16) { /* NumPy has no bf16: widen in place, back to front */
            uint16_t *h = bufs[i];
            float *f = bufs[i];
            for (size_t k = count; k-- > 0;) {
                uint32_t u = (uint32_t)h[k] << 16;
                memcpy(&f[k], &u, 4);
            }
            dt = VC_DTYPE_FP32;
        }
        outs[i].array = cli_array(bufs[i], dt, o.ndim, o.shape);
    }
    if (rc == CLI_OK) rc = cli_write_outputs(cmd, ctx, outs, n);
    for (int32_t i = 0; i < n; i++) {
        free(paths[i]);
        free(bufs[i]);
    }
    return rc;
}

static void print_summary(const run_opts *o, const char *model, const char *out, vc_net *net)
{
    int32_t n = 0, ns = 0;
    vc_net_output_count(net, &n);
    vc_net_step_count(net, &ns);
    if (o->json) {
        cli_json_io("model", model, "output_dir", out);
        printf(", \"outputs\": [");
    }
    for (int32_t i = 0; i < n; i++) {
        vc_net_output x;
        vc_net_get_output(net, i, &x);
        int64_t rows = 0, ch = 0;
        if (x.kind == VC_NET_SPARSE) {
            vc_tensor_info ti;
            vc_tensor_get_info(x.tensor, &ti);
            rows = ti.count;
            ch = ti.channels;
        }
        if (o->json) {
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_string(stdout, x.name);
            if (x.kind == VC_NET_SPARSE)
                printf(", \"kind\": \"sparse\", \"voxels\": %lld, \"channels\": %lld}",
                       (long long)rows, (long long)ch);
            else {
                printf(", \"kind\": \"dense\", \"dtype\": \"%s\", \"shape\": [", cli_dtype_name(x.dtype));
                for (int k = 0; k < x.ndim; k++) printf("%s%lld", k ? ", " : "", (long long)x.shape[k]);
                printf("]}");
            }
        } else if (x.kind == VC_NET_SPARSE) {
            printf("run: %s: sparse, %lld voxels x %lld channels\n", x.name, (long long)rows,
                   (long long)ch);
        } else {
            printf("run: %s: dense %s [", x.name, cli_dtype_name(x.dtype));
            for (int k = 0; k < x.ndim; k++) printf("%s%lld", k ? ", " : "", (long long)x.shape[k]);
            printf("]\n");
        }
    }
    if (o->json) printf("]");
    if (o->profile) {
        double total = 0, maps = 0;
        if (o->json) printf(", \"steps\": [");
        else printf("%-28s %-24s %10s %10s %12s %9s %9s\n", "step", "op", "voxels_in",
                    "voxels_out", "pairs", "map_ms", "ms");
        for (int32_t k = 0; k < ns; k++) {
            vc_net_step_info s;
            vc_net_get_step(net, k, &s);
            total += s.ms + s.map_ms;
            maps += s.map_ms;
            if (o->json) {
                printf("%s{\"name\": ", k ? ", " : "");
                cli_json_string(stdout, s.name);
                printf(", \"op\": \"%s\", \"voxels_in\": %lld, \"voxels_out\": %lld, \"pairs\": "
                       "%lld, \"map_ms\": %.4f, \"ms\": %.4f}", s.op, (long long)s.voxels_in,
                       (long long)s.voxels_out, (long long)s.pairs, s.map_ms, s.ms);
            } else {
                printf("%-28s %-24s %10lld %10lld %12lld %9.3f %9.3f\n", s.name, s.op,
                       (long long)s.voxels_in, (long long)s.voxels_out, (long long)s.pairs,
                       s.map_ms, s.ms);
            }
        }
        if (o->json) printf("], \"maps_ms\": %.4f, \"total_ms\": %.4f", maps, total);
        else printf("total %.3f ms (maps %.3f ms), %d steps\n", total, maps, ns);
    }
    const char *mode = o->bounds.set ? "graph replay" : "per call";
    if (o->json) {
        printf(", \"runs\": %lld, \"frame_ms\": %.4f, \"graph\": %s", (long long)o->runs,
               o->frame_ms, o->bounds.set ? "true" : "false");
        if (o->repeat > 0)
            printf(", \"repeat\": %lld, \"repeat_ms\": %.4f, \"repeat_p90_ms\": %.4f, "
                   "\"back_to_back_ms\": %.4f", (long long)o->repeat, o->repeat_ms,
                   o->repeat_p90_ms, o->back_to_back_ms);
        printf("}\n");
        return;
    }
    printf("run: frame %.3f ms (median of %lld)\n", o->frame_ms, (long long)o->runs);
    if (o->repeat > 0)
        printf("run: %s %.3f ms per frame (median of %lld, p90 %.3f), back to back %.3f ms per "
               "frame\n", mode, o->repeat_ms, (long long)o->repeat, o->repeat_p90_ms,
               o->back_to_back_ms);
}

/* OUT_DIR exists as a directory, or is made (one level). */
static int make_dir(const char *cmd, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? CLI_OK : cli_error(cmd, "OUT_DIR '%s' is not a directory", dir);
    if (mkdir(dir, 0777) != 0)
        return cli_error(cmd, "cannot make OUT_DIR '%s': %s", dir, strerror(errno));
    return CLI_OK;
}

/* The options into the net descriptor; CLI_USAGE after the error line. */
static int parse_run(const char *cmd, run_opts *o, int npos, const char **pos,
                     vc_net_desc *d, int *fmt)
{
    int want = o->seed ? 3 : 4;
    if (npos != want)
        return cli_usage_error(cmd, o->seed ? "expected MODEL IN OUT_DIR with --random-weights "
                                              "(see voxconv run --help)"
                                            : "expected MODEL WEIGHTS IN OUT_DIR (see voxconv "
                                              "run --help)");
    d->model_path = pos[0];
    if (o->seed) {
        d->random_weights = 1;
        if (cli_parse_u64(cmd, "--random-weights", o->seed, &d->seed)) return CLI_USAGE;
    } else {
        d->weights_path = pos[1];
    }
    int v = 0;
    if (o->dtype) {
        if (cli_parse_choice(cmd, "--dtype", o->dtype, CLI_DTYPES, &v)) return CLI_USAGE;
        d->dtype = (vc_dtype)v;
    }
    *fmt = 0;
    if (o->format && cli_parse_choice(cmd, "--format", o->format, CLI_FORMATS, fmt))
        return CLI_USAGE;
    o->runs = 1;
    if (o->runs_text && cli_parse_i64(cmd, "--runs", o->runs_text, 1, 10000, &o->runs))
        return CLI_USAGE;
    if (o->repeat_text && cli_parse_i64(cmd, "--repeat", o->repeat_text, 1, 100000, &o->repeat))
        return CLI_USAGE;
    if (o->bounds_text && cli_parse_bounds(cmd, o->bounds_text, &o->bounds)) return CLI_USAGE;
    if (o->bounds.set && o->profile)
        return cli_usage_error(cmd, "--profile times steps per call: not with --bounds");
    return cli_parse_read_opts(cmd, &o->r);
}

int cmd_run(int argc, char **argv)
{
    const char *cmd = "run";
    run_opts o;
    memset(&o, 0, sizeof o);
    const char *pos[4];
    int done = 0, npos = 0, fmt = 0;
    cli_opt opts[] = {{"--random-weights", &o.seed, NULL}, {"--dtype", &o.dtype, NULL},
                      {"--profile", NULL, &o.profile},
                      {"--step-by-step", NULL, &o.steps},     {"--json", NULL, &o.json},
                      {"--format", &o.format, NULL},       {"--backend", &o.backend, NULL},
                      {"--runs", &o.runs_text, NULL},      {"--bounds", &o.bounds_text, NULL},
                      {"--repeat", &o.repeat_text, NULL},
                      CLI_READ_OPTIONS(o.r)};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               4, &npos, RUN_HELP, &done);
    if (rc || done) return rc;
    vc_net_desc d = VC_NET_DESC_INIT;
    if ((rc = parse_run(cmd, &o, npos, pos, &d, &fmt))) {
        cli_read_opts_free(&o.r);
        return rc;
    }
    const char *in = pos[npos - 2], *out = pos[npos - 1];
    vc_context *ctx = NULL;
    vc_net *net = NULL;
    if ((rc = cli_open_context(cmd, o.backend, &ctx))) goto done;
    vc_status st = vc_net_create(ctx, &d, &net);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "cannot load the network");
        goto done;
    }
    vc_net_set_profiling(net, o.profile);
    if (o.steps) vc_net_set_auto_bounds(net, 0);
    int32_t n = 0;
    vc_net_output_count(net, &n);
    if ((rc = run_input(cmd, ctx, net, in, fmt, &o))) goto done;
    if ((rc = make_dir(cmd, out))) goto done;
    if ((rc = write_outputs(cmd, ctx, net, out, n))) goto done;
    print_summary(&o, pos[0], out, net);
done:
    vc_net_destroy(net);
    vc_context_destroy(ctx);
    cli_read_opts_free(&o.r);
    return rc;
}
