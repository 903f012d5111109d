/*
 * bench.h - what the two halves of voxconv bench share: cmd_bench.c runs the layers and fills a
 * bench_run; bench_report.c writes it (table, CSV, JSON, SVG) and draws the comparison of two
 * JSON results (--compare). The JSON fields are documented in docs/bench.md.
 */
#ifndef VOXCONV_CLI_BENCH_H
#define VOXCONV_CLI_BENCH_H

#include <stdio.h>

#include "cli.h"
#include "layers.h"

/* Timings of one layer or map build, in milliseconds. */
typedef struct bench_stats {
    double median, p10, p90;
} bench_stats;

typedef struct bench_layer {
    int64_t n_in, n_out, pairs;
    bench_stats t;
    vc_layer_floor floor;
    vc_conv_plan_info plan; /* convolutions; pools: algo AUTO, config "pool" */
    int map;                /* index into bench_run.maps                                     */
    double map_ms;          /* --model: the step's map builds (median); 0 for layers         */
    int dup_of;             /* -1, or the earlier layer of the same map, type and channels
                               whose timings this one repeats (timed once)                  */
    /* --ab-cache: the planner's own choice (plan_a, times ab_a) against the cache's (plan,
     * times t), interleaved in one process; ab 0 where the layer had no A/B (pools, repeats) */
    int ab;
    vc_conv_plan_info plan_a;
    bench_stats ab_a;
    double gain, spread;    /* median of the per-round ratios planner / cached; their median
                               absolute deviation over that median                           */
} bench_layer;

typedef struct bench_map {
    vc_map_type type;
    int32_t kernel[3], stride[3], padding[3], dilation[3];
    int64_t n_in, n_out, pairs;
    int first_layer; /* the first layer that uses it */
    bench_stats t;
} bench_map;

typedef struct bench_run {
    /* settings */
    char device[128];
    const char *backend; /* "cuda" or "cpu" */
    const char *dtype;   /* fp32 tf32 fp16 bf16 */
    const char *algo;    /* auto implicit ggs grouped */
    int runs, warmup, flush;
    int ab_rounds;       /* --ab-cache: A/B rounds per layer (0: no A/B)                     */
    const char *ab_cache;
    /* the scene */
    char scene[512];
    int64_t voxels;
    int32_t shape[3];
    /* the layers and their results */
    const cli_suite *suite;
    bench_layer *layers;
    bench_map *maps;
    int n_maps;
    double sum_ms, sum_floor_ms, sum_maps_ms; /* sums over every layer (repeats included)  */
    bench_stats network;                     /* the layers back to back, maps prebuilt     */
    int floor_known;                         /* every layer has a floor                    */
    int model;                               /* --model: the layers are a network's steps  */
} bench_run;

/* Median (the mean of the middle two for an even count), p10 and p90 (nearest rank); sorts v. */
bench_stats bench_stats_of(double *v, int n);

/* The table (stdout, or stderr when --csv or --json is "-"), then the files. */
int bench_report_all(const char *cmd, vc_context *ctx, const bench_run *r, const char *csv,
                     const char *json, const char *plot);

/* voxconv bench --model (bench_net.c): run holds the settings; the result is reported. */
typedef struct bench_model_opts {
    const char *model, *weights, *scene; /* weights NULL: random weights from seed            */
    const vc_synth_desc *synth;          /* a synthetic scene's points instead of scene       */
    const cli_read_opts *read;
    uint64_t seed;
    vc_dtype dtype;
    vc_algo algo;
    const char *csv, *json, *plot;
    const cli_bounds *bounds;            /* --bounds: then graph replays timed too, or NULL   */
} bench_model_opts;

int bench_model(const char *cmd, vc_context *ctx, const bench_model_opts *m, bench_run *run);

/* "subm" ... for the map types. */
const char *bench_algo_name(vc_algo a);

/* The table of every layer, the map builds and the whole-suite line, to f. */
void bench_print_table(FILE *f, const bench_run *r);
/* The CSV (one row per layer) and the JSON document; into an open stream. */
void bench_write_csv(FILE *f, const bench_run *r);
void bench_write_json(FILE *f, const bench_run *r);
/* The SVG chart of one run's per-layer times. */
void bench_write_svg(FILE *f, const bench_run *r);

/* --csv / --json / --plot: "-" is stdout; a file goes through the atomic writer (all of
 * them or none). Returns CLI_OK or CLI_FAIL after the error line. */
int bench_write_outputs(const char *cmd, vc_context *ctx, const bench_run *r, const char *csv,
                        const char *json, const char *plot);

/* voxconv bench --plot OUT.svg --compare A.json B.json. */
int bench_compare(const char *cmd, vc_context *ctx, const char *a, const char *b,
                  const char *plot);

#endif /* VOXCONV_CLI_BENCH_H */
