/* tests/gpu/test_gpu_graph.c - kernel-map builds captured in CUDA graphs (the bounded variant of
 * kmap/kmap_gpu.h). For subm k3, subm k5 (dilation 2), strided k3 s2 p1, downsample k2 s2 and
 * transposed k2 s2: one bounded build is captured with stream capture in the global mode (so any
 * hidden synchronisation or allocation would fail the capture), the graph is checked to hold
 * only kernel and memset nodes, then replayed on several new clouds copied into the same input
 * buffer; after each replay vc_kmap_gpu_bounded_check must pass and every array must equal the
 * CPU twin's bit for bit (the arrays are poisoned with 0xA5 before each replay, so an element a
 * replay forgets to write shows). Then bounds that are too small (max_out for the new-output
 * maps, max_pairs for all) must come back from the check as VC_ERR_CAPACITY with the needed
 * count, and a replay on a cloud with a repeated row / a row outside the shape as
 * VC_ERR_DUPLICATE / VC_ERR_OUT_OF_RANGE, the regular build's verdicts.
 * The device-count build (vc_kmap_build_gpu_bounded_dev), on the synthetic clouds and the real
 * scans (datasets/fetch; skipped with a line where missing), for subm k3 / k5, strided k3 s2,
 * downsample k2 s2 and transposed k2 s2: ONE graph (the build and the tile order of the map's
 * view) replayed on frames of different counts written into the same buffers - 0 rows, a
 * count past max_in and frames past max_out / max_pairs (VC_ERR_CAPACITY from the check, then
 * the next good frame passes) - with garbage in the input rows past the count; live arrays
 * equal the CPU twin's bit for bit, the tail rows of the extent hold out_in -1 / masks 0 / perm
 * in row order, the device out_count is the output count and the view's tile order is the
 * CPU's followed by the tail blocks. Then two levels in one graph: a strided map's out_coords
 * and out_count feeding a subm _dev build; and a downsample k2 s2 / strided k3 s2 map with its
 * bounded INVERSE (vc_kmap_build_gpu_bounded_inverse) in one graph, the inverse compared with
 * the CPU twin's inverse of the same frame, tail and all.
 * VC_SANITIZE=1: small clouds, the device-count tests on one synthetic cloud and the first 2000
 * voxels of one real scan (for compute-sanitizer runs). Prints its seed (VC_TEST_SEED
 * replays). Exits 77 without a CUDA build or a usable device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "hash/hash.h"
#include "kmap_compare.h"
#include "map_desc.h"
#include "real_scans.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

#define NFRAMES 3

static cudaStream_t g_stream;

/* ---- clouds: surfaces of a scan-like scene, exactly n distinct rows, shuffled (scenes.h) -- */

#define make_rows scene_surface_rows

/* ---- comparison (kmap_compare.h) ----------------------------------------------------------- */

/* Uploads and poison go through g_stream, not the legacy default stream: g_stream is
 * non-blocking, so a cudaMemcpy / cudaMemset on the legacy stream is not ordered with the graph
 * replays. A pageable cudaMemcpy returns before its last chunk reaches the device and cudaMemset
 * returns at once, so a replay launched right after could read the previous frame's last rows,
 * or have its results overwritten by a late poison. (Read-backs stay plain cudaMemcpy: they
 * follow vc_kmap_gpu_bounded_check, which synchronises g_stream.) */
static void upload(int32_t *d_in, const int32_t *rows, int64_t n)
{
    CUDA_OK(cudaMemcpyAsync(d_in, rows, (size_t)n * 16, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
}

static void fill(void *p, size_t bytes)
{
    CUDA_OK(cudaMemsetAsync(p, 0xa5, bytes, g_stream));
}

static void poison_bounded(const vc_kmap_gpu_bounded *b)
{
    const vc_kmap_data *m = &b->map;
    const int64_t K = m->volume;
    if (m->out_coords) fill(m->out_coords, (size_t)b->max_out * 16);
    fill(m->out_in, (size_t)(b->max_out * K) * 4);
    fill(m->offsets, (size_t)(K + 1) * 8);
    fill(m->in_rows, (size_t)b->max_pairs * 4);
    fill(m->out_rows, (size_t)b->max_pairs * 4);
    fill(m->masks, (size_t)(b->max_out * m->mask_words) * 4);
    fill(m->perm, (size_t)b->max_out * 4);
}

/* What queue(arg) queues on g_stream, as a graph_body for capture_checked (gpu_testutil.h). */
typedef struct queue_arg {
    vc_status (*queue)(const void *, vc_err *);
    const void *arg;
} queue_arg;

static vc_status queue_body(void *p, cudaStream_t stream, vc_err *err)
{
    (void)stream; /* the queue functions queue on g_stream, the stream captured */
    const queue_arg *q = p;
    return q->queue(q->arg, err);
}

/* Captures what queue(arg) queues on g_stream into an executable graph (capture_checked: a
 * warm-up outside the capture, the global mode, only kernel and memset nodes); NULL on failure. */
static cudaGraphExec_t capture_q(vc_status (*queue)(const void *, vc_err *), const void *arg,
                                 const char *label)
{
    queue_arg q = {queue, arg};
    return capture_checked(g_stream, queue_body, &q, label);
}

/* Rows [n, extent) of b after a build: out_in all -1, mask words 0, perm[i] = i; the device
 * output count is n. */
static void check_tail(const char *label, const vc_kmap_gpu_bounded *b, int64_t n)
{
    const vc_kmap_data *m = &b->map;
    const int64_t ext = b->desc.type == VC_MAP_SUBM ? b->max_in : b->max_out;
    const int64_t K = m->volume, W = m->mask_words, t = ext - n;
    int64_t dev_n = -1;
    CUDA_OK(cudaMemcpy(&dev_n, vc_kmap_gpu_bounded_out_count(b), 8, cudaMemcpyDeviceToHost));
    CHECK_MSG(dev_n == n, "%s: device out_count %lld, want %lld", label, (long long)dev_n,
              (long long)n);
    if (t <= 0) return;
    int32_t *oi = malloc((size_t)(t * K) * 4), *pm = malloc((size_t)t * 4);
    uint32_t *mk = malloc((size_t)(t * W) * 4);
    CUDA_OK(cudaMemcpy(oi, m->out_in + n * K, (size_t)(t * K) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(mk, m->masks + n * W, (size_t)(t * W) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(pm, m->perm + n, (size_t)t * 4, cudaMemcpyDeviceToHost));
    int64_t bad_oi = 0, bad_mk = 0, bad_pm = 0;
    for (int64_t i = 0; i < t * K; i++) bad_oi += oi[i] != -1;
    for (int64_t i = 0; i < t * W; i++) bad_mk += mk[i] != 0;
    for (int64_t i = 0; i < t; i++) bad_pm += pm[i] != n + i;
    CHECK_MSG(bad_oi == 0 && bad_mk == 0 && bad_pm == 0, "%s: tail rows [%lld, %lld): %lld "
              "out_in entries not -1, %lld mask words not 0, %lld perm entries not their row",
              label, (long long)n, (long long)ext, (long long)bad_oi, (long long)bad_mk,
              (long long)bad_pm);
    free(oi);
    free(pm);
    free(mk);
}

/* The host-count bounded build of b over d_in [n]. */
typedef struct host_build {
    vc_kmap_gpu_bounded *b;
    const int32_t *d_in;
    int64_t n;
} host_build;

static vc_status queue_host(const void *arg, vc_err *err)
{
    const host_build *h = arg;
    return vc_kmap_build_gpu_bounded(h->b, h->d_in, h->n, g_stream, err);
}

static cudaGraphExec_t capture(vc_kmap_gpu_bounded *b, const int32_t *d_in, int64_t n,
                               const char *label)
{
    const host_build h = {b, d_in, n};
    return capture_q(queue_host, &h, label);
}

static void run_desc(const vc_map_desc *d, int32_t *const *frames, int64_t n, int32_t batch,
                     const int32_t shape[3], int32_t *d_in)
{
    char label[160];
    snprintf(label, sizeof label, "type %d k %d s %d p %d d %d | n %lld",
             (int)d->type, d->kernel[0], d->stride[0], d->padding[0], d->dilation[0],
             (long long)n);
    vc_kmap_data cm[NFRAMES];
    memset(cm, 0, sizeof cm);
    int64_t max_out = 1, max_pairs = 1;
    for (int f = 0; f < NFRAMES; f++) {
        vc_err ce = {{0}};
        vc_status cs = vc_kmap_build_cpu(frames[f], n, shape, batch, d, NULL, 0, &cm[f], &ce);
        CHECK_MSG(cs == VC_OK, "%s: cpu frame %d: %s", label, f, ce.msg);
        if (cs != VC_OK) goto done;
        if (cm[f].n_out > max_out) max_out = cm[f].n_out;
        if (cm[f].n_pairs > max_pairs) max_pairs = cm[f].n_pairs;
    }
    if (d->type == VC_MAP_SUBM) max_out = n;
    upload(d_in, frames[0], n);

    /* 1. bounds that fit: three frames and the first again, each bit-identical */
    {
        vc_kmap_gpu_bounded b;
        vc_err err = {{0}};
        vc_status st = vc_kmap_gpu_bounded_create(d, shape, batch, n,
                                                  max_out + (d->type == VC_MAP_SUBM ? 0 : 17),
                                                  max_pairs + 101, NULL, &b, &err);
        CHECK_MSG(st == VC_OK, "%s: create: %s", label, err.msg);
        if (st != VC_OK) goto done;
        cudaGraphExec_t exec = capture(&b, d_in, n, label);
        for (int r = 0; exec && r <= NFRAMES; r++) {
            const int f = r % NFRAMES;
            upload(d_in, frames[f], n);
            poison_bounded(&b);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_OK, "%s: replay %d: check: %s", label, r, err.msg);
            if (st == VC_OK) {
                char l2[220];
                snprintf(l2, sizeof l2, "%s (graph replay %d, frame %d)", label, r, f);
                cmp_maps(l2, &cm[f], &b.map);
                check_tail(l2, &b, cm[f].n_out);
            }
        }
        /* 2. a replay on a cloud with a repeated row, then one with a row outside the shape */
        if (exec && n >= 4) {
            int32_t *bad = malloc((size_t)n * 16);
            memcpy(bad, frames[0], (size_t)n * 16);
            memcpy(bad + 4 * (n - 1), bad + 4 * (n / 3), 16); /* row n-1 repeats row n/3 */
            upload(d_in, bad, n);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_ERR_DUPLICATE && strstr(err.msg, "row ") &&
                          strtoll(strstr(err.msg, "row ") + 4, NULL, 10) == n - 1,
                      "%s: replay with a duplicate: %s (%s)", label, vc_status_string(st),
                      err.msg);
            memcpy(bad, frames[1], (size_t)n * 16);
            bad[4 * (n / 2) + 2] = shape[1]; /* y one past the edge */
            upload(d_in, bad, n);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_ERR_OUT_OF_RANGE, "%s: replay with a row outside: %s (%s)", label,
                      vc_status_string(st), err.msg);
            /* and a good frame again: nothing stale */
            upload(d_in, frames[2], n);
            poison_bounded(&b);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_OK, "%s: replay after bad rows: %s", label, err.msg);
            if (st == VC_OK) {
                char l2[220];
                snprintf(l2, sizeof l2, "%s (graph replay after bad rows)", label);
                cmp_maps(l2, &cm[2], &b.map);
            }
            free(bad);
        }
        if (exec) cudaGraphExecDestroy(exec);
        vc_kmap_gpu_bounded_destroy(&b);
    }

    /* 3. bounds too small: the flag comes up, the check names the count needed */
    for (int which = 0; which < 2; which++) {
        if (which == 0 && d->type == VC_MAP_SUBM) continue; /* n_out = n_in: known up front */
        const int64_t need_out = cm[0].n_out, need_pairs = cm[0].n_pairs;
        if (which == 0 && need_out < 2) continue;
        if (which == 1 && need_pairs < 2) continue;
        const int64_t mo = which == 0 ? need_out - 1 : (d->type == VC_MAP_SUBM ? n : need_out);
        const int64_t mp = which == 1 ? need_pairs - 1 : need_pairs + 101;
        vc_kmap_gpu_bounded b;
        vc_err err = {{0}};
        vc_status st = vc_kmap_gpu_bounded_create(d, shape, batch, n, mo, mp, NULL, &b, &err);
        CHECK_MSG(st == VC_OK, "%s: create (small bounds): %s", label, err.msg);
        if (st != VC_OK) continue;
        cudaGraphExec_t exec = capture(&b, d_in, n, label);
        if (exec) {
            upload(d_in, frames[0], n);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_ERR_CAPACITY, "%s: max_%s one short: %s (%s)", label,
                      which == 0 ? "out" : "pairs", vc_status_string(st), err.msg);
            if (which == 0)
                CHECK_MSG(b.map.n_out == need_out, "%s: n_out needed %lld, reported %lld",
                          label, (long long)need_out, (long long)b.map.n_out);
            else
                CHECK_MSG(b.map.n_pairs == need_pairs, "%s: n_pairs needed %lld, reported %lld",
                          label, (long long)need_pairs, (long long)b.map.n_pairs);
            int64_t st_words[VC_KMAP_GPU_STATUS_WORDS];
            CUDA_OK(cudaMemcpy(st_words, b.d_status, sizeof st_words, cudaMemcpyDeviceToHost));
            CHECK_MSG(st_words[VC_KMAP_GPU_FLAGS] & (which == 0 ? VC_KMAP_GPU_F_OUT_OVERFLOW
                                                                : VC_KMAP_GPU_F_PAIR_OVERFLOW),
                      "%s: overflow flag not set (flags 0x%llx)", label,
                      (unsigned long long)st_words[VC_KMAP_GPU_FLAGS]);
            cudaGraphExecDestroy(exec);
        }
        vc_kmap_gpu_bounded_destroy(&b);
    }

done:
    for (int f = 0; f < NFRAMES; f++) vc_kmap_data_free(&cm[f]);
}

/* ---- the device-count build (vc_kmap_build_gpu_bounded_dev) -------------------------------- */

/* One graph is captured per map and replayed on frames of different counts written into the
 * same buffers (rows and the device count). The extent's tail rows of the input buffer are
 * poisoned with garbage (copies of live rows, values outside the shape, 0xa5 bytes) that a build
 * reading past the count would trip on; the output arrays are poisoned before every replay. */

#define DEV_FRAMES 8

typedef struct dev_frame {
    int64_t count;    /* written into the device count word                                  */
    int32_t *rows;    /* min(count, max_in) rows: a shuffled prefix of the pool              */
    vc_kmap_data cpu; /* the CPU twin's map of those rows (none where count > max_in)        */
    int good;         /* within every bound: the check passes and the arrays compare         */
} dev_frame;

/* A copy of `pool` [N] shuffled (a frame of count c uses its first min(c, N) rows). */
static int32_t *shuffled(vc_rng *rng, const int32_t *pool, int64_t N)
{
    int32_t *r = malloc((size_t)(N > 0 ? N : 1) * 16);
    memcpy(r, pool, (size_t)N * 16);
    for (int64_t i = N - 1; i > 0; i--) {
        const int64_t j = vc_rng_int(rng, i + 1);
        int32_t t[4];
        memcpy(t, r + 4 * i, 16);
        memcpy(r + 4 * i, r + 4 * j, 16);
        memcpy(r + 4 * j, t, 16);
    }
    return r;
}

/* The input buffer [max_in] gets rows [0, n) then garbage; the count word gets `count`. */
static void upload_dev(int32_t *d_in, int64_t max_in, int64_t *d_count, const int32_t *rows,
                       int64_t n, int64_t count, vc_rng *rng)
{
    int32_t *h = malloc((size_t)(max_in > 0 ? max_in : 1) * 16);
    if (n > 0) memcpy(h, rows, (size_t)n * 16);
    for (int64_t i = n; i < max_in; i++) {
        if (i % 3 == 0 && n > 0) {
            memcpy(h + 4 * i, rows + 4 * vc_rng_int(rng, n), 16); /* a duplicate */
        } else if (i % 3 == 1) {
            for (int a = 0; a < 4; a++) h[4 * i + a] = (int32_t)vc_rng_next(rng); /* outside */
        } else {
            memset(h + 4 * i, 0xa5, 16);
        }
    }
    if (max_in > 0)
        CUDA_OK(cudaMemcpyAsync(d_in, h, (size_t)max_in * 16, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaMemcpyAsync(d_count, &count, 8, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream)); /* h and count stay alive until the copies end */
    free(h);
}

/* The tile order of b's view, built in the graph: the CPU order of the live rows, then the tail
 * blocks (cost 0) in order. */
static void check_view_order(const char *label, const vc_kmap_gpu_bounded *b, vc_kmap_data *cpu)
{
    vc_kmap_data view;
    vc_kmap_gpu_bounded_view(b, &view);
    vc_err ce = {{0}};
    vc_status cs = vc_kmap_tile_order_cpu(cpu, &ce);
    CHECK_MSG(cs == VC_OK, "%s: cpu tile order: %s", label, ce.msg);
    const int64_t vb = view.order_blocks, cb = cpu->order_blocks;
    CHECK_MSG(cs == VC_OK && vb >= cb && vb == (view.n_out + VC_KMAP_ORDER_ROWS - 1) /
                                                   VC_KMAP_ORDER_ROWS,
              "%s: view tile order of %lld blocks, cpu %lld", label, (long long)vb,
              (long long)cb);
    if (cs != VC_OK || vb < cb || vb == 0) return;
    int32_t *g = malloc((size_t)vb * 4);
    CUDA_OK(cudaMemcpy(g, view.tile_order, (size_t)vb * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (int64_t i = 0; i < vb; i++) bad += g[i] != (i < cb ? cpu->tile_order[i] : (int32_t)i);
    CHECK_MSG(bad == 0, "%s: view tile order differs in %lld of %lld blocks", label,
              (long long)bad, (long long)vb);
    free(g);
}

/* What one captured graph queues: the _dev builds of maps[0, n) (map i > 0 reads map i-1's
 * out_coords and out_count), then the tile order of the last map's view. */
typedef struct dev_graph {
    vc_kmap_gpu_bounded *maps[2];
    int n;
    const int32_t *d_in;
    const int64_t *d_count;
    int inverse; /* maps[1] is the bounded inverse of maps[0] (its build reads maps[0]'s)      */
} dev_graph;

static vc_status queue_dev(const dev_graph *g, vc_err *err)
{
    const int32_t *in = g->d_in;
    const int64_t *cnt = g->d_count;
    for (int i = 0; i < g->n; i++) {
        vc_status st = g->inverse && i == 1
                           ? vc_kmap_build_gpu_bounded_inverse(g->maps[1], g->maps[0], g_stream,
                                                               err)
                           : vc_kmap_build_gpu_bounded_dev(g->maps[i], in, cnt, g_stream, err);
        if (st != VC_OK) return st;
        in = g->maps[i]->map.out_coords;
        cnt = vc_kmap_gpu_bounded_out_count(g->maps[i]);
    }
    vc_kmap_data view;
    vc_kmap_gpu_bounded_view(g->maps[g->n - 1], &view);
    return vc_kmap_tile_order_gpu(&view, g_stream, err);
}

static vc_status queue_dev_v(const void *arg, vc_err *err)
{
    const dev_graph *g = arg;
    vc_status st = queue_dev(g, err);
    if (st != VC_OK) return st;
    /* under capture, a tile order that would reallocate is refused, the capture intact */
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    vc_kmap_data other;
    vc_kmap_gpu_bounded_view(g->maps[g->n - 1], &other);
    if (cudaStreamIsCapturing(g_stream, &cs) == cudaSuccess &&
        cs == cudaStreamCaptureStatusActive && other.n_out > VC_KMAP_ORDER_ROWS) {
        vc_err e2 = {{0}};
        other.n_out = 1;
        const vc_status r = vc_kmap_tile_order_gpu(&other, g_stream, &e2);
        CHECK_MSG(r == VC_ERR_UNSUPPORTED, "tile order of a new block count under capture: %s "
                  "(%s)", vc_status_string(r), e2.msg);
    }
    return VC_OK;
}

/* Builds frame f's CPU map (d over its rows) where its count fits max_in. */
static int dev_cpu(const char *label, dev_frame *fr, int64_t max_in, const vc_map_desc *d,
                   int32_t batch, const int32_t shape[3])
{
    memset(&fr->cpu, 0, sizeof fr->cpu);
    if (fr->count > max_in) return 1;
    vc_err ce = {{0}};
    vc_status cs = vc_kmap_build_cpu(fr->rows, fr->count, shape, batch, d, NULL, 0, &fr->cpu,
                                     &ce);
    CHECK_MSG(cs == VC_OK, "%s: cpu map of %lld rows: %s", label, (long long)fr->count, ce.msg);
    return cs == VC_OK;
}

static void poison_order(const vc_kmap_gpu_bounded *b)
{
    if (b->map.tile_order) fill(b->map.tile_order, (size_t)b->map.order_blocks * 4);
}

/* Replays exec on frame fr (rows of map 0 through the device count) and checks each level:
 * cpu[i] its CPU map (NULL where the frame is not good); a bad frame must fail some level's
 * check with VC_ERR_CAPACITY, naming max_in where the count passes it. */
static void replay_frame(const char *label, cudaGraphExec_t exec, const dev_graph *g,
                         const dev_frame *fr, int32_t *d_in, int64_t *d_count,
                         vc_kmap_data *const *cpu, vc_rng *rng)
{
    const int64_t max_in = g->maps[0]->max_in;
    upload_dev(d_in, max_in, d_count, fr->rows, fr->count < max_in ? fr->count : max_in,
               fr->count, rng);
    for (int i = 0; i < g->n; i++) {
        poison_bounded(g->maps[i]);
        poison_order(g->maps[i]);
    }
    CUDA_OK(cudaGraphLaunch(exec, g_stream));
    char l2[300];
    int failed = 0;
    for (int i = 0; i < g->n && !failed; i++) {
        vc_err err = {{0}};
        snprintf(l2, sizeof l2, "%s, count %lld, level %d", label, (long long)fr->count, i);
        const vc_status st = vc_kmap_gpu_bounded_check(g->maps[i], g_stream, &err);
        if (fr->good) {
            CHECK_MSG(st == VC_OK, "%s: check: %s", l2, err.msg);
            if (st != VC_OK) return;
            cmp_maps(l2, cpu[i], &g->maps[i]->map);
            check_tail(l2, g->maps[i], cpu[i]->n_out);
            if (i == g->n - 1) check_view_order(l2, g->maps[i], cpu[i]);
            continue;
        }
        if (st == VC_OK && i + 1 < g->n) continue;
        failed = 1;
        CHECK_MSG(st == VC_ERR_CAPACITY && (fr->count <= max_in || strstr(err.msg, "max_in")),
                  "%s: a frame past the bounds: %s (%s)", l2, vc_status_string(st), err.msg);
    }
}

/* Frame counts of a pool of N rows: within N/2 (they size the bounds), 0, the whole pool (past
 * max_out / max_pairs where it needs more) and past max_in, each bad one followed by good ones. */
static void dev_counts(int64_t N, int64_t c[DEV_FRAMES])
{
    const int64_t h = N / 2;
    const int64_t v[DEV_FRAMES] = {h, 0, h * 3 / 4, N, h / 3 + 1, N + 7, h, N > 0 ? 1 : 0};
    memcpy(c, v, sizeof v);
}

static void run_dev(const char *name, const vc_map_desc *d, const int32_t *pool, int64_t N,
                    int32_t batch, const int32_t shape[3], vc_rng *rng)
{
    char label[240];
    snprintf(label, sizeof label, "%s: dev type %d k %d s %d d %d | N %lld", name, (int)d->type,
             d->kernel[0], d->stride[0], d->dilation[0], (long long)N);
    dev_frame fr[DEV_FRAMES];
    int64_t counts[DEV_FRAMES], max_out = 1, max_pairs = 1;
    dev_counts(N, counts);
    int ok = 1;
    for (int f = 0; f < DEV_FRAMES; f++) {
        fr[f].count = counts[f];
        fr[f].rows = shuffled(rng, pool, N);
        ok &= dev_cpu(label, &fr[f], N, d, batch, shape);
        if (ok && counts[f] <= N / 2) {
            if (fr[f].cpu.n_out > max_out) max_out = fr[f].cpu.n_out;
            if (fr[f].cpu.n_pairs > max_pairs) max_pairs = fr[f].cpu.n_pairs;
        }
    }
    if (d->type == VC_MAP_SUBM) max_out = N > 0 ? N : 1;
    for (int f = 0; f < DEV_FRAMES; f++)
        fr[f].good = ok && fr[f].count <= N && fr[f].cpu.n_out <= max_out &&
                     fr[f].cpu.n_pairs <= max_pairs;
    vc_kmap_gpu_bounded b;
    vc_err err = {{0}};
    memset(&b, 0, sizeof b);
    vc_status st = ok ? vc_kmap_gpu_bounded_create(d, shape, batch, N, max_out, max_pairs, NULL,
                                                   &b, &err)
                      : VC_ERR_INTERNAL;
    CHECK_MSG(st == VC_OK, "%s: create: %s", label, err.msg);
    int32_t *d_in = NULL;
    int64_t *d_count = NULL;
    CUDA_OK(cudaMalloc((void **)&d_in, (size_t)(N > 0 ? N : 1) * 16)); /* exactly max_in rows */
    CUDA_OK(cudaMalloc((void **)&d_count, 8));
    dev_graph g = {{&b, NULL}, 1, d_in, d_count, 0};
    cudaGraphExec_t exec = NULL;
    if (st == VC_OK) {
        upload_dev(d_in, N, d_count, fr[0].rows, fr[0].count, fr[0].count, rng);
        exec = capture_q(queue_dev_v, &g, label);
    }
    for (int f = 0; exec && f < DEV_FRAMES; f++) {
        vc_kmap_data *cpu[1] = {&fr[f].cpu};
        replay_frame(label, exec, &g, &fr[f], d_in, d_count, cpu, rng);
    }
    if (exec) cudaGraphExecDestroy(exec);
    vc_kmap_gpu_bounded_destroy(&b);
    cudaFree(d_in);
    cudaFree(d_count);
    for (int f = 0; f < DEV_FRAMES; f++) {
        vc_kmap_data_free(&fr[f].cpu);
        free(fr[f].rows);
    }
}

/* Two maps in one graph (b2 built from b1's out_coords and out_count, or - inverse - b2 the
 * bounded inverse of b1), captured on frame 0 where `made` and replayed on every frame of fr
 * (second[f]: b2's CPU map of frame f); with an inverse, a frame past a bound must fail the
 * inverse's own check too (VC_ERR_CAPACITY: the forward's failure is carried in its status).
 * Then frees the maps, the frames' rows and both levels' CPU maps. */
static void replay_two(const char *label, int made, vc_kmap_gpu_bounded *b1,
                       vc_kmap_gpu_bounded *b2, int inverse, dev_frame *fr, vc_kmap_data *second,
                       int64_t N, vc_rng *rng)
{
    int32_t *d_in = NULL;
    int64_t *d_count = NULL;
    CUDA_OK(cudaMalloc((void **)&d_in, (size_t)(N > 0 ? N : 1) * 16));
    CUDA_OK(cudaMalloc((void **)&d_count, 8));
    dev_graph g = {{b1, b2}, 2, d_in, d_count, inverse};
    cudaGraphExec_t exec = NULL;
    if (made) {
        upload_dev(d_in, N, d_count, fr[0].rows, fr[0].count, fr[0].count, rng);
        exec = capture_q(queue_dev_v, &g, label);
    }
    for (int f = 0; exec && f < DEV_FRAMES; f++) {
        vc_kmap_data *cpu[2] = {&fr[f].cpu, &second[f]};
        replay_frame(label, exec, &g, &fr[f], d_in, d_count, cpu, rng);
        if (!inverse || fr[f].good) continue;
        vc_err e2 = {{0}};
        const vc_status st = vc_kmap_gpu_bounded_check(b2, g_stream, &e2);
        CHECK_MSG(st == VC_ERR_CAPACITY, "%s, count %lld: the inverse of a failed forward build: "
                  "%s (%s)", label, (long long)fr[f].count, vc_status_string(st), e2.msg);
    }
    if (exec) cudaGraphExecDestroy(exec);
    vc_kmap_gpu_bounded_destroy(b2); /* an inverse before the map it inverts */
    vc_kmap_gpu_bounded_destroy(b1);
    cudaFree(d_in);
    cudaFree(d_count);
    for (int f = 0; f < DEV_FRAMES; f++) {
        vc_kmap_data_free(&fr[f].cpu);
        vc_kmap_data_free(&second[f]);
        free(fr[f].rows);
    }
}

/* Two levels in one graph: a STRIDED k3 s2 map of the frame, then a SUBM k3 map of its outputs
 * (out_coords and the device out_count of the first feeding the second's _dev build). */
static void run_chain(const char *name, const int32_t *pool, int64_t N, int32_t batch,
                      const int32_t shape[3], vc_rng *rng)
{
    char label[240];
    snprintf(label, sizeof label, "%s: chain strided k3 s2 -> subm k3 | N %lld", name,
             (long long)N);
    const vc_map_desc d1 = mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1), d2 = mkdesc(VC_MAP_SUBM, 3, 1, 0, 1);
    dev_frame fr[DEV_FRAMES];
    vc_kmap_data l2[DEV_FRAMES];
    memset(l2, 0, sizeof l2);
    int64_t counts[DEV_FRAMES], mo1 = 1, mp1 = 1, mp2 = 1;
    dev_counts(N, counts);
    int ok = 1;
    for (int f = 0; f < DEV_FRAMES; f++) {
        fr[f].count = counts[f];
        fr[f].rows = shuffled(rng, pool, N);
        ok &= dev_cpu(label, &fr[f], N, &d1, batch, shape);
        if (ok && counts[f] <= N) {
            dev_frame f2 = {fr[f].cpu.n_out, fr[f].cpu.out_coords, {0}, 0};
            ok &= dev_cpu(label, &f2, INT64_MAX, &d2, fr[f].cpu.out_batch_size,
                          fr[f].cpu.out_shape);
            l2[f] = f2.cpu;
        }
        if (ok && counts[f] <= N / 2) {
            if (fr[f].cpu.n_out > mo1) mo1 = fr[f].cpu.n_out;
            if (fr[f].cpu.n_pairs > mp1) mp1 = fr[f].cpu.n_pairs;
            if (l2[f].n_pairs > mp2) mp2 = l2[f].n_pairs;
        }
    }
    for (int f = 0; f < DEV_FRAMES; f++)
        fr[f].good = ok && fr[f].count <= N && fr[f].cpu.n_out <= mo1 &&
                     fr[f].cpu.n_pairs <= mp1 && l2[f].n_pairs <= mp2;
    vc_kmap_gpu_bounded b1, b2;
    memset(&b1, 0, sizeof b1);
    memset(&b2, 0, sizeof b2);
    vc_err err = {{0}};
    vc_status st = ok ? vc_kmap_gpu_bounded_create(&d1, shape, batch, N, mo1, mp1, NULL, &b1,
                                                   &err)
                      : VC_ERR_INTERNAL;
    if (st == VC_OK)
        st = vc_kmap_gpu_bounded_create(&d2, b1.map.out_shape, b1.map.out_batch_size, mo1, mo1,
                                        mp2, NULL, &b2, &err);
    CHECK_MSG(st == VC_OK, "%s: create: %s", label, err.msg);
    replay_two(label, st == VC_OK, &b1, &b2, 0, fr, l2, N, rng);
}

/* A forward map and its bounded INVERSE in one graph (vc_kmap_build_gpu_bounded_dev of d, then
 * vc_kmap_build_gpu_bounded_inverse from its arrays and device counts), replayed on the frames
 * of run_dev: the inverse's live arrays equal the CPU twin's inverse of the CPU forward map bit
 * for bit, its tail rows (the extent is the forward's max_in) hold the guarantee, its view's
 * tile order is built in the graph; on a frame past a bound the inverse's own check fails too. */
static void run_inverse(const char *name, const vc_map_desc *d, const int32_t *pool, int64_t N,
                        int32_t batch, const int32_t shape[3], vc_rng *rng)
{
    char label[240];
    snprintf(label, sizeof label, "%s: inverse of type %d k %d s %d | N %lld", name,
             (int)d->type, d->kernel[0], d->stride[0], (long long)N);
    dev_frame fr[DEV_FRAMES];
    vc_kmap_data inv[DEV_FRAMES];
    memset(inv, 0, sizeof inv);
    int64_t counts[DEV_FRAMES], mo = 1, mp = 1;
    dev_counts(N, counts);
    int ok = 1;
    for (int f = 0; f < DEV_FRAMES; f++) {
        fr[f].count = counts[f];
        fr[f].rows = shuffled(rng, pool, N);
        ok &= dev_cpu(label, &fr[f], N, d, batch, shape);
        if (ok && counts[f] <= N) {
            vc_err ce = {{0}};
            const vc_status cs = vc_kmap_inverse_cpu(&fr[f].cpu, shape, batch, NULL, &inv[f], &ce);
            CHECK_MSG(cs == VC_OK, "%s: cpu inverse: %s", label, ce.msg);
            ok &= cs == VC_OK;
        }
        if (ok && counts[f] <= N / 2) {
            if (fr[f].cpu.n_out > mo) mo = fr[f].cpu.n_out;
            if (fr[f].cpu.n_pairs > mp) mp = fr[f].cpu.n_pairs;
        }
    }
    for (int f = 0; f < DEV_FRAMES; f++)
        fr[f].good = ok && fr[f].count <= N && fr[f].cpu.n_out <= mo && fr[f].cpu.n_pairs <= mp;
    vc_kmap_gpu_bounded b1, b2;
    memset(&b1, 0, sizeof b1);
    memset(&b2, 0, sizeof b2);
    vc_err err = {{0}};
    vc_status st = ok ? vc_kmap_gpu_bounded_create(d, shape, batch, N, mo, mp, NULL, &b1, &err)
                      : VC_ERR_INTERNAL;
    if (st == VC_OK) st = vc_kmap_gpu_bounded_create_inverse(&b1, NULL, &b2, &err);
    CHECK_MSG(st == VC_OK, "%s: create: %s", label, err.msg);
    CHECK_MSG(st != VC_OK || (b2.max_in == b1.max_out && b2.max_out == b1.max_in &&
                              b2.max_pairs == b1.max_pairs && !b2.map.out_coords),
              "%s: inverse bounds %lld / %lld / %lld", label, (long long)b2.max_in,
              (long long)b2.max_out, (long long)b2.max_pairs);
    replay_two(label, st == VC_OK, &b1, &b2, 1, fr, inv, N, rng);
}

/* The device-count tests over one pool of distinct rows: every map type, the chain, then the
 * inverses of the downsample k2 s2 and strided k3 s2 maps. */
static void run_dev_set(const char *name, const int32_t *pool, int64_t N, int32_t batch,
                        const int32_t shape[3], vc_rng *rng)
{
    const vc_map_desc descs[] = {
        mkdesc(VC_MAP_SUBM, 3, 1, 0, 1),       mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1),
        mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1), mkdesc(VC_MAP_TRANSPOSED, 2, 2, 0, 1),
        mkdesc(VC_MAP_SUBM, 5, 1, 0, 2), /* K > 32: the CUB mask sort over the extent */
    };
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++)
        run_dev(name, &descs[i], pool, N, batch, shape, rng);
    run_chain(name, pool, N, batch, shape, rng);
    const vc_map_desc fwd[] = {mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1),
                               mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1)};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        run_inverse(name, &fwd[i], pool, N, batch, shape, rng);
}

/* The real scans (real_scans.h), voxelized on the host: the first `cap` voxels of each, of
 * the first `scans` found. */
static void run_dev_scans(vc_rng *rng, int64_t cap, int scans)
{
    for (size_t f = 0; f < sizeof real_scan_files / sizeof real_scan_files[0] && scans > 0; f++) {
        char path[1024];
        vc_voxels vox;
        if (!real_scan_voxels(real_scan_files[f], &vox, path, sizeof path)) continue;
        scans--;
        const int64_t n = vox.n < cap ? vox.n : cap;
        run_dev_set(real_scan_files[f], vox.coords, n, vox.batch_size, vox.shape, rng);
        vc_voxels_free(&vox);
    }
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_graph");
    const char *san = getenv("VC_SANITIZE");
    const int small = san && atoi(san) != 0;
    if (small) printf("VC_SANITIZE: small sizes only\n");

    CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const int32_t big[3] = {41, 1600, 1408}, huge[3] = {1000, 2000, 3000};
    struct {
        int64_t n;
        int32_t batch;
        const int32_t *shape;
    } sets[] = {{small ? 3000 : 100000, 1, big}, {small ? 1500 : 20000, 3, huge}};
    const vc_map_desc descs[] = {
        mkdesc(VC_MAP_SUBM, 3, 1, 0, 1),       mkdesc(VC_MAP_SUBM, 5, 1, 0, 2),
        mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1),    mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1),
        mkdesc(VC_MAP_TRANSPOSED, 2, 2, 0, 1),
    };
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        const int64_t n = sets[si].n;
        int32_t *frames[NFRAMES];
        for (int f = 0; f < NFRAMES; f++)
            frames[f] = make_rows(&rng, n, sets[si].batch, sets[si].shape);
        int32_t *d_in = NULL;
        CUDA_OK(cudaMalloc((void **)&d_in, (size_t)n * 16));
        for (size_t di = 0; di < sizeof descs / sizeof descs[0]; di++)
            run_desc(&descs[di], frames, n, sets[si].batch, sets[si].shape, d_in);
        cudaFree(d_in);
        if (!small || si == 0) {
            char name[64];
            snprintf(name, sizeof name, "synthetic set %zu", si);
            run_dev_set(name, frames[0], n, sets[si].batch, sets[si].shape, &rng);
        }
        for (int f = 0; f < NFRAMES; f++) free(frames[f]);
    }
    run_dev_scans(&rng, small ? 2000 : INT64_MAX, small ? 1 : 3);
    cudaStreamDestroy(g_stream);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_graph: built without CUDA, skipped\n");
    return 77;
}
#endif
