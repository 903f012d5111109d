/* synth/scenes.c - the synthetic inputs of the library, the tests and the benchmarks (scenes.h).
 * The order of the draws from the generator is part of each scene: keep it. */
#include "scenes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sets of distinct rows --------------------------------------------------------------- */

void scene_set_init(scene_set *s, int32_t batch, const int32_t shape[3], int64_t expected,
                    int64_t limit)
{
    s->n = 0;
    s->cap = expected > 16 ? expected : 16;
    s->limit = limit;
    s->rows = malloc((size_t)s->cap * 16);
    vc_hash_result hr = vc_hash_init(&s->seen, s->cap, NULL);
    s->oom = s->rows == NULL || hr != VC_HASH_INSERTED;
    vc_keypack_init(&s->kp, batch, shape);
}

void scene_set_add(scene_set *s, int32_t b, int32_t z, int32_t y, int32_t x)
{
    if (s->oom || (s->limit >= 0 && s->n >= s->limit) || !vc_key_in_range(&s->kp, b, z, y, x))
        return;
    vc_hash_result hr = vc_hash_insert_grow(&s->seen, vc_key_pack(&s->kp, b, z, y, x), 0, NULL);
    if (hr != VC_HASH_INSERTED) {
        if (hr != VC_HASH_EXISTS) s->oom = 1;
        return;
    }
    if (s->n == s->cap) {
        int32_t *r = realloc(s->rows, (size_t)s->cap * 2 * 16);
        if (!r) {
            s->oom = 1;
            return;
        }
        s->cap *= 2;
        s->rows = r;
    }
    int32_t *r = s->rows + 4 * s->n++;
    r[0] = b;
    r[1] = z;
    r[2] = y;
    r[3] = x;
}

int32_t *scene_set_finish(scene_set *s, int64_t *n)
{
    vc_hash_free(&s->seen);
    if (s->oom) {
        free(s->rows);
        s->rows = NULL;
        s->n = 0;
    }
    *n = s->n;
    return s->rows;
}

void scene_shuffle_rows(vc_rng *rng, int32_t *rows, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1);
        for (int a = 0; a < 4; a++) {
            int32_t t = rows[4 * i + a];
            rows[4 * i + a] = rows[4 * j + a];
            rows[4 * j + a] = t;
        }
    }
}

/* ---- random voxel clouds ----------------------------------------------------------------- */

scene_cloud scene_random_cloud(vc_rng *rng, int64_t n, int32_t batch, const int32_t shape[3],
                               int style)
{
    scene_cloud c;
    memset(&c, 0, sizeof c);
    c.batch = batch;
    memcpy(c.shape, shape, sizeof c.shape);
    scene_set s;
    scene_set_init(&s, batch, shape, n, n);
    int64_t tries = 0;
    while (s.n < n && tries++ < 50 * n + 100) {
        int32_t b = (int32_t)vc_rng_int(rng, batch);
        int32_t z = (int32_t)vc_rng_int(rng, shape[0]), y = (int32_t)vc_rng_int(rng, shape[1]),
                x = (int32_t)vc_rng_int(rng, shape[2]);
        if (style == 0) {
            scene_set_add(&s, b, z, y, x);
        } else if (style == 1) {
            int32_t m = 1 + (int32_t)vc_rng_int(rng, 30);
            for (int32_t j = 0; j < m; j++)
                scene_set_add(&s, b, z + (int32_t)vc_rng_int(rng, 5) - 2,
                              y + (int32_t)vc_rng_int(rng, 5) - 2,
                              x + (int32_t)vc_rng_int(rng, 5) - 2);
        } else if (style == 2) {
            int a = (int)vc_rng_int(rng, 3);
            int32_t v = vc_rng_int(rng, 2) ? shape[a] - 1 : 0;
            if (a == 0) z = v;
            if (a == 1) y = v;
            if (a == 2) x = v;
            scene_set_add(&s, b, z, y, x);
        } else {
            int32_t len = 1 + (int32_t)vc_rng_int(rng, 40);
            int32_t zz = shape[0] / 4 + (int32_t)(((int64_t)x * 3 + y) % 3);
            for (int32_t j = 0; j < len; j++) scene_set_add(&s, b, zz, y, x + j);
        }
    }
    c.rows = scene_set_finish(&s, &c.n);
    scene_shuffle_rows(rng, c.rows, c.n);
    return c;
}

int32_t *scene_surface_rows(vc_rng *rng, int64_t n, int32_t batch, const int32_t shape[3])
{
    scene_set s;
    scene_set_init(&s, batch, shape, n, n);
    while (s.n < n && !s.oom) {
        /* a short run along x on a bumpy sheet, or a blob */
        int32_t b = (int32_t)vc_rng_int(rng, batch);
        int32_t y = (int32_t)vc_rng_int(rng, shape[1]), x = (int32_t)vc_rng_int(rng, shape[2]);
        int32_t z = (int32_t)vc_rng_int(rng, shape[0]);
        int blob = vc_rng_int(rng, 4) == 0;
        int32_t len = 1 + (int32_t)vc_rng_int(rng, 30);
        for (int32_t j = 0; j < len && s.n < n; j++) {
            int32_t zz = blob ? z + (int32_t)vc_rng_int(rng, 3) - 1 : shape[0] / 3 + (x + j) % 3;
            int32_t yy = blob ? y + (int32_t)vc_rng_int(rng, 3) - 1 : y;
            int32_t xx = blob ? x + (int32_t)vc_rng_int(rng, 3) - 1 : x + j;
            scene_set_add(&s, b, zz, yy, xx);
        }
    }
    int64_t got;
    int32_t *rows = scene_set_finish(&s, &got);
    scene_shuffle_rows(rng, rows, got);
    return rows;
}

/* ---- random point clouds ----------------------------------------------------------------- */

float *scene_random_points(vc_rng *rng, const vc_voxelize_desc *d, int64_t n, int dim,
                           int boundary_steps)
{
    float *pts = malloc((size_t)(n > 0 ? n : 1) * (size_t)dim * sizeof(float));
    if (!pts) return NULL;
    for (int64_t i = 0; i < n; i++) {
        float *p = pts + i * dim;
        int64_t kind = vc_rng_int(rng, 20);
        if (kind == 0 && i > 0) { /* duplicate of an earlier point */
            memcpy(p, pts + vc_rng_int(rng, i) * dim, (size_t)dim * sizeof(float));
            continue;
        }
        for (int a = 0; a < 3; a++) {
            float lo = d->range[a], hi = d->range[a + 3], ext = hi - lo;
            if (kind == 1) { /* on a voxel boundary (or the range's min or max) */
                p[a] = lo + (float)vc_rng_int(rng, boundary_steps) * d->voxel_size[a];
                if (vc_rng_int(rng, 4) == 0) p[a] = vc_rng_int(rng, 2) ? lo : hi;
            } else {
                /* uniform over the range widened by 10% on each side */
                p[a] = lo + ext * (0.5f + 0.6f * vc_rng_float(rng));
            }
        }
        for (int c = 3; c < dim; c++) p[c] = 10.0f * vc_rng_float(rng);
    }
    return pts;
}

/* ---- benchmark scenes -------------------------------------------------------------------- */

/* A vertical wall segment: x = c for y in [a, b] (axis 0), or y = c for x in [a, b] (axis 1). */
typedef struct wall {
    int axis;
    double c, a, b, h;
} wall;

void scene_lidar_walls(vc_rng *rng, int32_t **rows, int64_t *n, const int32_t shape[3])
{
    const wall walls[] = {{0, 20, -15, -5, 6}, {1, 12, 5, 40, 8},  {0, 45, -30, 30, 10},
                          {1, -18, 10, 60, 5}, {0, 8, 3, 5, 1.5},  {1, 4, 8, 12, 1.5},
                          {1, -6, 15, 19, 1.6}, {0, 30, -9, -7, 1.5}};
    const int nw = (int)(sizeof walls / sizeof walls[0]);
    scene_set v;
    scene_set_init(&v, 1, shape, 1 << 17, -1);
    const double pi = 3.14159265358979323846, h0 = 1.73;
    double yaw = vc_rng_float(rng) * 0.05;
    for (int beam = 0; beam < 128; beam++) {
        double el = (-24.8 + 26.8 * beam / 127.0) * pi / 180.0;
        for (int s = 0; s < 4096; s++) {
            double az = yaw + 2 * pi * s / 4096.0;
            double dx = cos(el) * cos(az), dy = cos(el) * sin(az), dz = sin(el);
            double best = 80.0;
            if (dz < 0) {
                double t = -h0 / dz;
                if (t < best) best = t;
            }
            for (int w = 0; w < nw; w++) {
                double d = walls[w].axis == 0 ? dx : dy;
                if (fabs(d) < 1e-9) continue;
                double t = walls[w].c / d;
                if (t <= 0 || t >= best) continue;
                double u = walls[w].axis == 0 ? t * dy : t * dx, z = h0 + t * dz;
                if (u >= walls[w].a && u <= walls[w].b && z >= 0 && z <= walls[w].h) best = t;
            }
            if (best >= 80.0) continue;
            double x = best * dx + 0.02 * vc_rng_float(rng);
            double y = best * dy + 0.02 * vc_rng_float(rng);
            double z = h0 + best * dz - 1.73 + 0.02 * vc_rng_float(rng); /* sensor frame */
            scene_set_add(&v, 0, (int32_t)floor((z + 3.0) / 0.1),
                          (int32_t)floor((y + 40.0) / 0.05), (int32_t)floor(x / 0.05));
        }
    }
    *rows = scene_set_finish(&v, n);
}

void scene_room(vc_rng *rng, int32_t **rows, int64_t *n, const int32_t shape[3])
{
    scene_set v;
    scene_set_init(&v, 1, shape, 1 << 19, -1);
    const int32_t Z = shape[0], Y = shape[1], X = shape[2];
    for (int32_t y = 0; y < Y; y++)
        for (int32_t x = 0; x < X; x++) {
            scene_set_add(&v, 0, 0, y, x);
            if ((x / 40 + y / 40) % 3) scene_set_add(&v, 0, Z - 1, y, x); /* ceiling, gaps */
        }
    for (int32_t z = 0; z < Z; z++) {
        for (int32_t y = 0; y < Y; y++) {
            scene_set_add(&v, 0, z, y, 0);
            scene_set_add(&v, 0, z, y, X - 1);
        }
        for (int32_t x = 0; x < X; x++) {
            scene_set_add(&v, 0, z, 0, x);
            scene_set_add(&v, 0, z, Y - 1, x);
        }
    }
    for (int b = 0; b < 8; b++) { /* boxes standing on the floor: top and sides */
        int32_t x0 = 10 + (int32_t)vc_rng_int(rng, X - 80);
        int32_t y0 = 10 + (int32_t)vc_rng_int(rng, Y - 80);
        int32_t sx = 20 + (int32_t)vc_rng_int(rng, 50), sy = 20 + (int32_t)vc_rng_int(rng, 50);
        int32_t sz = 15 + (int32_t)vc_rng_int(rng, 30);
        for (int32_t y = y0; y < y0 + sy; y++)
            for (int32_t x = x0; x < x0 + sx; x++) scene_set_add(&v, 0, sz, y, x);
        for (int32_t z = 1; z < sz; z++) {
            for (int32_t y = y0; y < y0 + sy; y++) {
                scene_set_add(&v, 0, z, y, x0);
                scene_set_add(&v, 0, z, y, x0 + sx - 1);
            }
            for (int32_t x = x0; x < x0 + sx; x++) {
                scene_set_add(&v, 0, z, y0, x);
                scene_set_add(&v, 0, z, y0 + sy - 1, x);
            }
        }
    }
    *rows = scene_set_finish(&v, n);
    scene_shuffle_rows(rng, *rows, *n);
}

/* Obstacles: axis-aligned boxes (x0, x1, y0, y1, height) standing on the ground. */
typedef struct box {
    double x0, x1, y0, y1, h;
} box;

/* Ray (origin o, direction d) against a box: entry distance or -1. */
static double ray_box(const double o[3], const double d[3], const box *b)
{
    double lo[3] = {b->x0, b->y0, 0.0}, hi[3] = {b->x1, b->y1, b->h};
    double t0 = 0.0, t1 = 1e30;
    for (int a = 0; a < 3; a++) {
        if (fabs(d[a]) < 1e-12) {
            if (o[a] < lo[a] || o[a] > hi[a]) return -1;
            continue;
        }
        double ta = (lo[a] - o[a]) / d[a], tb = (hi[a] - o[a]) / d[a];
        if (ta > tb) {
            double t = ta;
            ta = tb;
            tb = t;
        }
        if (ta > t0) t0 = ta;
        if (tb < t1) t1 = tb;
        if (t0 > t1) return -1;
    }
    return t0 > 0 ? t0 : -1;
}

/* The fixed obstacles of the sweep: five buildings and walls, 35 parked cars. */
static int sweep_boxes(box boxes[64])
{
    int nb = 0;
    vc_rng g = {0xC0FFEEull + 1}; /* the scene is the same in every frame */
    const box fixed[] = {{18, 21, -16, -5, 6},  {10, 40, 12, 13, 8},  {45, 46, -30, 30, 10},
                         {5, 60, -19, -18, 5},  {30, 34, 6, 10, 7}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) boxes[nb++] = fixed[i];
    while (nb < 40) { /* cars: 4.2 x 1.8 x 1.5 m, parked along both sides */
        double x = 4 + 60 * (vc_rng_float(&g) * 0.5 + 0.5);
        double y = (vc_rng_int(&g, 2) ? 1 : -1) * (4 + 3 * (vc_rng_float(&g) * 0.5 + 0.5));
        box b = {x, x + 4.2, y, y + 1.8, 1.5};
        boxes[nb++] = b;
    }
    return nb;
}

void scene_lidar_sweep(vc_rng *rng, int frame, int steps, scene_hit_fn hit, void *user)
{
    box boxes[64];
    const int nb = sweep_boxes(boxes);
    const double pi = 3.14159265358979323846, h0 = 1.73;
    const double yaw = 0.0007 * frame;
    for (int beam = 0; beam < 128; beam++) {
        double el = (-24.8 + 26.8 * beam / 127.0) * pi / 180.0;
        for (int s = 0; s < steps; s++) {
            double az = yaw + 2 * pi * s / (double)steps;
            double d[3] = {cos(el) * cos(az), cos(el) * sin(az), sin(el)};
            double o[3] = {0, 0, h0};
            double best = 80.0;
            if (d[2] < 0) best = -h0 / d[2];
            for (int b = 0; b < nb; b++) {
                double t = ray_box(o, d, &boxes[b]);
                if (t > 0 && t < best) best = t;
            }
            if (best >= 80.0) continue;
            double x = best * d[0] + 0.02 * vc_rng_float(rng);
            double y = best * d[1] + 0.02 * vc_rng_float(rng);
            double z = h0 + best * d[2] - h0 + 0.02 * vc_rng_float(rng);
            hit(user, x, y, z, best);
        }
    }
}

const scene_grid SCENE_GRID_KITTI = {{0.05, 0.05, 0.1}, {0.0, -40.0, -3.0}, {41, 1600, 1408}};
const scene_grid SCENE_GRID_NUSCENES = {{0.075, 0.075, 0.2}, {-54.0, -54.0, -5.0},
                                        {40, 1440, 1440}};

typedef struct grid_sink {
    scene_set *set;
    const scene_grid *g;
} grid_sink;

/* (p - min) / size is exact arithmetic for the KITTI grid's old form: x / 0.05, (y + 40) /
 * 0.05, (z + 3) / 0.1 (subtracting -40.0 adds 40.0, subtracting 0.0 changes nothing). */
static void add_to_grid(void *user, double x, double y, double z, double range)
{
    const grid_sink *k = user;
    (void)range;
    scene_set_add(k->set, 0, (int32_t)floor((z - k->g->min[2]) / k->g->size[2]),
                  (int32_t)floor((y - k->g->min[1]) / k->g->size[1]),
                  (int32_t)floor((x - k->g->min[0]) / k->g->size[0]));
}

void scene_lidar_boxes_grid(vc_rng *rng, int frame, int steps, const scene_grid *g,
                            int32_t **rows, int64_t *n)
{
    scene_set v;
    scene_set_init(&v, 1, g->shape, 1 << 17, -1);
    grid_sink k = {&v, g};
    scene_lidar_sweep(rng, frame, steps, add_to_grid, &k);
    *rows = scene_set_finish(&v, n);
}

void scene_lidar_boxes(vc_rng *rng, int frame, int32_t **rows, int64_t *n,
                       const int32_t shape[3])
{
    scene_grid g = SCENE_GRID_KITTI;
    memcpy(g.shape, shape, sizeof g.shape);
    scene_lidar_boxes_grid(rng, frame, 6144, &g, rows, n);
}

/* ---- scans ------------------------------------------------------------------------------- */

void scene_cloud_bounds(const vc_cloud *c, float mn[3], float mx[3])
{
    for (int a = 0; a < 3; a++) {
        mn[a] = 1e30f;
        mx[a] = -1e30f;
    }
    for (int64_t i = 0; i < c->count; i++)
        for (int a = 0; a < 3; a++) {
            float v = c->data[i * c->dim + a];
            if (!isfinite(v)) continue;
            if (v < mn[a]) mn[a] = v;
            if (v > mx[a]) mx[a] = v;
        }
}

// The voxel size of a scan given none (scene_scan_arg, scene_voxelize_padded), metres.
static const float kScanVoxel[3] = {0.05f, 0.05f, 0.1f};

int scene_scan_arg(const char *arg, char *path, size_t cap, float size[3])
{
    const char *at = strrchr(arg, '@');
    const size_t len = at ? (size_t)(at - arg) : strlen(arg);
    memcpy(size, kScanVoxel, sizeof kScanVoxel);
    if (len + 1 > cap) return -1;
    memcpy(path, arg, len);
    path[len] = 0;
    if (!at) return 0;
    // one size or three, and nothing after them (%n: the characters the numbers took)
    double v[3];
    int used = -1;
    if (sscanf(at + 1, "%lf%n", &v[0], &used) == 1 && at[1 + used] == 0) {
        v[1] = v[2] = v[0];
    } else {
        used = -1;
        if (sscanf(at + 1, "%lf,%lf,%lf%n", &v[0], &v[1], &v[2], &used) != 3 || used < 0 ||
            at[1 + used] != 0)
            return -1;
    }
    for (int a = 0; a < 3; a++) {
        if (!(v[a] > 0.0 && v[a] < 1e6)) return -1;
        size[a] = (float)v[a];
    }
    return 0;
}

vc_status scene_voxelize_padded(const vc_cloud *c, const float size[3], vc_voxels *out,
                                vc_err *err)
{
    float mn[3], mx[3];
    scene_cloud_bounds(c, mn, mx);
    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    memcpy(vd.voxel_size, size ? size : kScanVoxel, sizeof kScanVoxel);
    // a margin of 10 of the smallest voxel edge (0.5 m at the default size) beyond the box
    float pad = vd.voxel_size[0];
    if (vd.voxel_size[1] < pad) pad = vd.voxel_size[1];
    if (vd.voxel_size[2] < pad) pad = vd.voxel_size[2];
    pad *= 10.0f;
    for (int a = 0; a < 3; a++) {
        vd.range[a] = mn[a] - pad;
        vd.range[3 + a] = mx[a] + pad;
    }
    vc_points pts = {c->data, c->count, c->dim, NULL, VC_MEMORY_HOST};
    memset(out, 0, sizeof *out);
    return vc_voxelize_cpu(&vd, &pts, NULL, out, NULL, err);
}
