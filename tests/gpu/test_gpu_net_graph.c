/* tests/gpu/test_gpu_net_graph.c - a net's graph mode (vc_net_set_bounds) against the same net
 * run per call, on one GPU context. For each detection backbone (models/voxel_backbone8x_kitti,
 * voxel_res_backbone8x_kitti, voxel_res_backbone8x_nuscenes) with random weights, in fp32 and
 * fp16: bounds from per-call runs of every frame (vc_net_level_rows, x 1.25), then the graph
 * net captures on one frame and replays on the others - synthetic LiDAR scans of ~30k and
 * ~100k voxels, a uniform cloud, an empty frame, the first frame again, and points input (the
 * repository's real VLP-16 scan and a synthetic sweep). Every output must equal the per-call
 * run's: sparse coordinates exactly, features and the dense BEV within a relative error of 1e-5
 * (fp32) / 2e-3 (fp16). A frame over level 0's bound fails at once with VC_ERR_CAPACITY; a frame
 * over an inner level's bound fails at its first output call with VC_ERR_CAPACITY naming that
 * level, and the next good frame is right. A small model with a BN applied apart, a lone
 * activation, an add, a concat and pools covers the other operations over extents. The U-Net
 * (spunet_indoor: inverse convs over the bounded inverse maps, concat skips) likewise, fp16 and
 * fp32 (fp16 within 5e-3: tol_of), on synthetic rooms and real scans' points (datasets/fetch),
 * capacity at level 2; and under the net's own bounds (test_auto). No host sync in
 * vc_net_run: right after it returns on the 100k frame, cudaStreamQuery must say the frame is
 * still running (4 times out of 5; a run that waited would never leave it running).
 * VC_SANITIZE=1: the U-Net (no auto bounds) and one backbone, fp16, small frames. Prints its
 * seed. Skips (77) without a device. */
#define _POSIX_C_SOURCE 200809L /* core/clock.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/net_testutil.h"
#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/clock.h"
#include "gpu_testutil.h"
#include "net_compare.h"

static vc_context *gpu;
static int g_quick;

#define MAX_FRAMES 8

/* Frames of one model: voxel tensors and point sets. */
typedef struct frames {
    vc_tensor *vox[MAX_FRAMES];
    const char *vox_name[MAX_FRAMES];
    int n_vox;
    vc_points pts[MAX_FRAMES];
    const char *pts_name[MAX_FRAMES];
    float *pts_data[MAX_FRAMES];
    int n_pts;
} frames;


/* Every output of the graph net against the per-call net's (both on the GPU). */
static void compare(vc_net *g, vc_net *c, double tol, const char *what)
{
    double worst = net_compare(gpu, g, gpu, c, tol, what);
    printf("  %-40s outputs equal (worst relative error %.2e, tolerance %.0e)\n", what, worst,
           tol);
}

static vc_net *net_of(const char *path, const char *json, vc_dtype dt)
{
    vc_net_desc d = VC_NET_DESC_INIT;
    d.model_path = path;
    d.model_json = json;
    d.random_weights = 1;
    d.seed = 2026;
    d.dtype = dt;
    vc_net *net = NULL;
    CHECK_OK(gpu, vc_net_create(gpu, &d, &net));
    /* every frame step by step where no bounds are set: the reference of these tests */
    if (net) CHECK_OK(gpu, vc_net_set_auto_bounds(net, 0));
    return net;
}

static vc_tensor *synth(vc_synth_kind kind, int64_t voxels, int frame, vc_synth_grid grid,
                        int channels)
{
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    d.kind = kind;
    d.voxels = voxels;
    d.frame = frame;
    d.grid = grid;
    d.channels = channels;
    vc_tensor *t = NULL;
    CHECK_OK(gpu, vc_synth_voxels(gpu, &d, &t));
    return t;
}

static vc_tensor *empty_frame(const int32_t shape[3], int channels)
{
    vc_coords *c = NULL;
    vc_tensor *t = NULL;
    CHECK_OK(gpu, vc_coords_create(gpu, NULL, 0, VC_MEMORY_HOST, shape, 1, &c));
    CHECK_OK(gpu, vc_tensor_create(gpu, c, channels, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &t));
    vc_coords_destroy(c);
    return t;
}

static float *synth_points(int frame, int dim, int64_t *n)
{
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    d.frame = frame;
    vc_cloud cl;
    CHECK_OK(gpu, vc_synth_points(gpu, &d, &cl));
    float *p = calloc((size_t)cl.count * (size_t)dim + 1, 4);
    for (int64_t i = 0; i < cl.count; i++)
        for (int k = 0; k < dim && k < cl.dim; k++) p[i * dim + k] = cl.data[i * cl.dim + k];
    *n = cl.count;
    vc_cloud_free(&cl);
    return p;
}

static void add_points(frames *f, const char *name, float *data, int64_t n, int dim)
{
    if (!data) return;
    vc_points p = {data, n, dim, NULL, VC_MEMORY_HOST};
    f->pts[f->n_pts] = p;
    f->pts_data[f->n_pts] = data;
    f->pts_name[f->n_pts++] = name;
}

static void free_frames(frames *f)
{
    for (int i = 0; i < f->n_vox; i++) vc_tensor_destroy(f->vox[i]);
    for (int i = 0; i < f->n_pts; i++) free(f->pts_data[i]);
    memset(f, 0, sizeof *f);
}

/* Bounds covering every frame: per-call runs, each level's largest count x 1.25 + 64. */
static vc_net_bounds bounds_for(vc_net *ref, const frames *f)
{
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    int32_t levels = 0;
    CHECK_OK(gpu, vc_net_level_count(ref, &levels));
    int64_t rows[VC_NET_MAX_LEVELS] = {0}, most[VC_NET_MAX_LEVELS] = {0};
    for (int i = 0; i < f->n_vox + f->n_pts; i++) {
        vc_status s = i < f->n_vox ? vc_net_run(ref, f->vox[i])
                                   : vc_net_run_points(ref, &f->pts[i - f->n_vox]);
        CHECK_OK(gpu, s);
        if (s != VC_OK) continue;
        CHECK_OK(gpu, vc_net_level_rows(ref, rows, levels));
        for (int l = 0; l < levels; l++)
            if (rows[l] > most[l]) most[l] = rows[l];
    }
    for (int i = 0; i < f->n_pts; i++)
        if (f->pts[i].count > b.max_points) b.max_points = f->pts[i].count;
    printf("  bounds:");
    for (int l = 0; l < levels; l++) {
        b.max_voxels[l] = most[l] + most[l] / 4 + 64;
        printf(" %lld", (long long)b.max_voxels[l]);
    }
    printf(" voxels, %lld points\n", (long long)b.max_points);
    return b;
}

/* Every frame of f through the graph net g (captured on the first) and the per-call ref. */
static void compare_frames(vc_net *g, vc_net *ref, const frames *f, double tol)
{
    char what[160];
    for (int i = 0; i < f->n_vox; i++) {
        vc_tensor_info ti;
        vc_tensor_get_info(f->vox[i], &ti);
        snprintf(what, sizeof what, "%s (%lld voxels)", f->vox_name[i], (long long)ti.count);
        CHECK_OK(gpu, vc_net_run(g, f->vox[i]));
        CHECK_OK(gpu, vc_net_run(ref, f->vox[i]));
        compare(g, ref, tol, what);
    }
    for (int i = 0; i < f->n_pts; i++) {
        snprintf(what, sizeof what, "%s (%lld)", f->pts_name[i], (long long)f->pts[i].count);
        CHECK_OK(gpu, vc_net_run_points(g, &f->pts[i]));
        CHECK_OK(gpu, vc_net_run_points(ref, &f->pts[i]));
        compare(g, ref, tol, what);
    }
}

/* vc_net_run returns before the 100k frame is done: the stream is still busy right after. */
static void check_no_sync(vc_net *g, vc_tensor *big)
{
    int busy = 0;
    double t_run = 0, t_all = 0;
    for (int k = 0; k < 5; k++) {
        vc_net_output o;
        double t0 = vc_clock_ms();
        CHECK_OK(gpu, vc_net_run(g, big));
        double t1 = vc_clock_ms();
        busy += cudaStreamQuery(NULL) == cudaErrorNotReady;
        CHECK_OK(gpu, vc_net_get_output(g, 0, &o));
        t_run += t1 - t0;
        t_all += vc_clock_ms() - t0;
    }
    cudaGetLastError();
    printf("  no host sync in vc_net_run: the stream was busy after %d of 5 runs (run returns in "
           "%.3f ms, the frame ends at %.3f ms)\n", busy, t_run / 5, t_all / 5);
    CHECK_MSG(busy >= 4, "vc_net_run left the stream idle after %d of 5 runs: it waited", 5 - busy);
}

/* An inner level over its bound (`level`'s bound: the tiny frame's rows there; every other
 * level's the big frame's x 1.25 + 64; both from per-call runs): VC_ERR_CAPACITY at the first
 * output call, naming the level; the output calls keep saying so; the next good frame (the tiny
 * one) is right. */
static void check_inner_capacity(const char *path, vc_dtype dt, vc_tensor *big, vc_tensor *tiny,
                                 vc_net *ref, double tol, int level)
{
    int64_t rows[VC_NET_MAX_LEVELS] = {0}, most[VC_NET_MAX_LEVELS] = {0};
    int32_t levels = 0;
    CHECK_OK(gpu, vc_net_run(ref, big));
    CHECK_OK(gpu, vc_net_level_count(ref, &levels));
    CHECK_OK(gpu, vc_net_level_rows(ref, most, levels));
    CHECK_OK(gpu, vc_net_run(ref, tiny));
    CHECK_OK(gpu, vc_net_level_rows(ref, rows, levels));
    CHECK_MSG(rows[level] < most[level], "level %d: the tiny frame has %lld rows, the big one "
              "%lld", level, (long long)rows[level], (long long)most[level]);
    vc_net *g = net_of(path, NULL, dt);
    if (!g) return;
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    for (int l = 0; l < VC_NET_MAX_LEVELS; l++) b.max_voxels[l] = most[l] + most[l] / 4 + 64;
    b.max_voxels[level] = rows[level] > 0 ? rows[level] : 1;
    CHECK_OK(gpu, vc_net_set_bounds(g, &b));
    vc_net_output o;
    CHECK_OK(gpu, vc_net_run(g, big));
    CHECK_STATUS(gpu, vc_net_get_output(g, 0, &o), VC_ERR_CAPACITY);
    const char *msg = vc_context_last_error(gpu);
    char want[32];
    snprintf(want, sizeof want, "level %d", level);
    CHECK_MSG(strstr(msg, want) != NULL, "the capacity error does not name %s: %s", want, msg);
    printf("  over an inner bound: %s\n", msg);
    CHECK_STATUS(gpu, vc_net_get_output(g, 0, &o), VC_ERR_CAPACITY);
    CHECK_OK(gpu, vc_net_run(g, tiny));
    CHECK_OK(gpu, vc_net_run(ref, tiny));
    compare(g, ref, tol, "good frame after the capacity error");
    vc_net_destroy(g);
}

/* The relative error allowed between graph and step-by-step runs: 1e-5 in fp32; in fp16 2e-3,
 * 5e-3 for the U-Net: the graph's GEMMs may split taps otherwise than the step-by-step run's
 * (they plan on the extents), and the U-Net chains about three times the backbones' convs, each
 * output rounded to fp16 - still far below a wrong map's error. */
static double tol_of(const char *model, vc_dtype dt)
{
    if (dt == VC_DTYPE_FP32) return 1e-5;
    return strstr(model, "spunet") ? 5e-3 : 2e-3;
}

/* models/MODEL's path into path[cap] and two nets of it in dtype dt, the per-call reference and
 * the one for graph mode; 0 (none left) where one could not be made. */
static int two_nets(const char *model, vc_dtype dt, char *path, size_t cap, vc_net **ref,
                    vc_net **g)
{
    const char *root = getenv("VC_DATA_ROOT");
    snprintf(path, cap, "%s%smodels/%s", root ? root : "", root ? "/" : "", model);
    printf("%s %s\n", model, dt == VC_DTYPE_FP32 ? "fp32" : "fp16");
    *ref = net_of(path, NULL, dt);
    *g = net_of(path, NULL, dt);
    if (*ref && *g) return 1;
    vc_net_destroy(*ref), vc_net_destroy(*g);
    return 0;
}

/* One detection backbone in one dtype. */
static void test_backbone(const char *model, vc_dtype dt, vc_synth_grid grid, int dim)
{
    char path[1024];
    const double tol = tol_of(model, dt);
    vc_net *ref = NULL, *g = NULL;
    if (!two_nets(model, dt, path, sizeof path, &ref, &g)) return;
    frames f;
    memset(&f, 0, sizeof f);
    vc_tensor *first = synth(VC_SYNTH_LIDAR, g_quick ? 5000 : 30000, 0, grid, dim);
    int32_t shape[3] = {1, 1, 1};
    if (first) {
        vc_tensor_info ti;
        vc_coords_info ci;
        vc_tensor_get_info(first, &ti);
        vc_coords_get_info(ti.coords, &ci);
        memcpy(shape, ci.spatial_shape, sizeof shape);
    }
    f.vox_name[f.n_vox] = "lidar (capture)";
    f.vox[f.n_vox++] = first;
    int big = -1;
    if (!g_quick) {
        big = f.n_vox;
        f.vox_name[f.n_vox] = "lidar ~100k";
        f.vox[f.n_vox++] = synth(VC_SYNTH_LIDAR, 0, 1, grid, dim);
    }
    f.vox_name[f.n_vox] = "uniform";
    f.vox[f.n_vox++] = synth(VC_SYNTH_UNIFORM, g_quick ? 2000 : 7000, 2, grid, dim);
    f.vox_name[f.n_vox] = "empty";
    f.vox[f.n_vox++] = empty_frame(shape, dim);
    if (!g_quick) {
        f.vox_name[f.n_vox] = "lidar (capture frame again)";
        f.vox[f.n_vox++] = synth(VC_SYNTH_LIDAR, 30000, 0, grid, dim);
    }
    int64_t n = 0;
    float *p = net_scan_points("vlp16.bin", dim, &n);
    add_points(&f, "vlp16.bin points (real)", p, n, dim);
    if (!g_quick) {
        p = synth_points(3, dim, &n);
        add_points(&f, "synthetic sweep points", p, n, dim);
        p = net_scan_points("vlp16.bin", dim, &n);
        add_points(&f, "vlp16.bin points again", p, n, dim);
    }
    vc_net_bounds b = bounds_for(ref, &f);
    CHECK_OK(gpu, vc_net_set_bounds(g, &b));
    compare_frames(g, ref, &f, tol);
    /* over level 0's bound: refused at once; the net goes on */
    vc_net_bounds small = b;
    small.max_voxels[0] = 100;
    vc_net *gs = net_of(path, NULL, dt);
    if (gs) {
        CHECK_OK(gpu, vc_net_set_bounds(gs, &small));
        CHECK_STATUS(gpu, vc_net_run(gs, first), VC_ERR_CAPACITY);
        CHECK_MSG(strstr(vc_context_last_error(gpu), "level 0") != NULL, "no level 0 in: %s",
                  vc_context_last_error(gpu));
        vc_net_output o;
        CHECK_STATUS(gpu, vc_net_get_output(gs, 0, &o), VC_ERR_CAPACITY);
        vc_net_destroy(gs);
    }
    if (f.n_pts > 0) {
        vc_points over = f.pts[0];
        over.count = b.max_points + 1;
        float *data = calloc((size_t)over.count * (size_t)dim, 4);
        memcpy(data, f.pts[0].data, (size_t)f.pts[0].count * (size_t)dim * 4);
        over.data = data;
        CHECK_STATUS(gpu, vc_net_run_points(g, &over), VC_ERR_CAPACITY);
        free(data);
        CHECK_OK(gpu, vc_net_run(g, first));
        CHECK_OK(gpu, vc_net_run(ref, first));
        compare(g, ref, tol, "after the points over max_points");
    }
    vc_tensor *tiny = synth(VC_SYNTH_UNIFORM, 40, 5, grid, dim);
    check_inner_capacity(path, dt, first, tiny, ref, tol, 1);
    if (big >= 0) check_no_sync(g, f.vox[big]);
    /* back to per-call runs */
    CHECK_OK(gpu, vc_net_set_bounds(g, NULL));
    CHECK_OK(gpu, vc_net_run(g, first));
    CHECK_OK(gpu, vc_net_run(ref, first));
    compare(g, ref, 0, "per call again (bit-identical)");
    vc_tensor_destroy(tiny);
    free_frames(&f);
    vc_net_destroy(ref), vc_net_destroy(g);
}

/* The U-Net (models/spunet_indoor.json: subm k5 stem, four k2 s2 downsamples, their inverse
 * convs and the concat skips) in one dtype: synthetic indoor rooms of ~40k and ~120k voxels,
 * a small one, an empty frame, the first again, and points input (the real scans octomap_scan,
 * bun0 and table_scene_lms400, voxelized by the graph); then level 2 over its bound. */
/* The first n rows of t (its coordinate set's shape, fp32 features), on the GPU context. */
static vc_tensor *head_of(const vc_tensor *t, int64_t n)
{
    vc_tensor *h = net_retensor(gpu, t, n, NULL);
    CHECK_MSG(h != NULL, "head_of: %s", vc_context_last_error(gpu));
    return h;
}

static void test_unet(vc_dtype dt)
{
    char path[1024];
    const double tol = tol_of("spunet_indoor.json", dt);
    vc_net *ref = NULL, *g = NULL;
    if (!two_nets("spunet_indoor.json", dt, path, sizeof path, &ref, &g)) return;
    frames f;
    memset(&f, 0, sizeof f);
    const vc_synth_grid kg = VC_SYNTH_GRID_KITTI; /* unused by the indoor scene */
    vc_tensor *first = synth(VC_SYNTH_INDOOR, g_quick ? 2500 : 40000, 0, kg, 3);
    const int32_t shape[3] = {208, 800, 1600};
    f.vox_name[f.n_vox] = "indoor (capture)";
    f.vox[f.n_vox++] = first;
    if (!g_quick) {
        f.vox_name[f.n_vox] = "indoor ~120k";
        f.vox[f.n_vox++] = synth(VC_SYNTH_INDOOR, 120000, 1, kg, 3);
    }
    f.vox_name[f.n_vox] = "indoor small";
    f.vox[f.n_vox++] = synth(VC_SYNTH_INDOOR, g_quick ? 700 : 6000, 2, kg, 3);
    f.vox_name[f.n_vox] = "empty";
    f.vox[f.n_vox++] = empty_frame(shape, 3);
    if (!g_quick) {
        f.vox_name[f.n_vox] = "indoor (capture frame again)";
        f.vox[f.n_vox++] = synth(VC_SYNTH_INDOOR, 40000, 0, kg, 3);
    }
    const char *scans[3] = {"bun0.pcd", "octomap_scan.bin", "table_scene_lms400.pcd"};
    for (int i = 0; i < (g_quick ? 1 : 3); i++) {
        int64_t n = 0;
        float *p = net_scan_points(scans[i], 3, &n);
        if (g_quick && n > 8000) n = 8000; /* the sanitizer run: its first 8000 points */
        add_points(&f, scans[i], p, n, 3);
    }
    vc_net_bounds b = bounds_for(ref, &f);
    CHECK_OK(gpu, vc_net_set_bounds(g, &b));
    compare_frames(g, ref, &f, tol);
    /* the synthetic room comes out near 100k voxels whatever size is asked: the tiny frame is
     * the first 300 rows of the capture frame (sorted rows: a valid set) */
    vc_tensor *tiny = head_of(first, 300);
    check_inner_capacity(path, dt, first, tiny, ref, tol, 2);
    vc_tensor_destroy(tiny);
    free_frames(&f);
    vc_net_destroy(ref), vc_net_destroy(g);
}

/* Per-call runs with the net's own bounds (vc_net_set_auto_bounds on, the default): frames of
 * growing and shrinking size (synthetic scenes of `kind`), voxels and the points of `scan`, each
 * equal to a step-by-step net's run; the inner levels outgrow their first bounds (a frame run
 * again after they grow; the U-Net's inverse maps follow their forward maps), level 0 grows
 * before the run. Off again: bit-identical to the step-by-step net. */
static void test_auto(const char *model, vc_dtype dt, vc_synth_kind kind, vc_synth_grid grid,
                      int dim, const char *scan)
{
    char path[1024];
    vc_net *ref = NULL, *a = NULL;
    printf("auto bounds: ");
    if (!two_nets(model, dt, path, sizeof path, &ref, &a)) return;
    const double tol = tol_of(model, dt);
    CHECK_OK(gpu, vc_net_set_auto_bounds(a, 1));
    const int64_t sizes[] = {3000, 20000, g_quick ? 6000 : 100000, 0, 1500, 20000};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]);
    vc_tensor *t[8] = {NULL};
    int32_t shape[3] = {1, 1, 1};
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    char what[160];
    for (int i = 0; i < n_sizes; i++) {
        t[i] = sizes[i] ? synth(kind, sizes[i], i, grid, dim) : empty_frame(shape, dim);
        if (!t[i]) continue;
        vc_tensor_info ti;
        vc_tensor_get_info(t[i], &ti);
        if (i == 0) {
            vc_coords_info ci;
            vc_coords_get_info(ti.coords, &ci);
            memcpy(shape, ci.spatial_shape, sizeof shape);
        }
        CHECK_OK(gpu, vc_net_run(a, t[i]));
        CHECK_OK(gpu, vc_net_run(ref, t[i]));
        snprintf(what, sizeof what, "auto frame %d (%lld voxels)", i, (long long)ti.count);
        compare(a, ref, tol, what);
        /* from the second frame on the net holds bounds of its own, never below the frame */
        vc_status s = vc_net_bounds_get(a, &b);
        if (i == 0) {
            CHECK_STATUS(gpu, s, VC_ERR_INVALID_ARGUMENT);
        } else {
            CHECK_OK(gpu, s);
            CHECK_MSG(b.max_voxels[0] >= ti.count, "frame %d: level 0 bound %lld < %lld rows", i,
                      (long long)b.max_voxels[0], (long long)ti.count);
        }
    }
    int64_t n = 0;
    float *p = net_scan_points(scan, dim, &n);
    for (int k = 0; p && k < 2; k++) {
        vc_points pts = {p, n, dim, NULL, VC_MEMORY_HOST};
        CHECK_OK(gpu, vc_net_run_points(a, &pts));
        CHECK_OK(gpu, vc_net_run_points(ref, &pts));
        snprintf(what, sizeof what, "auto %s points, run %d", scan, k);
        compare(a, ref, tol, what);
    }
    free(p);
    CHECK_OK(gpu, vc_net_bounds_get(a, &b));
    printf("  its bounds now: %lld points,", (long long)b.max_points);
    int32_t levels = 0;
    vc_net_level_count(a, &levels);
    for (int l = 0; l < levels; l++) printf(" %lld", (long long)b.max_voxels[l]);
    printf(" voxels\n");
    /* off: step by step again, the same bits as the reference */
    CHECK_OK(gpu, vc_net_set_auto_bounds(a, 0));
    CHECK_STATUS(gpu, vc_net_bounds_get(a, &b), VC_ERR_INVALID_ARGUMENT);
    if (t[1]) {
        CHECK_OK(gpu, vc_net_run(a, t[1]));
        CHECK_OK(gpu, vc_net_run(ref, t[1]));
        compare(a, ref, 0, "auto off: step by step (bit-identical)");
    }
    for (int i = 0; i < n_sizes; i++) vc_tensor_destroy(t[i]);
    vc_net_destroy(ref), vc_net_destroy(a);
}

/* The tensor operations over extents: a BN applied apart, a lone activation in place on a
 * concat, an add of two non-conv results, a concat, a dense output, a strided max pool (a level
 * of its own) and a subm average pool; a voxel-only description. */
static const char MIX_MODEL[] =
    "{\"format\": \"voxconv-model\", \"version\": 1, \"name\": \"graph-mix\",\n"
    " \"input\": {\"channels\": 4, \"spatial_shape\": [21, 128, 128]},\n"
    " \"layers\": [\n"
    "  {\"op\": \"subm\", \"id\": \"c0\", \"name\": \"c0\", \"out_channels\": 16, \"kernel\": 3, \"indice_key\": \"s1\"},\n"
    "  {\"op\": \"relu\", \"id\": \"stem\"},\n"
    "  {\"op\": \"batchnorm\", \"id\": \"side\", \"input\": \"stem\", \"name\": \"side\"},\n"
    "  {\"op\": \"relu\", \"id\": \"side_act\"},\n"
    "  {\"op\": \"subm\", \"id\": \"a\", \"input\": \"stem\", \"name\": \"a\", \"out_channels\": 16, \"kernel\": 3, \"indice_key\": \"s1\"},\n"
    "  {\"op\": \"add\", \"id\": \"sum\", \"inputs\": [\"side_act\", \"stem\"]},\n"
    "  {\"op\": \"concat\", \"id\": \"cat\", \"inputs\": [\"sum\", \"a\"]},\n"
    "  {\"op\": \"leaky_relu\", \"id\": \"lr\", \"slope\": 0.1},\n"
    "  {\"op\": \"conv\", \"id\": \"down\", \"name\": \"down\", \"out_channels\": 8, \"kernel\": 3, \"stride\": 2, \"padding\": 1, \"indice_key\": \"sp\"},\n"
    "  {\"op\": \"dense\", \"id\": \"bev\", \"input\": \"down\"},\n"
    "  {\"op\": \"maxpool\", \"id\": \"mp\", \"input\": \"down\", \"kernel\": 2, \"stride\": 2},\n"
    "  {\"op\": \"avgpool\", \"id\": \"ap\", \"input\": \"a\", \"kernel\": 3, \"map\": \"subm\"}\n"
    " ],\n"
    " \"outputs\": {\"stem\": \"stem\", \"cat\": \"lr\", \"down\": \"down\", \"bev\": \"bev\",\n"
    "             \"mp\": \"mp\", \"ap\": \"ap\"}}\n";

static void test_mix(void)
{
    printf("graph-mix fp32 (tensor operations over extents)\n");
    vc_net *ref = net_of(NULL, MIX_MODEL, VC_DTYPE_FP32);
    vc_net *g = net_of(NULL, MIX_MODEL, VC_DTYPE_FP32);
    if (!ref || !g) {
        vc_net_destroy(ref), vc_net_destroy(g);
        return;
    }
    const int32_t shape[3] = {21, 128, 128};
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    b.max_voxels[0] = 9000;
    b.max_voxels[1] = 46000; /* the strided level's whole grid, 11 x 64 x 64: never over */
    b.max_voxels[2] = 6000;  /* the pooled level's whole grid, 5 x 32 x 32 */
    CHECK_OK(gpu, vc_net_set_bounds(g, &b));
    int32_t levels = 0;
    CHECK_OK(gpu, vc_net_level_count(g, &levels));
    CHECK_MSG(levels == 3, "graph-mix has %d levels, not 3", levels);
    const int64_t sizes[4] = {6000, 300, 0, 8500};
    for (int i = 0; i < 4; i++) {
        vc_tensor *t = sizes[i] ? NULL : empty_frame(shape, 4);
        if (!t) {
            vc_synth_desc d = VC_SYNTH_DESC_INIT;
            d.kind = VC_SYNTH_UNIFORM;
            d.voxels = sizes[i];
            d.frame = i;
            vc_tensor *u = NULL;
            CHECK_OK(gpu, vc_synth_voxels(gpu, &d, &u));
            if (!u) continue;
            /* the uniform cloud on the KITTI grid, folded into this shape (distinct rows kept) */
            vc_tensor_info ti;
            vc_tensor_get_info(u, &ti);
            int32_t *rows = malloc((size_t)ti.count * 16 + 16);
            float *feat = malloc((size_t)ti.count * 16 + 16);
            vc_coords_copy_out(gpu, ti.coords, rows, VC_MEMORY_HOST);
            vc_tensor_copy_out(gpu, u, feat, VC_DTYPE_FP32, VC_MEMORY_HOST);
            int64_t n = 0;
            char *seen = calloc((size_t)21 * 128 * 128, 1);
            for (int64_t r = 0; r < ti.count; r++) {
                int32_t z = rows[r * 4 + 1] % 21, y = rows[r * 4 + 2] % 128;
                int32_t x = rows[r * 4 + 3] % 128;
                size_t key = ((size_t)z * 128 + (size_t)y) * 128 + (size_t)x;
                if (seen[key]) continue;
                seen[key] = 1;
                int32_t *o = rows + n * 4;
                o[0] = 0, o[1] = z, o[2] = y, o[3] = x;
                memmove(feat + n * 4, feat + r * 4, 16);
                n++;
            }
            vc_coords *c = NULL;
            CHECK_OK(gpu, vc_coords_create(gpu, rows, n, VC_MEMORY_HOST, shape, 1, &c));
            CHECK_OK(gpu, vc_tensor_create(gpu, c, 4, VC_DTYPE_FP32, feat, VC_MEMORY_HOST, &t));
            vc_coords_destroy(c);
            vc_tensor_destroy(u);
            free(rows), free(feat), free(seen);
        }
        char what[96];
        snprintf(what, sizeof what, "graph-mix frame %d", i);
        CHECK_OK(gpu, vc_net_run(g, t));
        CHECK_OK(gpu, vc_net_run(ref, t));
        compare(g, ref, 1e-5, what);
        vc_tensor_destroy(t);
    }
    vc_net_destroy(ref), vc_net_destroy(g);
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_net_graph"); /* prints the seed; the frames are fixed */
    (void)rng;
    g_quick = getenv("VC_SANITIZE") != NULL;
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CUDA;
    if (vc_context_create(&d, &gpu) != VC_OK) {
        printf("test_gpu_net_graph: no usable CUDA device (%s), skipped\n",
               vc_context_last_error(NULL));
        return 77;
    }
    test_mix();
    test_unet(VC_DTYPE_FP16);
    test_auto("voxel_res_backbone8x_kitti.json", VC_DTYPE_FP16, VC_SYNTH_LIDAR,
              VC_SYNTH_GRID_KITTI, 4, "vlp16.bin");
    if (!g_quick) {
        test_auto("spunet_indoor.json", VC_DTYPE_FP16, VC_SYNTH_INDOOR, VC_SYNTH_GRID_KITTI, 3,
                  "bun0.pcd");
        test_auto("voxel_backbone8x_kitti.json", VC_DTYPE_FP32, VC_SYNTH_LIDAR,
                  VC_SYNTH_GRID_KITTI, 4, "vlp16.bin");
    }
    test_backbone("voxel_res_backbone8x_kitti.json", VC_DTYPE_FP16, VC_SYNTH_GRID_KITTI, 4);
    if (!g_quick) {
        test_unet(VC_DTYPE_FP32);
        test_backbone("voxel_res_backbone8x_kitti.json", VC_DTYPE_FP32, VC_SYNTH_GRID_KITTI, 4);
        test_backbone("voxel_backbone8x_kitti.json", VC_DTYPE_FP16, VC_SYNTH_GRID_KITTI, 4);
        test_backbone("voxel_backbone8x_kitti.json", VC_DTYPE_FP32, VC_SYNTH_GRID_KITTI, 4);
        test_backbone("voxel_res_backbone8x_nuscenes.json", VC_DTYPE_FP16,
                      VC_SYNTH_GRID_NUSCENES, 5);
        test_backbone("voxel_res_backbone8x_nuscenes.json", VC_DTYPE_FP32,
                      VC_SYNTH_GRID_NUSCENES, 5);
    }
    CHECK_OK(gpu, vc_context_destroy(gpu));
    TEST_END();
}
#else
int main(void)
{
    printf("test_gpu_net_graph: built without CUDA, skipped\n");
    return 77;
}
#endif
