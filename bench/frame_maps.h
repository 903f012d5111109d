/* bench/frame_maps.h - a frame's maps as one job (bench_conv): every distinct map a network
 * uses, built over device counts (kmap/kmap_gpu.h, the bounded builds a net's graph mode runs),
 * with the tile orders its layers take, captured as one CUDA graph and replayed with L2
 * flushed. Two schedules: serial (one stream, creation order, what a net did before it forked
 * its map builds) and forked (the maps that make a level on one stream, the others on a second,
 * each waiting only for the maps it reads, as src/net/graph_run.c queues them). After the
 * warm-up replays every map is checked against its regular build (counts, out_in, perm and
 * output coordinates bit for bit). */
#ifndef VC_BENCH_FRAME_MAPS_H
#define VC_BENCH_FRAME_MAPS_H

#include <cuda_runtime_api.h>

#include "core/options.h"
#include "frame_state.h"

typedef struct frame_maps_result {
    double serial_ms, forked_ms; /* medians of `runs` graph replays, L2 flushed before each    */
    int mismatches;              /* maps whose bounded build differs from the regular one      */
} frame_maps_result;

/* Times the maps that layers 0..n_layers-1 use (map_of[i]: layer i's entry in fs) and the
 * makers of their levels, over fs's level 0, as above; extents as a net's auto bounds take
 * them (each level's rows x 1.25 + 64). Dies on CUDA errors (a benchmark). */
void frame_maps_of(const frame_state *fs, const int *map_of, int n_layers, int runs,
                   const vc_engine_options *opt, cudaStream_t s, frame_maps_result *res);

#endif
