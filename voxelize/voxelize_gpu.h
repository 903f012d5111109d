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

#ifdef __cplusplus
}
#endif

#endif
