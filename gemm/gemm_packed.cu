// gemm/gemm_packed.cu - the launchers of the tap-packed configurations listed in
// gemm/gemm_packed.h (gemm/mainloop.cuh's TP), in a file of their own so that a build
// compiles them beside gemm/gemm.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gemm/gemm_packed.h"
#include "gemm/schedule.cuh"

namespace vcg {

#define VC_GEMM_PACKED_DEFINE(name, T, dt, BM, BN, BK, WM, WN, S, MINB, TP)                    \
    cudaError_t plan_##name(const Params &p, const Sched &sc, LaunchPlan *out)                \
    {                                                                                          \
        return plan_mma<T, BM, BN, BK, WM, WN, S, 16, false, MINB, false, 1, TP>(p, sc, out);  \
    }                                                                                          \
    cudaError_t launch_##name(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left) \
    {                                                                                          \
        return launch_mma<T, BM, BN, BK, WM, WN, S, 16, false, MINB, false, 1, TP>(p, pl, s,   \
                                                                                   left);      \
    }
VC_GEMM_PACKED_CONFIGS(VC_GEMM_PACKED_DEFINE)
#undef VC_GEMM_PACKED_DEFINE

} // namespace vcg
