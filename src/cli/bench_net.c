/*
 * bench_net.c - voxconv bench --model: a whole network (vc_net_*, docs/networks.md) timed on a
 * scene. The frame (vc_net_run or vc_net_run_points: voxelization, every map, every layer) is
 * timed with vc_timer, unprofiled; then, profiled (vc_net_set_profiling, which synchronises
 * between steps), each step's time and map build. The result has the shape of a layer result
 * (its steps under "layers", with "type" the step's op), so the table, the files and --compare
 * treat both alike; steps have no floor (a step does not say its channels).
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The frame's input: points (a point file, or a synthetic scene's points, voxelized by the
 * model's "voxelize" block) or a voxel tensor (.vxt). */
typedef struct net_input {
    vc_tensor *t;
    vc_cloud cl;
    vc_points pts;
} net_input;

static int load_input(const char *cmd, vc_context *ctx, const char *path,
                      const vc_synth_desc *synth, const cli_read_opts *r, net_input *in,
                      bench_run *run)
{
    memset(in, 0, sizeof *in);
    size_t n = path ? strlen(path) : 0;
    int rc = CLI_OK;
    if (synth) {
        vc_status st = vc_synth_points(ctx, synth, &in->cl);
        if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot make the scene");
        snprintf(run->scene, sizeof run->scene, "synth %s points, seed %llu",
                 CLI_SYNTH_KINDS[synth->kind], (unsigned long long)synth->seed);
    } else if (n > 4 && !strcmp(path + n - 4, ".vxt")) {
        if ((rc = cli_load_tensor(cmd, ctx, path, &in->t))) return rc;
        vc_tensor_info ti;
        vc_coords_info ci;
        vc_tensor_get_info(in->t, &ti);
        vc_coords_get_info(ti.coords, &ci);
        run->voxels = ci.count;
        memcpy(run->shape, ci.spatial_shape, sizeof run->shape);
        snprintf(run->scene, sizeof run->scene, "%s", path);
        return CLI_OK;
    } else {
        if ((rc = cli_read_cloud(cmd, ctx, path, 0, r, &in->cl))) return rc;
        snprintf(run->scene, sizeof run->scene, "%s points", path);
    }
    vc_points p = {in->cl.data, in->cl.count, in->cl.dim, NULL, VC_MEMORY_HOST};
    in->pts = p;
    run->voxels = in->cl.count; /* points, for a point input: the voxels are the model's */
    return CLI_OK;
}

static vc_status run_frame(vc_net *net, const net_input *in)
{
    return in->t ? vc_net_run(net, in->t) : vc_net_run_points(net, &in->pts);
}

/* warm-up, then runs frames; per run the steps' times into ms[k * nsteps + i] and map_ms
 * (profiled), or the frame's time into frame[k] (unprofiled). */
static vc_status time_frames(vc_net *net, const net_input *in, vc_timer *tm, const bench_run *run,
                             int32_t nsteps, double *frame, double *ms, double *map_ms)
{
    vc_status st = VC_OK;
    for (int k = -run->warmup; k < run->runs && st == VC_OK; k++) {
        double t = 0;
        if (run->flush) st = vc_timer_flush_cache(tm);
        if (st == VC_OK) st = vc_timer_start(tm);
        if (st == VC_OK) st = run_frame(net, in);
        if (st == VC_OK) st = vc_timer_stop(tm, &t);
        if (k < 0 || st != VC_OK) continue;
        if (frame) frame[k] = t;
        for (int32_t i = 0; ms && i < nsteps && st == VC_OK; i++) {
            vc_net_step_info si;
            st = vc_net_get_step(net, i, &si);
            ms[(size_t)i * (size_t)run->runs + (size_t)k] = si.ms;
            map_ms[(size_t)i * (size_t)run->runs + (size_t)k] = si.map_ms;
        }
    }
    return st;
}

/* The steps of the last run as layers of a suite (names, ops), with their statistics. */
static int fill_steps(const char *cmd, vc_net *net, int32_t nsteps, double *ms, double *map_ms,
                      bench_run *run, cli_suite *suite)
{
    char err[256];
    for (int32_t i = 0; i < nsteps; i++) {
        vc_net_step_info si;
        vc_net_get_step(net, i, &si);
        cli_layer l;
        memset(&l, 0, sizeof l);
        snprintf(l.name, sizeof l.name, "%s", si.name ? si.name : "?");
        l.kernel[0] = l.kernel[1] = l.kernel[2] = 1;
        l.stride[0] = l.stride[1] = l.stride[2] = 1;
        l.dilation[0] = l.dilation[1] = l.dilation[2] = 1;
        if (cli_suite_add(suite, &l, err, sizeof err)) return cli_error(cmd, "%s", err);
        bench_layer *b = &run->layers[i];
        b->n_in = si.voxels_in;
        b->n_out = si.voxels_out;
        b->pairs = si.pairs;
        b->t = bench_stats_of(ms + (size_t)i * (size_t)run->runs, run->runs);
        b->map_ms = bench_stats_of(map_ms + (size_t)i * (size_t)run->runs, run->runs).median;
        b->dup_of = -1;
        snprintf(b->plan.config, sizeof b->plan.config, "%s", si.op ? si.op : "?");
        run->sum_ms += b->t.median;
        run->sum_maps_ms += b->map_ms;
    }
    return CLI_OK;
}

static int bench_net_frames(const char *cmd, vc_context *ctx, vc_net *net, const net_input *in,
                            bench_run *run, cli_suite *suite)
{
    vc_timer *tm = NULL;
    int32_t nsteps = 0;
    vc_status st = vc_timer_create(ctx, &tm);
    double *frame = cli_xcalloc((size_t)run->runs, sizeof *frame);
    if (st == VC_OK && frame) st = time_frames(net, in, tm, run, 0, frame, NULL, NULL);
    if (st == VC_OK && frame) run->network = bench_stats_of(frame, run->runs);
    if (st == VC_OK) st = vc_net_set_profiling(net, 1);
    if (st == VC_OK) st = run_frame(net, in); /* the step list of a profiled run */
    if (st == VC_OK) st = vc_net_step_count(net, &nsteps);
    size_t cells = (size_t)(nsteps > 0 ? nsteps : 1) * (size_t)run->runs;
    double *ms = cli_xcalloc(cells, sizeof *ms), *map_ms = cli_xcalloc(cells, sizeof *map_ms);
    run->layers = cli_xcalloc((size_t)(nsteps > 0 ? nsteps : 1), sizeof *run->layers);
    int rc = CLI_OK;
    if (!frame || !ms || !map_ms || !run->layers) rc = cli_error(cmd, "out of memory");
    if (rc == CLI_OK && st == VC_OK) st = time_frames(net, in, tm, run, nsteps, NULL, ms, map_ms);
    if (rc == CLI_OK && st != VC_OK) rc = cli_vc_error(cmd, ctx, st, "the network failed");
    if (rc == CLI_OK) rc = fill_steps(cmd, net, nsteps, ms, map_ms, run, suite);
    free(frame);
    free(ms);
    free(map_ms);
    vc_timer_destroy(tm);
    return rc;
}

/* --bounds: the net in graph mode (the bounds as given, or from the input's per-call frame),
 * then the frame timed as a graph replay - the run and the output check (the frame's one
 * synchronisation) between two timer marks - after the capture and the warm-up; the line beside
 * the per-call median goes to `f`. */
static int bench_graph(const char *cmd, vc_context *ctx, vc_net *net, const net_input *in,
                       const cli_bounds *b, const bench_run *run, FILE *f)
{
    vc_net_set_profiling(net, 0);
    int rc = cli_set_bounds(cmd, ctx, net, b, in->t, in->t ? NULL : &in->pts, 1);
    if (rc) return rc;
    vc_timer *tm = NULL;
    vc_status st = vc_timer_create(ctx, &tm);
    double *v = cli_xcalloc((size_t)run->runs, sizeof *v);
    if (!v) st = VC_ERR_OUT_OF_MEMORY;
    for (int k = -run->warmup - 1; k < run->runs && st == VC_OK; k++) {
        double t = 0;
        vc_net_output o;
        if (run->flush) st = vc_timer_flush_cache(tm);
        if (st == VC_OK) st = vc_timer_start(tm);
        if (st == VC_OK) st = run_frame(net, in);
        if (st == VC_OK) st = vc_net_get_output(net, 0, &o);
        if (st == VC_OK) st = vc_timer_stop(tm, &t);
        if (k >= 0 && st == VC_OK) v[k] = t;
    }
    if (st == VC_OK) {
        bench_stats g = bench_stats_of(v, run->runs);
        fprintf(f, "bench: graph replay %.3f ms per frame (p10 %.3f, p90 %.3f, %d runs) vs "
                "%.3f ms per call: %.2fx\n", g.median, g.p10, g.p90, run->runs,
                run->network.median, g.median > 0 ? run->network.median / g.median : 0.0);
    }
    free(v);
    vc_timer_destroy(tm);
    return st == VC_OK ? CLI_OK : cli_vc_error(cmd, ctx, st, "the graph replay failed");
}

int bench_model(const char *cmd, vc_context *ctx, const bench_model_opts *m, bench_run *run)
{
    net_input in;
    cli_suite suite;
    memset(&suite, 0, sizeof suite);
    const char *base = strrchr(m->model, '/');
    snprintf(suite.name, sizeof suite.name, "%s", base ? base + 1 : m->model);
    int rc = load_input(cmd, ctx, m->scene, m->synth, m->read, &in, run);
    if (rc) return rc;
    vc_net_desc d = VC_NET_DESC_INIT;
    d.model_path = m->model;
    d.weights_path = m->weights;
    d.random_weights = m->weights == NULL;
    d.seed = m->seed;
    d.dtype = m->dtype;
    d.algo = m->algo;
    vc_net *net = NULL;
    vc_status st = vc_net_create(ctx, &d, &net);
    if (st != VC_OK) rc = cli_vc_error(cmd, ctx, st, "cannot load the network");
    if (rc == CLI_OK) rc = bench_net_frames(cmd, ctx, net, &in, run, &suite);
    run->suite = &suite;
    run->floor_known = 0;
    if (rc == CLI_OK) rc = bench_report_all(cmd, ctx, run, m->csv, m->json, m->plot);
    if (rc == CLI_OK && m->bounds && m->bounds->set) {
        FILE *f = (m->csv && !strcmp(m->csv, "-")) || (m->json && !strcmp(m->json, "-"))
                      ? stderr : stdout;
        rc = bench_graph(cmd, ctx, net, &in, m->bounds, run, f);
    }
    vc_net_destroy(net);
    vc_tensor_destroy(in.t);
    vc_cloud_free(&in.cl);
    run->suite = NULL;
    free(run->layers);
    run->layers = NULL;
    cli_suite_free(&suite);
    return rc;
}
