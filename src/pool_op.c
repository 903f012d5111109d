/* src/pool_op.c - vc_pool_forward (pooling over a kernel map, the caller's or one built and
 * cached) and vc_global_pool (every batch item to one row), on the CPU twins or, on a CUDA
 * context, the GPU versions. */
#include "internal.h"
#include "pool/pool.h"

vc_status vc_pool_forward(vc_context *ctx, const vc_pool_desc *desc, const vc_tensor *in,
                          vc_tensor **out)
{
    const char *fn = "vc_pool_forward";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_pool_desc d = VC_POOL_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_pool_desc);
    vc_status s = vc_tensor_check(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (d.mode != VC_POOL_MAX && d.mode != VC_POOL_AVG)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad mode %d", fn, (int)d.mode);
    const vc_kmap *map = NULL;
    vc_kmap *held = NULL;
    if ((s = vc_kmap_resolve(ctx, fn, in, d.kmap, &d.map, &map, &held)) != VC_OK) return s;
    vc_tensor *r = NULL;
    s = vc_tensor_create(ctx, map->out, in->channels, in->dtype, NULL, VC_MEMORY_HOST, &r);
    if (s == VC_OK) {
        vc_err err = {{0}};
        if (ctx->backend == VC_BACKEND_CPU)
            s = vc_pool_cpu(&map->data, d.mode, in->data, in->dtype, in->channels, r->data,
                            ctx->num_threads, &err);
#ifdef VOXCONV_HAVE_CUDA
        else
            s = vc_pool_gpu(&map->data, d.mode, in->data, in->dtype, in->channels, r->data,
                            &ctx->opts, ctx->stream, &err);
#endif
        s = vc_ctx_err(ctx, s, &err);
    }
    vc_kmap_destroy(held);
    if (s != VC_OK) {
        vc_tensor_destroy(r);
        return s;
    }
    *out = r;
    return VC_OK;
}

vc_status vc_global_pool(vc_context *ctx, vc_pool_mode mode, const vc_tensor *in, float *dst,
                         vc_memory where)
{
    const char *fn = "vc_global_pool";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_status s = vc_tensor_check(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!dst) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (mode != VC_POOL_MAX && mode != VC_POOL_AVG)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad mode %d", fn, (int)mode);
    if (where != VC_MEMORY_HOST && where != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad memory kind", fn);
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: device dst on a CPU context", fn);
    vc_err err = {{0}};
    size_t bytes = (size_t)in->coords->batch_size * (size_t)in->channels * sizeof(float);
    /* The result lands in a scratch buffer first: the caller's changes only on success. */
    vc_memory native = vc_ctx_native(ctx);
    float *tmp = vc_mem_alloc(ctx, bytes, native);
    if (!tmp) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (ctx->backend == VC_BACKEND_CPU)
        s = vc_global_pool_cpu(in->coords->data, in->coords->count, in->coords->batch_size, mode,
                               in->data, in->dtype, in->channels, tmp, &ctx->opts, &err);
#ifdef VOXCONV_HAVE_CUDA
    else
        s = vc_global_pool_gpu(in->coords->data, in->coords->count, in->coords->batch_size, mode,
                               in->data, in->dtype, in->channels, tmp, &ctx->opts, ctx->stream,
                               &err);
#endif
    s = vc_ctx_err(ctx, s, &err);
    if (s == VC_OK) s = vc_mem_copy(ctx, dst, where, tmp, native, bytes);
    vc_mem_free(ctx, tmp, native);
    return s;
}
