/* gemm/gemm_packed.h - the tap-packed configurations of the GEMM table: one list that
 * gemm/gemm_packed.cu instantiates (its own file, so that the build compiles it beside
 * gemm/gemm.cu) and gemm/gemm.cu puts in its table. Each is the mma.sync tensor-core kernel of
 * gemm/mainloop.cuh with TP > 1: a stage holds TP taps of a tile's walk side by side along k,
 * for gathered problems whose k is exactly BK / TP (the stems' 8 padded channels, 16, 32), which
 * one tap a stage would run with BK - k columns of zeros in every stage. A CTA per tile, no tap
 * split; registers capped (MINB) as for the unpacked tiles of the same shape. */
#ifndef VC_GEMM_GEMM_PACKED_H
#define VC_GEMM_GEMM_PACKED_H

#include <cuda_runtime.h>

/* X(name, element type, dtype, BM, BN, BK, WM, WN, stages, MINB, TP): k = BK / TP. The stems
 * (k 8: 64x64x32 to 64 columns, 64x32x32 to 32), the strided 16 -> 32 levels (k 16 on
 * 64x32x32), the large subm 16 -> 16 levels (k 16 on 64x16x32) and the strided 32 -> 64 ones
 * (k 32 on 64x64x64): conv/tiles.cu's packed_first.
 * 64x32x64 tiles (k 16 and 32) were timed and dropped: slower than the planner's tiles on the
 * 16- and 32-channel subm layers; so was 64x16x64 (four taps of 16), slower than 64x16x32 on
 * every 16 -> 16 layer (docs/benchmarks.md "Tap packs"). */
#define VC_GEMM_PACKED_CONFIGS(X)                                                              \
    X(f16_64x64x32_s3_p4, __half, VC_GEMM_F16, 64, 64, 32, 2, 2, 3, 6, 4)                       \
    X(f16_64x32x32_s3_p4, __half, VC_GEMM_F16, 64, 32, 32, 2, 1, 3, 8, 4)                       \
    X(f16_64x32x32_s3_p2, __half, VC_GEMM_F16, 64, 32, 32, 2, 1, 3, 8, 2)                       \
    X(f16_64x64x64_s3_p2, __half, VC_GEMM_F16, 64, 64, 64, 2, 2, 3, 4, 2)                       \
    X(bf16_64x64x32_s3_p4, __nv_bfloat16, VC_GEMM_BF16, 64, 64, 32, 2, 2, 3, 6, 4)              \
    X(bf16_64x32x32_s3_p4, __nv_bfloat16, VC_GEMM_BF16, 64, 32, 32, 2, 1, 3, 8, 4)              \
    X(bf16_64x32x32_s3_p2, __nv_bfloat16, VC_GEMM_BF16, 64, 32, 32, 2, 1, 3, 8, 2)              \
    X(bf16_64x64x64_s3_p2, __nv_bfloat16, VC_GEMM_BF16, 64, 64, 64, 2, 2, 3, 4, 2)              \
    X(f16_64x16x32_s3_p2, __half, VC_GEMM_F16, 64, 16, 32, 2, 1, 3, 8, 2)                       \
    X(bf16_64x16x32_s3_p2, __nv_bfloat16, VC_GEMM_BF16, 64, 16, 32, 2, 1, 3, 8, 2)

namespace vcg {
struct Params;
struct LaunchPlan;
struct Sched;
#define VC_GEMM_PACKED_DECLARE(name, T, dt, BM, BN, BK, WM, WN, S, MINB, TP)                   \
    cudaError_t plan_##name(const Params &p, const Sched &sc, LaunchPlan *out);                \
    cudaError_t launch_##name(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left);
VC_GEMM_PACKED_CONFIGS(VC_GEMM_PACKED_DECLARE)
#undef VC_GEMM_PACKED_DECLARE
} // namespace vcg

#endif
