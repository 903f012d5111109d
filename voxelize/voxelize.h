/* voxelize/voxelize.h - points to voxels: the result type, the argument checks both voxelizers
 * share, and the CPU twin (voxelize_cpu.c); the GPU version is in voxelize_gpu.h. */
#ifndef VC_VOXELIZE_VOXELIZE_H
#define VC_VOXELIZE_VOXELIZE_H

#include <stdint.h>

struct CUstream_st;

#include "core/alloc.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Voxelization result: host arrays (vc_voxelize_cpu, free with vc_voxels_free) or device arrays
 * (vc_voxelize_gpu, free with vc_voxels_free_gpu), from `alloc` (core/alloc.h). */
typedef struct vc_voxels {
    int32_t *coords;          /* [n, 4]                                                        */
    void *features;           /* [n, channels] of desc->dtype                                  */
    int64_t n;
    int64_t channels;
    int32_t shape[3];         /* z, y, x                                                       */
    int32_t batch_size;
    const struct vc_allocator *alloc; /* what the arrays came from; NULL: the defaults        */
    struct CUstream_st *stream; /* device arrays: the stream their allocation is ordered on    */
} vc_voxels;

/* Checks the descriptor and computes the grid shape (z, y, x). */
vc_status vc_voxelize_check(const vc_voxelize_desc *d, int32_t shape[3], vc_err *err);
/* The argument checks both voxelizers make, in their order (vc_voxelize_check, then the points:
 * memory `where`, dim, count, data, size): shape and dim*count on success. */
vc_status vc_voxelize_check_args(const vc_voxelize_desc *d, const vc_points *pts,
                                 const vc_voxels *out, vc_memory where, int32_t shape[3],
                                 int64_t *total_elems, vc_err *err);
vc_status vc_voxelize_cpu(const vc_voxelize_desc *d, const vc_points *pts,
                          const vc_engine_options *opt, vc_voxels *out,
                          vc_voxelize_stats *stats, vc_err *err);
void vc_voxels_free(vc_voxels *v);

#ifdef __cplusplus
}
#endif

#endif
