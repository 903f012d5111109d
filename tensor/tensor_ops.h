/* tensor/tensor_ops.h - the engine of the tensor operations (channel concat, add, per-channel
 * affine, sparse to dense) on plain feature arrays [rows, channels]: the CPU twins
 * (tensor_ops_cpu.c) and their GPU versions (tensor_ops.cu, CUDA builds only), one semantics
 * and the same bits: arithmetic in fp32 through the inline helpers below, stored with
 * core/dtype.h's rounding (round to nearest even), which core/cuda_util.cuh's stores match.
 * The API layer (src/tensor_ops.c) checks every argument; these functions trust theirs. */
#ifndef VC_TENSOR_TENSOR_OPS_H
#define VC_TENSOR_TENSOR_OPS_H

#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define VC_HOST_DEVICE __host__ __device__
#else
#define VC_HOST_DEVICE
#endif

/* The activations of the tensor operations, as the convolution's CPU twin applies them: a NaN
 * stays NaN (v < 0 is false for it), -0 stays -0. */
static inline VC_HOST_DEVICE float vc_activate_f32(float v, int act, float slope)
{
    if (act == VC_ACT_RELU) return v < 0.0f ? 0.0f : v;
    if (act == VC_ACT_LEAKY_RELU) return v < 0.0f ? v * slope : v;
    return v;
}

/* x * scale + shift with the product and the sum rounded apart (never one fused multiply-add,
 * so the CPU and the GPU agree bit for bit); a NULL scale or shift skips its step. The device
 * uses the explicitly rounded intrinsics; on the host each step is its own statement, which C
 * never contracts (clang's FP_CONTRACT "on" stays within one expression, gcc's ISO modes keep
 * contraction off). */
static inline VC_HOST_DEVICE float vc_affine_f32(float x, const float *scale, const float *shift,
                                                 int64_t c)
{
#if defined(__CUDA_ARCH__)
    if (scale) x = __fmul_rn(x, scale[c]);
    if (shift) x = __fadd_rn(x, shift[c]);
#else
    if (scale) x = x * scale[c];
    if (shift) x = x + shift[c];
#endif
    return x;
}

/* out[r, off_p + c] = parts[p][r, c]: the parts' channels side by side (off_p = the sum of the
 * channels before part p). A copy of the bits: every part has `dtype`. */
vc_status vc_concat_cpu(const void *const *parts, const int64_t *channels, int32_t count,
                        int64_t rows, vc_dtype dtype, void *out, int num_threads, vc_err *err);
/* out[i] = act(a[i] + b[i]) for i < n; out may be a or b. */
vc_status vc_add_cpu(const void *a, const void *b, void *out, vc_dtype dtype, int64_t n,
                     vc_activation act, float slope, int num_threads, vc_err *err);
/* In place: x[r, c] = act(vc_affine_f32(x[r, c], scale, shift, c)). scale, shift: [channels]
 * fp32 or NULL. */
vc_status vc_affine_cpu(void *x, vc_dtype dtype, int64_t rows, int64_t channels,
                        const float *scale, const float *shift, vc_activation act, float slope,
                        int num_threads, vc_err *err);
/* dst [batch, channels, shape[0], shape[1], shape[2]] of dst_dtype: zeros, then for every row r
 * (b, z, y, x) of coords and channel c, dst[b, c, z, y, x] = in[r, c] converted to dst_dtype.
 * Rows outside the shape or the batch are skipped (a validated set has none). With duplicate
 * rows the CPU keeps the last one. */
vc_status vc_to_dense_cpu(const int32_t *coords, int64_t rows, const int32_t shape[3],
                          int32_t batch, const void *in, vc_dtype in_dtype, int64_t channels,
                          void *dst, vc_dtype dst_dtype, int num_threads, vc_err *err);

struct CUstream_st;

/* The GPU versions: device arrays, work queued on `stream`, no host synchronisation. With
 * duplicate rows vc_to_dense_gpu keeps one of them (which is not defined). */
vc_status vc_concat_gpu(const void *const *parts, const int64_t *channels, int32_t count,
                        int64_t rows, vc_dtype dtype, void *out, struct CUstream_st *stream,
                        vc_err *err);
vc_status vc_add_gpu(const void *a, const void *b, void *out, vc_dtype dtype, int64_t n,
                     vc_activation act, float slope, struct CUstream_st *stream, vc_err *err);
vc_status vc_affine_gpu(void *x, vc_dtype dtype, int64_t rows, int64_t channels,
                        const float *scale, const float *shift, vc_activation act, float slope,
                        struct CUstream_st *stream, vc_err *err);
vc_status vc_to_dense_gpu(const int32_t *coords, int64_t rows, const int32_t shape[3],
                          int32_t batch, const void *in, vc_dtype in_dtype, int64_t channels,
                          void *dst, vc_dtype dst_dtype, struct CUstream_st *stream,
                          vc_err *err);
/* vc_to_dense_gpu over the first *d_count rows of a [rows, ...] extent (d_count: a device int64
 * read when the work runs; rows past it, or past `rows`, are never read; a negative count reads
 * none). The zero fill and the scatter are queued together: no allocation, no synchronisation,
 * capturable in a CUDA graph. The same output as vc_to_dense_gpu over those rows. */
vc_status vc_to_dense_gpu_dev(const int32_t *coords, int64_t rows, const int64_t *d_count,
                              const int32_t shape[3], int32_t batch, const void *in,
                              vc_dtype in_dtype, int64_t channels, void *dst, vc_dtype dst_dtype,
                              struct CUstream_st *stream, vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
