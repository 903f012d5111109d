/* tests/common/map_desc.h - kernel-map descriptors for the test programs: from per-axis arrays
 * (mkdesc3), a kernel per axis z, y, x with one stride, padding and dilation (mkdesc_zyx), or a
 * cubic kernel (mkdesc). */
#ifndef VC_TEST_MAP_DESC_H
#define VC_TEST_MAP_DESC_H

#include "voxconv.h"

static inline vc_map_desc mkdesc3(vc_map_type t, const int k[3], const int s[3], const int p[3],
                                  const int d[3])
{
    vc_map_desc m = VC_MAP_DESC_INIT;
    m.type = t;
    for (int a = 0; a < 3; a++) {
        m.kernel[a] = k[a];
        m.stride[a] = s[a];
        m.padding[a] = p[a];
        m.dilation[a] = d[a];
    }
    return m;
}

static inline vc_map_desc mkdesc_zyx(vc_map_type t, int kz, int ky, int kx, int s, int p, int dil)
{
    const int k[3] = {kz, ky, kx}, ss[3] = {s, s, s}, pp[3] = {p, p, p}, dd[3] = {dil, dil, dil};
    return mkdesc3(t, k, ss, pp, dd);
}

static inline vc_map_desc mkdesc(vc_map_type t, int k, int s, int p, int dil)
{
    return mkdesc_zyx(t, k, k, k, s, p, dil);
}

#endif
