/* tests/common/gpu_testutil.h - what the GPU test programs share on top of testutil.h: a CUDA
 * runtime check that counts a failure and goes on (CUDA_OK), and host-to-device copies. CUDA
 * builds only; include inside the test's VOXCONV_HAVE_CUDA block. */
#ifndef VC_GPU_TESTUTIL_H
#define VC_GPU_TESTUTIL_H

#include <cuda_runtime_api.h>

#include "testutil.h"

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                 \
    } while (0)

/* 1 when a CUDA device is usable; 0 after printing why the test skips (its main returns 77). */
static inline int gpu_usable(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) return 1;
    printf("SKIP: no usable CUDA device\n");
    return 0;
}

/* A device buffer of `bytes` (16 when 0), with a copy of `host` unless it is NULL. */
static inline void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 16));
    if (bytes && host) CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

#endif
