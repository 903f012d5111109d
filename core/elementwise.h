/* core/elementwise.h - device fills, dtype casts and the non-finite scan over flat feature
 * buffers (elementwise.cu), used by the API layer for tensors on a CUDA context. Work is queued
 * on `stream`; only the scan synchronises (it reads its count back). */
#ifndef VC_CORE_ELEMENTWISE_H
#define VC_CORE_ELEMENTWISE_H

#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

vc_status vc_cuda_fill(void *data, vc_dtype dtype, int64_t n, float value,
                       struct CUstream_st *stream, vc_err *err);
vc_status vc_cuda_cast(const void *src, vc_dtype src_dtype, void *dst, vc_dtype dst_dtype,
                       int64_t n, struct CUstream_st *stream, vc_err *err);
/* Counts the NaN and infinite elements of data[0, n) into *count, the first one's index into
 * *first (-1: none); zero != 0 replaces them with +0. scratch: 16 bytes of device memory. */
vc_status vc_cuda_nonfinite(void *data, vc_dtype dtype, int64_t n, int zero, int64_t *scratch,
                            int64_t *count, int64_t *first, struct CUstream_st *stream,
                            vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
