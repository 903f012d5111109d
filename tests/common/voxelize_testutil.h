/* tests/common/voxelize_testutil.h - descriptor and point-set builders shared by the
 * voxelization tests (tests/unit/test_voxelize.c, tests/gpu/test_gpu_voxelize.c,
 * tests/gpu/test_gpu_bounded.c), and where the real scans of datasets/ are. */
#ifndef VC_VOXELIZE_TESTUTIL_H
#define VC_VOXELIZE_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
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

/* Looks for datasets/data/NAME: under $VC_TEST_DATA_ROOT (the data folder itself or the
 * repository root), the working directory and its parents, then the source tree (found from
 * this header's path: tests/common/). */
static inline int find_scan(const char *name, char *path, size_t cap)
{
    char dirs[8][1024];
    int nd = 0;
    const char *root = getenv("VC_TEST_DATA_ROOT");
    char src[1024];
    int srclen = snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = srclen > 0 && (size_t)srclen < sizeof src ? strrchr(src, '/') : NULL;
    if (slash) *slash = 0;
    const int have_root = root && *root;
    const char *pre[6] = {have_root ? root : NULL, have_root ? root : NULL, "", "", "",
                          slash ? src : NULL};
    const char *post[6] = {"", "/datasets/data", "datasets/data", "../datasets/data",
                           "../../datasets/data", "/../../datasets/data"};
    for (int i = 0; i < 6; i++) {
        if (!pre[i]) continue;
        int len = snprintf(dirs[nd], sizeof dirs[0], "%s%s", pre[i], post[i]);
        if (len > 0 && (size_t)len < sizeof dirs[0]) nd++; /* a truncated path is skipped */
    }
    for (int i = 0; i < nd; i++) {
        int len = snprintf(path, cap, "%s/%s", dirs[i], name);
        if (len <= 0 || (size_t)len >= cap) continue;
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return 1;
        }
    }
    return 0;
}

#endif
