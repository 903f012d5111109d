/* tests/gpu/test_gpu_bounded.c - the bounded, graph-capturable GPU voxelization
 * (vc_voxelize_gpu_bounded_*, voxelize/voxelize_gpu.h) against vc_voxelize_gpu.
 * For four descriptions (MEAN fp32; FIRST bf16 with the description's own cap and non-finite
 * points as errors; COUNT fp16 with batch indices and an inferred batch size; MEAN fp16 with a
 * given batch size, a cap and errors) ONE run is captured as a CUDA graph in the global capture
 * mode (a hidden synchronisation or allocation fails the capture; the graph must hold only
 * kernel and memset nodes), then replayed on a sequence of point sets written into the same
 * buffers: the synthetic LiDAR and indoor scenes (vc_synth_points), the real scans of datasets/
 * (vlp16.bin, octomap_scan.bin, bun0.pcd, table_scene_lms400.pcd; skipped with a line where
 * absent), 0 points, a count over max_points, more voxels than max_voxels, a non-finite point,
 * a negative and a too-large batch index, then good frames again. Before every replay the tail
 * rows of the inputs are poisoned (NaN points, batch index -1: read, they would change the
 * verdict) and the outputs and the whole workspace are filled with 0xA5. After each replay the
 * check must give vc_voxelize_gpu's status and message on the same points (VC_ERR_CAPACITY
 * naming the count for the over-bound frames), the same statistics and batch size, *d_count =
 * its voxel count, and rows [0, count) of coords and features bit-identical.
 * VC_SANITIZE=1: at most 3000 points a frame (for compute-sanitizer). Prints its seed
 * (VC_TEST_SEED replays). Exits 77 without a CUDA build or a usable device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "testutil.h"
#include "voxconv.h"
#include "voxelize_testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

#include "voxelize/voxelize_gpu.h"

#define DIM 4
#define MAX_FRAMES 16

static cudaStream_t g_stream;
static int g_small;
static int64_t g_replays, g_capacity_voxels, g_errors_same, g_good_same;

/* ---- the frames ------------------------------------------------------------------------------ */

typedef struct frame {
    char name[64];
    float *pts;     /* [n, DIM] (host)                                                           */
    int64_t n;      /* the count written to the device (may pass max_points)                     */
    int batch_kind; /* batch indices: 0 pattern 0..k-1, 1 one negative, 2 one = 3             */
} frame;

static int64_t g_cap_points; /* VC_SANITIZE: points per frame at most                        */

/* A frame from n rows of `dim` columns: DIM columns kept, missing ones 0. */
static void add_frame(frame *fs, int *nf, const char *name, const float *src, int64_t n, int dim)
{
    if (*nf >= MAX_FRAMES) return;
    if (g_cap_points && n > g_cap_points) n = g_cap_points;
    frame *f = &fs[(*nf)++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->n = n;
    f->pts = calloc((size_t)(n > 0 ? n : 1) * DIM, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < DIM && c < dim; c++) f->pts[i * DIM + c] = src[i * dim + c];
}

static void add_scan(frame *fs, int *nf, const char *file)
{
    char path[1200];
    if (!find_scan(file, path, sizeof path)) {
        printf("real scan %s: not found (datasets/fetch fetches it), SKIPPED\n", file);
        return;
    }
    vc_cloud c;
    memset(&c, 0, sizeof c);
    vc_status s = vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &c);
    CHECK_MSG(s == VC_OK, "reading %s: status %d", path, (int)s);
    if (s != VC_OK) return;
    printf("real scan %s: %lld points, %d columns\n", file, (long long)c.count, (int)c.dim);
    add_frame(fs, nf, file, c.data, c.count, c.dim);
    vc_cloud_free(&c);
}

static void add_synth(frame *fs, int *nf, vc_context *ctx, vc_synth_kind kind, int64_t voxels,
                      const char *name)
{
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    d.kind = kind;
    d.voxels = voxels;
    vc_cloud c;
    memset(&c, 0, sizeof c);
    vc_status s = vc_synth_points(ctx, &d, &c);
    CHECK_MSG(s == VC_OK, "vc_synth_points %s: status %d", name, (int)s);
    if (s != VC_OK) return;
    add_frame(fs, nf, name, c.data, c.count, c.dim);
    vc_cloud_free(&c);
}

/* n points uniform over [lo, hi) per axis (nearly every one its own voxel). */
static void add_uniform(frame *fs, int *nf, vc_rng *rng, int64_t n, const float lo[3],
                        const float hi[3], const char *name)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * DIM * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++)
            p[i * DIM + a] = lo[a] + (hi[a] - lo[a]) * 0.5f * (vc_rng_float(rng) + 1.0f);
        p[i * DIM + 3] = vc_rng_float(rng);
    }
    add_frame(fs, nf, name, p, n, DIM);
    free(p);
}

/* Batch indices of frame f for a description that takes them. */
static int32_t *frame_batch(const frame *f, int index)
{
    const int64_t n = f->n;
    int32_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    const int64_t k = 1 + index % 3; /* 1, 2 or 3 batches */
    for (int64_t i = 0; i < n; i++) b[i] = (int32_t)(i * k / n);
    if (n > 0 && f->batch_kind == 1) b[n / 2] = -2;
    if (n > 0 && f->batch_kind == 2) b[n / 3] = 3;
    return b;
}

/* ---- the reference: vc_voxelize_gpu on exactly those points ---------------------------------- */

typedef struct ref_run {
    vc_status st;
    vc_err err;
    vc_voxels v; /* host copies */
    vc_voxelize_stats stats;
} ref_run;

static void reference(const vc_voxelize_desc *d, const float *pts, int64_t n,
                      const int32_t *batch, ref_run *r)
{
    memset(r, 0, sizeof *r);
    float *dp = to_device(pts, (size_t)n * DIM * sizeof(float));
    int32_t *db = batch ? to_device(batch, (size_t)n * sizeof(int32_t)) : NULL;
    vc_points p = make_points(dp, n, DIM, db, VC_MEMORY_DEVICE);
    vc_voxels out;
    r->st = vc_voxelize_gpu(d, &p, NULL, g_stream, &out, &r->stats, &r->err);
    CUDA_OK(cudaStreamSynchronize(g_stream));
    if (r->st == VC_OK) {
        r->v = out;
        const size_t esize = d->dtype == VC_DTYPE_FP32 ? 4 : 2;
        const size_t cb = (size_t)out.n * 16, fb = (size_t)(out.n * out.channels) * esize;
        r->v.coords = malloc(cb + 1);
        r->v.features = malloc(fb + 1);
        if (out.n > 0) {
            CUDA_OK(cudaMemcpy(r->v.coords, out.coords, cb, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(r->v.features, out.features, fb, cudaMemcpyDeviceToHost));
        }
        vc_voxels_free_gpu(&out);
    }
    CUDA_OK(cudaFree(dp));
    if (db) CUDA_OK(cudaFree(db));
}

static void ref_free(ref_run *r)
{
    free(r->v.coords);
    free(r->v.features);
    memset(r, 0, sizeof *r);
}

/* ---- the graph ------------------------------------------------------------------------------- */

/* One bounded run, as capture_checked (gpu_testutil.h) runs it. */
typedef struct run_arg {
    vc_voxelize_gpu_bounded *b;
    const float *dp;
    const int32_t *db;
    const int64_t *dn;
} run_arg;

static vc_status run_body(void *arg, cudaStream_t stream, vc_err *err)
{
    const run_arg *a = arg;
    return vc_voxelize_gpu_bounded_run(a->b, a->dp, a->db, a->dn, stream, err);
}

/* ---- one description over every frame -------------------------------------------------------- */

typedef struct config {
    const char *what;
    vc_voxelize_desc d;
    int with_batch;
} config;

/* The inputs of frame f into the fixed buffers, tails poisoned, outputs and workspace too. */
static void stage(const vc_voxelize_gpu_bounded *b, const frame *f, const int32_t *batch,
                  float *dp, int32_t *db, int64_t *dn)
{
    const int64_t P = b->max_points, rows = f->n < P ? f->n : P;
    const size_t esize = b->desc.dtype == VC_DTYPE_FP32 ? 4 : 2;
    CUDA_OK(cudaMemsetAsync(dp, 0xff, (size_t)P * DIM * sizeof(float), g_stream)); /* NaN */
    if (rows > 0)
        CUDA_OK(cudaMemcpyAsync(dp, f->pts, (size_t)rows * DIM * sizeof(float),
                                cudaMemcpyHostToDevice, g_stream));
    if (db) {
        CUDA_OK(cudaMemsetAsync(db, 0xff, (size_t)P * sizeof(int32_t), g_stream)); /* -1 */
        if (rows > 0)
            CUDA_OK(cudaMemcpyAsync(db, batch, (size_t)rows * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, g_stream));
    }
    CUDA_OK(cudaMemcpyAsync(dn, &f->n, sizeof f->n, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaMemsetAsync(b->coords, 0xa5, (size_t)b->max_voxels * 16, g_stream));
    CUDA_OK(cudaMemsetAsync(b->features, 0xa5, (size_t)(b->max_voxels * b->channels) * esize,
                            g_stream));
    CUDA_OK(cudaMemsetAsync(b->work, 0xa5, b->work_bytes, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream)); /* the host arrays may go */
}

/* One replay of frame f against its reference. */
static void replay_case(vc_voxelize_gpu_bounded *b, cudaGraphExec_t exec, const config *c,
                        const frame *f, const ref_run *r, const char *label)
{
    vc_err err = {{0}};
    vc_voxelize_stats stats;
    memset(&stats, 0x5a, sizeof stats);
    CUDA_OK(cudaGraphLaunch(exec, g_stream));
    vc_status st = vc_voxelize_gpu_bounded_check(b, g_stream, &stats, &err);
    g_replays++;
    int64_t count = -1;
    CUDA_OK(cudaMemcpy(&count, b->d_count, sizeof count, cudaMemcpyDeviceToHost));
    CHECK_MSG(count >= 0 && count <= b->max_voxels, "%s: d_count %lld outside [0, %lld]", label,
              (long long)count, (long long)b->max_voxels);
    char need[64];
    if (f->n > b->max_points) {
        snprintf(need, sizeof need, "%lld points", (long long)f->n);
        CHECK_MSG(st == VC_ERR_CAPACITY && strstr(err.msg, need), "%s: %lld points over "
                  "max_points %lld: status %d (%s)", label, (long long)f->n,
                  (long long)b->max_points, (int)st, err.msg);
        printf("%s: %s\n", label, err.msg);
        return;
    }
    if (r->st != VC_OK) {
        const int same = st == r->st && strcmp(err.msg, r->err.msg) == 0;
        CHECK_MSG(same, "%s: status %d (%s), vc_voxelize_gpu %d (%s)", label, (int)st, err.msg,
                  (int)r->st, r->err.msg);
        g_errors_same += same;
        printf("%s: %s (as vc_voxelize_gpu)\n", label, err.msg);
        return;
    }
    if (r->v.n > b->max_voxels) {
        snprintf(need, sizeof need, "%lld voxels", (long long)r->v.n);
        CHECK_MSG(st == VC_ERR_CAPACITY && strstr(err.msg, need), "%s: %lld voxels over "
                  "max_voxels %lld: status %d (%s)", label, (long long)r->v.n,
                  (long long)b->max_voxels, (int)st, err.msg);
        CHECK_MSG(count == b->max_voxels, "%s: d_count %lld after a capacity overflow", label,
                  (long long)count);
        g_capacity_voxels++;
        printf("%s: %s\n", label, err.msg);
        return;
    }
    CHECK_MSG(st == VC_OK, "%s: check: status %d (%s)", label, (int)st, err.msg);
    if (st != VC_OK) return;
    CHECK_MSG(memcmp(&stats, &r->stats, sizeof stats) == 0, "%s: statistics differ (kept %lld "
              "vs %lld, used %lld vs %lld, nonfinite %lld vs %lld)", label,
              (long long)stats.voxels_kept, (long long)r->stats.voxels_kept,
              (long long)stats.points_used, (long long)r->stats.points_used,
              (long long)stats.points_nonfinite, (long long)r->stats.points_nonfinite);
    CHECK_MSG(count == r->v.n, "%s: d_count %lld, vc_voxelize_gpu %lld", label,
              (long long)count, (long long)r->v.n);
    CHECK_MSG(b->batch_size == r->v.batch_size, "%s: batch size %d vs %d", label,
              (int)b->batch_size, (int)r->v.batch_size);
    if (count != r->v.n) return;
    const size_t esize = c->d.dtype == VC_DTYPE_FP32 ? 4 : 2;
    const size_t cb = (size_t)count * 16, fb = (size_t)(count * b->channels) * esize;
    void *hc = malloc(cb + 1), *hf = malloc(fb + 1);
    CUDA_OK(cudaMemcpy(hc, b->coords, cb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hf, b->features, fb, cudaMemcpyDeviceToHost));
    const int same = memcmp(hc, r->v.coords, cb) == 0 && memcmp(hf, r->v.features, fb) == 0;
    CHECK_MSG(same, "%s: rows differ from vc_voxelize_gpu's (%lld rows)", label,
              (long long)count);
    g_good_same += same;
    printf("%s: %lld points -> %lld voxels (%lld in total, %lld non-finite), batch size %d, "
           "bit-identical\n", label, (long long)f->n, (long long)count,
           (long long)r->stats.voxels_total, (long long)r->stats.points_nonfinite,
           (int)b->batch_size);
    free(hc);
    free(hf);
}

static void run_config(const config *c, frame *fs, int nf, int64_t max_points,
                       const int *sizing)
{
    int32_t *batches[MAX_FRAMES] = {0};
    ref_run refs[MAX_FRAMES];
    int64_t max_voxels = 1;
    for (int i = 0; i < nf; i++) {
        if (c->with_batch) batches[i] = frame_batch(&fs[i], i);
        const int64_t n = fs[i].n < max_points ? fs[i].n : max_points;
        reference(&c->d, fs[i].pts, n, batches[i], &refs[i]);
        if (sizing[i] && refs[i].st == VC_OK && refs[i].v.n > max_voxels)
            max_voxels = refs[i].v.n;
    }
    vc_voxelize_gpu_bounded b;
    vc_err err = {{0}};
    vc_status st = vc_voxelize_gpu_bounded_create(&c->d, max_points, DIM, max_voxels, NULL, &b,
                                                  &err);
    CHECK_MSG(st == VC_OK, "%s: create: %s", c->what, err.msg);
    float *dp = NULL;
    int32_t *db = NULL;
    int64_t *dn = NULL;
    CUDA_OK(cudaMalloc((void **)&dp, (size_t)max_points * DIM * sizeof(float)));
    if (c->with_batch) CUDA_OK(cudaMalloc((void **)&db, (size_t)max_points * sizeof(int32_t)));
    CUDA_OK(cudaMalloc((void **)&dn, sizeof(int64_t)));
    printf("%s: max_points %lld, max_voxels %lld\n", c->what, (long long)max_points,
           (long long)max_voxels);
    cudaGraphExec_t exec = NULL;
    if (st == VC_OK) {
        stage(&b, &fs[0], batches[0], dp, db, dn);
        run_arg a = {&b, dp, db, dn};
        exec = capture_checked(g_stream, run_body, &a, c->what);
    }
    for (int i = 0; exec && i < nf; i++) {
        char label[160];
        snprintf(label, sizeof label, "%s | %s", c->what, fs[i].name);
        stage(&b, &fs[i], batches[i], dp, db, dn);
        replay_case(&b, exec, c, &fs[i], &refs[i], label);
    }
    if (exec && !g_small) { /* informative: device time of a replay on the last frame */
        cudaEvent_t e0, e1;
        float ms = 0.0f;
        CUDA_OK(cudaEventCreate(&e0));
        CUDA_OK(cudaEventCreate(&e1));
        CUDA_OK(cudaEventRecord(e0, g_stream));
        for (int k = 0; k < 20; k++) CUDA_OK(cudaGraphLaunch(exec, g_stream));
        CUDA_OK(cudaEventRecord(e1, g_stream));
        CUDA_OK(cudaEventSynchronize(e1));
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        printf("%s: %.3f ms a replay (%s, max_points %lld)\n", c->what, ms / 20.0,
               fs[nf - 1].name, (long long)max_points);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    if (exec) cudaGraphExecDestroy(exec);
    vc_voxelize_gpu_bounded_destroy(&b);
    CHECK(b.work == NULL && b.coords == NULL);
    CUDA_OK(cudaFree(dp));
    if (db) CUDA_OK(cudaFree(db));
    CUDA_OK(cudaFree(dn));
    for (int i = 0; i < nf; i++) {
        ref_free(&refs[i]);
        free(batches[i]);
    }
}

/* Bad arguments to create and run. */
static void test_arguments(void)
{
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    const float range[6] = {0, 0, 0, 10, 10, 10};
    memcpy(d.range, range, sizeof range);
    vc_voxelize_gpu_bounded b;
    vc_err err = {{0}};
    CHECK(vc_voxelize_gpu_bounded_create(&d, 0, DIM, 10, NULL, &b, &err) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_voxelize_gpu_bounded_create(&d, 10, 2, 10, NULL, &b, &err) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_voxelize_gpu_bounded_create(&d, 10, DIM, 0, NULL, &b, &err) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK(b.work == NULL);
    CHECK(vc_voxelize_gpu_bounded_run(&b, NULL, NULL, NULL, g_stream, &err) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_voxelize_gpu_bounded_create(&d, 10, DIM, 10, NULL, &b, &err) == VC_OK);
    /* a check before any run: an empty frame */
    vc_voxelize_stats s;
    CHECK(vc_voxelize_gpu_bounded_check(&b, g_stream, &s, &err) == VC_OK);
    CHECK(s.points_in == 0 && s.voxels_kept == 0);
    /* a negative count: vc_voxelize_gpu's message */
    float *dp = to_device(NULL, 10 * DIM * sizeof(float));
    const int64_t neg = -4;
    int64_t *dn = to_device(&neg, sizeof neg);
    CHECK(vc_voxelize_gpu_bounded_run(&b, dp, NULL, NULL, g_stream, &err) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_voxelize_gpu_bounded_run(&b, dp, NULL, dn, g_stream, &err) == VC_OK);
    CHECK(vc_voxelize_gpu_bounded_check(&b, g_stream, &s, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "count -4 is negative") != NULL, "negative count: %s", err.msg);
    vc_voxelize_gpu_bounded_destroy(&b);
    vc_voxelize_gpu_bounded_destroy(&b); /* twice: fine */
    CUDA_OK(cudaFree(dp));
    CUDA_OK(cudaFree(dn));
}

int main(void)
{
    if (!gpu_usable()) return 77;
    const char *san = getenv("VC_SANITIZE");
    g_small = san && *san && strcmp(san, "0") != 0;
    g_cap_points = g_small ? 3000 : 0;
    vc_rng rng = vc_test_rng("test_gpu_bounded");
    if (g_small) printf("VC_SANITIZE: at most %lld points a frame\n", (long long)g_cap_points);
    /* a blocking stream: the plain cudaMemcpy / cudaMemset of the helpers (to_device) are
     * ordered with it */
    CUDA_OK(cudaStreamCreate(&g_stream));
    vc_context *ctx = NULL;
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    CHECK(vc_context_create(&cd, &ctx) == VC_OK);
    if (!ctx) TEST_END();
    test_arguments();

    /* the frames; sizing[i]: frame i sets max_voxels (the good frames of regular size) */
    frame fs[MAX_FRAMES];
    int sizing[MAX_FRAMES] = {0};
    int nf = 0;
    add_synth(fs, &nf, ctx, VC_SYNTH_LIDAR, g_small ? 2000 : 0, "synth lidar");
    add_scan(fs, &nf, "vlp16.bin");
    add_frame(fs, &nf, "0 points", NULL, 0, DIM);
    add_scan(fs, &nf, "octomap_scan.bin");
    add_scan(fs, &nf, "bun0.pcd");
    add_scan(fs, &nf, "table_scene_lms400.pcd");
    add_synth(fs, &nf, ctx, VC_SYNTH_INDOOR, g_small ? 2000 : 30000, "synth indoor");
    const int n_sizing = nf;
    int64_t max_points = 1;
    for (int i = 0; i < nf; i++) {
        sizing[i] = 1;
        if (fs[i].n > max_points) max_points = fs[i].n;
    }
    const float lo[3] = {-19.0f, -19.0f, -3.5f}, hi[3] = {19.0f, 19.0f, 3.5f};
    /* over max_points: the count says max_points + 3, the buffer holds max_points rows */
    add_uniform(fs, &nf, &rng, max_points, lo, hi, "count over max_points");
    fs[nf - 1].n = max_points + 3;
    add_uniform(fs, &nf, &rng, max_points, lo, hi, "uniform (many voxels)");
    /* a non-finite point and bad batch indices in copies of the first frame */
    add_frame(fs, &nf, "non-finite point", fs[0].pts, fs[0].n, DIM);
    if (fs[nf - 1].n > 2) {
        fs[nf - 1].pts[(fs[nf - 1].n / 3) * DIM + 1] = NAN;
        fs[nf - 1].pts[(fs[nf - 1].n / 2) * DIM + 2] = INFINITY;
    }
    add_frame(fs, &nf, "negative batch index", fs[0].pts, fs[0].n, DIM);
    fs[nf - 1].batch_kind = 1;
    add_frame(fs, &nf, "batch index 3", fs[0].pts, fs[0].n, DIM);
    fs[nf - 1].batch_kind = 2;
    /* good frames again: the second and the first */
    for (int k = 0; k < 2; k++) {
        const int i = k == 0 && n_sizing > 1 ? 1 : 0;
        char name[64];
        snprintf(name, sizeof name, "%.50s again", fs[i].name);
        add_frame(fs, &nf, name, fs[i].pts, fs[i].n, DIM);
    }
    printf("%d frames, max_points %lld\n", nf, (long long)max_points);

    const float outdoor[6] = {-50.0f, -50.0f, -5.0f, 50.0f, 50.0f, 15.0f};
    const float fine[6] = {-20.0f, -20.0f, -4.0f, 20.0f, 20.0f, 4.0f};
    config cfg[4];
    cfg[0].what = "outdoor mean fp32";
    cfg[0].d = make_desc(0.1f, 0.1f, 0.2f, outdoor, VC_REDUCE_MEAN);
    cfg[0].with_batch = 0;
    cfg[1].what = "outdoor first bf16 cap, non-finite error";
    cfg[1].d = make_desc(0.1f, 0.1f, 0.2f, outdoor, VC_REDUCE_FIRST);
    cfg[1].d.dtype = VC_DTYPE_BF16;
    cfg[1].d.max_voxels = g_small ? 700 : 20000;
    cfg[1].d.nonfinite = VC_NONFINITE_ERROR;
    cfg[1].with_batch = 0;
    cfg[2].what = "fine count fp16, batch inferred";
    cfg[2].d = make_desc(0.05f, 0.05f, 0.1f, fine, VC_REDUCE_COUNT);
    cfg[2].d.dtype = VC_DTYPE_FP16;
    cfg[2].with_batch = 1;
    cfg[3].what = "fine mean fp16, batch size 3, cap, non-finite error";
    cfg[3].d = make_desc(0.05f, 0.05f, 0.1f, fine, VC_REDUCE_MEAN);
    cfg[3].d.dtype = VC_DTYPE_FP16;
    cfg[3].d.batch_size = 3;
    cfg[3].d.max_voxels = g_small ? 1500 : 40000;
    cfg[3].d.nonfinite = VC_NONFINITE_ERROR;
    cfg[3].with_batch = 1;
    for (int c = 0; c < 4; c++) run_config(&cfg[c], fs, nf, max_points, sizing);

    CHECK_MSG(g_capacity_voxels > 0, "no frame went over max_voxels");
    printf("test_gpu_bounded: %lld replays: %lld good frames bit-identical, %lld errors as "
           "vc_voxelize_gpu, %lld over max_voxels\n", (long long)g_replays,
           (long long)g_good_same, (long long)g_errors_same, (long long)g_capacity_voxels);
    for (int i = 0; i < nf; i++) free(fs[i].pts);
    vc_context_destroy(ctx);
    CUDA_OK(cudaStreamDestroy(g_stream));
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_bounded: built without CUDA, skipped\n");
    return 77;
}
#endif
