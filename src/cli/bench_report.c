/*
 * bench_report.c - the reports of voxconv bench (bench.h): the table on the terminal, the CSV
 * and JSON files (fields in docs/bench.md), the SVG chart of one result, and the comparison of
 * two JSON results (read with cJSON) drawn by the same chart code.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

bench_stats bench_stats_of(double *v, int n)
{
    bench_stats s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.p10 = v[(int)floor(0.1 * (n - 1) + 0.5)];
    s.p90 = v[(int)floor(0.9 * (n - 1) + 0.5)];
    return s;
}

const char *bench_algo_name(vc_algo a)
{
    switch (a) {
    case VC_ALGO_IMPLICIT_GEMM: return "implicit";
    case VC_ALGO_GATHER_GEMM_SCATTER: return "ggs";
    case VC_ALGO_GATHER_GEMM_SCATTER_GROUPED: return "grouped";
    default: return "auto";
    }
}

static const char *map_type_name(vc_map_type t)
{
    static const char *const n[] = {"subm", "strided", "downsample", "inverse", "transposed"};
    return (unsigned)t < 5 ? n[t] : "?";
}

static void triple(const int32_t v[3], char *buf, size_t len)
{
    if (v[0] == v[1] && v[1] == v[2]) snprintf(buf, len, "%d", (int)v[0]);
    else snprintf(buf, len, "%d,%d,%d", (int)v[0], (int)v[1], (int)v[2]);
}

/* The texts of a layer's row: kernel, stride, padding, dilation, and the floor and the ratio
 * to it (`none` where there are no rates). */
typedef struct row_text {
    char k[24], s[24], p[24], d[24], floor[32], ratio[32];
} row_text;

static void row_text_of(const cli_layer *l, const bench_layer *b, const char *none,
                        row_text *t)
{
    triple(l->kernel, t->k, sizeof t->k);
    triple(l->stride, t->s, sizeof t->s);
    triple(l->padding, t->p, sizeof t->p);
    triple(l->dilation, t->d, sizeof t->d);
    snprintf(t->floor, sizeof t->floor, "%s", none);
    snprintf(t->ratio, sizeof t->ratio, "%s", none);
    if (b->floor.ms > 0) {
        snprintf(t->floor, sizeof t->floor, "%.6g", b->floor.ms);
        snprintf(t->ratio, sizeof t->ratio, "%.4g", b->t.median / b->floor.ms);
    }
}

/* Useful TFLOP/s and GB/s (the floor's bytes) at time ms. */
static double tflops(const bench_layer *l) { return l->floor.flops / (l->t.median * 1e-3) * 1e-12; }
static double gbps(const bench_layer *l) { return l->floor.bytes / (l->t.median * 1e-3) * 1e-9; }

/* "implicit f16_128x64x32_s3 split 2", "pool", "cpu". */
static void algo_text(const bench_layer *l, char *buf, size_t len)
{
    if (!strcmp(l->plan.config, "pool") || !strcmp(l->plan.config, "cpu")) {
        snprintf(buf, len, "%s", l->plan.config);
        return;
    }
    char split[32] = "";
    if (l->plan.tap_split > 0) snprintf(split, sizeof split, " split %d", (int)l->plan.tap_split);
    if (l->plan.tap_split < 0)
        snprintf(split, sizeof split, " split <=%d", (int)-l->plan.tap_split);
    snprintf(buf, len, "%s%s%s%s%s", bench_algo_name(l->plan.algo), l->plan.config[0] ? " " : "",
             l->plan.config, split, l->plan.tuned ? " (tuned)" : "");
}

/* --model: one row per step of the network, then the frame. */
static void print_steps(FILE *f, const bench_run *r)
{
    const cli_suite *s = r->suite;
    fprintf(f, "# voxconv bench: model %s, %d steps on %s\n", s->name, s->n, r->scene);
    fprintf(f, "%s (%s), %s, algo %s; median, p10, p90 of %d runs after %d warm-up%s; steps "
            "profiled (synchronised between steps), the frame not\n\n", r->device, r->backend,
            r->dtype, r->algo, r->runs, r->warmup,
            r->flush ? ", caches flushed before each run" : "");
    fprintf(f, "| step | op | voxels in | voxels out | pairs | median ms | p10 ms | p90 ms |"
            " map ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < s->n; i++) {
        const bench_layer *b = &r->layers[i];
        fprintf(f, "| %s | %s | %lld | %lld | %lld | %.4f | %.4f | %.4f | %.4f |\n",
                s->layers[i].name, b->plan.config, (long long)b->n_in, (long long)b->n_out,
                (long long)b->pairs, b->t.median, b->t.p10, b->t.p90, b->map_ms);
    }
    fprintf(f, "\nwhole network: %d steps, sum of step medians %.4f ms (map builds %.4f ms); "
            "frame %.4f ms (p10 %.4f, p90 %.4f)\n", s->n, r->sum_ms, r->sum_maps_ms,
            r->network.median, r->network.p10, r->network.p90);
}

/* "CONFIG/SPLIT" of a plan, for the A/B table. */
static void plan_text(const vc_conv_plan_info *p, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%d", p->config[0] ? p->config : bench_algo_name(p->algo),
             (int)p->tap_split);
}

/* --ab-cache: per conv layer the planner's own choice (A) against the cached one (B). */
static void print_ab(FILE *f, const bench_run *r)
{
    fprintf(f, "\nA/B, the planner (A) against tune cache %s (B), in one process: %d rounds of "
            "%d calls a side, ABBA...; gain = median of the per-round ratios A / B, spread = "
            "their median absolute deviation over the gain\n\n", r->ab_cache, r->ab_rounds,
            r->runs);
    fprintf(f, "| layer | A: planner | B: cached | A median ms | B median ms | gain | spread |"
            " tuned |\n|---|---|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < r->suite->n; i++) {
        const bench_layer *b = &r->layers[i];
        if (!b->ab) continue;
        char pa[96], pb[96];
        plan_text(&b->plan_a, pa, sizeof pa);
        plan_text(&b->plan, pb, sizeof pb);
        fprintf(f, "| %s | %s | %s | %.4f | %.4f | %.4f | %.4f | %s |\n",
                r->suite->layers[i].name, pa, pb, b->ab_a.median, b->t.median, b->gain,
                b->spread, b->plan.tuned ? "yes" : "no");
    }
}

void bench_print_table(FILE *f, const bench_run *r)
{
    const cli_suite *s = r->suite;
    if (r->model) {
        print_steps(f, r);
        return;
    }
    fprintf(f, "# voxconv bench: %s, %d layers on %s (%lld voxels, %dx%dx%d)\n", s->name, s->n,
            r->scene, (long long)r->voxels, r->shape[0], r->shape[1], r->shape[2]);
    fprintf(f, "%s (%s), %s, algo %s; median, p10, p90 of %d runs after %d warm-up%s\n\n",
            r->device, r->backend, r->dtype, r->algo, r->runs, r->warmup,
            r->flush ? ", caches flushed before each run" : "");
    fprintf(f, "| layer | type | k | s | p | cin->cout | voxels in | voxels out | pairs |"
            " median ms | p10 ms | p90 ms | TFLOP/s | GB/s | floor ms | x floor | algorithm |\n");
    fprintf(f, "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < s->n; i++) {
        const cli_layer *l = &s->layers[i];
        const bench_layer *b = &r->layers[i];
        char algo[96];
        row_text t;
        row_text_of(l, b, "-", &t);
        algo_text(b, algo, sizeof algo);
        fprintf(f, "| %s%s | %s | %s | %s | %s | %lld->%lld | %lld | %lld | %lld | %.4f | %.4f |"
                " %.4f | %.3g | %.3g | %s | %s | %s |\n", l->name, b->dup_of >= 0 ? " (=)" : "",
                CLI_LAYER_TYPES[l->type], t.k, t.s, t.p, (long long)l->cin, (long long)l->cout,
                (long long)b->n_in, (long long)b->n_out, (long long)b->pairs, b->t.median,
                b->t.p10, b->t.p90, tflops(b), gbps(b), t.floor, t.ratio, algo);
    }
    fprintf(f, "\nmap builds (vc_kmap_build on a fresh copy of the input level, timed apart):\n\n");
    fprintf(f, "| map | first layer | type | k | s | voxels in | voxels out | pairs | median ms |"
            " p10 ms | p90 ms |\n|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int m = 0; m < r->n_maps; m++) {
        const bench_map *b = &r->maps[m];
        char k[24], st[24];
        triple(b->kernel, k, sizeof k);
        triple(b->stride, st, sizeof st);
        fprintf(f, "| %d | %s | %s | %s | %s | %lld | %lld | %lld | %.4f | %.4f | %.4f |\n", m,
                s->layers[b->first_layer].name, map_type_name(b->type), k, st,
                (long long)b->n_in, (long long)b->n_out, (long long)b->pairs, b->t.median,
                b->t.p10, b->t.p90);
    }
    if (r->ab_rounds > 0) print_ab(f, r);
    fprintf(f, "\nwhole suite: %d layers, sum of medians %.4f ms", s->n, r->sum_ms);
    if (r->floor_known)
        fprintf(f, " (floor %.4f ms, %.1fx)", r->sum_floor_ms, r->sum_ms / r->sum_floor_ms);
    fprintf(f, "; back to back %.4f ms (p10 %.4f, p90 %.4f); map builds %.4f ms\n",
            r->network.median, r->network.p10, r->network.p90, r->sum_maps_ms);
}

static void csv_steps(FILE *f, const bench_run *r)
{
    const cli_suite *s = r->suite;
    fprintf(f, "model,index,step,op,voxels_in,voxels_out,pairs,median_ms,p10_ms,p90_ms,map_ms,"
            "dtype,backend,device\n");
    for (int i = 0; i < s->n; i++) {
        const bench_layer *b = &r->layers[i];
        fprintf(f, "\"%s\",%d,\"%s\",%s,%lld,%lld,%lld,%.6g,%.6g,%.6g,%.6g,%s,%s,\"%s\"\n",
                s->name, i, s->layers[i].name, b->plan.config, (long long)b->n_in,
                (long long)b->n_out, (long long)b->pairs, b->t.median, b->t.p10, b->t.p90,
                b->map_ms, r->dtype, r->backend, r->device);
    }
}

void bench_write_csv(FILE *f, const bench_run *r)
{
    const cli_suite *s = r->suite;
    if (r->model) {
        csv_steps(f, r);
        return;
    }
    fprintf(f, "suite,index,layer,type,kernel,stride,padding,dilation,cin,cout,voxels_in,"
            "voxels_out,pairs,median_ms,p10_ms,p90_ms,tflops,gbps,floor_ms,floor_ratio,algo,"
            "config,tap_split,repeat_of,dtype,backend,device\n");
    for (int i = 0; i < s->n; i++) {
        const cli_layer *l = &s->layers[i];
        const bench_layer *b = &r->layers[i];
        row_text t;
        row_text_of(l, b, "", &t);
        fprintf(f, "\"%s\",%d,\"%s\",%s,\"%s\",\"%s\",\"%s\",\"%s\",%lld,%lld,%lld,%lld,%lld,"
                "%.6g,%.6g,%.6g,%.4g,%.4g,%s,%s,%s,\"%s\",%d,%d,%s,%s,\"%s\"\n", s->name, i,
                l->name, CLI_LAYER_TYPES[l->type], t.k, t.s, t.p, t.d, (long long)l->cin,
                (long long)l->cout, (long long)b->n_in, (long long)b->n_out, (long long)b->pairs,
                b->t.median, b->t.p10, b->t.p90, tflops(b), gbps(b), t.floor, t.ratio,
                bench_algo_name(b->plan.algo), b->plan.config, (int)b->plan.tap_split,
                b->dup_of, r->dtype, r->backend, r->device);
    }
}

static void json_int3(FILE *f, const char *key, const int32_t v[3])
{
    fprintf(f, "\"%s\": [%d, %d, %d]", key, (int)v[0], (int)v[1], (int)v[2]);
}

/* "kernel": [..], "stride": [..], "padding": [..], "dilation": [..] */
static void json_geometry(FILE *f, const int32_t k[3], const int32_t s[3], const int32_t p[3],
                          const int32_t d[3])
{
    json_int3(f, "kernel", k);
    fprintf(f, ", ");
    json_int3(f, "stride", s);
    fprintf(f, ", ");
    json_int3(f, "padding", p);
    fprintf(f, ", ");
    json_int3(f, "dilation", d);
}

static void json_stats(FILE *f, const bench_stats *t)
{
    fprintf(f, "\"median_ms\": %.6g, \"p10_ms\": %.6g, \"p90_ms\": %.6g", t->median, t->p10,
            t->p90);
}

static void json_layer(FILE *f, const bench_run *r, int i)
{
    const cli_layer *l = &r->suite->layers[i];
    const bench_layer *b = &r->layers[i];
    fprintf(f, "    {\"index\": %d, \"name\": ", i);
    cli_json_string(f, l->name);
    if (r->model) { /* a network's step: no geometry, channels or floor */
        fprintf(f, ", \"type\": ");
        cli_json_string(f, b->plan.config);
        fprintf(f, ", \"voxels_in\": %lld, \"voxels_out\": %lld, \"pairs\": %lld, ",
                (long long)b->n_in, (long long)b->n_out, (long long)b->pairs);
        json_stats(f, &b->t);
        fprintf(f, ", \"map_ms\": %.6g, \"floor_ms\": null}", b->map_ms);
        return;
    }
    fprintf(f, ", \"type\": \"%s\", ", CLI_LAYER_TYPES[l->type]);
    json_geometry(f, l->kernel, l->stride, l->padding, l->dilation);
    fprintf(f, ", \"cin\": %lld, \"cout\": %lld, \"voxels_in\": %lld, \"voxels_out\": %lld, "
            "\"pairs\": %lld, ", (long long)l->cin, (long long)l->cout, (long long)b->n_in,
            (long long)b->n_out, (long long)b->pairs);
    json_stats(f, &b->t);
    fprintf(f, ", \"flops\": %.6g, \"bytes\": %.6g, \"tflops\": %.6g, \"gbps\": %.6g, ",
            b->floor.flops, b->floor.bytes, tflops(b), gbps(b));
    if (b->floor.ms > 0)
        fprintf(f, "\"floor_ms\": %.6g, \"floor_ratio\": %.6g", b->floor.ms,
                b->t.median / b->floor.ms);
    else
        fprintf(f, "\"floor_ms\": null, \"floor_ratio\": null");
    fprintf(f, ", \"algo\": \"%s\", \"config\": ", bench_algo_name(b->plan.algo));
    cli_json_string(f, b->plan.config);
    fprintf(f, ", \"tap_split\": %d, \"tuned\": %s, \"map\": %d, \"repeat_of\": %d",
            (int)b->plan.tap_split, b->plan.tuned ? "true" : "false", b->map, b->dup_of);
    if (b->ab) {
        fprintf(f, ", \"ab\": {\"planner_config\": ");
        cli_json_string(f, b->plan_a.config);
        fprintf(f, ", \"planner_tap_split\": %d, \"planner_ms\": %.6g, \"planner_p10_ms\": "
                "%.6g, \"planner_p90_ms\": %.6g, \"cached_ms\": %.6g, \"gain\": %.6g, "
                "\"spread\": %.6g, \"rounds\": %d}", (int)b->plan_a.tap_split, b->ab_a.median,
                b->ab_a.p10, b->ab_a.p90, b->t.median, b->gain, b->spread, r->ab_rounds);
    } else if (r->ab_rounds > 0) {
        fprintf(f, ", \"ab\": null");
    }
    fprintf(f, "}");
}

void bench_write_json(FILE *f, const bench_run *r)
{
    fprintf(f, "{\n  \"tool\": \"voxconv bench\", \"version\": \"%s\", \"device\": ", vc_version());
    cli_json_string(f, r->device);
    fprintf(f, ", \"backend\": \"%s\", \"dtype\": \"%s\", \"algo\": ", r->backend, r->dtype);
    cli_json_string(f, r->algo);
    fprintf(f, ",\n  \"runs\": %d, \"warmup\": %d, \"flush_l2\": %s,", r->runs, r->warmup,
            r->flush ? "true" : "false");
    if (r->ab_rounds > 0) {
        fprintf(f, " \"ab_cache\": ");
        cli_json_string(f, r->ab_cache);
        fprintf(f, ", \"ab_rounds\": %d,", r->ab_rounds);
    }
    fprintf(f, "\n  \"scene\": {\"source\": ");
    cli_json_string(f, r->scene);
    fprintf(f, ", \"voxels\": %lld, ", (long long)r->voxels);
    json_int3(f, "spatial_shape", r->shape);
    fprintf(f, "},\n  \"%s\": ", r->model ? "model" : "suite");
    cli_json_string(f, r->suite->name);
    fprintf(f, ",\n  \"layers\": [\n");
    for (int i = 0; i < r->suite->n; i++) {
        json_layer(f, r, i);
        fprintf(f, "%s\n", i + 1 < r->suite->n ? "," : "");
    }
    fprintf(f, "  ],\n  \"maps\": [\n");
    for (int m = 0; m < r->n_maps; m++) {
        const bench_map *b = &r->maps[m];
        fprintf(f, "    {\"index\": %d, \"first_layer\": %d, \"type\": \"%s\", ", m,
                b->first_layer, map_type_name(b->type));
        json_geometry(f, b->kernel, b->stride, b->padding, b->dilation);
        fprintf(f, ", \"voxels_in\": %lld, \"voxels_out\": %lld, \"pairs\": %lld, ",
                (long long)b->n_in, (long long)b->n_out, (long long)b->pairs);
        json_stats(f, &b->t);
        fprintf(f, "}%s\n", m + 1 < r->n_maps ? "," : "");
    }
    fprintf(f, "  ],\n  \"total\": {\"layers\": %d, \"sum_median_ms\": %.6g, ", r->suite->n,
            r->sum_ms);
    if (r->floor_known) fprintf(f, "\"sum_floor_ms\": %.6g, ", r->sum_floor_ms);
    else fprintf(f, "\"sum_floor_ms\": null, ");
    fprintf(f, "\"network_median_ms\": %.6g, \"network_p10_ms\": %.6g, \"network_p90_ms\": "
            "%.6g, \"map_builds_ms\": %.6g}\n}\n", r->network.median, r->network.p10,
            r->network.p90, r->sum_maps_ms);
}

/* One report as text in memory (open_memstream); NULL when out of memory. */
static char *report_text(const bench_run *r, void (*write)(FILE *, const bench_run *),
                         size_t *len)
{
    char *text = NULL;
    FILE *m = open_memstream(&text, len);
    if (!m) return NULL;
    write(m, r);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int bench_write_outputs(const char *cmd, vc_context *ctx, const bench_run *r, const char *csv,
                        const char *json, const char *plot)
{
    const char *paths[3] = {csv, json, plot};
    void (*writers[3])(FILE *, const bench_run *) = {bench_write_csv, bench_write_json,
                                                     bench_write_svg};
    char *texts[3] = {NULL, NULL, NULL};
    cli_output outs[3];
    int n = 0, rc = CLI_OK;
    for (int k = 0; k < 3 && rc == CLI_OK; k++) {
        if (!paths[k]) continue;
        if (!strcmp(paths[k], "-")) {
            writers[k](stdout, r);
            continue;
        }
        size_t len = 0;
        if (!(texts[k] = report_text(r, writers[k], &len))) {
            rc = cli_error(cmd, "out of memory");
            break;
        }
        memset(&outs[n], 0, sizeof outs[n]);
        outs[n].path = paths[k];
        outs[n].text = texts[k];
        outs[n].text_len = len;
        n++;
    }
    if (rc == CLI_OK && n > 0) rc = cli_write_outputs(cmd, ctx, outs, n);
    for (int k = 0; k < 3; k++) free(texts[k]);
    return rc;
}

int bench_report_all(const char *cmd, vc_context *ctx, const bench_run *r, const char *csv,
                     const char *json, const char *plot)
{
    int to_stdout = (csv && !strcmp(csv, "-")) || (json && !strcmp(json, "-"));
    bench_print_table(to_stdout ? stderr : stdout, r);
    return bench_write_outputs(cmd, ctx, r, csv, json, plot);
}
