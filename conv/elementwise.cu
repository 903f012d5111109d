// conv/elementwise.cu - device fill and dtype conversion of feature buffers (the CPU twin is the
// host loop in src/tensor.c: vc_store_f32(vc_load_f32(...)), same rounding: round to nearest
// even through __float2half_rn / __float2bfloat16_rn).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "voxconv.h"

namespace {

__device__ __forceinline__ float load_f32(const void *p, int t, int64_t i)
{
    if (t == VC_DTYPE_FP16) return __half2float(static_cast<const __half *>(p)[i]);
    if (t == VC_DTYPE_BF16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void store_f32(void *p, int t, int64_t i, float v)
{
    if (t == VC_DTYPE_FP16)
        static_cast<__half *>(p)[i] = __float2half_rn(v);
    else if (t == VC_DTYPE_BF16)
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    else
        static_cast<float *>(p)[i] = v;
}

__global__ void fill_kernel(void *data, int dtype, int64_t n, float value)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f32(data, dtype, i, value);
}

__global__ void cast_kernel(const void *src, int st, void *dst, int dt, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f32(dst, dt, i, load_f32(src, st, i));
}

unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

} // namespace

extern "C" int vc_cuda_fill(void *data, vc_dtype dtype, int64_t n, float value,
                            struct CUstream_st *stream)
{
    if (n <= 0) return 0;
    fill_kernel<<<grid_for(n), 256, 0, stream>>>(data, (int)dtype, n, value);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int vc_cuda_cast(const void *src, vc_dtype src_dtype, void *dst, vc_dtype dst_dtype,
                            int64_t n, struct CUstream_st *stream)
{
    if (n <= 0) return 0;
    cast_kernel<<<grid_for(n), 256, 0, stream>>>(src, (int)src_dtype, dst, (int)dst_dtype, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
