// core/frame.cu - device helpers of a bounded frame (core/frame.h).
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/cuda_check.cuh"
#include "core/frame.h"

static const char kArea[] = "frame";

namespace {

__global__ void set_count_kernel(int64_t *dst, int64_t value) { *dst = value; }

// One warp a block: lane j copies word j.
__global__ void gather_kernel(vc_frame_gather g, int64_t *dst)
{
    int64_t at = 0;
    for (int i = 0; i < g.n; i++) {
        if ((int)threadIdx.x < g.words[i]) dst[at + threadIdx.x] = g.src[i][threadIdx.x];
        at += g.words[i];
    }
}

} // namespace

extern "C" vc_status vc_frame_set_count(int64_t *dst, int64_t value, struct CUstream_st *stream,
                                        vc_err *err)
{
    set_count_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(dst, value);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? VC_OK : vc_cuda_fail(err, e, kArea, "writing a count");
}

extern "C" vc_status vc_frame_gather_words(const vc_frame_gather *g, int64_t *dst,
                                           struct CUstream_st *stream, vc_err *err)
{
    if (!g || g->n < 0 || g->n > VC_FRAME_GATHER_MAX)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "frame: bad status gather");
    for (int i = 0; i < g->n; i++)
        if (g->words[i] < 0 || g->words[i] > 16 || !g->src[i])
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "frame: bad status block %d", i);
    gather_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(*g, dst);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? VC_OK : vc_cuda_fail(err, e, kArea, "gathering the frame's status");
}
