/* synth/scenes.h - the synthetic inputs of the library (vc_synth_voxels, vc_synth_points), the
 * tests and the benchmarks: sets of distinct voxel rows, random voxel clouds and point clouds,
 * the LiDAR sweeps and the indoor room of the benchmarks, and scan files voxelized. One copy of
 * each: the tests and benchmark programs include this header (through tests/common/scenes.h).
 * Every generator draws from the vc_rng it is given, in a fixed order: the same seed gives the
 * same bytes. The benchmarks' figures stay comparable across versions only while that holds, so
 * a change here that moves a single draw is a change of every benchmark scene.
 * Rows are int32 (b, z, y, x), 16 bytes each, malloc'ed: the caller frees them. A generator
 * that runs out of memory returns NULL rows (and n = 0); nothing here aborts or prints. */
#ifndef VC_SYNTH_SCENES_H
#define VC_SYNTH_SCENES_H

#include <stdint.h>

#include "hash/hash.h"
#include "core/rng.h"
#include "voxconv.h"
#include "voxelize/voxelize.h"

/* ---- sets of distinct rows --------------------------------------------------------------- */

/* Distinct rows in the order first added; rows outside the grid (vc_key_in_range) and repeats
 * are dropped, and so is every row past `limit`. */
typedef struct scene_set {
    int32_t *rows;
    int64_t n, cap, limit;
    vc_hash seen;
    vc_keypack kp;
    int oom; /* an allocation failed: the set stopped growing and finishes as NULL */
} scene_set;

/* `expected` sizes the first allocation (it grows past it); limit < 0: no limit. */
void scene_set_init(scene_set *s, int32_t batch, const int32_t shape[3], int64_t expected,
                    int64_t limit);
void scene_set_add(scene_set *s, int32_t b, int32_t z, int32_t y, int32_t x);
/* Frees the set's table and hands over its rows (*n of them); NULL (and *n = 0) after a failed
 * allocation. */
int32_t *scene_set_finish(scene_set *s, int64_t *n);

/* Fisher-Yates over n rows of 4 int32, from the last row down: a map builder must not rely on
 * the input's order. */
void scene_shuffle_rows(vc_rng *rng, int32_t *rows, int64_t n);

/* ---- random voxel clouds (the GPU tests) ------------------------------------------------- */

typedef struct scene_cloud {
    int32_t *rows;
    int64_t n;
    int32_t batch;
    int32_t shape[3];
} scene_cloud;

/* Up to n distinct rows in batch x shape (fewer where 50 n + 100 draws do not find them),
 * shuffled. style 0: uniform; 1: blobs (dense neighbourhoods); 2: on the faces of the shape;
 * 3: sheets (a ground plane with bumps, like a scan). */
scene_cloud scene_random_cloud(vc_rng *rng, int64_t n, int32_t batch, const int32_t shape[3],
                               int style);

/* Exactly n distinct rows on the surfaces of a scan-like scene (short runs along x on a bumpy
 * sheet, and blobs), shuffled. n must fit the grid. */
int32_t *scene_surface_rows(vc_rng *rng, int64_t n, int32_t batch, const int32_t shape[3]);

/* ---- random point clouds (the voxelization tests) ---------------------------------------- */

/* n points of `dim` floats for voxelizing with d: clustered, with exact duplicates of earlier
 * points (1 in 20), points on voxel boundaries (on one of the first `boundary_steps` planes of
 * each axis) and on the range's min and max (1 in 20), the rest uniform over the range widened
 * by 10% on each side; features past xyz uniform in [-10, 10). */
float *scene_random_points(vc_rng *rng, const vc_voxelize_desc *d, int64_t n, int dim,
                           int boundary_steps);

/* ---- benchmark scenes -------------------------------------------------------------------- */

/* One sweep of a 128-beam spinning LiDAR 1.73 m above a ground plane with eight walls (4096
 * azimuth steps, ~100k voxels); voxels of 0.05 x 0.05 x 0.1 m over x [0, 70.4), y [-40, 40),
 * z [-3, 1) (the SECOND / KITTI grid, shape 41 x 1600 x 1408). bench_kmap's outdoor scene. */
void scene_lidar_walls(vc_rng *rng, int32_t **rows, int64_t *n, const int32_t shape[3]);

/* A 10 x 8 x 3 m room at 3 cm (shape 100 x 267 x 334): floor, ceiling with gaps, four walls and
 * eight boxes, shuffled. bench_kmap's indoor scene. */
void scene_room(vc_rng *rng, int32_t **rows, int64_t *n, const int32_t shape[3]);

/* One sweep of a 128-beam spinning LiDAR 1.73 m above the ground (6144 azimuth steps, yaw
 * 0.0007 rad per frame, ~100k voxels) among buildings, walls and 35 parked cars (the same in
 * every frame; the noise comes from rng), on the grid of scene_lidar_walls. bench_conv's scene. */
void scene_lidar_boxes(vc_rng *rng, int frame, int32_t **rows, int64_t *n,
                       const int32_t shape[3]);

/* ---- the LiDAR sweep of vc_synth (scene_lidar_boxes on any grid) ------------------------ */

/* A voxel grid: voxel size and range minimum per axis x, y, z (metres); shape z, y, x. A point
 * lands in voxel floor((p - min) / size), computed in double. */
typedef struct scene_grid {
    double size[3], min[3];
    int32_t shape[3];
} scene_grid;

/* SECOND / KITTI: 0.05 x 0.05 x 0.1 m over x [0, 70.4), y [-40, 40), z [-3, 1), 41x1600x1408.
 * nuScenes (CenterPoint): 0.075 x 0.075 x 0.2 m over x, y [-54, 54), z [-5, 3), 40x1440x1440. */
extern const scene_grid SCENE_GRID_KITTI, SCENE_GRID_NUSCENES;

/* Called for each return of a sweep: the point in the sensor frame and its range (metres). */
typedef void (*scene_hit_fn)(void *user, double x, double y, double z, double range);

/* The sweep of scene_lidar_boxes with `steps` azimuth steps (6144 there): every return, in the
 * order scene_lidar_boxes adds them, with the same draws from rng. */
void scene_lidar_sweep(vc_rng *rng, int frame, int steps, scene_hit_fn hit, void *user);

/* scene_lidar_boxes on grid g with `steps` azimuth steps; on the KITTI grid with 6144 steps the
 * same rows. */
void scene_lidar_boxes_grid(vc_rng *rng, int frame, int steps, const scene_grid *g,
                            int32_t **rows, int64_t *n);

/* ---- scans ------------------------------------------------------------------------------- */

/* Bounding box of a cloud's finite x, y, z. */
void scene_cloud_bounds(const vc_cloud *c, float mn[3], float mx[3]);

/* A scan argument "path[@size]" (size "s" or "sx,sy,sz" in metres, each positive; the last @
 * starts it): the path into path[cap] and the voxel size into size (0.05, 0.05, 0.1 without one).
 * 0, or -1 when the size does not parse, has anything after it, or the path does not fit. */
int scene_scan_arg(const char *arg, char *path, size_t cap, float size[3]);

/* The cloud voxelized on the host (vc_voxelize_cpu) at `size` (NULL: 0.05 x 0.05 x 0.1 m) over
 * its bounding box widened on each side by 10 of its smallest voxel edge (0.5 m by default). */
vc_status scene_voxelize_padded(const vc_cloud *c, const float size[3], vc_voxels *out,
                                vc_err *err);

#endif
