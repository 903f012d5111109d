/* src/synth_op.c - vc_synth_voxels and vc_synth_points: the scenes of synth/scenes.h behind the
 * public description (kind, seed, size, frame, grid). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "src/io/io.h"
#include "synth/scenes.h"

#define SYNTH_DEFAULT_SEED 0x5eed5eed12345ull
#define SYNTH_LIDAR_STEPS 6144
#define SYNTH_UNIFORM_VOXELS 100000
#define SYNTH_MAX_FRAME 255
#define SYNTH_MAX_VOXELS ((int64_t)1 << 28)
/* The indoor room's grid at scale 1 (scene_room's shape) and its voxel size. */
static const int32_t ROOM_SHAPE[3] = {100, 267, 334};
#define ROOM_VOXEL 0.03

/* What one generation is given besides the description: the LiDAR's azimuth steps, the room's
 * scale. */
typedef struct synth_param {
    int steps;
    double scale;
} synth_param;

static const scene_grid *grid_of(vc_synth_grid g)
{
    return g == VC_SYNTH_GRID_NUSCENES ? &SCENE_GRID_NUSCENES : &SCENE_GRID_KITTI;
}

static void room_shape(double scale, int32_t shape[3])
{
    /* the boxes of scene_room need y and x over 80 and z over their 45-voxel height */
    for (int a = 0; a < 3; a++) {
        double v = floor(ROOM_SHAPE[a] * scale + 0.5);
        shape[a] = (int32_t)(v < (a == 0 ? 50 : 100) ? (a == 0 ? 50 : 100) : v);
    }
}

/* The grid of a description (sizes x, y, z; minimum x, y, z; shape z, y, x). */
static scene_grid synth_grid(const vc_synth_desc *d, const synth_param *p)
{
    if (d->kind != VC_SYNTH_INDOOR) return *grid_of(d->grid);
    scene_grid g = {{ROOM_VOXEL, ROOM_VOXEL, ROOM_VOXEL}, {0, 0, 0}, {0, 0, 0}};
    room_shape(p->scale, g.shape);
    return g;
}

/* One scene: frames 0..d->frame drawn in order from one generator, the last one kept. */
static void generate(const vc_synth_desc *d, const synth_param *p, int32_t **rows, int64_t *n)
{
    vc_rng rng = {d->seed ? d->seed : SYNTH_DEFAULT_SEED};
    const scene_grid g = synth_grid(d, p);
    *rows = NULL;
    *n = 0;
    for (int f = 0; f <= d->frame; f++) {
        free(*rows);
        if (d->kind == VC_SYNTH_LIDAR) {
            scene_lidar_boxes_grid(&rng, f, p->steps, &g, rows, n);
        } else if (d->kind == VC_SYNTH_INDOOR) {
            scene_room(&rng, rows, n, g.shape);
        } else {
            scene_cloud c = scene_random_cloud(
                &rng, d->voxels ? d->voxels : SYNTH_UNIFORM_VOXELS, 1, g.shape, 0);
            *rows = c.rows;
            *n = c.n;
        }
        if (!*rows) return;
    }
}

/* The scene of d, aiming at d->voxels for LIDAR and INDOOR: a first generation at the kind's own
 * size, then up to three more with the steps (proportional) or the scale (square root: the room
 * is surfaces) corrected by the ratio of the counts. */
/* A generated scene: its rows, grid, and the steps or scale its size settled on. */
typedef struct synth_scene {
    int32_t *rows;
    int64_t n;
    scene_grid g;
    synth_param p;
} synth_scene;

static vc_status synth_rows(vc_context *ctx, const char *fn, const vc_synth_desc *d,
                            synth_scene *sc)
{
    int32_t **rows = &sc->rows;
    int64_t *n = &sc->n;
    synth_param p = {SYNTH_LIDAR_STEPS, 1.0};
    generate(d, &p, rows, n);
    for (int it = 0; it < 3 && *rows && d->kind != VC_SYNTH_UNIFORM && d->voxels > 0; it++) {
        double ratio = (double)d->voxels / (double)(*n > 0 ? *n : 1);
        if (fabs(ratio - 1.0) < 0.02) break;
        synth_param q = p;
        if (d->kind == VC_SYNTH_LIDAR) {
            double s = floor(p.steps * ratio + 0.5);
            q.steps = (int)(s < 64 ? 64 : s > (1 << 17) ? (1 << 17) : s);
        } else {
            q.scale = p.scale * sqrt(ratio);
            if (q.scale > 8.0) q.scale = 8.0;
        }
        if (q.steps == p.steps && q.scale == p.scale) break;
        p = q;
        free(*rows);
        generate(d, &p, rows, n);
    }
    if (!*rows) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    sc->g = synth_grid(d, &p);
    sc->p = p;
    return VC_OK;
}

/* The prologue of both entry points: the context's message cleared, `out` present, the
 * description (required) checked into *d. */
static vc_status take_desc(vc_context *ctx, const char *fn, const vc_synth_desc *desc,
                           const void *out, vc_synth_desc *d)
{
    vc_ctx_clear(ctx);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *d = (vc_synth_desc)VC_SYNTH_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, *d, desc, vc_synth_desc);
    if (d->kind != VC_SYNTH_LIDAR && d->kind != VC_SYNTH_INDOOR && d->kind != VC_SYNTH_UNIFORM)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad kind %d", fn, (int)d->kind);
    if (d->grid != VC_SYNTH_GRID_KITTI && d->grid != VC_SYNTH_GRID_NUSCENES)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad grid %d", fn, (int)d->grid);
    if (d->frame < 0 || d->frame > SYNTH_MAX_FRAME)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: frame %d is outside 0..%d", fn,
                           (int)d->frame, SYNTH_MAX_FRAME);
    if (d->channels < 1 || d->channels > 1024)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: channels %d is outside 1..1024",
                           fn, (int)d->channels);
    if (d->voxels < 0 || d->voxels > SYNTH_MAX_VOXELS)
        return vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: voxels %lld is outside 0..%lld", fn,
                           (long long)d->voxels, (long long)SYNTH_MAX_VOXELS);
    if (d->kind == VC_SYNTH_UNIFORM) {
        const int32_t *s = grid_of(d->grid)->shape;
        int64_t cells = (int64_t)s[0] * s[1] * s[2];
        if (d->voxels > cells / 4)
            return vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: %lld uniform voxels exceed a quarter of "
                               "the grid's %lld cells", fn, (long long)d->voxels,
                               (long long)cells);
    }
    return VC_OK;
}

vc_status vc_synth_voxels(vc_context *ctx, const vc_synth_desc *desc, vc_tensor **out)
{
    const char *fn = "vc_synth_voxels";
    vc_synth_desc d;
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_status s = take_desc(ctx, fn, desc, out, &d);
    if (s != VC_OK) return s;
    synth_scene sc;
    if ((s = synth_rows(ctx, fn, &d, &sc)) != VC_OK) return s;
    int32_t *rows = sc.rows;
    const int64_t n = sc.n;
    size_t elems = (size_t)n * (size_t)d.channels;
    float *feat = malloc(elems ? elems * sizeof(float) : 1);
    if (!feat) {
        free(rows);
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    /* the features' own generator: the rows do not depend on the channel count */
    vc_rng fr = {(d.seed ? d.seed : SYNTH_DEFAULT_SEED) * 0x9E3779B97F4A7C15ull + 7};
    for (size_t i = 0; i < elems; i++) feat[i] = vc_rng_float(&fr);
    vc_coords *c = NULL;
    s = vc_coords_create(ctx, rows, n, VC_MEMORY_HOST, sc.g.shape, 1, &c);
    if (s == VC_OK)
        s = vc_tensor_create(ctx, c, d.channels, VC_DTYPE_FP32, feat, VC_MEMORY_HOST, out);
    vc_coords_destroy(c); /* the tensor holds its own reference */
    free(rows);
    free(feat);
    return s;
}

typedef struct point_sink {
    float *p;
    int64_t n, cap;
    int oom;
} point_sink;

static void add_point(void *user, double x, double y, double z, double range)
{
    point_sink *k = user;
    if (k->oom) return;
    if (k->n == k->cap) {
        int64_t cap = k->cap ? 2 * k->cap : 1 << 18;
        float *p = realloc(k->p, (size_t)cap * 4 * sizeof(float));
        if (!p) {
            k->oom = 1;
            return;
        }
        k->p = p;
        k->cap = cap;
    }
    float *q = k->p + 4 * k->n++;
    q[0] = (float)x;
    q[1] = (float)y;
    q[2] = (float)z;
    q[3] = (float)(1.0 / (1.0 + range / 10.0));
}

/* The LiDAR's returns (frames 0..frame drawn in order, the last kept), with the azimuth steps
 * `steps`. */
static vc_status lidar_points(vc_context *ctx, const char *fn, const vc_synth_desc *d,
                              int steps, point_sink *k)
{
    vc_rng rng = {d->seed ? d->seed : SYNTH_DEFAULT_SEED};
    for (int f = 0; f <= d->frame; f++) {
        k->n = 0;
        scene_lidar_sweep(&rng, f, steps, add_point, k);
        if (k->oom) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    return VC_OK;
}

vc_status vc_synth_points(vc_context *ctx, const vc_synth_desc *desc, vc_cloud *out)
{
    const char *fn = "vc_synth_points";
    vc_synth_desc d;
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_status s = take_desc(ctx, fn, desc, out, &d);
    if (s != VC_OK) return s;
    /* the rows (and the steps or scale the size settled on) as vc_synth_voxels makes them */
    synth_scene sc = {NULL, 0, SCENE_GRID_KITTI, {SYNTH_LIDAR_STEPS, 1.0}};
    if ((d.kind != VC_SYNTH_LIDAR || d.voxels > 0) && (s = synth_rows(ctx, fn, &d, &sc)) != VC_OK)
        return s;
    int32_t *rows = sc.rows;
    int64_t n = sc.n;
    const scene_grid g = sc.g;
    point_sink k = {NULL, 0, 0, 0};
    if (d.kind == VC_SYNTH_LIDAR) {
        free(rows);
        rows = NULL;
        if ((s = lidar_points(ctx, fn, &d, sc.p.steps, &k)) != VC_OK) {
            free(k.p);
            return s;
        }
        n = k.n;
    }
    static const char *const names[4] = {"x", "y", "z", "intensity"};
    const vc_io_src src = {ctx, fn};
    vc_cloud c;
    s = vc_io_cloud_alloc(&src, &c, n, 4, names);
    if (s == VC_OK && rows) {
        for (int64_t i = 0; i < n; i++) { /* voxel centres: rows are (b, z, y, x) */
            for (int a = 0; a < 3; a++)
                c.data[4 * i + a] =
                    (float)(g.min[a] + ((double)rows[4 * i + 3 - a] + 0.5) * g.size[a]);
            c.data[4 * i + 3] = 0.0f;
        }
    } else if (s == VC_OK && n > 0) {
        memcpy(c.data, k.p, (size_t)n * 4 * sizeof(float));
    }
    free(rows);
    free(k.p);
    if (s == VC_OK) *out = c;
    return s;
}
