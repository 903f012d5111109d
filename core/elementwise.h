/* core/elementwise.h - device fills and dtype casts over flat feature buffers (elementwise.cu),
 * used by the API layer for tensors on a CUDA context. Return a cudaError_t as int (0 = success);
 * work is queued on `stream`, nothing synchronises. */
#ifndef VC_CORE_ELEMENTWISE_H
#define VC_CORE_ELEMENTWISE_H

#include <stdint.h>

#include "voxconv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

int vc_cuda_fill(void *data, vc_dtype dtype, int64_t n, float value, struct CUstream_st *stream);
int vc_cuda_cast(const void *src, vc_dtype src_dtype, void *dst, vc_dtype dst_dtype, int64_t n,
                 struct CUstream_st *stream);

#ifdef __cplusplus
}
#endif

#endif
