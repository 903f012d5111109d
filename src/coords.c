/* src/coords.c - coordinate sets: creation (copying or wrapping caller buffers, validated; or
 * trusted rows voxconv produced), reference counting, the kernel-map cache's lifetime (the set
 * owns its cache: kmap_cache.c), info and copy-out. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"


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

vc_status vc_coords_view(vc_context *ctx, int32_t *data, int64_t count, const int32_t shape[3],
                         int32_t batch_size, vc_coords **out)
{
    vc_coords *c = new_set(ctx, data, 0, count, shape, batch_size);
    if (!c) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "out of memory for a coordinate set");
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
    vc_kmap_cache_release(c);
    if (c->owned) vc_mem_free(ctx, c->data, c->memory);
    free(c);
    ctx->live_handles--;
    return VC_OK;
}

vc_status vc_coords_clear_cache(vc_coords *c)
{
    if (!c) return VC_ERR_INVALID_ARGUMENT;
    vc_kmap_cache_trim(c);
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

