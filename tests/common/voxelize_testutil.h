/* tests/common/voxelize_testutil.h - descriptor and point-set builders shared by the
 * voxelization tests (tests/unit/test_voxelize.c, tests/gpu/test_gpu_voxelize.c). */
#ifndef VC_VOXELIZE_TESTUTIL_H
#define VC_VOXELIZE_TESTUTIL_H

#include <string.h>

#include "voxconv.h"
#include "voxelize/voxelize.h"

static inline vc_voxelize_desc make_desc(float vx, float vy, float vz, const float range[6],
                                         vc_reduce reduce)
{
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    d.voxel_size[0] = vx;
    d.voxel_size[1] = vy;
    d.voxel_size[2] = vz;
    memcpy(d.range, range, sizeof d.range);
    d.reduce = reduce;
    return d;
}

static inline vc_points make_points(const float *data, int64_t count, int32_t dim,
                                    const int32_t *batch, vc_memory memory)
{
    vc_points p;
    memset(&p, 0, sizeof p);
    p.data = data;
    p.count = count;
    p.dim = dim;
    p.batch = batch;
    p.memory = memory;
    return p;
}

#endif
