/* core/alloc.c - the engine's memory source (core/alloc.h). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/device_pool.h"
#endif

void *vc_host_alloc(const vc_allocator *a, size_t bytes)
{
    if (bytes == 0) bytes = 1; /* a valid, distinct pointer even for empty arrays */
    return a ? a->alloc(a->user, bytes, VC_MEMORY_HOST, NULL) : malloc(bytes);
}

void *vc_host_alloc_n(const vc_allocator *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    return vc_host_alloc(a, n * size);
}

void *vc_host_calloc(const vc_allocator *a, size_t n, size_t size)
{
    if (!a) return calloc(n ? n : 1, size ? size : 1);
    void *p = vc_host_alloc_n(a, n, size);
    if (p) memset(p, 0, n * size);
    return p;
}

void vc_host_free(const vc_allocator *a, void *p)
{
    if (!p) return;
    if (a)
        a->free(a->user, p, VC_MEMORY_HOST, NULL);
    else
        free(p);
}

#ifdef VOXCONV_HAVE_CUDA
int vc_dev_alloc(const vc_allocator *a, void **p, size_t bytes, struct CUstream_st *stream)
{
    if (bytes < 256) bytes = 256;
    if (!a) return vc_device_pool_alloc(p, (int64_t)bytes, stream);
    *p = a->alloc(a->user, bytes, VC_MEMORY_DEVICE, stream);
    return *p ? (int)cudaSuccess : (int)cudaErrorMemoryAllocation;
}

int vc_dev_free(const vc_allocator *a, void *p, struct CUstream_st *stream)
{
    if (!p) return (int)cudaSuccess;
    if (a) {
        a->free(a->user, p, VC_MEMORY_DEVICE, stream);
        return (int)cudaSuccess;
    }
    return (int)cudaFreeAsync(p, (cudaStream_t)stream);
}
#endif

vc_engine_cache *vc_engine_cache_new(void) { return calloc(1, sizeof(vc_engine_cache)); }

void vc_engine_cache_free(vc_engine_cache *c)
{
    if (!c) return;
#ifdef VOXCONV_HAVE_CUDA
    if (c->status_pinned) {
        cudaFreeHost(c->status_pinned);
        cudaGetLastError();
    }
#endif
    free(c);
}
