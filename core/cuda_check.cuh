// core/cuda_check.cuh - the one way a .cu file of the engine turns a CUDA error into a vc_status
// with a message: vc_cuda_fail() and the VC_CUDA_TRY macro built on it. Messages read
// "AREA: WHAT: <CUDA's text>", or "AREA: out of device memory (WHAT)" with
// VC_ERR_OUT_OF_MEMORY, so a caller can tell exhaustion from a broken device.
#ifndef VC_CORE_CUDA_CHECK_CUH
#define VC_CORE_CUDA_CHECK_CUH

#include <cuda_runtime.h>

#include "core/status.h"

// Records e (not cudaSuccess) in err as the status it maps to. Clears a non-sticky error, so
// that later calls on the context start clean.
static inline vc_status vc_cuda_fail(vc_err *err, cudaError_t e, const char *area,
                                     const char *what)
{
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "%s: out of device memory (%s)", area, what);
    return vc_fail(err, VC_ERR_CUDA, "%s: %s: %s", area, what, cudaGetErrorString(e));
}

// Runs a CUDA call; on failure sets `st` through vc_cuda_fail (area: the file's `kArea`) and
// jumps to the function's `fail:` label, which releases what the function holds. The caller
// declares `vc_status st`, `vc_err *err` and `static const char kArea[]`.
#define VC_CUDA_TRY(call, what)                                                                \
    do {                                                                                       \
        cudaError_t vc_e_ = (call);                                                            \
        if (vc_e_ != cudaSuccess) {                                                            \
            st = vc_cuda_fail(err, vc_e_, kArea, what);                                        \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

#endif
