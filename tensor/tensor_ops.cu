// tensor/tensor_ops.cu - the GPU versions of the tensor operations (tensor_ops.h): grid-stride
// kernels over the elements, queued on the caller's stream, no host synchronisation. Each
// element is computed by the same inline helpers as the CPU twin (tensor_ops_cpu.c) and stored
// through core/cuda_util.cuh (round to nearest even, as core/dtype.h), so both give the same
// bits for finite values.
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"
#include "tensor/tensor_ops.h"

static const char kArea[] = "tensor ops (GPU)";

namespace {

// out[r, off + c] = in[r, c] for c < width; T is the element's storage (2 or 4 bytes).
template <typename T>
__global__ void concat_kernel(const T *in, int64_t width, int64_t rows, T *out, int64_t total,
                              int64_t off)
{
    GRID_LOOP(i, rows * width)
    {
        const int64_t r = i / width, c = i - r * width;
        out[r * total + off + c] = in[i];
    }
}

__global__ void add_kernel(const void *a, const void *b, void *out, int dtype, int64_t n, int act,
                           float slope)
{
    GRID_LOOP(i, n)
    {
        const float v = __fadd_rn(load_f32(a, dtype, i), load_f32(b, dtype, i));
        store_f32(out, dtype, i, vc_activate_f32(v, act, slope));
    }
}

__global__ void affine_kernel(void *x, int dtype, int64_t n, int64_t channels,
                              const float *scale, const float *shift, int act, float slope)
{
    GRID_LOOP(i, n)
    {
        const float v = vc_affine_f32(load_f32(x, dtype, i), scale, shift, i % channels);
        store_f32(x, dtype, i, vc_activate_f32(v, act, slope));
    }
}

// One thread per (row, channel), channels fastest: a row's features are read together. Rows
// outside the shape or the batch are skipped, as on the CPU. d_rows (or NULL): a device count;
// only the rows below it (and below `rows`, the extent) are read.
__global__ void scatter_kernel(const int32_t *coords, int64_t rows, const int64_t *d_rows,
                               int32_t batch, int32_t D, int32_t H, int32_t W, const void *in,
                               int in_dtype, int64_t channels, void *dst, int dst_dtype)
{
    int64_t live = rows;
    if (d_rows && *d_rows < rows) live = *d_rows < 0 ? 0 : *d_rows;
    GRID_LOOP(i, rows * channels)
    {
        if (i >= live * channels) break;
        const int64_t r = i / channels, c = i - r * channels;
        // Four int32 loads: a wrapped set's rows need not be 16-byte aligned.
        const int32_t *q = coords + 4 * r;
        const int32_t b = q[0], z = q[1], y = q[2], x = q[3];
        if (b < 0 || b >= batch || z < 0 || z >= D || y < 0 || y >= H || x < 0 || x >= W)
            continue;
        const int64_t o = (((int64_t)b * channels + c) * D + z) * H * W + (int64_t)y * W + x;
        store_f32(dst, dst_dtype, o, load_f32(in, in_dtype, i));
    }
}

} // namespace

extern "C" vc_status vc_concat_gpu(const void *const *parts, const int64_t *channels,
                                   int32_t count, int64_t rows, vc_dtype dtype, void *out,
                                   struct CUstream_st *stream, vc_err *err)
{
    vc_status st = VC_OK;
    int64_t total = 0, off = 0;
    for (int32_t p = 0; p < count; p++) total += channels[p];
    for (int32_t p = 0; p < count && rows > 0; p++) {
        const int64_t n = rows * channels[p];
        if (dtype == VC_DTYPE_FP32)
            concat_kernel<<<grid_for(n), kThreads, 0, stream>>>(
                static_cast<const uint32_t *>(parts[p]), channels[p], rows,
                static_cast<uint32_t *>(out), total, off);
        else
            concat_kernel<<<grid_for(n), kThreads, 0, stream>>>(
                static_cast<const uint16_t *>(parts[p]), channels[p], rows,
                static_cast<uint16_t *>(out), total, off);
        VC_CUDA_TRY(cudaGetLastError(), "concat kernel");
        off += channels[p];
    }
fail:
    return st;
}

extern "C" vc_status vc_add_gpu(const void *a, const void *b, void *out, vc_dtype dtype,
                                int64_t n, vc_activation act, float slope,
                                struct CUstream_st *stream, vc_err *err)
{
    vc_status st = VC_OK;
    if (n <= 0) return VC_OK;
    add_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, out, (int)dtype, n, (int)act, slope);
    VC_CUDA_TRY(cudaGetLastError(), "add kernel");
fail:
    return st;
}

extern "C" vc_status vc_affine_gpu(void *x, vc_dtype dtype, int64_t rows, int64_t channels,
                                   const float *scale, const float *shift, vc_activation act,
                                   float slope, struct CUstream_st *stream, vc_err *err)
{
    vc_status st = VC_OK;
    const int64_t n = rows * channels;
    if (n <= 0) return VC_OK;
    affine_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, (int)dtype, n, channels, scale, shift,
                                                        (int)act, slope);
    VC_CUDA_TRY(cudaGetLastError(), "affine kernel");
fail:
    return st;
}

namespace {

// vc_to_dense_gpu and its device-count twin: the zero fill, then the scatter.
vc_status to_dense(const int32_t *coords, int64_t rows, const int64_t *d_count,
                   const int32_t shape[3], int32_t batch, const void *in, vc_dtype in_dtype,
                   int64_t channels, void *dst, vc_dtype dst_dtype, cudaStream_t stream,
                   vc_err *err)
{
    vc_status st = VC_OK;
    // The caller checked that B*C*D*H*W elements of dst_dtype fit int64 (and dst's capacity).
    const int64_t total = (int64_t)batch * channels * shape[0] * shape[1] * shape[2];
    const int64_t n = rows * channels;
    // Zero bits are +0 in every float dtype.
    VC_CUDA_TRY(cudaMemsetAsync(dst, 0, (size_t)total * vc_dtype_size(dst_dtype), stream),
                "dense array: zero fill");
    if (n > 0) {
        scatter_kernel<<<grid_for(n), kThreads, 0, stream>>>(coords, rows, d_count, batch,
                                                             shape[0], shape[1], shape[2], in,
                                                             (int)in_dtype, channels, dst,
                                                             (int)dst_dtype);
        VC_CUDA_TRY(cudaGetLastError(), "dense scatter kernel");
    }
fail:
    return st;
}

} // namespace

extern "C" vc_status vc_to_dense_gpu(const int32_t *coords, int64_t rows, const int32_t shape[3],
                                     int32_t batch, const void *in, vc_dtype in_dtype,
                                     int64_t channels, void *dst, vc_dtype dst_dtype,
                                     struct CUstream_st *stream, vc_err *err)
{
    return to_dense(coords, rows, NULL, shape, batch, in, in_dtype, channels, dst, dst_dtype,
                    stream, err);
}

extern "C" vc_status vc_to_dense_gpu_dev(const int32_t *coords, int64_t rows,
                                         const int64_t *d_count, const int32_t shape[3],
                                         int32_t batch, const void *in, vc_dtype in_dtype,
                                         int64_t channels, void *dst, vc_dtype dst_dtype,
                                         struct CUstream_st *stream, vc_err *err)
{
    if (!d_count)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "%s: the device row count is NULL", kArea);
    return to_dense(coords, rows, d_count, shape, batch, in, in_dtype, channels, dst, dst_dtype,
                    stream, err);
}
