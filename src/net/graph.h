/* src/net/graph.h - the state of a net's graph mode, shared by graph.c (bounds, levels, the
 * fixed buffers, teardown) and graph_run.c (the frame, its capture, the check, the outputs).
 * Internal to src/net/. docs/networks.md "Graph mode" describes the behaviour. */
#ifndef VC_SRC_NET_GRAPH_H
#define VC_SRC_NET_GRAPH_H

#include "src/net/net_internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/frame.h"
#include "kmap/kmap_gpu.h"
#include "voxelize/voxelize_gpu.h"

/* The streams a frame's map builds run on (graph_run.c): [0] the maps that make levels, [1] the
 * others. No more: builds in flight at once must all fit on the device (kmap/sort_pairs.cu). */
#define VC_GRAPH_MAP_STREAMS 2

/* One bounded map: a distinct (input level, map description) of the net, as the per-call run's
 * map cache shares them. view: its arrays seen at the extents (vc_kmap_gpu_bounded_view: n_in =
 * the input level's, n_out = the output level's, n_pairs = max_pairs, the tile order made at
 * create) for vc_conv_gpu_bounded. */
typedef struct graph_map {
    vc_kmap_gpu_bounded b;
    vc_kmap_data view;
    vc_map_desc desc;
    int32_t level_in, level_out;
    int64_t plan_rows;        /* the output rows its convs are planned for: the output level's
                                 rows in the last per-call run when the bounds were set (0: the
                                 extent; vc_conv_gpu_bounded)                                  */
    int32_t layer;            /* the first layer on the map (messages)                         */
    int32_t fwd;              /* INVERSE: the map it inverts (its key owner's), built first;
                                 else -1                                                        */
    int order_stale;          /* set at the frame's start: the tile order follows the build    */
    int waited;               /* the frame's stream waited for its build (once a frame)       */
} graph_map;

/* One level: a coordinate set of the frame at its fixed extent. */
typedef struct graph_level {
    int64_t extent;
    int32_t *coords;          /* device [extent, 4]                                            */
    const int64_t *d_count;   /* device: its live rows                                         */
    int32_t shape[3];
    int32_t map;              /* the map that makes it, or -1 (level 0)                        */
} graph_level;

/* Temporaries of a captured frame (the conv's widened operands and tap-split partials): handed
 * out in request order, one block per request, never reused within a frame, and kept for the
 * graph's life; every frame (eager warm-up, capture) starts again at the first block. The
 * sequence of requests depends only on the extents, so the capture takes the blocks the warm-up
 * made and allocates nothing (frozen: a request that does not fit fails). */
typedef struct graph_arena {
    vc_context *ctx;
    void **ptr;
    size_t *size;
    int32_t n, cap, next;
    void **old;               /* blocks replaced by larger ones (a captured graph may use them) */
    int32_t n_old, cap_old;
    int frozen;
} graph_arena;

struct vc_net_graph {
    vc_net_bounds bounds;     /* as resolved: every level's extent                             */
    int32_t batch;
    int32_t n_levels;
    graph_level lv[VC_NET_MAX_LEVELS];
    graph_map *maps;
    int32_t n_maps;
    int32_t *layer_map;       /* per layer: its map index (convs), or -1                       */
    void **buf;               /* per layer: its sparse result [extent, channels], or NULL      */
    char *buf_owned;          /* 0 where buf aliases its input's (an in-place affine)          */
    void **dense;             /* per layer: its dense result, or NULL                          */
    int64_t (*dense_shape)[5];
    int32_t *dense_ndim;
    int32_t *own_coords;      /* level 0 without a voxelizer: [extent, 4]                      */
    void *own_feats;          /* [extent, in_channels]                                         */
    int64_t *own_count;
    int has_vox;
    vc_voxelize_gpu_bounded vox;
    float *pts;               /* [max_points, pts_dim]                                         */
    int64_t *pts_count;
    int32_t pts_dim;
    graph_arena arena;
    vc_allocator arena_alloc;
    vc_engine_options opts;   /* the context's, with the arena as allocator                    */
    int64_t *stat_host, *stat_dev; /* mapped pinned: level counts, then 8 words a map          */
    cudaStream_t cap_stream;  /* capture (the context's may be the legacy stream)              */
    cudaStream_t map_stream[VC_GRAPH_MAP_STREAMS]; /* forked from the frame's stream           */
    cudaEvent_t *ev;          /* [n_maps + 1 + VC_GRAPH_MAP_STREAMS]: each map built, the fork,
                                 then each map stream's join                                   */
    cudaGraphExec_t exec[2];  /* [0] voxels in, [1] points in                                  */
    int pending;              /* a frame queued and not checked                                */
    int points_frame;         /* the last frame came from points                               */
    int ran;
    vc_status frame_status;
    char frame_msg[512];
    vc_tensor **views;        /* per output: the sparse view of the last checked frame         */
};

/* graph.c: (re)allocates every resource of g for batch size `batch` (g->bounds resolved);
 * on failure what was made is freed and the message is on the context. */
vc_status vc_graph_setup(vc_net *net, struct vc_net_graph *g, int32_t batch);
/* Frees every resource of g (waiting for the device first), leaving bounds. */
void vc_graph_release(vc_net *net, struct vc_net_graph *g);
/* The features of layer r's result (VC_NET_INPUT: level 0's). */
void *vc_graph_data(const vc_net *net, int32_t r);
#endif

#endif
