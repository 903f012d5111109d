/* tests/common/real_scans.h - the real scans of datasets/data (datasets/fetch), found and
 * voxelized on the host for the GPU tests that run on them. */
#ifndef VC_TESTS_REAL_SCANS_H
#define VC_TESTS_REAL_SCANS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"

/* The scans, in the order the tests take them. */
static const char *const real_scan_files[3] = {"vlp16.bin", "octomap_scan.bin", "bun0.pcd"};

/* Finds scan `name` ($VC_DATASETS/NAME, then datasets/data/NAME under $VC_DATA_ROOT, the working
 * folder and up to three above), reads it and voxelizes it with scene_voxelize_padded: 1 with
 * *vox filled (free with vc_voxels_free) and its path in path[path_size]; 0 where it is missing
 * (one SKIPPED line) or a step fails (a failed check). */
static inline int real_scan_voxels(const char *name, vc_voxels *vox, char *path,
                                   size_t path_size)
{
    const char *env = getenv("VC_DATASETS"), *root = getenv("VC_DATA_ROOT");
    const char *dirs[] = {root, ".", "..", "../..", "../../.."};
    FILE *fp = NULL;
    if (env) {
        snprintf(path, path_size, "%s/%s", env, name);
        fp = fopen(path, "rb");
    }
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && !fp; i++) {
        if (!dirs[i]) continue;
        snprintf(path, path_size, "%s/datasets/data/%s", dirs[i], name);
        fp = fopen(path, "rb");
    }
    if (!fp) {
        printf("real scan %s: not found (datasets/fetch; or set VC_DATASETS), SKIPPED\n", name);
        return 0;
    }
    fclose(fp);
    vc_cloud pc;
    memset(&pc, 0, sizeof pc);
    vc_status st = vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &pc);
    CHECK_MSG(st == VC_OK, "reading %s: %s", path, vc_status_string(st));
    if (st != VC_OK) return 0;
    vc_err err = {{0}};
    st = scene_voxelize_padded(&pc, NULL, vox, &err);
    CHECK_MSG(st == VC_OK, "voxelizing %s: %s", path, err.msg);
    if (st == VC_OK)
        printf("real scan %s: %lld points -> %lld voxels, grid %dx%dx%d\n", path,
               (long long)pc.count, (long long)vox->n, (int)vox->shape[0], (int)vox->shape[1],
               (int)vox->shape[2]);
    vc_cloud_free(&pc);
    return st == VC_OK;
}

#endif
