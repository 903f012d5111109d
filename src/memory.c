/* src/memory.c - memory in either place through the context's allocator (core/alloc.h: the
 * caller's, else malloc and the library's stream-ordered device pool); synchronous copies
 * between any two places; device staging of caller arrays. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "core/alloc.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

void *vc_mem_alloc(vc_context *ctx, size_t bytes, vc_memory where)
{
    if (where == VC_MEMORY_HOST) return vc_host_alloc(ctx->opts.allocator, bytes);
#ifdef VOXCONV_HAVE_CUDA
    /* Stream ordered: freeing never waits for the device (see vc_mem_free). */
    void *p = NULL;
    if (vc_dev_alloc(ctx->opts.allocator, &p, bytes, ctx->stream) != (int)cudaSuccess) {
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
    if (where == VC_MEMORY_HOST) {
        vc_host_free(ctx->opts.allocator, p);
        return;
    }
#ifdef VOXCONV_HAVE_CUDA
    vc_dev_free(ctx->opts.allocator, p, ctx->stream);
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
