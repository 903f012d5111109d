/* bench/frame_state.h - bench_conv's per-frame state: the coordinate levels of a frame and the
 * distinct maps its networks use (built by bench_conv.c's get_map, read by frame_maps.c). */
#ifndef VC_BENCH_FRAME_STATE_H
#define VC_BENCH_FRAME_STATE_H

#include <stdint.h>

#include "kmap/kmap.h"

#define MAX_MAPS 64
#define MAX_LEVELS 16

typedef struct level {
    const int32_t *coords; /* device */
    int64_t n;
    int32_t shape[3];
} level;

typedef struct map_entry {
    int in_level, out_level;
    int type; /* vc_map_type */
    int k[3], s[3], p[3];
    int fwd;  /* INVERSE: the forward entry */
    vc_kmap_data m;
} map_entry;

typedef struct frame_state {
    level lv[MAX_LEVELS];
    int nlv;
    map_entry maps[MAX_MAPS];
    int nmaps;
} frame_state;

static inline vc_map_desc desc_of(int type, const int k[3], const int s[3], const int p[3])
{
    vc_map_desc d = VC_MAP_DESC_INIT;
    d.type = (vc_map_type)type;
    for (int a = 0; a < 3; a++) {
        d.kernel[a] = k[a];
        d.stride[a] = s[a];
        d.padding[a] = p[a];
    }
    return d;
}

#endif
