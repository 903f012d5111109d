/* src/tensor.c - sparse tensors: creation (copying or wrapping caller buffers) on a coordinate
 * set, reference to the set, copies in and out with dtype conversion, cast and fill. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "internal.h"

/* The arguments of vc_tensor_create/_wrap (after vc_ctx_clear); *bytes = the features' size. */
static vc_status check_tensor_args(vc_context *ctx, const char *fn, vc_coords *coords,
                                   int64_t channels, vc_dtype dtype, vc_memory where,
                                   vc_tensor **out, size_t *bytes)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (!coords) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: coords is NULL", fn);
    if (coords->ctx != ctx)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: the coordinate set belongs to another context", fn);
    if (channels < 1 || channels > VC_MAX_CHANNELS)
        return vc_ctx_fail(ctx, channels < 1 ? VC_ERR_INVALID_ARGUMENT : VC_ERR_LIMIT,
                           "%s: channels %lld outside [1, %lld]", fn, (long long)channels,
                           (long long)VC_MAX_CHANNELS);
    if (!vc_is_float_dtype(dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: features must be fp32, fp16 or bf16 (got dtype %d)", fn,
                           (int)dtype);
    if (where != VC_MEMORY_HOST && where != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad memory kind %d", fn, (int)where);
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: device memory given to a CPU context", fn);
    int64_t elems;
    if (vc_mul_overflow_i64(coords->count, channels, &elems) ||
        elems > INT64_MAX / (int64_t)vc_dtype_size(dtype))
        return vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: %lld x %lld features overflow", fn,
                           (long long)coords->count, (long long)channels);
    *bytes = (size_t)elems * vc_dtype_size(dtype);
    return VC_OK;
}

static vc_tensor *new_tensor(vc_context *ctx, vc_coords *coords, int64_t channels, vc_dtype dtype,
                             void *data, int owned)
{
    vc_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ctx = ctx;
    t->coords = coords;
    coords->refs++;
    t->channels = channels;
    t->dtype = dtype;
    t->memory = vc_ctx_native(ctx);
    t->data = data;
    t->owned = owned;
    ctx->live_handles++;
    return t;
}

/* Copies n elements between any two places, converting dtype (staging through the host where
 * the device cannot convert in place). */
static vc_status convert_copy(vc_context *ctx, void *dst, vc_dtype dt, vc_memory dw,
                              const void *src, vc_dtype st, vc_memory sw, int64_t n)
{
    if (n == 0) return VC_OK;
    if (dt == st) return vc_mem_copy(ctx, dst, dw, src, sw, (size_t)n * vc_dtype_size(dt));
    if (dw == VC_MEMORY_HOST && sw == VC_MEMORY_HOST) {
        for (int64_t i = 0; i < n; i++) vc_store_f32(dst, dt, i, vc_load_f32(src, st, i));
        return VC_OK;
    }
#ifdef VOXCONV_HAVE_CUDA
    if (dw == VC_MEMORY_DEVICE && sw == VC_MEMORY_DEVICE) {
        vc_err err;
        return vc_ctx_err(ctx, vc_cuda_cast(src, st, dst, dt, n, ctx->stream, &err), &err);
    }
#endif
    void *hs = malloc((size_t)n * vc_dtype_size(st));
    void *hd = malloc((size_t)n * vc_dtype_size(dt));
    vc_status s = (hs && hd) ? VC_OK : vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == VC_OK) s = vc_mem_copy(ctx, hs, VC_MEMORY_HOST, src, sw, (size_t)n * vc_dtype_size(st));
    if (s == VC_OK) {
        for (int64_t i = 0; i < n; i++) vc_store_f32(hd, dt, i, vc_load_f32(hs, st, i));
        s = vc_mem_copy(ctx, dst, dw, hd, VC_MEMORY_HOST, (size_t)n * vc_dtype_size(dt));
    }
    free(hs);
    free(hd);
    return s;
}

vc_status vc_tensor_alloc(vc_context *ctx, const char *fn, vc_coords *coords, int64_t channels,
                          vc_dtype dtype, vc_tensor **out)
{
    size_t bytes = 0;
    vc_memory native = vc_ctx_native(ctx);
    vc_status s = check_tensor_args(ctx, fn, coords, channels, dtype, native, out, &bytes);
    if (s != VC_OK) return s;
    void *data = vc_mem_alloc(ctx, bytes, native);
    if (!data)
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", fn, bytes);
    vc_tensor *t = new_tensor(ctx, coords, channels, dtype, data, 1);
    if (!t) {
        vc_mem_free(ctx, data, native);
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = t;
    return VC_OK;
}

vc_status vc_tensor_create(vc_context *ctx, vc_coords *coords, int64_t channels, vc_dtype dtype,
                           const void *features, vc_memory where, vc_tensor **out)
{
    const char *fn = "vc_tensor_create";
    vc_ctx_clear(ctx);
    size_t bytes = 0;
    vc_status s = check_tensor_args(ctx, fn, coords, channels, dtype, where, out, &bytes);
    if (s != VC_OK) return s;
    vc_tensor *t = NULL;
    if ((s = vc_tensor_alloc(ctx, fn, coords, channels, dtype, &t)) != VC_OK) return s;
    if (features) {
        s = vc_mem_copy(ctx, t->data, t->memory, features, where, bytes);
    } else if (t->memory == VC_MEMORY_HOST) {
        memset(t->data, 0, bytes);
    } else {
#ifdef VOXCONV_HAVE_CUDA
        vc_err err;
        s = vc_ctx_err(ctx, vc_cuda_fill(t->data, dtype, (int64_t)(bytes / vc_dtype_size(dtype)),
                                         0.0f, ctx->stream, &err), &err);
#endif
    }
    if (s != VC_OK) {
        vc_tensor_destroy(t);
        return s;
    }
    *out = t;
    return VC_OK;
}

vc_status vc_tensor_wrap(vc_context *ctx, vc_coords *coords, int64_t channels, vc_dtype dtype,
                         void *features, vc_memory where, vc_tensor **out)
{
    const char *fn = "vc_tensor_wrap";
    vc_ctx_clear(ctx);
    size_t bytes = 0;
    vc_status s = check_tensor_args(ctx, fn, coords, channels, dtype, where, out, &bytes);
    if (s != VC_OK) return s;
    if (!features && coords->count > 0)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: features is NULL", fn);
    if (where != vc_ctx_native(ctx))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: a wrapped buffer must be in the context's native memory", fn);
    vc_tensor *t = new_tensor(ctx, coords, channels, dtype, features, 0);
    if (!t) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    *out = t;
    return VC_OK;
}

vc_status vc_tensor_destroy(vc_tensor *t)
{
    if (!t) return VC_OK;
    vc_context *ctx = t->ctx;
    if (t->owned) vc_mem_free(ctx, t->data, t->memory);
    vc_coords_destroy(t->coords);
    free(t);
    ctx->live_handles--;
    return VC_OK;
}

vc_status vc_tensor_get_info(const vc_tensor *t, vc_tensor_info *out)
{
    if (!t || !out) return VC_ERR_INVALID_ARGUMENT;
    out->count = t->coords->count;
    out->channels = t->channels;
    out->dtype = t->dtype;
    out->memory = t->memory;
    out->coords = t->coords;
    out->data = t->data;
    return VC_OK;
}

static vc_status check_copy(vc_context *ctx, const char *fn, const vc_tensor *t, const void *buf,
                            vc_dtype dtype, vc_memory where)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!t) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    if (!buf && t->coords->count > 0)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: buffer is NULL", fn);
    if (!vc_is_float_dtype(dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: dtype %d is not a float type", fn,
                           (int)dtype);
    if (where != VC_MEMORY_HOST && where != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad memory kind", fn);
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: device buffer on a CPU context", fn);
    return VC_OK;
}

vc_status vc_tensor_copy_out(vc_context *ctx, const vc_tensor *t, void *dst, vc_dtype dtype,
                             vc_memory where)
{
    vc_status s = check_copy(ctx, "vc_tensor_copy_out", t, dst, dtype, where);
    if (s != VC_OK) return s;
    return convert_copy(ctx, dst, dtype, where, t->data, t->dtype, t->memory,
                        t->coords->count * t->channels);
}

vc_status vc_tensor_copy_in(vc_context *ctx, vc_tensor *t, const void *src, vc_dtype dtype,
                            vc_memory where)
{
    vc_status s = check_copy(ctx, "vc_tensor_copy_in", t, src, dtype, where);
    if (s != VC_OK) return s;
    return convert_copy(ctx, t->data, t->dtype, t->memory, src, dtype, where,
                        t->coords->count * t->channels);
}

vc_status vc_tensor_cast(vc_context *ctx, const vc_tensor *t, vc_dtype dtype, vc_tensor **out)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!t || !out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_tensor_cast: NULL argument");
    vc_tensor *r = NULL;
    vc_status s = vc_tensor_create(ctx, t->coords, t->channels, dtype, NULL, t->memory, &r);
    if (s != VC_OK) return s;
    s = convert_copy(ctx, r->data, dtype, r->memory, t->data, t->dtype, t->memory,
                     t->coords->count * t->channels);
    if (s != VC_OK) {
        vc_tensor_destroy(r);
        return s;
    }
    *out = r;
    return VC_OK;
}

vc_status vc_tensor_fill(vc_context *ctx, vc_tensor *t, float value)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!t) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_tensor_fill: tensor is NULL");
    int64_t n = t->coords->count * t->channels;
    if (t->memory == VC_MEMORY_HOST) {
        for (int64_t i = 0; i < n; i++) vc_store_f32(t->data, t->dtype, i, value);
        return VC_OK;
    }
#ifdef VOXCONV_HAVE_CUDA
    vc_err err;
    return vc_ctx_err(ctx, vc_cuda_fill(t->data, t->dtype, n, value, ctx->stream, &err), &err);
#else
    return vc_ctx_fail(ctx, VC_ERR_INTERNAL, "vc_tensor_fill: device tensor in a CPU build");
#endif
}

/* Counts (and with `zero` replaces) the non-finite features of t on the host or the device. */
static vc_status scan_nonfinite(vc_context *ctx, vc_tensor *t, int zero, int64_t *count,
                                int64_t *first)
{
    const int64_t n = t->coords->count * t->channels;
    *count = 0;
    *first = -1;
    if (t->memory == VC_MEMORY_HOST) {
        for (int64_t i = 0; i < n; i++) {
            if (isfinite(vc_load_f32(t->data, t->dtype, i))) continue;
            if (!(*count)++) *first = i;
            if (zero) vc_store_f32(t->data, t->dtype, i, 0.0f);
        }
        return VC_OK;
    }
#ifdef VOXCONV_HAVE_CUDA
    int64_t *scratch = vc_mem_alloc(ctx, 16, VC_MEMORY_DEVICE);
    if (!scratch)
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY,
                           "vc_tensor_check_finite: cannot allocate 16 bytes of device memory");
    vc_err err;
    vc_status s = vc_cuda_nonfinite(t->data, t->dtype, n, zero, scratch, count, first,
                                    ctx->stream, &err);
    vc_mem_free(ctx, scratch, VC_MEMORY_DEVICE);
    return vc_ctx_err(ctx, s, &err);
#else
    return vc_ctx_fail(ctx, VC_ERR_INTERNAL, "vc_tensor_check_finite: device tensor in a CPU "
                       "build");
#endif
}

vc_status vc_tensor_check_finite(vc_context *ctx, vc_tensor *t, vc_nonfinite_policy policy,
                                 int64_t *count)
{
    const char *fn = "vc_tensor_check_finite";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_status s = vc_tensor_check(ctx, fn, "tensor", t);
    if (s != VC_OK) return s;
    if (policy != VC_NONFINITE_REFUSE && policy != VC_NONFINITE_KEEP &&
        policy != VC_NONFINITE_ZERO)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: unknown policy %d", fn,
                           (int)policy);
    int64_t found = 0, first = -1;
    s = scan_nonfinite(ctx, t, policy == VC_NONFINITE_ZERO, &found, &first);
    if (s != VC_OK) return s;
    if (count) *count = found;
    if (found && policy == VC_NONFINITE_REFUSE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: %lld feature%s NaN or infinite, the first at row %lld, channel "
                           "%lld", fn, (long long)found,
                           found == 1 ? " is" : "s are", (long long)(first / t->channels),
                           (long long)(first % t->channels));
    return VC_OK;
}

vc_status vc_tensor_check(vc_context *ctx, const char *fn, const char *what, const vc_tensor *t)
{
    if (!t) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    if (t->ctx != ctx)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: %s belongs to another context", fn,
                           what);
    return VC_OK;
}
