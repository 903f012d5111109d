// core/elementwise.cu - device fill, dtype conversion and the non-finite scan of feature buffers
// (the CPU twins are the host loops in src/tensor.c: vc_store_f32(vc_load_f32(...)), same
// rounding: round to nearest even through __float2half_rn / __float2bfloat16_rn).
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"
#include "core/elementwise.h"

static const char kArea[] = "features (GPU)";

namespace {

__global__ void fill_kernel(void *data, int dtype, int64_t n, float value)
{
    GRID_LOOP(i, n) store_f32(data, dtype, i, value);
}

__global__ void cast_kernel(const void *src, int st, void *dst, int dt, int64_t n)
{
    GRID_LOOP(i, n) store_f32(dst, dt, i, load_f32(src, st, i));
}

// found[0]: how many elements are NaN or infinite; found[1]: the smallest such index (starts at
// INT64_MAX). Both are order-independent, so the result is deterministic. zero: those
// elements become +0.
__global__ void nonfinite_kernel(void *data, int dtype, int64_t n, int zero,
                                 unsigned long long *found)
{
    GRID_LOOP(i, n)
    {
        if (isfinite(load_f32(data, dtype, i))) continue;
        atomicAdd(&found[0], 1ull);
        atomicMin(&found[1], (unsigned long long)i);
        if (zero) store_f32(data, dtype, i, 0.0f);
    }
}

} // namespace

extern "C" vc_status vc_cuda_fill(void *data, vc_dtype dtype, int64_t n, float value,
                                  struct CUstream_st *stream, vc_err *err)
{
    if (n <= 0) return VC_OK;
    fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(data, (int)dtype, n, value);
    vc_status st = VC_OK;
    VC_CUDA_TRY(cudaGetLastError(), "fill kernel");
fail:
    return st;
}

extern "C" vc_status vc_cuda_cast(const void *src, vc_dtype src_dtype, void *dst,
                                  vc_dtype dst_dtype, int64_t n, struct CUstream_st *stream,
                                  vc_err *err)
{
    if (n <= 0) return VC_OK;
    cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(src, (int)src_dtype, dst, (int)dst_dtype,
                                                      n);
    vc_status st = VC_OK;
    VC_CUDA_TRY(cudaGetLastError(), "dtype conversion kernel");
fail:
    return st;
}

extern "C" vc_status vc_cuda_nonfinite(void *data, vc_dtype dtype, int64_t n, int zero,
                                       int64_t *scratch, int64_t *count, int64_t *first,
                                       struct CUstream_st *stream, vc_err *err)
{
    unsigned long long host[2] = {0, ~0ull >> 1};
    *count = 0;
    *first = -1;
    if (n <= 0) return VC_OK;
    unsigned long long *found = reinterpret_cast<unsigned long long *>(scratch);
    vc_status st = VC_OK;
    VC_CUDA_TRY(cudaMemcpyAsync(found, host, sizeof host, cudaMemcpyHostToDevice, stream),
                "non-finite scan: upload");
    nonfinite_kernel<<<grid_for(n), kThreads, 0, stream>>>(data, (int)dtype, n, zero, found);
    VC_CUDA_TRY(cudaGetLastError(), "non-finite scan kernel");
    VC_CUDA_TRY(cudaMemcpyAsync(host, found, sizeof host, cudaMemcpyDeviceToHost, stream),
                "non-finite scan: read-back");
    VC_CUDA_TRY(cudaStreamSynchronize(stream), "non-finite scan");
    *count = (int64_t)host[0];
    *first = host[0] ? (int64_t)host[1] : -1;
fail:
    return st;
}
