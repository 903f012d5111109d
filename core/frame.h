/* core/frame.h - device helpers of a bounded frame (src/net/graph.c): the counts a frame's
 * input writes, and the one gather of every status word of the frame into mapped host memory,
 * each a single small kernel so that a CUDA graph holds them as kernel nodes. CUDA builds only;
 * work is queued on `stream`, nothing synchronises. */
#ifndef VC_CORE_FRAME_H
#define VC_CORE_FRAME_H

#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Sources of one gather: up to this many blocks of int64 words. */
#define VC_FRAME_GATHER_MAX 48

typedef struct vc_frame_gather {
    const int64_t *src[VC_FRAME_GATHER_MAX]; /* device words                                   */
    int32_t words[VC_FRAME_GATHER_MAX];      /* words of each block (<= 16)                     */
    int32_t n;                               /* blocks                                          */
} vc_frame_gather;

/* *dst = value, queued as a kernel (its argument is taken at launch: the host may change its
 * copy at once, unlike a copy from pinned memory). */
vc_status vc_frame_set_count(int64_t *dst, int64_t value, struct CUstream_st *stream,
                             vc_err *err);

/* dst[0 ..) = the blocks of g one after the other (g->words[i] words from g->src[i]); dst is
 * device memory or the device alias of mapped host memory. One kernel. */
vc_status vc_frame_gather_words(const vc_frame_gather *g, int64_t *dst,
                                struct CUstream_st *stream, vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
