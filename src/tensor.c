/* src/tensor.c - coordinate sets and sparse tensors: creation (copying or wrapping caller
 * buffers), reference counting, validation, copies in and out with dtype conversion, fill. */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "internal.h"

/* ---- coordinate sets ---------------------------------------------------------------------- */

static vc_status check_set_args(vc_context *ctx, const char *fn, const int32_t *coords,
                                int64_t count, vc_memory where, const int32_t shape[3],
                                int32_t batch_size, vc_coords **out)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (count < 0 || count > VC_MAX_ROWS)
        return vc_ctx_fail(ctx, count < 0 ? VC_ERR_INVALID_ARGUMENT : VC_ERR_LIMIT,
                           "%s: count %lld outside [0, %lld]", fn, (long long)count,
                           (long long)VC_MAX_ROWS);
    if (count > 0 && !coords)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: coords is NULL", fn);
    if (where != VC_MEMORY_HOST && where != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad memory kind %d", fn, (int)where);
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: device memory given to a CPU context", fn);
    if (!shape) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: spatial_shape is NULL", fn);
    for (int i = 0; i < 3; i++)
        if (shape[i] < 1)
            return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                               "%s: spatial_shape[%d] = %d must be >= 1", fn, i, (int)shape[i]);
    if (batch_size < 1)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: batch_size %d must be >= 1", fn,
                           (int)batch_size);
    return VC_OK;
}

/* Checks every row of a host array against the shape and batch size. */
static vc_status validate_rows(vc_context *ctx, const char *fn, const int32_t *c, int64_t n,
                               const int32_t shape[3], int32_t batch_size)
{
    for (int64_t i = 0; i < n; i++) {
        const int32_t *r = c + 4 * i;
        if (r[0] < 0 || r[0] >= batch_size || r[1] < 0 || r[1] >= shape[0] || r[2] < 0 ||
            r[2] >= shape[1] || r[3] < 0 || r[3] >= shape[2])
            return vc_ctx_fail(ctx, VC_ERR_OUT_OF_RANGE,
                               "%s: row %lld (b=%d, z=%d, y=%d, x=%d) is outside batch size %d "
                               "and spatial shape (z,y,x) = (%d,%d,%d)",
                               fn, (long long)i, (int)r[0], (int)r[1], (int)r[2], (int)r[3],
                               (int)batch_size, (int)shape[0], (int)shape[1], (int)shape[2]);
    }
    return VC_OK;
}

/* Validates rows wherever they live (device rows are staged through the host). */
static vc_status validate_any(vc_context *ctx, const char *fn, const int32_t *c, int64_t n,
                              vc_memory where, const int32_t shape[3], int32_t batch_size)
{
    if (n == 0) return VC_OK;
    if (where == VC_MEMORY_HOST) return validate_rows(ctx, fn, c, n, shape, batch_size);
    size_t bytes = (size_t)n * 16u;
    int32_t *tmp = malloc(bytes);
    if (!tmp) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    vc_status s = vc_mem_copy(ctx, tmp, VC_MEMORY_HOST, c, where, bytes);
    if (s == VC_OK) s = validate_rows(ctx, fn, tmp, n, shape, batch_size);
    free(tmp);
    return s;
}

static vc_coords *new_set(vc_context *ctx, int32_t *data, int owned, int64_t count,
                          const int32_t shape[3], int32_t batch_size)
{
    vc_coords *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ctx = ctx;
    c->refs = 1;
    c->id = ctx->next_id++;
    c->count = count;
    memcpy(c->shape, shape, sizeof c->shape);
    c->batch_size = batch_size;
    c->memory = vc_ctx_native(ctx);
    c->data = data;
    c->owned = owned;
    ctx->live_handles++;
    return c;
}

vc_status vc_coords_create(vc_context *ctx, const int32_t *coords, int64_t count,
                           vc_memory where, const int32_t spatial_shape[3], int32_t batch_size,
                           vc_coords **out)
{
    const char *fn = "vc_coords_create";
    vc_ctx_clear(ctx);
    vc_status s = check_set_args(ctx, fn, coords, count, where, spatial_shape, batch_size, out);
    if (s != VC_OK) return s;
    s = validate_any(ctx, fn, coords, count, where, spatial_shape, batch_size);
    if (s != VC_OK) return s;
    vc_memory native = vc_ctx_native(ctx);
    size_t bytes = (size_t)count * 16u;
    int32_t *data = vc_mem_alloc(ctx, bytes, native);
    if (!data)
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", fn, bytes);
    s = vc_mem_copy(ctx, data, native, coords, where, bytes);
    if (s != VC_OK) {
        vc_mem_free(ctx, data, native);
        return s;
    }
    vc_coords *c = new_set(ctx, data, 1, count, spatial_shape, batch_size);
    if (!c) {
        vc_mem_free(ctx, data, native);
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = c;
    return VC_OK;
}

vc_status vc_coords_trusted(vc_context *ctx, const int32_t *src, vc_memory where, int64_t count,
                            const int32_t shape[3], int32_t batch_size, vc_coords **out)
{
    vc_memory native = vc_ctx_native(ctx);
    size_t bytes = (size_t)count * 16u;
    int32_t *data = vc_mem_alloc(ctx, bytes, native);
    if (!data) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", bytes);
    vc_status s = vc_mem_copy(ctx, data, native, src, where, bytes);
    vc_coords *c = s == VC_OK ? new_set(ctx, data, 1, count, shape, batch_size) : NULL;
    if (!c) {
        vc_mem_free(ctx, data, native);
        return s != VC_OK ? s : vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "out of memory");
    }
    *out = c;
    return VC_OK;
}

vc_status vc_coords_wrap(vc_context *ctx, const int32_t *coords, int64_t count, vc_memory where,
                         const int32_t spatial_shape[3], int32_t batch_size, vc_coords **out)
{
    const char *fn = "vc_coords_wrap";
    vc_ctx_clear(ctx);
    vc_status s = check_set_args(ctx, fn, coords, count, where, spatial_shape, batch_size, out);
    if (s != VC_OK) return s;
    if (where != vc_ctx_native(ctx))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: a wrapped buffer must be in the context's native memory (%s)", fn,
                           vc_ctx_native(ctx) == VC_MEMORY_HOST ? "host" : "device");
    s = validate_any(ctx, fn, coords, count, where, spatial_shape, batch_size);
    if (s != VC_OK) return s;
    vc_coords *c = new_set(ctx, (int32_t *)coords, 0, count, spatial_shape, batch_size);
    if (!c) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    *out = c;
    return VC_OK;
}

vc_status vc_coords_retain(vc_coords *coords)
{
    if (!coords) return VC_ERR_INVALID_ARGUMENT;
    coords->refs++;
    return VC_OK;
}

vc_status vc_coords_destroy(vc_coords *c)
{
    if (!c) return VC_OK;
    if (--c->refs > 0) return VC_OK;
    vc_context *ctx = c->ctx;
    /* The cache holds the only references to maps no user holds (a user reference retains this
     * set), so every cached map goes with the set. */
    for (int32_t i = 0; i < c->n_maps; i++) vc_kmap_free_internal(c->maps[i]);
    free(c->maps);
    if (c->owned) vc_mem_free(ctx, c->data, c->memory);
    free(c);
    ctx->live_handles--;
    return VC_OK;
}

vc_status vc_coords_clear_cache(vc_coords *c)
{
    if (!c) return VC_ERR_INVALID_ARGUMENT;
    int32_t kept = 0;
    for (int32_t i = 0; i < c->n_maps; i++) {
        if (c->maps[i]->user_refs > 0 || (c->maps[i]->inverse &&
                                          c->maps[i]->inverse->user_refs > 0))
            c->maps[kept++] = c->maps[i];
        else
            vc_kmap_free_internal(c->maps[i]);
    }
    c->n_maps = kept;
    return VC_OK;
}

vc_status vc_coords_get_info(const vc_coords *c, vc_coords_info *out)
{
    if (!c || !out) return VC_ERR_INVALID_ARGUMENT;
    out->count = c->count;
    memcpy(out->spatial_shape, c->shape, sizeof c->shape);
    out->batch_size = c->batch_size;
    out->memory = c->memory;
    out->data = c->data;
    return VC_OK;
}

vc_status vc_coords_copy_out(vc_context *ctx, const vc_coords *c, int32_t *dst, vc_memory where)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!c || (!dst && c->count > 0))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_coords_copy_out: NULL argument");
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "vc_coords_copy_out: device destination on a CPU context");
    return vc_mem_copy(ctx, dst, where, c->data, c->memory, (size_t)c->count * 16u);
}

/* ---- tensors ------------------------------------------------------------------------------ */

static vc_status check_tensor_args(vc_context *ctx, const char *fn, vc_coords *coords,
                                   int64_t channels, vc_dtype dtype, vc_memory where,
                                   size_t *bytes)
{
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
        if (vc_cuda_cast(src, st, dst, dt, n, ctx->stream) != 0)
            return vc_ctx_fail(ctx, VC_ERR_CUDA, "dtype conversion kernel failed");
        return VC_OK;
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

vc_status vc_tensor_create(vc_context *ctx, vc_coords *coords, int64_t channels, vc_dtype dtype,
                           const void *features, vc_memory where, vc_tensor **out)
{
    const char *fn = "vc_tensor_create";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    size_t bytes = 0;
    vc_status s = check_tensor_args(ctx, fn, coords, channels, dtype, where, &bytes);
    if (s != VC_OK) return s;
    vc_memory native = vc_ctx_native(ctx);
    void *data = vc_mem_alloc(ctx, bytes, native);
    if (!data)
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", fn, bytes);
    if (features) {
        s = vc_mem_copy(ctx, data, native, features, where, bytes);
    } else if (native == VC_MEMORY_HOST) {
        memset(data, 0, bytes);
    } else {
#ifdef VOXCONV_HAVE_CUDA
        if (vc_cuda_fill(data, dtype, (int64_t)(bytes / vc_dtype_size(dtype)), 0.0f,
                         ctx->stream) != 0)
            s = vc_ctx_fail(ctx, VC_ERR_CUDA, "%s: zero fill failed", fn);
#endif
    }
    if (s != VC_OK) {
        vc_mem_free(ctx, data, native);
        return s;
    }
    vc_tensor *t = new_tensor(ctx, coords, channels, dtype, data, 1);
    if (!t) {
        vc_mem_free(ctx, data, native);
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = t;
    return VC_OK;
}

vc_status vc_tensor_wrap(vc_context *ctx, vc_coords *coords, int64_t channels, vc_dtype dtype,
                         void *features, vc_memory where, vc_tensor **out)
{
    const char *fn = "vc_tensor_wrap";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    size_t bytes = 0;
    vc_status s = check_tensor_args(ctx, fn, coords, channels, dtype, where, &bytes);
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
    if (vc_cuda_fill(t->data, t->dtype, n, value, ctx->stream) != 0)
        return vc_ctx_fail(ctx, VC_ERR_CUDA, "vc_tensor_fill: fill kernel failed");
    return VC_OK;
#else
    return vc_ctx_fail(ctx, VC_ERR_INTERNAL, "vc_tensor_fill: device tensor in a CPU build");
#endif
}
