// core/device_pool.cu - the library's stream-ordered device memory pool (core/device_pool.h).
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

#include "core/cuda_check.cuh"
#include "core/device_pool.h"

static const char kArea[] = "device pool";

namespace {

const int kMaxDevices = 64;

std::atomic<cudaMemPool_t> g_pools[kMaxDevices];

// The library's pool on the current device (created once, kept for the process): freed blocks
// stay cached up to 1 GiB, so repeated builds do not go back to the driver. NULL when pools are
// not supported (the device's default pool is used then).
cudaMemPool_t lib_pool()
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
        cudaGetLastError();
        return NULL;
    }
    cudaMemPool_t p = g_pools[dev].load(std::memory_order_acquire);
    if (p) return p;
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess ||
        !supported) {
        cudaGetLastError();
        return NULL;
    }
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t np = NULL;
    if (cudaMemPoolCreate(&np, &props) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    uint64_t threshold = (uint64_t)1 << 30;
    cudaMemPoolSetAttribute(np, cudaMemPoolAttrReleaseThreshold, &threshold);
    cudaGetLastError();
    cudaMemPool_t expected = NULL;
    if (!g_pools[dev].compare_exchange_strong(expected, np, std::memory_order_acq_rel)) {
        cudaMemPoolDestroy(np);
        return expected;
    }
    return np;
}

} // namespace

extern "C" int vc_device_pool_alloc(void **p, int64_t bytes, struct CUstream_st *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    *p = NULL;
    if (bytes < 256) bytes = 256;
    cudaMemPool_t pool = lib_pool();
    cudaError_t e = pool ? cudaMallocFromPoolAsync(p, (size_t)bytes, pool, s)
                         : cudaMallocAsync(p, (size_t)bytes, s);
    if (e != cudaSuccess) *p = NULL;
    return (int)e;
}

extern "C" void vc_device_pool_trim(void)
{
    cudaMemPool_t p = lib_pool();
    if (p) cudaMemPoolTrimTo(p, 0);
    cudaGetLastError();
}

extern "C" vc_status vc_device_pool_dirty(size_t bytes, int value, vc_err *err)
{
    vc_status st = VC_OK;
    void *p = NULL;
    VC_CUDA_TRY((cudaError_t)vc_device_pool_alloc(&p, (int64_t)bytes, 0), "dirtying the pool");
    VC_CUDA_TRY(cudaMemsetAsync(p, value, bytes, 0), "dirtying the pool");
    cudaFreeAsync(p, 0);
    p = NULL;
    VC_CUDA_TRY(cudaStreamSynchronize(0), "dirtying the pool");
    return VC_OK;
fail:
    if (p) cudaFreeAsync(p, 0);
    return st;
}
