/* gemm/gemm_sm90.h - the Hopper (wgmma, sm_90a) configurations of the GEMM table: one list that
 * gemm/gemm_sm90.cu instantiates (the only file built for sm_90a) and gemm/gemm.cu puts in its
 * table when the build has them (VC_GEMM_HAVE_SM90A). Each is the tensor-core kernel of
 * gemm/gemm_kernels.cuh with WG != 0: a BM x BN tile, one warpgroup per 64 rows, rows of 64 or
 * 128 bytes, 16-byte cp.async loads. */
#ifndef VC_GEMM_GEMM_SM90_H
#define VC_GEMM_GEMM_SM90_H

#include <cuda_runtime.h>

/* X(name, element type, dtype, math, BM, BN, BK, stages). 128x128 (rows of 64 bytes, 5 stages)
 * fits two CTAs on an SM, so that one computes while the other waits or runs its epilogue; 128x256
 * (one CTA per SM) pays where the arithmetic does: long k (16-bit), or tf32's n = 256. */
#define VC_GEMM_SM90_CONFIGS(X)                                                                \
    X(f16_128x128x32_s5_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 128, 32, 5)        \
    X(f16_128x256x64_s3_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 256, 64, 3)        \
    X(bf16_128x128x32_s5_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 128, 32,   \
      5)                                                                                       \
    X(bf16_128x256x64_s3_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 256, 64,   \
      3)                                                                                       \
    X(tf32_128x128x16_s5_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 128, 16, 5)           \
    X(tf32_128x256x32_s3_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 256, 32, 3)

namespace vcg {
struct Params;
#define VC_GEMM_SM90_DECLARE(name, T, dt, math, BM, BN, BK, S)                                         \
    cudaError_t launch_##name(const Params &p, cudaStream_t s, int *splits, bool plan);
VC_GEMM_SM90_CONFIGS(VC_GEMM_SM90_DECLARE)
#undef VC_GEMM_SM90_DECLARE
} // namespace vcg

#endif
