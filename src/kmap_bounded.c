/* src/kmap_bounded.c - bounded kernel maps (vc_kmap_bounded_*): device maps whose arrays are
 * sized once from caller bounds and rebuilt in place without allocating or synchronising
 * (include/voxconv.h). Not cached: the caller owns each one. A CUDA context only. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include "kmap/kmap_gpu.h"
#endif

struct vc_kmap_bounded {
    vc_context *ctx;
#ifdef VOXCONV_HAVE_CUDA
    vc_kmap_gpu_bounded b;
#endif
};

vc_status vc_kmap_bounded_create(vc_context *ctx, const vc_kmap_bounded_desc *desc,
                                 vc_kmap_bounded **out)
{
    const char *fn = "vc_kmap_bounded_create";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_kmap_bounded_desc d = VC_KMAP_BOUNDED_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_kmap_bounded_desc);
    if (d.map.struct_size != sizeof(vc_map_desc))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: desc->map.struct_size is %u, "
                           "expected %zu", fn, (unsigned)d.map.struct_size, sizeof(vc_map_desc));
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "%s: bounded kernel maps are device maps; "
                           "use a CUDA context (vc_kmap_build serves the CPU)", fn);
#ifdef VOXCONV_HAVE_CUDA
    if (d.map.type == VC_MAP_INVERSE)
        return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "%s: INVERSE maps have no bounded variant; "
                           "use vc_kmap_build", fn);
    d.map.inverse_of = NULL;
    vc_kmap_bounded *m = calloc(1, sizeof *m);
    if (!m) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    vc_err err = {{0}};
    vc_status s = vc_kmap_gpu_bounded_create(&d.map, d.shape, d.batch_size, d.max_in, d.max_out,
                                             d.max_pairs, &ctx->opts, &m->b, &err);
    if (s != VC_OK) {
        free(m);
        return vc_ctx_err(ctx, s, &err);
    }
    m->ctx = ctx;
    ctx->live_handles++;
    *out = m;
    return VC_OK;
#else
    return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "%s: this build has no CUDA backend", fn);
#endif
}

/* Both builds: over `count` rows, or (d_count set) over the device count d_count. */
static vc_status bounded_build(vc_kmap_bounded *m, const int32_t *coords, int64_t count,
                               const int64_t *d_count, const char *fn)
{
    if (!m) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(m->ctx);
#ifdef VOXCONV_HAVE_CUDA
    if (d_count ? m->b.max_in > 0 && !coords : count > 0 && !coords)
        return vc_ctx_fail(m->ctx, VC_ERR_INVALID_ARGUMENT, "%s: coords is NULL", fn);
    vc_err err = {{0}};
    vc_status s = d_count ? vc_kmap_build_gpu_bounded_dev(&m->b, coords, d_count, m->ctx->stream,
                                                          &err)
                          : vc_kmap_build_gpu_bounded(&m->b, coords, count, m->ctx->stream,
                                                      &err);
    return s == VC_OK ? VC_OK : vc_ctx_err(m->ctx, s, &err);
#else
    (void)coords;
    (void)count;
    (void)d_count;
    (void)fn;
    return VC_ERR_UNSUPPORTED;
#endif
}

vc_status vc_kmap_bounded_build(vc_kmap_bounded *m, const int32_t *coords, int64_t count)
{
    return bounded_build(m, coords, count, NULL, "vc_kmap_bounded_build");
}

vc_status vc_kmap_bounded_build_dev(vc_kmap_bounded *m, const int32_t *coords,
                                    const int64_t *count)
{
    if (m && !count)
        return vc_ctx_fail(m->ctx, VC_ERR_INVALID_ARGUMENT, "vc_kmap_bounded_build_dev: count "
                           "is NULL");
    return bounded_build(m, coords, 0, count, "vc_kmap_bounded_build_dev");
}

vc_status vc_kmap_bounded_check(vc_kmap_bounded *m, int64_t *out_count, int64_t *pair_count)
{
    if (!m) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(m->ctx);
#ifdef VOXCONV_HAVE_CUDA
    vc_err err = {{0}};
    vc_status s = vc_kmap_gpu_bounded_check(&m->b, m->ctx->stream, &err);
    if (s != VC_OK) return vc_ctx_err(m->ctx, s, &err);
    if (out_count) *out_count = m->b.map.n_out;
    if (pair_count) *pair_count = m->b.map.n_pairs;
    return VC_OK;
#else
    (void)out_count;
    (void)pair_count;
    return VC_ERR_UNSUPPORTED;
#endif
}

vc_status vc_kmap_bounded_arrays_get(const vc_kmap_bounded *m, vc_kmap_bounded_arrays *out)
{
    if (!m || !out) return VC_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
#ifdef VOXCONV_HAVE_CUDA
    const vc_kmap_data *d = &m->b.map;
    out->volume = d->volume;
    out->mask_words = d->mask_words;
    memcpy(out->out_shape, d->out_shape, sizeof out->out_shape);
    out->out_batch_size = d->out_batch_size;
    out->out_coords = d->out_coords;
    out->out_in = d->out_in;
    out->offsets = d->offsets;
    out->in_rows = d->in_rows;
    out->out_rows = d->out_rows;
    out->masks = d->masks;
    out->perm = d->perm;
    out->status = m->b.d_status;
    out->out_count = vc_kmap_gpu_bounded_out_count(&m->b);
    return VC_OK;
#else
    return VC_ERR_UNSUPPORTED;
#endif
}

vc_status vc_kmap_bounded_destroy(vc_kmap_bounded *m)
{
    if (!m) return VC_OK;
#ifdef VOXCONV_HAVE_CUDA
    vc_kmap_gpu_bounded_destroy(&m->b);
#endif
    m->ctx->live_handles--;
    free(m);
    return VC_OK;
}
