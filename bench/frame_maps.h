/* bench/frame_maps.h - a frame's maps as one job (bench_conv): every distinct map of a network
 * built over device counts (kmap/kmap_gpu.h, the bounded builds a net's graph mode runs), with
 * the tile orders its layers take, captured as one CUDA graph and replayed with L2 flushed.
 * Two schedules: serial (one stream, creation order, what a net did before it forked its map
 * builds) and forked (the maps that make a level on one stream, the others on a second, each
 * waiting only for the maps it reads, as src/net/graph_run.c queues them). After a replay every
 * map is checked against its regular build (counts, out_in and perm bit for bit). */
#ifndef VC_BENCH_FRAME_MAPS_H
#define VC_BENCH_FRAME_MAPS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kmap/kmap_gpu.h"

/* One map of the frame, in creation order (a level's maker before the maps on the level, a
 * forward map before its inverse). */
typedef struct frame_map {
    vc_map_desc desc;         /* type and kernel (INVERSE: fwd names the forward map)         */
    int32_t in_level;         /* 0: the frame's input; L > 0: the level map maker_of[L] makes   */
    int32_t fwd;              /* INVERSE: index of its forward map here; else -1                */
    int32_t in_shape[3];
    const vc_kmap_data *ref;  /* its regular build (vc_kmap_build_gpu / vc_kmap_inverse_gpu)    */
} frame_map;

typedef struct frame_maps_result {
    double serial_ms, forked_ms; /* medians of `runs` graph replays, L2 flushed before each    */
    int mismatches;              /* maps whose bounded build differs from the regular one      */
} frame_maps_result;

/* Times maps[0..n) over the frame's input coords0 [n0, 4] (device) as above, extents as a net's
 * auto bounds take them (each level's rows x 1.25 + 64). out_level[i] is the level map i makes
 * (-1: none, SUBM and INVERSE). Dies on CUDA errors (a benchmark). */
void frame_maps_time(const int32_t *coords0, int64_t n0, const frame_map *maps,
                     const int32_t *out_level, int32_t n, int runs, const vc_engine_options *opt,
                     cudaStream_t s, frame_maps_result *res);

#endif
