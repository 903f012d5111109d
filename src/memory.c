/* src/memory.c - memory in either place through the context: host malloc, or the caller's
 * allocator, or stream-ordered CUDA allocations for the device; synchronous copies between any
 * two places; device staging of caller arrays. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

void *vc_mem_alloc(vc_context *ctx, size_t bytes, vc_memory where)
{
    if (bytes == 0) bytes = 1; /* a valid, distinct pointer even for empty arrays */
    if (ctx->has_allocator) return ctx->allocator.alloc(ctx->allocator.user, bytes, where,
                                                        ctx->stream);
    if (where == VC_MEMORY_HOST) return malloc(bytes);
#ifdef VOXCONV_HAVE_CUDA
    /* Stream ordered: freeing never waits for the device (see vc_mem_free). */
    void *p = NULL;
    if (cudaMallocAsync(&p, bytes, (cudaStream_t)ctx->stream) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
#else
    return NULL;
#endif
}

void vc_mem_free(vc_context *ctx, void *p, vc_memory where)
{
    if (!p) return;
    if (ctx->has_allocator) {
        ctx->allocator.free(ctx->allocator.user, p, where, ctx->stream);
        return;
    }
    if (where == VC_MEMORY_HOST) {
        free(p);
        return;
    }
#ifdef VOXCONV_HAVE_CUDA
    cudaFreeAsync(p, (cudaStream_t)ctx->stream);
#endif
}

vc_status vc_mem_copy(vc_context *ctx, void *dst, vc_memory dst_where, const void *src,
                      vc_memory src_where, size_t bytes)
{
    if (bytes == 0) return VC_OK;
    if (dst_where == VC_MEMORY_HOST && src_where == VC_MEMORY_HOST) {
        memmove(dst, src, bytes);
        return VC_OK;
    }
#ifdef VOXCONV_HAVE_CUDA
    enum cudaMemcpyKind kind = dst_where == VC_MEMORY_HOST
                                   ? cudaMemcpyDeviceToHost
                                   : (src_where == VC_MEMORY_HOST ? cudaMemcpyHostToDevice
                                                                  : cudaMemcpyDeviceToDevice);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)ctx->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)ctx->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return vc_ctx_fail(ctx, VC_ERR_CUDA, "copy of %zu bytes failed: %s", bytes,
                           cudaGetErrorString(e));
    }
    return VC_OK;
#else
    return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "device memory needs a CUDA build of voxconv");
#endif
}

vc_status vc_mem_to_device(vc_context *ctx, const void *p, vc_memory where, size_t bytes,
                           const void **dev, void **tmp)
{
    *tmp = NULL;
    *dev = p;
    if (!p || where == VC_MEMORY_DEVICE) return VC_OK;
    void *d = vc_mem_alloc(ctx, bytes, VC_MEMORY_DEVICE);
    if (!d) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "cannot allocate %zu device bytes", bytes);
    vc_status s = vc_mem_copy(ctx, d, VC_MEMORY_DEVICE, p, VC_MEMORY_HOST, bytes);
    if (s != VC_OK) {
        vc_mem_free(ctx, d, VC_MEMORY_DEVICE);
        return s;
    }
    *tmp = d;
    *dev = d;
    return VC_OK;
}
