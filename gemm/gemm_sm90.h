/* gemm/gemm_sm90.h - the Hopper (wgmma, sm_90a) configurations of the GEMM table: one list that
 * gemm/gemm_sm90.cu instantiates (the only file built for sm_90a) and gemm/gemm.cu puts in its
 * table when the build has them (VC_GEMM_HAVE_SM90A). Each is the tensor-core kernel of
 * gemm/gemm_kernels.cuh with WG = true: a 128 x BN tile, two warpgroups of 64 rows each, rows of
 * 128 bytes (BK = 64 for 16-bit types, 32 for tf32), 16-byte cp.async loads. */
#ifndef VC_GEMM_GEMM_SM90_H
#define VC_GEMM_GEMM_SM90_H

#include <cuda_runtime.h>

/* X(name, element type, dtype, math, BN, stages) */
#define VC_GEMM_SM90_CONFIGS(X)                                                                \
    X(f16_128x256x64_s3_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 256, 3)                 \
    X(f16_128x192x64_s4_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 192, 4)                 \
    X(f16_128x128x64_s4_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 4)                 \
    X(bf16_128x256x64_s3_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 256, 3)        \
    X(bf16_128x192x64_s4_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 192, 4)        \
    X(bf16_128x128x64_s4_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 4)        \
    X(tf32_128x256x32_s3_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 256, 3)                    \
    X(tf32_128x192x32_s4_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 192, 4)                    \
    X(tf32_128x128x32_s4_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 4)

namespace vcg {
struct Params;
#define VC_GEMM_SM90_DECLARE(name, T, dt, math, BN, S)                                         \
    cudaError_t launch_##name(const Params &p, cudaStream_t s);
VC_GEMM_SM90_CONFIGS(VC_GEMM_SM90_DECLARE)
#undef VC_GEMM_SM90_DECLARE
} // namespace vcg

#endif
