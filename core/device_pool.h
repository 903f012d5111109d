/* core/device_pool.h - the library's stream-ordered device memory pool: one cudaMemPool_t per
 * device, created on first use and kept for the process, that keeps up to 1 GiB of freed blocks
 * cached, so that repeated map builds and per-call scratch do not go back to the driver after
 * the caller's synchronisations (as the device's default pool would). It is a thread-safe cache
 * of pool handles, not a switch: every context of the process shares it. Where the device has
 * no memory pools, allocations come from the device's default pool. The engine reaches it
 * through core/alloc.h (vc_dev_alloc), which uses it when the context has no allocator. */
#ifndef VC_CORE_DEVICE_POOL_H
#define VC_CORE_DEVICE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Stream-ordered allocation of `bytes` (at least 256) from the pool of the current device, on
 * `stream`. Free it with cudaFreeAsync on a stream, or cudaFree after the stream's work. Returns
 * a cudaError_t as int; *p is NULL on failure. */
int vc_device_pool_alloc(void **p, int64_t bytes, struct CUstream_st *stream);

/* Returns the cached, unused memory of the pool on the current device to the driver. */
void vc_device_pool_trim(void);

/* Test hook: takes `bytes` from the pool, fills them with `value` and gives them back, so that
 * the next allocations reuse dirty memory (an element a build forgets to write then shows).
 * Synchronises the legacy default stream. */
vc_status vc_device_pool_dirty(size_t bytes, int value, vc_err *err);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>

/* n elements of T (at least one) from the pool, for the .cu files. */
template <typename T> static inline cudaError_t vc_device_pool_alloc_n(T **p, int64_t n,
                                                                        cudaStream_t s)
{
    if (n < 1) n = 1;
    return (cudaError_t)vc_device_pool_alloc((void **)p, n * (int64_t)sizeof(T), s);
}
#endif

#endif
