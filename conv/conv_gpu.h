/* conv/conv_gpu.h - convolution and pooling on the GPU, with the semantics of the CPU twins in
 * conv/conv.h (the tests compare against them). Every pointer in the arguments, the map's arrays
 * included (a vc_kmap_data from vc_kmap_build_gpu), is a DEVICE pointer. Work is queued on
 * `stream`; none of these calls synchronises the host. */
#ifndef VC_CONV_CONV_GPU_H
#define VC_CONV_CONV_GPU_H

#include "conv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Forward convolution. algo: VC_ALGO_IMPLICIT_GEMM (output-stationary, gather through out_in,
 * outputs in mask order, CTA mask skipping, fused epilogue, no atomics), VC_ALGO_GATHER_GEMM_SCATTER
 * (per-offset GEMMs into an fp32 accumulator, then the epilogue), or VC_ALGO_AUTO (the planner
 * picks from the map and the channels). Deterministic for a given algo. a->num_threads is
 * ignored. fp32 features use exact fp32 arithmetic unless `tf32` is set. */
vc_status vc_conv_gpu(const vc_conv_args *a, vc_algo algo, int tf32, struct CUstream_st *stream,
                      vc_err *err);

/* Pooling over a device map; out has the input's dtype and channels. */
vc_status vc_pool_gpu(const vc_kmap_data *map, vc_pool_mode mode, const void *in, vc_dtype dtype,
                      int64_t channels, void *out, struct CUstream_st *stream, vc_err *err);

/* Global pooling into dst [batch_size, channels] fp32 (device). Deterministic (no float
 * atomics). */
vc_status vc_global_pool_gpu(const int32_t *coords, int64_t n, int32_t batch_size,
                             vc_pool_mode mode, const void *in, vc_dtype dtype, int64_t channels,
                             float *dst, struct CUstream_st *stream, vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
