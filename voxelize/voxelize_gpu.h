/* voxelize/voxelize_gpu.h - voxelization on the GPU with the CPU twin's semantics (voxelize.h,
 * voxelize_cpu.c): identical coordinates and order, features within fp32 rounding, the
 * same cap rule (the voxels whose first point comes earliest survive), the same statistics. */
#ifndef VC_VOXELIZE_VOXELIZE_GPU_H
#define VC_VOXELIZE_VOXELIZE_GPU_H

#include "voxelize/voxelize.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Points (pts->data and pts->batch) are DEVICE pointers (pts->memory == VC_MEMORY_DEVICE). The
 * result's coords and features are DEVICE arrays from opt's allocator (NULL: the device pool),
 * stream ordered on `stream`; free them with vc_voxels_free_gpu (stream ordered on the same
 * stream). Synchronises once: the voxel count and the statistics come back to the host. Every
 * temporary comes from the allocator too. */
vc_status vc_voxelize_gpu(const vc_voxelize_desc *d, const vc_points *pts,
                          const vc_engine_options *opt, struct CUstream_st *stream,
                          vc_voxels *out, vc_voxelize_stats *stats, vc_err *err);
void vc_voxels_free_gpu(vc_voxels *v);

/* ---- the bounded, graph-capturable variant ---------------------------------------------- */

/* Fixed extents (max_points points of dim columns in, at most max_voxels voxels out) and device
 * counts: made once by vc_voxelize_gpu_bounded_create, then each frame is queued by _run (no
 * allocation, no host synchronisation: capturable in a CUDA graph, whose replays voxelize
 * whatever the point buffers and the count then hold) and checked by _check (the one sync).
 * Fields up to `channels` are public to the library; the rest is private workspace. */
typedef struct vc_voxelize_gpu_bounded {
    int32_t *coords;          /* device [max_voxels, 4]: rows [0, *d_count) are live           */
    void *features;           /* device [max_voxels, channels] of desc.dtype                   */
    int64_t *d_count;         /* device int64: the voxels made by the last run                 */
    int64_t max_points, dim, max_voxels;
    int64_t channels;         /* dim, or 1 for VC_REDUCE_COUNT                                 */
    int32_t shape[3];         /* the grid (z, y, x)                                            */
    int32_t batch_size;       /* set by a successful _check: the last run's batch size         */
    int64_t voxels_needed;    /* set by _check: the voxels the last run made (max_voxels cap
                                 applied, not the bound): what a bound must hold for it        */
    /* private */
    vc_voxelize_desc desc;
    vc_engine_options opt;    /* the options it was created with (allocator)                   */
    int64_t *info;            /* device counters of the last run (voxelize_bounded.cu)         */
    void *work;               /* device workspace: keys, indices, starts, flags, CUB storage   */
    size_t work_bytes, cub_bytes;
    const float *last_points; /* the last run's inputs (the check reads a bad point's values)  */
    const int32_t *last_batch;
    int32_t last_make_keys;   /* whether the last run built keys (the grid packs)              */
} vc_voxelize_gpu_bounded;

/* Checks d (as vc_voxelize_gpu does; dim in [3, VC_MAX_CHANNELS]; max_points >= 1,
 * max_voxels >= 1), allocates every array and temporary of a run once through opt's allocator
 * (NULL: the defaults; opt is copied) and sizes the sort storage for max_points. Synchronous;
 * *b is zeroed first and stays zeroed on failure. */
vc_status vc_voxelize_gpu_bounded_create(const vc_voxelize_desc *d, int64_t max_points,
                                         int64_t dim, int64_t max_voxels,
                                         const vc_engine_options *opt,
                                         vc_voxelize_gpu_bounded *b, vc_err *err);
/* Queues voxelization of the first *d_n_points rows of d_points ([max_points, dim] fp32,
 * device; d_batch int32 [max_points] or NULL) - no allocation, no sync, capturable. Coords
 * and features rows [0, *d_count) match vc_voxelize_gpu's for the same points exactly
 * (same order, same bits); tail rows unspecified. More voxels than max_voxels (beyond the
 * description's own max_voxels cap, which keeps its meaning) sets a capacity flag (*d_count
 * is then max_voxels); a count over max_points likewise (only the first max_points points are
 * read). Points past the count are never read. The pointers must be device-accessible (not
 * inspected, unlike vc_voxelize_gpu's: a run only queues work); they and the count are read
 * when the work runs. Sorting cost: max_points keys over the bits a key can
 * use, the batch field's bits included - with batch indices and desc.batch_size 0 that field
 * is 31 bits wide (give the batch size where it is known). */
vc_status vc_voxelize_gpu_bounded_run(vc_voxelize_gpu_bounded *b, const float *d_points,
                                      const int32_t *d_batch, const int64_t *d_n_points,
                                      struct CUstream_st *stream, vc_err *err);
/* Synchronises; reports what vc_voxelize_gpu would report for those points (same messages
 * where practical), VC_ERR_CAPACITY naming the voxel count needed; fills stats (may be NULL).
 * Order: a negative count (VC_ERR_INVALID_ARGUMENT), a count over max_points (VC_ERR_CAPACITY,
 * before any error of the points, since the points past max_points were not read), then
 * vc_voxelize_gpu's errors in its order, then more voxels than max_voxels. On VC_OK sets
 * b->batch_size. */
vc_status vc_voxelize_gpu_bounded_check(vc_voxelize_gpu_bounded *b, struct CUstream_st *stream,
                                        vc_voxelize_stats *stats, vc_err *err);
/* Frees what _create allocated (waiting for the device first) and zeroes *b. NULL and zeroed
 * structs are fine. */
void vc_voxelize_gpu_bounded_destroy(vc_voxelize_gpu_bounded *b);

#ifdef __cplusplus
}
#endif

#endif
