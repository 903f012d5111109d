// core/cuda_util.cuh - small device helpers shared by the .cu files of conv/: grid sizing for
// grid-stride loops, and fp32 loads/stores of any feature dtype (round to nearest even, as the
// CPU twins' core/dtype.h does).
#ifndef VC_CONV_CUDA_UTIL_CUH
#define VC_CONV_CUDA_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "voxconv.h"

namespace {

const int kThreads = 256;

// Blocks for a grid-stride loop over n items of kThreads threads (at least 1, capped).
inline unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

#define GRID_LOOP(i, n)                                                                        \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                  \
         i += (int64_t)gridDim.x * blockDim.x)

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

} // namespace

#endif
