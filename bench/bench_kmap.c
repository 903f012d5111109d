/* bench/bench_kmap.c - benchmark of the GPU hash table and GPU kernel-map builds (not a
 * ctest). Usage: bench_kmap [runs] [scan[@voxel_size] ...]
 *   - hash insert and lookup of 1M and 10M random keys, in both slot layouts (16-byte slots for
 *     62-bit keys, packed 8-byte slots for 31-bit keys): the insert call (with its read-back),
 *     the insert kernel alone (vc_hash_gpu_insert_async), the lookup; each beside its floor:
 *     bytes over the copy bandwidth or random sectors (one per key) over the rate that the
 *     table's size allows (sector_rate; the rates and their source: docs/benchmarks.md, Floors);
 *   - map builds (subm k3, strided k3 s2 p1, downsample k2 s2) on synthetic scenes - a spinning
 *     128-beam LiDAR over a ground plane and a few walls (~100k voxels, SECOND grid
 *     41x1600x1408) and an indoor room of surfaces (~300k voxels) - and on the scans given on
 *     the command line (any format vc_cloud_read reads, voxelized by vc_voxelize_cpu at
 *     voxel_size metres, "x" or "x,y,z"; default 0.05,0.05,0.1; three frames each, shifted by
 *     0, 1, 2 voxels so that runs rotate over distinct tables): per stage (the timed build),
 *     the whole regular call (vc_kmap_build_gpu, host read-backs included; by events, and the
 *     host's time until it returns, which may come before its last kernels end), the same call
 *     queued behind a spin (its host work before its first launch hidden: what is left is the
 *     GPU's chain, the read-back and the host's return), and the bounded build captured in a
 *     CUDA graph and replayed (no host synchronisation inside); beside each stage its floor,
 *     from the counts of the map (see docs/benchmarks.md).
 * VC_BENCH_DENSE=-1 / 1 sends the new-output maps to the output hash table / the dense bitmap
 * wherever it fits (vc_engine_options.kmap_dense; default 0: the library's choice), for A/Bs.
 * VC_BENCH_MODES=staged,call,graph (any of the three; default all) times those modes of each
 * map row and skips the others (their columns print 0), so that a profiler sees the kernels of
 * one mode alone (bench/run_kmap.sh profile).
 * Timing: CUDA events, WARMUP warm-up runs, median of `runs` (default 25, at least 20) runs.
 * Prints markdown tables to stdout. Seeds are fixed. */
#define _POSIX_C_SOURCE 200809L /* core/clock.h */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv.h"
#include "core/clock.h"
#include "core/floor.h"
#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "hash/hash.h"
#include "hash/hash_gpu.h"
#include "scenes.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "bench_util.h"
#include "voxelize/voxelize.h"

#define NFRAMES 3
#define WARMUP 3

static int g_runs = 25;
static cudaStream_t g_s;
static vc_engine_options g_opts = VC_ENGINE_OPTIONS_INIT; /* VC_BENCH_DENSE */
enum { MODE_STAGED = 1, MODE_CALL = 2, MODE_GRAPH = 4 };
static int g_modes = MODE_STAGED | MODE_CALL | MODE_GRAPH;


/* Random 32-byte sectors per second that a table of `bytes` allows on an H100: a step function
 * of where the table lives (the fast half of L2, all of it, HBM); docs/benchmarks.md, Floors. */
static double sector_rate(double bytes)
{
    const double mb = bytes / (1 << 20);
    if (mb <= 24) return 135e9;
    if (mb <= 32) return 99e9;
    if (mb <= 64) return 53e9;
    return 31.6e9;
}

/* Floor in microseconds: the larger of bytes over the H100's bandwidth (core/floor.h, the one
 * copy of the floor model's rates) and sectors over `rate`. */
static double floor_us(double bytes, double sectors, double rate)
{
    double a = bytes / VC_FLOOR_H100_BYTES, b = sectors / rate;
    return 1e6 * (a > b ? a : b);
}

/* ---- scenes ------------------------------------------------------------------------------ */

typedef struct scene {
    const char *name;
    int32_t shape[3];
    int32_t *rows[NFRAMES];
    int64_t n[NFRAMES];
    int nframes;
} scene;

/* A scan file voxelized by vc_voxelize_cpu at `arg` = "path[@size]" (size "s" or "sx,sy,sz" in
 * metres; default 0.05,0.05,0.1). Frames 1 and 2 are frame 0 shifted by 1 and 2 voxels in y and
 * x (the grid has a margin of 3 voxels). Rows come sorted by (b, z, y, x), as voxelized. */
static int load_scan(const char *arg, scene *s)
{
    char path[256];
    float size[3];
    if (scene_scan_arg(arg, path, sizeof path, size) != 0) return -1;
    vc_cloud c;
    if (vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &c) != VC_OK) return -1;
    float mn[3], mx[3];
    scene_cloud_bounds(&c, mn, mx);
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    for (int a = 0; a < 3; a++) {
        d.voxel_size[a] = (float)size[a];
        d.range[a] = mn[a];
        d.range[3 + a] = mn[a] + (float)((ceil((mx[a] - mn[a]) / size[a]) + 3) * size[a]);
    }
    vc_points p = {c.data, c.count, c.dim, NULL, VC_MEMORY_HOST};
    vc_voxels v;
    vc_err err = {{0}};
    vc_status st = vc_voxelize_cpu(&d, &p, NULL, &v, NULL, &err);
    vc_cloud_free(&c);
    if (st != VC_OK || v.n < 1) {
        fprintf(stderr, "bench_kmap: voxelizing %s: %s\n", path, err.msg);
        return -1;
    }
    memcpy(s->shape, v.shape, sizeof s->shape);
    s->nframes = NFRAMES;
    for (int f = 0; f < NFRAMES; f++) {
        s->n[f] = v.n;
        s->rows[f] = malloc((size_t)v.n * 16);
        for (int64_t i = 0; i < v.n; i++) {
            const int32_t *r = v.coords + 4 * i;
            int32_t *o = s->rows[f] + 4 * i;
            o[0] = r[0];
            o[1] = r[1];
            o[2] = r[2] + f;
            o[3] = r[3] + f;
        }
    }
    vc_voxels_free(&v);
    const char *base = strrchr(path, '/');
    static char names[8][160];
    static int used = 0;
    char *name = names[used++ % 8];
    snprintf(name, 160, "%s @ %g,%g,%g m (real)", base ? base + 1 : path, size[0], size[1],
             size[2]);
    s->name = name;
    return 0;
}

/* ---- hash throughput --------------------------------------------------------------------- */

static void bench_hash(int64_t n, int packed, vc_rng *rng)
{
    uint64_t *keys = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) keys[i] = vc_rng_next(rng) >> (packed ? 33 : 2);
    uint64_t *q = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) q[i] = keys[i];
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1);
        uint64_t t = q[i];
        q[i] = q[j];
        q[j] = t;
    }
    uint64_t *dk, *dq;
    int32_t *dout;
    CUDA_CHECK(cudaMalloc((void **)&dk, (size_t)n * 8));
    CUDA_CHECK(cudaMalloc((void **)&dq, (size_t)n * 8));
    CUDA_CHECK(cudaMalloc((void **)&dout, (size_t)n * 4));
    CUDA_CHECK(cudaMemcpy(dk, keys, (size_t)n * 8, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dq, q, (size_t)n * 8, cudaMemcpyHostToDevice));
    bench_timer tm;
    bench_timer_init(&tm, g_s);
    float *ti = malloc(sizeof(float) * (size_t)g_runs);
    float *tk = malloc(sizeof(float) * (size_t)g_runs);
    float *tf = malloc(sizeof(float) * (size_t)g_runs);
    const int32_t bits = packed ? 31 : 64;
    vc_hash_gpu h;
    int64_t cap = 0;
    for (int r = -WARMUP; r < g_runs; r++) {
        DIE_IF(vc_hash_gpu_create_ex(&h, n, bits, g_s) != VC_HASH_GPU_OK, "hash create failed");
        CUDA_CHECK(cudaStreamSynchronize(g_s));
        bench_timer_start(&tm);
        /* the whole call: includes the one read-back of the insert counters */
        DIE_IF(vc_hash_gpu_insert(&h, dk, NULL, n, g_s, NULL) != VC_HASH_GPU_OK, "insert failed");
        bench_timer_stop(&tm, r >= 0 ? &ti[r] : NULL);
        vc_hash_gpu_destroy(&h, g_s);
        DIE_IF(vc_hash_gpu_create_ex(&h, n, bits, g_s) != VC_HASH_GPU_OK, "hash create failed");
        CUDA_CHECK(cudaStreamSynchronize(g_s));
        bench_timer_start(&tm);
        /* the kernels alone */
        DIE_IF(vc_hash_gpu_insert_async(&h, dk, NULL, n, g_s) != VC_HASH_GPU_OK,
               "insert_async failed");
        bench_timer_stop(&tm, r >= 0 ? &tk[r] : NULL);
        DIE_IF(vc_hash_gpu_insert_result(&h, g_s, NULL) != VC_HASH_GPU_OK, "insert failed");
        bench_timer_start(&tm);
        DIE_IF(vc_hash_gpu_find(&h, dq, n, dout, g_s) != VC_HASH_GPU_OK, "find failed");
        bench_timer_stop(&tm, r >= 0 ? &tf[r] : NULL);
        cap = h.capacity;
        vc_hash_gpu_destroy(&h, g_s);
    }
    /* every key is in the table: spot-check the lookups of the last run */
    int32_t *got = malloc((size_t)n * 4);
    CUDA_CHECK(cudaMemcpy(got, dout, (size_t)n * 4, cudaMemcpyDeviceToHost));
    int64_t missing = 0;
    for (int64_t i = 0; i < n; i++) missing += got[i] < 0;
    DIE_IF(missing != 0, "hash lookup: %lld keys not found", (long long)missing);
    free(got);
    const double slot = packed ? 8 : 16, tbytes = (double)cap * slot, rate = sector_rate(tbytes);
    const float mi = median(ti, g_runs), mk = median(tk, g_runs), mf = median(tf, g_runs);
    /* insert: key read + slot write; lookup: key read, slot read, result write; one random
     * sector per key (probes past the home slot not counted) */
    const double fi = floor_us(n * (8 + slot), (double)n, rate);
    const double ff = floor_us(n * (8 + slot + 4), (double)n, rate);
    const char *lay = packed ? "packed 8 B (31-bit keys)" : "16 B (62-bit keys)";
    printf("| insert call | %s | %lld | %.0f MB | %.3f | %.2f G/s | %.1f | %.1fx |\n", lay,
           (long long)n, tbytes / (1 << 20), mi, n / (mi * 1e-3) * 1e-9, fi, mi * 1e3 / fi);
    printf("| insert kernel | %s | %lld | %.0f MB | %.3f | %.2f G/s | %.1f | %.1fx |\n", lay,
           (long long)n, tbytes / (1 << 20), mk, n / (mk * 1e-3) * 1e-9, fi, mk * 1e3 / fi);
    printf("| lookup | %s | %lld | %.0f MB | %.3f | %.2f G/s | %.1f | %.1fx |\n", lay,
           (long long)n, tbytes / (1 << 20), mf, n / (mf * 1e-3) * 1e-9, ff, mf * 1e3 / ff);
    bench_timer_free(&tm);
    cudaFree(dk);
    cudaFree(dq);
    cudaFree(dout);
    free(keys);
    free(q);
    free(ti);
    free(tk);
    free(tf);
}

/* ---- map builds -------------------------------------------------------------------------- */

static int64_t capacity_of(int64_t n) { return vc_hash_capacity_for(n); }

/* Stage floors (us) of a map, per docs/benchmarks.md: insert, out coords, out_in, pairs,
 * masks+perm, total. Tables and their layouts as the regular build sizes them. */
static void map_floors(const scene *sc, const vc_map_desc *d, int64_t n, int64_t no,
                       int64_t np, double fl[6])
{
    const int64_t K = (int64_t)d->kernel[0] * d->kernel[1] * d->kernel[2];
    vc_keypack kin, kout;
    vc_keypack_init(&kin, 1, sc->shape);
    const int bits_in = kin.shift[0] + kin.bits[0];
    const double tin = (double)capacity_of(n) * (bits_in <= 31 ? 8 : 16);
    for (int i = 0; i < 6; i++) fl[i] = 0;
    if (d->type == VC_MAP_SUBM) {
        const double half = (double)(K - 1) / 2;
        fl[0] = floor_us(16.0 * n + tin + 4.0 * n * half, (double)n, sector_rate(tin));
        fl[2] = floor_us(16.0 * n + 4.0 * n * (half + 1), n * half + (np - n) / 2.0,
                         sector_rate(tin));
    } else {
        int32_t osh[3];
        vc_err err;
        vc_kmap_check_desc(d, sc->shape, osh, &err);
        vc_keypack_init(&kout, 1, osh);
        const int bits_out = kout.shift[0] + kout.bits[0];
        const double ks = bits_out <= 31 ? 4 : 8;
        int64_t est = d->type == VC_MAP_DOWNSAMPLE ? n : 4 * n;
        const double tout = (double)capacity_of(est) * (bits_out <= 31 ? 8 : 16);
        /* candidates inserted: one per input (downsample) or one per pair (strided) */
        const double cand = d->type == VC_MAP_DOWNSAMPLE ? (double)n : (double)np;
        fl[0] = floor_us(16.0 * n + tin + tout + ks * no, (double)n + cand,
                         sector_rate(tin + tout));
        fl[1] = floor_us(2 * ks * no + 16.0 * no + 4.0 * no * K, (double)no, sector_rate(tout));
        fl[2] = floor_us(16.0 * n + 4.0 * np, cand + np, sector_rate(tout));
    }
    fl[3] = floor_us(4.0 * no * K + 12.0 * no + 12.0 * np, 0, 1);
    fl[4] = floor_us(12.0 * no, 0, 1);
    fl[5] = fl[0] + fl[1] + fl[2] + fl[3] + fl[4];
}

/* ---- probes: the SM clock, and what a graph node costs on this machine ------------------ */

static CUfunction g_spin, g_empty, g_atom;
static int g_nvrtc_ok;
static unsigned long long *g_spin_out;

/* Queues a spin of ns nanoseconds on g_s (nothing when the probe kernels did not compile). */
static void queue_spin(long long ns)
{
    if (!g_nvrtc_ok) return;
    void *args[] = {&ns, &g_spin_out};
    DIE_IF(cuLaunchKernel(g_spin, 1, 1, 1, 32, 1, 1, 0, (CUstream)g_s, args, NULL) !=
               CUDA_SUCCESS, "launching the spin probe failed");
}

/* The SM clock now (MHz): a 20 us spin's cycles over its nanoseconds; 0 without the probes. */
static double clock_now(void)
{
    if (!g_nvrtc_ok) return 0;
    unsigned long long r[2] = {0, 0};
    queue_spin(20000);
    CUDA_CHECK(cudaStreamSynchronize(g_s));
    CUDA_CHECK(cudaMemcpy(r, g_spin_out, sizeof r, cudaMemcpyDeviceToHost));
    return r[0] ? (double)r[1] * 1e3 / (double)r[0] : 0;
}

/* The spin that "queued" timings start behind (ns): longer than the host's submission of
 * anything timed behind it, so that the GPU never waits for the host there. */
static const long long kQueueSpinNs = 200000;

/* Replays a graph of `nodes` empty kernels (a chain), started right after the host launch
 * ("direct") or queued behind a spin (kQueueSpinNs) so that the host's submission is hidden
 * ("queued"): microseconds, medians. */
static void probe_graph(int nodes, float *direct, float *queued)
{
    cudaGraph_t g;
    cudaGraphExec_t ex;
    CUDA_CHECK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < nodes; i++)
        DIE_IF(cuLaunchKernel(g_empty, 1, 1, 1, 32, 1, 1, 0, (CUstream)g_s, NULL, NULL) !=
                   CUDA_SUCCESS, "capturing the empty kernels failed");
    CUDA_CHECK(cudaStreamEndCapture(g_s, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ex, g, 0));
    cudaGraphDestroy(g);
    bench_timer tm;
    bench_timer_init(&tm, g_s);
    float *t = malloc(sizeof(float) * (size_t)g_runs);
    for (int mode = 0; mode < 2; mode++) {
        for (int r = -WARMUP; r < g_runs; r++) {
            if (mode) queue_spin(kQueueSpinNs);
            bench_timer_start(&tm);
            CUDA_CHECK(cudaGraphLaunch(ex, g_s));
            bench_timer_stop(&tm, r >= 0 ? &t[r] : NULL);
        }
        *(mode ? queued : direct) = median(t, g_runs) * 1e3f;
    }
    free(t);
    bench_timer_free(&tm);
    cudaGraphExecDestroy(ex);
}

/* Random-slot atomics: n operations over a table of `words` words (all ones before each run),
 * microseconds (median) and G operations per second, per mode of the atom kernel. */
static void probe_atomics(long long n, long long words)
{
    static const char *names[5] = {"64-bit CAS on an empty slot", "load, then 64-bit CAS",
                                   "32-bit CAS", "plain 64-bit store", "32-bit atomicAdd"};
    unsigned long long *t = NULL, mask = (unsigned long long)words - 1;
    CUDA_CHECK(cudaMalloc((void **)&t, (size_t)words * 8));
    bench_timer tm;
    bench_timer_init(&tm, g_s);
    float *ts = malloc(sizeof(float) * (size_t)g_runs);
    unsigned blocks = (unsigned)((n + 255) / 256);
    for (int mode = 0; mode < 5; mode++) {
        for (int r = -WARMUP; r < g_runs; r++) {
            CUDA_CHECK(cudaMemsetAsync(t, 0xff, (size_t)words * 8, g_s));
            void *args[] = {&t, &mask, &n, &mode};
            bench_timer_start(&tm);
            DIE_IF(cuLaunchKernel(g_atom, blocks, 1, 1, 256, 1, 1, 0, (CUstream)g_s, args, NULL) !=
                       CUDA_SUCCESS, "launching the atomics probe failed");
            bench_timer_stop(&tm, r >= 0 ? &ts[r] : NULL);
        }
        const float us = median(ts, g_runs) * 1e3f;
        printf("| %s | %lld | %lld MB | %.1f | %.2f |\n", names[mode], n, words * 8 >> 20, us,
               (double)n / us * 1e-3);
    }
    free(ts);
    bench_timer_free(&tm);
    cudaFree(t);
}

/* Clock read after each map row's graph replays, printed with the probes. */
static char g_clock_lines[16][160];
static int g_nclock;

/* The bounded build of one map row captured in a CUDA graph per frame and replayed: tg (the
 * replay, from the host's launch) and tq (queued behind a spin: the GPU's time alone), g_runs
 * each; the replays' counts checked against the regular build's. */
static void bench_graph(const scene *sc, int32_t *const *d_rows, const char *label,
                        const vc_map_desc *d, int64_t max_in, int64_t max_out, int64_t max_pairs,
                        const int64_t *n_out, const int64_t *n_pairs, float *tg, float *tq)
{
    bench_timer tm;
    bench_timer_init(&tm, g_s);
    vc_kmap_gpu_bounded b;
    vc_err err = {{0}};
    DIE_IF(vc_kmap_gpu_bounded_create(d, sc->shape, 1, max_in, max_out, max_pairs, &g_opts, &b,
                                      &err) != VC_OK,
           "%s %s: bounded create: %s", sc->name, label, err.msg);
    cudaGraphExec_t exec[NFRAMES];
    for (int f = 0; f < sc->nframes; f++) {
        /* warm-up outside the capture, then capture */
        DIE_IF(vc_kmap_build_gpu_bounded(&b, d_rows[f], sc->n[f], g_s, &err) != VC_OK, "%s",
               err.msg);
        DIE_IF(vc_kmap_gpu_bounded_check(&b, g_s, &err) != VC_OK, "%s %s: bounded: %s",
               sc->name, label, err.msg);
        cudaGraph_t g;
        CUDA_CHECK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeGlobal));
        DIE_IF(vc_kmap_build_gpu_bounded(&b, d_rows[f], sc->n[f], g_s, &err) != VC_OK, "%s",
               err.msg);
        CUDA_CHECK(cudaStreamEndCapture(g_s, &g));
        CUDA_CHECK(cudaGraphInstantiate(&exec[f], g, 0));
        cudaGraphDestroy(g);
    }
    for (int r = -WARMUP; r < g_runs; r++) {
        int f = (r + WARMUP) % sc->nframes;
        bench_timer_start(&tm);
        CUDA_CHECK(cudaGraphLaunch(exec[f], g_s));
        bench_timer_stop(&tm, r >= 0 ? &tg[r] : NULL);
    }
    const double mhz = clock_now();
    /* the same replays queued behind a spin (kQueueSpinNs): the GPU's time alone, without the
     * host's submission of the graph */
    for (int r = -WARMUP; r < g_runs; r++) {
        int f = (r + WARMUP) % sc->nframes;
        queue_spin(kQueueSpinNs);
        bench_timer_start(&tm);
        CUDA_CHECK(cudaGraphLaunch(exec[f], g_s));
        bench_timer_stop(&tm, r >= 0 ? &tq[r] : NULL);
    }
    if (g_nclock < 16)
        snprintf(g_clock_lines[g_nclock++], sizeof g_clock_lines[0],
                 "%s, %s: SM clock %.0f MHz right after the graph replays", sc->name, label,
                 mhz);
    for (int f = 0; f < sc->nframes; f++) {
        CUDA_CHECK(cudaGraphLaunch(exec[f], g_s));
        DIE_IF(vc_kmap_gpu_bounded_check(&b, g_s, &err) != VC_OK, "%s %s: replay: %s", sc->name,
               label, err.msg);
        DIE_IF(b.map.n_out != n_out[f] || b.map.n_pairs != n_pairs[f],
               "%s %s: replay counts %lld/%lld differ from the regular build's %lld/%lld",
               sc->name, label, (long long)b.map.n_out, (long long)b.map.n_pairs,
               (long long)n_out[f], (long long)n_pairs[f]);
        cudaGraphExecDestroy(exec[f]);
    }
    vc_kmap_gpu_bounded_destroy(&b);
    bench_timer_free(&tm);
}

/* One regular call of frame f's map build between events e0 and e1, in ms; *host_ms: the
 * host's time in the call (until it returns, which may come before its last kernels end).
 * queued: behind a spin (kQueueSpinNs), e0 after it, so that the host's work before the call's
 * first launch runs during the spin. */
static float call_ms(const scene *sc, int32_t *const *d_rows, int f, const char *label,
                     const vc_map_desc *d, int queued, cudaEvent_t e0, cudaEvent_t e1,
                     float *host_ms)
{
    vc_kmap_data m;
    vc_err err = {{0}};
    float ms = 0.f;
    if (queued) queue_spin(kQueueSpinNs);
    CUDA_CHECK(cudaEventRecord(e0, g_s));
    const double h0 = vc_clock_ms();
    vc_status st = vc_kmap_build_gpu(d_rows[f], sc->n[f], sc->shape, 1, d, &g_opts, g_s, &m, &err);
    *host_ms = (float)(vc_clock_ms() - h0);
    CUDA_CHECK(cudaEventRecord(e1, g_s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    DIE_IF(st != VC_OK, "%s %s: %s", sc->name, label, err.msg);
    vc_kmap_data_free_gpu(&m);
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
}

static void bench_build(const scene *sc, int32_t *const *d_rows, const char *label,
                        const vc_map_desc *d)
{
    float *t[11];
    for (int i = 0; i < 11; i++) t[i] = calloc((size_t)g_runs, sizeof(float));
    int64_t n_out[NFRAMES] = {0}, n_pairs[NFRAMES] = {0}, max_in = 1, max_out = 1, max_pairs = 1;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    /* 0. without the staged mode: one untimed call a frame, for the counts */
    for (int f = 0; f < sc->nframes && !(g_modes & MODE_STAGED); f++) {
        vc_kmap_data m;
        vc_err err = {{0}};
        DIE_IF(vc_kmap_build_gpu(d_rows[f], sc->n[f], sc->shape, 1, d, &g_opts, g_s, &m, &err) !=
                   VC_OK,
               "%s %s: %s", sc->name, label, err.msg);
        n_out[f] = m.n_out;
        n_pairs[f] = m.n_pairs;
        vc_kmap_data_free_gpu(&m);
    }
    /* 1. the timed build: stages */
    for (int r = -WARMUP; r < g_runs && (g_modes & MODE_STAGED); r++) {
        int f = (r + WARMUP) % sc->nframes;
        vc_kmap_data m;
        vc_kmap_gpu_timing tm;
        vc_err err = {{0}};
        vc_status st = vc_kmap_build_gpu_timed(d_rows[f], sc->n[f], sc->shape, 1, d, &g_opts,
                                               g_s, &m, &tm, &err);
        DIE_IF(st != VC_OK, "%s %s: %s", sc->name, label, err.msg);
        n_out[f] = m.n_out;
        n_pairs[f] = m.n_pairs;
        vc_kmap_data_free_gpu(&m);
        if (r < 0) continue;
        t[0][r] = tm.insert_ms;
        t[1][r] = tm.out_coords_ms;
        t[2][r] = tm.out_in_ms;
        t[3][r] = tm.pairs_ms;
        t[4][r] = tm.masks_ms;
        t[5][r] = tm.total_ms;
    }
    /* 2. the whole regular call, untimed inside; 2b. the same call queued behind a spin
     * (call_ms) */
    for (int q = 0; q < 2; q++)
        for (int r = -WARMUP; r < g_runs && (g_modes & MODE_CALL) && (!q || g_nvrtc_ok); r++) {
            float host = 0.f;
            const float ms =
                call_ms(sc, d_rows, (r + WARMUP) % sc->nframes, label, d, q, e0, e1, &host);
            if (r >= 0) t[q ? 9 : 6][r] = ms;
            if (r >= 0 && !q) t[10][r] = host;
        }
    /* 3. the bounded build, one graph per frame, replayed */
    for (int f = 0; f < sc->nframes; f++) {
        if (sc->n[f] > max_in) max_in = sc->n[f];
        if (n_out[f] > max_out) max_out = n_out[f];
        if (n_pairs[f] > max_pairs) max_pairs = n_pairs[f];
    }
    if (d->type == VC_MAP_SUBM) max_out = max_in;
    if (g_modes & MODE_GRAPH)
        bench_graph(sc, d_rows, label, d, max_in, max_out, max_pairs, n_out, n_pairs, t[7], t[8]);
    double fl[6];
    map_floors(sc, d, sc->n[0], n_out[0], n_pairs[0], fl);
    float med[11];
    for (int i = 0; i < 11; i++) med[i] = median(t[i], g_runs);
    printf("| %s | %s | %lld | %lld | %lld |", sc->name, label, (long long)sc->n[0],
           (long long)n_out[0], (long long)n_pairs[0]);
    for (int i = 0; i < 6; i++) printf(" %.1f |", med[i] * 1e3);
    printf(" %.1f | %.1f | %.1f | %.1f | %.1f |\n", med[6] * 1e3, med[10] * 1e3, med[9] * 1e3,
           med[7] * 1e3, med[8] * 1e3);
    printf("| | floor (us) | | | |");
    for (int i = 0; i < 6; i++) printf(" %.1f |", fl[i]);
    printf(" x%.1f | | x%.1f | x%.1f | x%.1f |\n", med[6] * 1e3 / fl[5], med[9] * 1e3 / fl[5],
           med[7] * 1e3 / fl[5], med[8] * 1e3 / fl[5]);
    for (int i = 0; i < 11; i++) free(t[i]);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

/* ---- probe kernels, compiled with NVRTC ---------------------------------------------------- */

static const char *kProbeSrc =
    "/* probes: a spin of ns nanoseconds (globaltimer) that reports the SM cycles it took, and\n"
    "   an empty kernel */\n"
    "extern \"C\" __global__ void spin(long long ns, unsigned long long *out)\n"
    "{\n"
    "  unsigned long long t0, t1;\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "  long long c0 = clock64();\n"
    "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t1)); }\n"
    "  while ((long long)(t1 - t0) < ns);\n"
    "  long long c1 = clock64();\n"
    "  if (out && threadIdx.x == 0 && blockIdx.x == 0) { out[0] = t1 - t0; out[1] = c1 - c0; }\n"
    "}\n"
    "extern \"C\" __global__ void empty(void) {}\n"
    "/* random-slot atomics over a table of mask + 1 words: mode 0 64-bit CAS on an empty slot,\n"
    "   1 load then 64-bit CAS (the insert's pattern), 2 32-bit CAS, 3 plain 64-bit store,\n"
    "   4 32-bit atomicAdd */\n"
    "extern \"C\" __global__ void atom(unsigned long long *t, unsigned long long mask,\n"
    "    long long n, int mode)\n"
    "{\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    unsigned long long k = (unsigned long long)i * 0x9e3779b97f4a7c15ull;\n"
    "    k ^= k >> 29;\n"
    "    unsigned long long s = k & mask;\n"
    "    if (mode == 0) atomicCAS(&t[s], ~0ull, (unsigned long long)i);\n"
    "    else if (mode == 1) {\n"
    "      if (t[s] == ~0ull) atomicCAS(&t[s], ~0ull, (unsigned long long)i);\n"
    "    }\n"
    "    else if (mode == 2) atomicCAS((unsigned *)&t[s], ~0u, (unsigned)i);\n"
    "    else if (mode == 3) t[s] = i;\n"
    "    else atomicAdd((unsigned *)&t[s], 1u);\n"
    "  }\n"
    "}\n";

static int probe_init(void)
{
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, kProbeSrc, "probes.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return -1;
    int major = 0, minor = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *opts[] = {arch};
    if (nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) {
        size_t len = 0;
        nvrtcGetProgramLogSize(prog, &len);
        char *log = malloc(len + 1);
        nvrtcGetProgramLog(prog, log);
        fprintf(stderr, "nvrtc: %s\n", log);
        free(log);
        return -1;
    }
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    char *cubin = malloc(size);
    nvrtcGetCUBIN(prog, cubin);
    nvrtcDestroyProgram(&prog);
    CUmodule mod;
    int rc = cuModuleLoadData(&mod, cubin) == CUDA_SUCCESS &&
                     cuModuleGetFunction(&g_spin, mod, "spin") == CUDA_SUCCESS &&
                     cuModuleGetFunction(&g_empty, mod, "empty") == CUDA_SUCCESS &&
                     cuModuleGetFunction(&g_atom, mod, "atom") == CUDA_SUCCESS
                 ? 0
                 : -1;
    free(cubin);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------- */

/* What a graph node and a random-slot atomic cost on this device, with the SM clock before and
 * after (needs the NVRTC probe kernels). */
static void run_probes(void)
{
    /* what a graph node costs here: chains of empty kernels */
    printf("## Probes\n\n");
    printf("SM clock at the start: %.0f MHz\n\n", clock_now());
    printf("| graph of empty kernels | replay (us) | replay queued behind a spin (us) |\n");
    printf("|---|---|---|\n");
    const int sizes[3] = {1, 8, 16};
    for (int i = 0; i < 3; i++) {
        float dt = 0, qt = 0;
        probe_graph(sizes[i], &dt, &qt);
        printf("| %d nodes | %.1f | %.1f |\n", sizes[i], dt, qt);
    }
    printf("\n| random-slot operation | ops | table | us | G ops/s |\n|---|---|---|---|---|\n");
    probe_atomics(100000, 1 << 18);
    probe_atomics(1000000, 1 << 21);
    printf("\nSM clock after the probes: %.0f MHz\n\n", clock_now());
    fflush(stdout);
}

/* Insert and lookup of 1M and 10M random keys, in both slot layouts. */
static void bench_hash_table(vc_rng *rng)
{
    printf("## Hash table (random keys, load <= 0.5; floor = max(bytes / 3.0 TB/s, keys / "
           "sector rate of the table's size))\n\n");
    printf("| op | slots | keys | table | ms | keys/s | floor us | vs floor |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    bench_hash(1000000, 0, rng);
    bench_hash(1000000, 1, rng);
    bench_hash(10000000, 0, rng);
    bench_hash(10000000, 1, rng);
    fflush(stdout);
}

/* A synthetic scene of NFRAMES frames: name and grid set, frames left to the generator. */
static scene *synthetic_scene(scene *s, const char *name, int32_t z, int32_t y, int32_t x)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    s->shape[0] = z;
    s->shape[1] = y;
    s->shape[2] = x;
    s->nframes = NFRAMES;
    return s;
}

/* The outdoor and indoor synthetic scenes (three frames each, drawn from rng in that order) and
 * the scans given (at most 8 scenes in all); returns their count. */
static int make_scenes(scene *scenes, vc_rng *rng, char **scans, int nscans)
{
    int ns = 0;
    scene *s = synthetic_scene(&scenes[ns++], "outdoor 128-beam (synthetic)", 41, 1600, 1408);
    for (int f = 0; f < NFRAMES; f++) scene_lidar_walls(rng, &s->rows[f], &s->n[f], s->shape);
    s = synthetic_scene(&scenes[ns++], "indoor room (synthetic)", 100, 267, 334);
    for (int f = 0; f < NFRAMES; f++) scene_room(rng, &s->rows[f], &s->n[f], s->shape);
    for (int i = 0; i < nscans && ns < 8; i++) {
        s = &scenes[ns];
        memset(s, 0, sizeof *s);
        if (load_scan(scans[i], s) != 0) {
            fprintf(stderr, "bench_kmap: cannot read %s\n", scans[i]);
            continue;
        }
        ns++;
    }
    return ns;
}

/* VC_BENCH_ONLY=subm (strided, down)[@I]: the subm k3 (strided k3 s2 p1, downsample k2 s2) row
 * of scene I alone (0, the default: the outdoor scene; 1 indoor; 2 on: the scans given), for
 * profilers and A/B runs. Returns 1 (subm), 2 (strided), 3 (down) or 0 (all rows); the map's
 * name in only, the scene in *only_scene. */
static int parse_only(char only[32], int *only_scene)
{
    *only_scene = 0;
    if (getenv("VC_BENCH_ONLY")) {
        snprintf(only, 32, "%s", getenv("VC_BENCH_ONLY"));
        char *at = strchr(only, '@');
        if (at) {
            *at = 0;
            *only_scene = atoi(at + 1);
        }
    }
    return strcmp(only, "subm") == 0      ? 1
           : strcmp(only, "strided") == 0 ? 2
           : strcmp(only, "down") == 0    ? 3
                                          : 0;
}

int main(int argc, char **argv)
{
    g_opts.cache = vc_engine_cache_new(); /* the read-back block, as a context keeps it */
    if (!bench_have_device("bench_kmap")) return 77;
    int argi = 1;
    if (argc > 1 && atoi(argv[1]) > 0) {
        g_runs = atoi(argv[1]);
        if (g_runs < 20) g_runs = 20;
        argi = 2;
    }
    vc_bench_map_switches(&g_opts); /* VC_BENCH_DENSE */
    const char *modes = getenv("VC_BENCH_MODES");
    if (modes && *modes) {
        g_modes = (strstr(modes, "staged") ? MODE_STAGED : 0) |
                  (strstr(modes, "call") ? MODE_CALL : 0) |
                  (strstr(modes, "graph") ? MODE_GRAPH : 0);
        DIE_IF(g_modes == 0, "VC_BENCH_MODES=%s: expected staged, call and/or graph", modes);
        printf("VC_BENCH_MODES=%s: the other modes are skipped (0 in their columns)\n", modes);
    }
    CUDA_CHECK(cudaFree(0)); /* creates the primary context the driver API calls use */
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    printf("# bench_kmap\n\n");
    bench_print_device();
    printf("; median of %d runs after %d warm-up, CUDA events\n\n", g_runs, WARMUP);

    char only[32] = "";
    int only_scene = 0;
    const int only_map = parse_only(only, &only_scene);
    const int subm_only = only_map != 0;
    g_nvrtc_ok = probe_init() == 0;
    if (g_nvrtc_ok) CUDA_CHECK(cudaMalloc((void **)&g_spin_out, 2 * sizeof(unsigned long long)));
    if (g_nvrtc_ok && !subm_only) {
        run_probes();
    }

    vc_rng rng = {0x5eed5eed12345ull};
    if (!subm_only) bench_hash_table(&rng);

    scene scenes[8];
    int ns = make_scenes(scenes, &rng, argv + argi, argc - argi);

    if (subm_only) {
        DIE_IF(only_scene < 0 || only_scene >= ns, "VC_BENCH_ONLY: no scene %d (%d scenes)",
               only_scene, ns);
        for (int i = 0; i < ns; i++)
            if (i != only_scene)
                for (int f = 0; f < scenes[i].nframes; f++) free(scenes[i].rows[f]);
        scenes[0] = scenes[only_scene];
        ns = 1;
    }
    printf("\n## Map builds (microseconds, medians; stages of the timed build, then the whole "
           "regular call, alone (events; the host's time until it returns) and queued behind "
           "a spin, and a CUDA-graph replay of the bounded build)\n\n");
    printf("| scene | map | voxels | outputs | pairs | insert | out coords | out_in | pairs | "
           "masks+perm | staged total | call | call, host | call, queued | graph | "
           "graph, queued |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int32_t *d_rows[8][NFRAMES];
    vc_map_desc subm = VC_MAP_DESC_INIT, strided = VC_MAP_DESC_INIT, down = VC_MAP_DESC_INIT;
    strided.type = VC_MAP_STRIDED;
    for (int a = 0; a < 3; a++) {
        strided.stride[a] = 2;
        strided.padding[a] = 1;
        down.kernel[a] = 2;
        down.stride[a] = 2;
    }
    down.type = VC_MAP_DOWNSAMPLE;
    for (int i = 0; i < ns; i++) {
        for (int f = 0; f < scenes[i].nframes; f++) {
            size_t b = (size_t)scenes[i].n[f] * 16;
            CUDA_CHECK(cudaMalloc((void **)&d_rows[i][f], b ? b : 16));
            CUDA_CHECK(cudaMemcpy(d_rows[i][f], scenes[i].rows[f], b, cudaMemcpyHostToDevice));
        }
        if (subm_only) {
            const vc_map_desc *dd = only_map == 1 ? &subm : only_map == 2 ? &strided : &down;
            bench_build(&scenes[i], d_rows[i], only, dd);
            continue;
        }
        bench_build(&scenes[i], d_rows[i], "subm k3", &subm);
        bench_build(&scenes[i], d_rows[i], "strided k3 s2 p1", &strided);
        bench_build(&scenes[i], d_rows[i], "downsample k2 s2", &down);
        fflush(stdout);
    }

    if (g_nclock > 0) {
        printf("\n");
        for (int i = 0; i < g_nclock; i++) printf("# %s\n", g_clock_lines[i]);
    }
    for (int i = 0; i < ns; i++)
        for (int f = 0; f < scenes[i].nframes; f++) {
            cudaFree(d_rows[i][f]);
            free(scenes[i].rows[f]);
        }
    cudaStreamDestroy(g_s);
    return 0;
}

#else
int main(void)
{
    printf("bench_kmap: built without CUDA\n");
    return 77;
}
#endif
