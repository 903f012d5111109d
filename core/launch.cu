// core/launch.cu - the cached device attributes of core/launch.cuh.
#include <cuda_runtime.h>

#include <atomic>

#include "core/launch.cuh"

namespace {

const int kMaxDevices = 64;

std::atomic<int> g_cc_major[kMaxDevices], g_sms[kMaxDevices]; // 0: not read yet

// An attribute of the current device, read once per device; 0 where it cannot be read.
int cached_attr(std::atomic<int> *cache, cudaDeviceAttr attr)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
        cudaGetLastError();
        return 0;
    }
    int v = cache[dev].load(std::memory_order_relaxed);
    if (v == 0) {
        if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess || v <= 0) {
            cudaGetLastError();
            v = -1;
        }
        cache[dev].store(v, std::memory_order_relaxed);
    }
    return v > 0 ? v : 0;
}

} // namespace

int vc_device_cc_major(void)
{
    return cached_attr(g_cc_major, cudaDevAttrComputeCapabilityMajor);
}

int vc_device_sms(void) { return cached_attr(g_sms, cudaDevAttrMultiProcessorCount); }
