// core/launch.cuh - kernel launches with programmatic dependent launch, and the attributes of
// the current device they need, read once per device (core/launch.cu). Shared by the .cu files
// of the engine.
#ifndef VC_CORE_LAUNCH_CUH
#define VC_CORE_LAUNCH_CUH

#include <cuda_runtime.h>
#include <stdint.h>

// Attributes of the current device, read once per device and cached for the process
// (thread-safe); 0 where they cannot be read.
int vc_device_cc_major(void); // compute capability, major
int vc_device_sms(void);      // multiprocessors

namespace {

// Programmatic dependent launch (compute capability 9.0 and up; see launch_k): a kernel
// launched with the overlap starts with pdl_enter. It waits until the kernel before it in the
// stream has finished and its writes are visible (griddepcontrol.wait; at once when the
// launch did not ask for the overlap, or on an older GPU), then lets the next kernel's blocks
// be scheduled as soon as all of this one's have started (griddepcontrol.launch_dependents):
// they wait in their own pdl_enter, so the launch latency of kernel i + 1 overlaps kernel i's
// work instead of following it. Nothing a kernel does comes before its pdl_enter, so no read
// or write can overtake the kernel before it, and since that kernel itself waited on its
// predecessor, every earlier kernel of the stream has finished too.
__device__ __forceinline__ void pdl_enter()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches ask for the programmatic overlap of pdl_enter: compute capability 9.0 and up.
inline bool pdl_on() { return vc_device_cc_major() >= 9; }

// Launches kernel k (whose first statement is pdl_enter) on stream s; with pdl, overlapped
// with the end of the kernel before it where the device allows (programmatic stream
// serialization).
template <typename... P, typename... A>
cudaError_t launch_k(bool pdl, void (*k)(P...), int64_t grid, int block, size_t smem,
                     cudaStream_t s, A &&...args)
{
    cudaLaunchConfig_t cfg = {}; // every field zero, then set below
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl && pdl_on() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, static_cast<A &&>(args)...);
}

} // namespace

#endif
