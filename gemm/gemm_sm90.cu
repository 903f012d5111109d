// gemm/gemm_sm90.cu - the launchers of the wgmma configurations listed in gemm/gemm_sm90.h.
// Built for sm_90a alone (CMakeLists.txt: its own object library), so that wgmma assembles here
// and nowhere else; gemm/gemm.cu offers these configurations only on a compute capability 9.0
// device.
#include "gemm/gemm_kernels.cuh"
#include "gemm/gemm_sm90.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm/gemm_sm90.cu is built for sm_90a only (-gencode=arch=compute_90a,code=sm_90a)"
#endif

namespace vcg {

#define VC_GEMM_SM90_DEFINE(name, T, dt, math, BM, BN, BK, S)                                 \
    cudaError_t launch_##name(const Params &p, cudaStream_t s, int *splits, bool plan)         \
    {                                                                                          \
        return launch_mma<T, BM, BN, BK, BM / 16, 1, S, 16, true>(p, s, splits, plan);         \
    }
VC_GEMM_SM90_CONFIGS(VC_GEMM_SM90_DEFINE)
#undef VC_GEMM_SM90_DEFINE

} // namespace vcg
