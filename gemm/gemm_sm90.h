/* gemm/gemm_sm90.h - the Hopper (wgmma, sm_90a) configurations of the GEMM table: one list that
 * gemm/gemm_sm90.cu instantiates (the only file built for sm_90a) and gemm/gemm.cu puts in its
 * table when the build has them (VC_GEMM_HAVE_SM90A). Each is the tensor-core kernel of
 * gemm/mainloop.cuh with WG != 0: a BM x BN tile, one warpgroup per 64 rows, rows of 64 or
 * 128 bytes, 16-byte cp.async loads. */
#ifndef VC_GEMM_GEMM_SM90_H
#define VC_GEMM_GEMM_SM90_H

#include <cuda_runtime.h>
#include <stdint.h>

/* X(name, element type, dtype, math, BM, BN, BK, stages, tap sets). 128x128 (rows of 64 bytes,
 * 5 stages) fits two CTAs on an SM, so that one computes while the other waits or runs its
 * epilogue; 128x256 (one CTA per SM) pays where the arithmetic does: long k (16-bit), or tf32's
 * n = 256; 64x64x64 (one warpgroup, rows of 128 bytes, 3 CTAs an SM) is the implicit
 * convolution's tile for the mid-size k3 layers of 64-256 channels (conv/conv.cu); its _wg2 form
 * (two warpgroups, each its own ring of the stages, dividing the tile's taps: gemm/mainloop.cuh's
 * TG) is for the small scans, where a layer lasts as long as its heaviest tile's chain of taps;
 * 64x96 (64 deep for c_in a multiple of 64 from 128, else 32 deep with 6 stages; three CTAs an
 * SM) is for the mid-size k3 layers to 96 channels, which 64-column tiles compute as two column
 * tiles (A gathered twice) and 128-column ones with a quarter of the MMAs and W wasted; 64x32x32
 * with two tap sets (three CTAs an SM) for the sparser mid-size 32 -> 32 k3 levels. */
#define VC_GEMM_SM90_CONFIGS(X)                                                                 \
    X(f16_128x128x32_s5_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 128, 32, 5, 1)      \
    X(f16_64x64x64_s4_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 64, 64, 4, 1)          \
    X(f16_64x64x64_s3_wg2, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 64, 64, 3, 2)         \
    X(f16_128x256x64_s3_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 256, 64, 3, 1)      \
    X(f16_64x96x64_s3_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 96, 64, 3, 1)          \
    X(f16_64x96x32_s6_wg, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 96, 32, 6, 1)          \
    X(f16_64x32x32_s4_wg2, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 32, 32, 4, 2)         \
    X(bf16_128x128x32_s5_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT,                 \
      128, 128, 32, 5, 1)                                                                       \
    X(bf16_64x64x64_s4_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 64, 64, 4, 1) \
    X(bf16_64x64x64_s3_wg2, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT,                  \
      64, 64, 64, 3, 2)                                                                         \
    X(bf16_128x256x64_s3_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT,                 \
      128, 256, 64, 3, 1)                                                                       \
    X(bf16_64x96x64_s3_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 96, 64, 3, 1) \
    X(bf16_64x96x32_s6_wg, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 96, 32, 6, 1) \
    X(bf16_64x32x32_s4_wg2, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 32, 32, 4, 2) \
    X(tf32_128x128x16_s5_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 128, 16, 5, 1)         \
    X(tf32_128x256x32_s3_wg, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 256, 32, 3, 1)

/* The dense kernel (gemm_sm90.cu, dense_tma_kernel): dense problems only - no gather, gather
 * rows, masks or tap split, taps = 1 - with k * sizeof(T) a multiple of 16 and A, W 16-byte
 * aligned. A CTA holds a BN-column slice of W in shared memory for its whole life (loaded once by
 * the TMA unit) and streams 64-row tiles of A through a ring of TMA stages (rows of 128 bytes,
 * the 128-byte swizzle); one producer warp issues the copies, two to four consumer warpgroups
 * (VC_GEMM_DENSE_CONSUMERS) take the tiles in turn (wgmma m64nBN, fp32 accumulators) and run the
 * epilogue through a small shared-memory staging area, so one warpgroup's epilogue overlaps the
 * others' MMAs and the copies never wait for any. X(name, element type, dtype, math, BN). */
#define VC_GEMM_SM90_DENSE_CONFIGS(X)                                                          \
    X(f16_dense_64x64_tma, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64)                      \
    X(f16_dense_64x96_tma, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 96)                      \
    X(f16_dense_64x128_tma, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128)                    \
    X(f16_dense_64x192_tma, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 192)                    \
    X(f16_dense_64x256_tma, __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 256)                    \
    X(bf16_dense_64x64_tma, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64)             \
    X(bf16_dense_64x96_tma, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 96)             \
    X(bf16_dense_64x128_tma, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128)           \
    X(bf16_dense_64x192_tma, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 192)           \
    X(bf16_dense_64x256_tma, __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 256)           \
    X(tf32_dense_64x128_tma, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128)                       \
    X(tf32_dense_64x192_tma, float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 192)

/* The dense kernel's dynamic shared memory: 1 KB of slack to align the tiles to a swizzle atom,
 * the W slice (k rounded up to 128-byte rows, BN rows), `stages` A stages of 64 rows x 128 bytes,
 * then the epilogue's staging (4 warps a consumer warpgroup x 16 rows x 32 columns of fp32, rows
 * padded to EPI_LD floats); at most the budget below: the 227 KB a block of every compute
 * capability 9.0 part less 1 KB for the static mbarriers. */
#define VC_GEMM_DENSE_SMEM_BUDGET (227 * 1024 - 1024)
#define VC_GEMM_DENSE_EPI_LD 36
#define VC_GEMM_DENSE_MAX_STAGES 16
#define VC_GEMM_DENSE_MIN_STAGES 3

/* Consumer warpgroups of the dense kernel with a W slice of bn columns: four up to 96 columns,
 * three up to 192 (each consumer's epilogue, latency-bound, overlaps the others' MMAs), two for
 * 256 (its 128 accumulators a thread need the registers that two consumers leave): a consumer
 * holds bn / 2 accumulators, and with four the launch leaves it 104 registers (gemm_sm90.cu). */
#define VC_GEMM_DENSE_CONSUMERS(bn) ((bn) <= 96 ? 4 : (bn) <= 192 ? 3 : 2)

/* The 128-byte k blocks of k elements of es bytes. */
static inline int64_t vc_gemm_dense_kblocks(int es, int64_t k) { return (k * es + 127) / 128; }

/* The dense kernel's dynamic shared memory with `stages` A stages (the layout above). */
static inline int64_t vc_gemm_dense_smem(int es, int bn, int64_t k, int stages)
{
    return 1024 + vc_gemm_dense_kblocks(es, k) * bn * 128 + (int64_t)stages * 64 * 128 +
           (int64_t)VC_GEMM_DENSE_CONSUMERS(bn) * 4 * 16 * VC_GEMM_DENSE_EPI_LD * 4;
}

/* The A stages that fit beside a W slice of bn rows of k elements of es bytes (at most
 * VC_GEMM_DENSE_MAX_STAGES), or 0 when fewer than VC_GEMM_DENSE_MIN_STAGES fit. */
static inline int vc_gemm_dense_stages(int es, int bn, int64_t k)
{
    const int64_t left = (int64_t)VC_GEMM_DENSE_SMEM_BUDGET - vc_gemm_dense_smem(es, bn, k, 0);
    const int64_t s = left > 0 ? left / (64 * 128) : 0;
    if (s < VC_GEMM_DENSE_MIN_STAGES) return 0;
    return s > VC_GEMM_DENSE_MAX_STAGES ? VC_GEMM_DENSE_MAX_STAGES : (int)s;
}

namespace vcg {
struct Params;
struct LaunchPlan;
struct Sched;
/* The wgmma tiles whose tap splits run as clusters (gemm/cluster.cuh; gemm.cu's table says so
 * to vc_gemm_split_in_clusters): the 16-bit 64-row one without tap sets (those have no split).
 * On the 128-row tiles (one or two CTAs an SM, 64-128 KB fp32 tiles to add across the cluster)
 * the cluster split was slower than the two-pass one (measured, docs/benchmarks.md). */
template <typename T, int BM, int TG>
constexpr bool kClusterWg = sizeof(T) == 2 && BM == 64 && TG == 1;
#define VC_GEMM_SM90_DECLARE(name, T, dt, math, BM, BN, BK, S, TG)                            \
    cudaError_t plan_##name(const Params &p, const Sched &sc, LaunchPlan *out);                \
    cudaError_t launch_##name(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left);
VC_GEMM_SM90_CONFIGS(VC_GEMM_SM90_DECLARE)
#undef VC_GEMM_SM90_DECLARE
#define VC_GEMM_SM90_DENSE_DECLARE(name, T, dt, math, BN)                                      \
    cudaError_t plan_##name(const Params &p, const Sched &sc, LaunchPlan *out);                \
    cudaError_t launch_##name(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left);
VC_GEMM_SM90_DENSE_CONFIGS(VC_GEMM_SM90_DENSE_DECLARE)
#undef VC_GEMM_SM90_DENSE_DECLARE
/* Whether the driver offers the tensor-map encoder the dense kernel needs (looked up once). */
bool dense_tma_available();
} // namespace vcg

#endif
