// core/elementwise.cu - device fill and dtype conversion of feature buffers (the CPU twin is the
// host loop in src/tensor.c: vc_store_f32(vc_load_f32(...)), same rounding: round to nearest
// even through __float2half_rn / __float2bfloat16_rn).
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/cuda_util.cuh"
#include "voxconv.h"

namespace {

__global__ void fill_kernel(void *data, int dtype, int64_t n, float value)
{
    GRID_LOOP(i, n) store_f32(data, dtype, i, value);
}

__global__ void cast_kernel(const void *src, int st, void *dst, int dt, int64_t n)
{
    GRID_LOOP(i, n) store_f32(dst, dt, i, load_f32(src, st, i));
}

} // namespace

extern "C" int vc_cuda_fill(void *data, vc_dtype dtype, int64_t n, float value,
                            struct CUstream_st *stream)
{
    if (n <= 0) return 0;
    fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(data, (int)dtype, n, value);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int vc_cuda_cast(const void *src, vc_dtype src_dtype, void *dst, vc_dtype dst_dtype,
                            int64_t n, struct CUstream_st *stream)
{
    if (n <= 0) return 0;
    cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(src, (int)src_dtype, dst, (int)dst_dtype,
                                                      n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
