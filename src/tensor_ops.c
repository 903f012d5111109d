/* src/tensor_ops.c - the tensor operations of include/voxconv.h (vc_tensor_concat,
 * vc_tensor_add, vc_tensor_affine, vc_tensor_to_dense): argument checks with messages naming
 * the function, the argument and the value, then the CPU twins or, on a CUDA context, the GPU
 * versions (tensor/tensor_ops.h). */
#include <stdlib.h>

#include "core/dtype.h"
#include "internal.h"
#include "tensor/tensor_ops.h"

static vc_status check_act(vc_context *ctx, const char *fn, vc_activation act)
{
    if (act != VC_ACT_NONE && act != VC_ACT_RELU && act != VC_ACT_LEAKY_RELU)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad activation %d", fn, (int)act);
    return VC_OK;
}

static vc_status check_where(vc_context *ctx, const char *fn, const char *what, vc_memory where)
{
    if (where != VC_MEMORY_HOST && where != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad memory kind %d for %s", fn,
                           (int)where, what);
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: %s in device memory given to a CPU context", fn, what);
    return VC_OK;
}

/* `t` against `ref` (named ref_name): same coordinate set (pointer equal), same dtype, and
 * with same_channels the same channel count. */
static vc_status check_same(vc_context *ctx, const char *fn, const char *name, const vc_tensor *t,
                            const char *ref_name, const vc_tensor *ref, int same_channels)
{
    if (t->coords != ref->coords)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                           "%s: %s and %s are on different coordinate sets (%lld and %lld rows); "
                           "they must share one vc_coords", fn, name, ref_name,
                           (long long)t->coords->count, (long long)ref->coords->count);
    if (t->dtype != ref->dtype)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH, "%s: %s is %s but %s is %s", fn, name,
                           vc_dtype_name(t->dtype), ref_name, vc_dtype_name(ref->dtype));
    if (same_channels && t->channels != ref->channels)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH, "%s: %s has %lld channels but %s has %lld",
                           fn, name, (long long)t->channels, ref_name, (long long)ref->channels);
    return VC_OK;
}

vc_status vc_tensor_concat(vc_context *ctx, const vc_tensor *const *parts, int32_t count,
                           vc_tensor **out)
{
    const char *fn = "vc_tensor_concat";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!parts) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: parts is NULL", fn);
    if (count < 1)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: count %d, need at least 1 part", fn,
                           (int)count);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    int64_t total = 0;
    for (int32_t p = 0; p < count; p++) {
        char name[32];
        snprintf(name, sizeof name, "parts[%d]", (int)p);
        vc_status s = vc_tensor_check(ctx, fn, name, parts[p]);
        if (s == VC_OK && p > 0) s = check_same(ctx, fn, name, parts[p], "parts[0]", parts[0], 0);
        if (s != VC_OK) return s;
        total += parts[p]->channels; /* each <= 2^20, count < 2^31: no overflow */
    }
    if (total > VC_MAX_CHANNELS)
        return vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: %lld channels in all, more than %lld", fn,
                           (long long)total, (long long)VC_MAX_CHANNELS);
    const void **data = malloc((size_t)count * sizeof *data);
    int64_t *channels = malloc((size_t)count * sizeof *channels);
    vc_tensor *r = NULL;
    vc_status s = data && channels ? VC_OK
                                   : vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (s == VC_OK)
        s = vc_tensor_alloc(ctx, fn, parts[0]->coords, total, parts[0]->dtype, &r);
    if (s == VC_OK) {
        for (int32_t p = 0; p < count; p++) {
            data[p] = parts[p]->data;
            channels[p] = parts[p]->channels;
        }
        vc_err err = {{0}};
        if (ctx->backend == VC_BACKEND_CPU)
            s = vc_concat_cpu(data, channels, count, r->coords->count, r->dtype, r->data,
                              ctx->num_threads, &err);
#ifdef VOXCONV_HAVE_CUDA
        else
            s = vc_concat_gpu(data, channels, count, r->coords->count, r->dtype, r->data,
                              ctx->stream, &err);
#endif
        s = vc_ctx_err(ctx, s, &err);
    }
    free(data);
    free(channels);
    if (s != VC_OK) {
        vc_tensor_destroy(r);
        return s;
    }
    *out = r;
    return VC_OK;
}

vc_status vc_tensor_add(vc_context *ctx, const vc_tensor *a, const vc_tensor *b,
                        vc_activation act, float slope, vc_tensor **out)
{
    const char *fn = "vc_tensor_add";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_status s;
    if ((s = vc_tensor_check(ctx, fn, "a", a)) != VC_OK) return s;
    if ((s = vc_tensor_check(ctx, fn, "b", b)) != VC_OK) return s;
    if ((s = check_same(ctx, fn, "b", b, "a", a, 1)) != VC_OK) return s;
    if ((s = check_act(ctx, fn, act)) != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    vc_tensor *r = NULL;
    if ((s = vc_tensor_alloc(ctx, fn, a->coords, a->channels, a->dtype, &r)) != VC_OK) return s;
    const int64_t n = a->coords->count * a->channels; /* checked by vc_tensor_alloc */
    vc_err err = {{0}};
    if (ctx->backend == VC_BACKEND_CPU)
        s = vc_add_cpu(a->data, b->data, r->data, a->dtype, n, act, slope, ctx->num_threads,
                       &err);
#ifdef VOXCONV_HAVE_CUDA
    else
        s = vc_add_gpu(a->data, b->data, r->data, a->dtype, n, act, slope, ctx->stream, &err);
#endif
    if ((s = vc_ctx_err(ctx, s, &err)) != VC_OK) {
        vc_tensor_destroy(r);
        return s;
    }
    *out = r;
    return VC_OK;
}

vc_status vc_tensor_affine(vc_context *ctx, vc_tensor *t, const float *scale, const float *shift,
                           vc_memory where, vc_activation act, float slope)
{
    const char *fn = "vc_tensor_affine";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_status s;
    if ((s = vc_tensor_check(ctx, fn, "tensor", t)) != VC_OK) return s;
    if ((s = check_where(ctx, fn, "scale and shift", where)) != VC_OK) return s;
    if ((s = check_act(ctx, fn, act)) != VC_OK) return s;
    const int64_t rows = t->coords->count;
    vc_err err = {{0}};
    if (ctx->backend == VC_BACKEND_CPU)
        return vc_ctx_err(ctx, vc_affine_cpu(t->data, t->dtype, rows, t->channels, scale, shift,
                                             act, slope, ctx->num_threads, &err),
                          &err);
#ifdef VOXCONV_HAVE_CUDA
    /* Host arrays travel to the device for this call (a synchronous copy; the frees are stream
     * ordered after the kernel). */
    const size_t bytes = (size_t)t->channels * sizeof(float);
    const void *dscale = NULL, *dshift = NULL;
    void *tmp_scale = NULL, *tmp_shift = NULL;
    s = vc_mem_to_device(ctx, scale, where, bytes, &dscale, &tmp_scale);
    if (s == VC_OK) s = vc_mem_to_device(ctx, shift, where, bytes, &dshift, &tmp_shift);
    if (s == VC_OK)
        s = vc_ctx_err(ctx, vc_affine_gpu(t->data, t->dtype, rows, t->channels, dscale, dshift,
                                          act, slope, ctx->stream, &err),
                       &err);
    vc_mem_free(ctx, tmp_scale, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, tmp_shift, VC_MEMORY_DEVICE);
    return s;
#else
    return vc_ctx_fail(ctx, VC_ERR_INTERNAL, "%s: device tensor in a CPU build", fn);
#endif
}

/* B*C*D*H*W of t into *n; VC_ERR_LIMIT when it (or its bytes in `dtype`) overflows int64. */
static vc_status dense_elements(vc_context *ctx, const char *fn, const vc_tensor *t,
                                vc_dtype dtype, int64_t *n)
{
    const vc_coords *c = t->coords;
    int64_t v = c->batch_size;
    if (vc_mul_overflow_i64(v, t->channels, &v) || vc_mul_overflow_i64(v, c->shape[0], &v) ||
        vc_mul_overflow_i64(v, c->shape[1], &v) || vc_mul_overflow_i64(v, c->shape[2], &v) ||
        v > INT64_MAX / (int64_t)vc_dtype_size(dtype))
        return vc_ctx_fail(ctx, VC_ERR_LIMIT,
                           "%s: the dense array [%d, %lld, %d, %d, %d] of %s overflows 64 bits",
                           fn, (int)c->batch_size, (long long)t->channels, (int)c->shape[0],
                           (int)c->shape[1], (int)c->shape[2], vc_dtype_name(dtype));
    *n = v;
    return VC_OK;
}

vc_status vc_tensor_to_dense(vc_context *ctx, const vc_tensor *t, void *dst, int64_t capacity,
                             vc_dtype dtype, vc_memory where)
{
    const char *fn = "vc_tensor_to_dense";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_status s;
    if ((s = vc_tensor_check(ctx, fn, "tensor", t)) != VC_OK) return s;
    if (!vc_is_float_dtype(dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: dtype must be fp32, fp16 or bf16 (got %d)", fn, (int)dtype);
    if ((s = check_where(ctx, fn, "dst", where)) != VC_OK) return s;
    if (capacity < 0)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: capacity %lld is negative", fn,
                           (long long)capacity);
    int64_t n = 0;
    if ((s = dense_elements(ctx, fn, t, dtype, &n)) != VC_OK) return s;
    if (capacity < n)
        return vc_ctx_fail(ctx, VC_ERR_CAPACITY,
                           "%s: dst holds %lld elements, the dense array needs %lld "
                           "(batch %d x channels %lld x %d x %d x %d)", fn, (long long)capacity,
                           (long long)n, (int)t->coords->batch_size, (long long)t->channels,
                           (int)t->coords->shape[0], (int)t->coords->shape[1],
                           (int)t->coords->shape[2]);
    if (n == 0) return VC_OK;
    if (!dst) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    const vc_coords *c = t->coords;
    vc_err err = {{0}};
    if (ctx->backend == VC_BACKEND_CPU)
        return vc_ctx_err(ctx, vc_to_dense_cpu(c->data, c->count, c->shape, c->batch_size,
                                               t->data, t->dtype, t->channels, dst, dtype,
                                               ctx->num_threads, &err),
                          &err);
#ifdef VOXCONV_HAVE_CUDA
    /* A host dst: the array is made in device memory, then copied back (synchronous). */
    const size_t bytes = (size_t)n * vc_dtype_size(dtype);
    void *d = dst;
    if (where == VC_MEMORY_HOST && !(d = vc_mem_alloc(ctx, bytes, VC_MEMORY_DEVICE)))
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu device bytes to "
                           "stage the dense array", fn, bytes);
    s = vc_ctx_err(ctx, vc_to_dense_gpu(c->data, c->count, c->shape, c->batch_size, t->data,
                                        t->dtype, t->channels, d, dtype, ctx->stream, &err),
                   &err);
    if (where == VC_MEMORY_HOST) {
        if (s == VC_OK) s = vc_mem_copy(ctx, dst, VC_MEMORY_HOST, d, VC_MEMORY_DEVICE, bytes);
        vc_mem_free(ctx, d, VC_MEMORY_DEVICE);
    }
    return s;
#else
    return vc_ctx_fail(ctx, VC_ERR_INTERNAL, "%s: device tensor in a CPU build", fn);
#endif
}
