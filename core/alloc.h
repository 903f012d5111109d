/* core/alloc.h - the one way the engine gets bulk memory: through the caller's allocator (the
 * context's vc_allocator, carried in vc_engine_options.allocator) when there is one, else the
 * library's defaults (malloc on the host, the device pool of core/device_pool.h on the GPU).
 * So a caller bounds and accounts for every array voxconv makes. Results that outlive a call
 * (maps, voxels) keep the allocator pointer they were made with and free through it.
 * Also the per-context engine cache (vc_engine_options.cache). */
#ifndef VC_CORE_ALLOC_H
#define VC_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "core/options.h"
#include "voxconv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* The allocator of opt (NULL: the library's defaults). */
static inline const vc_allocator *vc_opt_allocator(const vc_engine_options *opt)
{
    return opt ? opt->allocator : NULL;
}

/* Host memory (at least one byte): a->alloc(VC_MEMORY_HOST) or malloc. NULL on failure. */
void *vc_host_alloc(const vc_allocator *a, size_t bytes);
/* n elements of `size` bytes, zeroed; NULL on failure or overflow. */
void *vc_host_calloc(const vc_allocator *a, size_t n, size_t size);
/* n elements of `size` bytes; NULL on failure or overflow. */
void *vc_host_alloc_n(const vc_allocator *a, size_t n, size_t size);
void vc_host_free(const vc_allocator *a, void *p);

/* Device memory (at least 256 bytes), stream ordered on `stream`: a->alloc(VC_MEMORY_DEVICE) or
 * the device pool. Returns a cudaError_t as int (cudaErrorMemoryAllocation when the allocator
 * returns NULL, so VC_CUDA_TRY says "out of device memory"); *p is NULL on failure. CUDA builds
 * only. */
int vc_dev_alloc(const vc_allocator *a, void **p, size_t bytes, struct CUstream_st *stream);
/* Frees p (NULL is fine) stream ordered on `stream`. Returns a cudaError_t as int. */
int vc_dev_free(const vc_allocator *a, void *p, struct CUstream_st *stream);

/* Mutable resources the engine keeps for one context between calls (vc_engine_options.cache);
 * single-threaded like the context. */
typedef struct vc_engine_cache {
    /* kmap/build.cu's read-back block: mapped pinned host memory (cudaHostAlloc), its device
     * alias, whether making it was tried, and the sequence number of its last read-back. */
    int64_t *status_pinned, *status_mapped;
    int64_t status_seq;
    int status_tried;
} vc_engine_cache;

/* A new, empty cache (calloc: a handle, not bulk data); NULL on failure. */
vc_engine_cache *vc_engine_cache_new(void);
/* Frees the cache and what it holds (CUDA-aware). NULL is fine. */
void vc_engine_cache_free(vc_engine_cache *c);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>

/* n elements of T (at least one) through a, for the .cu files (C++ linkage even where this
 * header is reached from inside an extern "C" block). */
extern "C++" {
template <typename T>
static inline cudaError_t vc_dev_alloc_n(const vc_allocator *a, T **p, int64_t n, cudaStream_t s)
{
    if (n < 1) n = 1;
    return (cudaError_t)vc_dev_alloc(a, (void **)p, (size_t)n * sizeof(T), s);
}
}
#endif

#endif
