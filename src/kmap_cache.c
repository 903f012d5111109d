/* src/kmap_cache.c - kernel-map handles and the cache that owns them: vc_kmap_build (looked up
 * in, or built into, the cache of the input coordinate set; INVERSE maps cached on the forward
 * map), user references (vc_kmap_destroy), the read-only accessors, and the cache's end
 * (vc_kmap_cache_release/trim, called by the coordinate sets of coords.c). Ownership is set out
 * above struct vc_kmap in internal.h. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include "kmap/kmap_gpu.h"
#endif

/* Frees a map owned by a cache: its data, its cached inverse, its owned output set. */
static void kmap_free(vc_kmap *m)
{
    if (!m) return;
    if (m->inverse) kmap_free(m->inverse);
#ifdef VOXCONV_HAVE_CUDA
    if (m->memory == VC_MEMORY_DEVICE)
        vc_kmap_data_free_gpu(&m->data);
    else
#endif
        vc_kmap_data_free(&m->data);
    if (m->owns_out) vc_coords_destroy(m->out);
    free(m);
}

void vc_kmap_cache_release(vc_coords *c)
{
    for (int32_t i = 0; i < c->n_maps; i++) kmap_free(c->maps[i]);
    free(c->maps);
}

void vc_kmap_cache_trim(vc_coords *c)
{
    int32_t kept = 0;
    for (int32_t i = 0; i < c->n_maps; i++) {
        if (c->maps[i]->user_refs > 0 || (c->maps[i]->inverse &&
                                          c->maps[i]->inverse->user_refs > 0))
            c->maps[kept++] = c->maps[i];
        else
            kmap_free(c->maps[i]);
    }
    c->n_maps = kept;
}

static int same_params(const vc_map_desc *a, const vc_map_desc *b)
{
    return a->type == b->type && !memcmp(a->kernel, b->kernel, sizeof a->kernel) &&
           !memcmp(a->stride, b->stride, sizeof a->stride) &&
           !memcmp(a->padding, b->padding, sizeof a->padding) &&
           !memcmp(a->dilation, b->dilation, sizeof a->dilation);
}

/* Hands out a user reference: the map, and the set that owns it. */
static vc_kmap *user_ref(vc_kmap *m)
{
    m->user_refs++;
    m->root->refs++;
    return m;
}

static vc_status build_inverse(vc_context *ctx, vc_coords *in, const vc_map_desc *d,
                               vc_kmap **out)
{
    const char *fn = "vc_kmap_build";
    vc_kmap *fwd = (vc_kmap *)d->inverse_of;
    if (!fwd)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: an INVERSE map needs desc->inverse_of (the forward map)", fn);
    if (fwd->ctx != ctx)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: inverse_of belongs to another context", fn);
    if (fwd->desc.type != VC_MAP_STRIDED && fwd->desc.type != VC_MAP_DOWNSAMPLE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: only STRIDED and DOWNSAMPLE maps can be inverted", fn);
    if (fwd->out != in)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                           "%s: the input of an INVERSE map must be the output coordinate set of "
                           "the forward map", fn);
    if (!fwd->inverse) {
        vc_kmap *m = calloc(1, sizeof *m);
        if (!m) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        vc_err err = {{0}};
        vc_status s;
        m->memory = fwd->memory;
#ifdef VOXCONV_HAVE_CUDA
        if (fwd->memory == VC_MEMORY_DEVICE)
            s = vc_kmap_inverse_gpu(&fwd->data, fwd->in->shape, fwd->in->batch_size, &ctx->opts,
                                    ctx->stream, &m->data, &err);
        else
#endif
            s = vc_kmap_inverse_cpu(&fwd->data, fwd->in->shape, fwd->in->batch_size, &ctx->opts,
                                    &m->data, &err);
        if (s != VC_OK) {
            free(m);
            return vc_ctx_err(ctx, s, &err);
        }
        m->ctx = ctx;
        m->in = in;
        m->out = fwd->in;
        m->root = fwd->root;
        m->desc = fwd->desc;
        m->desc.type = VC_MAP_INVERSE;
        m->fwd = fwd;
        fwd->inverse = m;
    }
    *out = user_ref(fwd->inverse);
    return VC_OK;
}

vc_status vc_kmap_build(vc_context *ctx, vc_coords *in, const vc_map_desc *desc, vc_kmap **out)
{
    const char *fn = "vc_kmap_build";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_map_desc d = VC_MAP_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_map_desc);
    if (!in || !out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: in or out is NULL", fn);
    if (in->ctx != ctx)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: the coordinate set belongs to another context", fn);
    if (d.type == VC_MAP_INVERSE) return build_inverse(ctx, in, &d, out);
    d.inverse_of = NULL;

    for (int32_t i = 0; i < in->n_maps; i++)
        if (same_params(&in->maps[i]->desc, &d)) {
            *out = user_ref(in->maps[i]);
            return VC_OK;
        }

    if (in->n_maps == in->cap_maps) {
        int32_t cap = in->cap_maps ? 2 * in->cap_maps : 4;
        vc_kmap **grown = realloc(in->maps, (size_t)cap * sizeof *grown);
        if (!grown) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        in->maps = grown;
        in->cap_maps = cap;
    }
    vc_status s;
    vc_kmap *m = calloc(1, sizeof *m);
    if (!m) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    vc_err err = {{0}};
    m->memory = in->memory;
#ifdef VOXCONV_HAVE_CUDA
    if (in->memory == VC_MEMORY_DEVICE)
        s = vc_kmap_build_gpu(in->data, in->count, in->shape, in->batch_size, &d, &ctx->opts,
                              ctx->stream, &m->data, &err);
    else
#endif
        s = vc_kmap_build_cpu(in->data, in->count, in->shape, in->batch_size, &d,
                              &ctx->opts, ctx->num_threads, &m->data, &err);
    if (s != VC_OK) {
        free(m);
        return vc_ctx_err(ctx, s, &err);
    }
    m->ctx = ctx;
    m->in = in;
    m->root = in;
    m->desc = d;
    if (m->data.out_coords) {
        /* A new output set: a copy in the context's memory (the map's own arrays are internal;
         * the set may use the caller's allocator). The map keeps its copy until it dies. */
        s = vc_coords_trusted(ctx, m->data.out_coords, m->memory, m->data.n_out,
                              m->data.out_shape, m->data.out_batch_size, &m->out);
        if (s != VC_OK) {
            kmap_free(m);
            return s;
        }
        m->owns_out = 1;
    } else {
        m->out = in;
    }
    in->maps[in->n_maps++] = m;
    *out = user_ref(m);
    return VC_OK;
}

vc_status vc_kmap_destroy(vc_kmap *m)
{
    if (!m) return VC_OK;
    if (m->user_refs <= 0) return VC_ERR_INVALID_ARGUMENT;
    m->user_refs--;
    return vc_coords_destroy(m->root); /* may free the map with its owner */
}

vc_status vc_kmap_resolve(vc_context *ctx, const char *fn, const vc_tensor *in,
                          const vc_kmap *given, const vc_map_desc *d, const vc_kmap **map,
                          vc_kmap **held)
{
    *held = NULL;
    if (given) {
        if (given->ctx != ctx)
            return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: kmap belongs to another context",
                               fn);
        if (given->in != in->coords)
            return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                               "%s: the kernel map's input is not the input tensor's coordinate "
                               "set", fn);
        *map = given;
        return VC_OK;
    }
    vc_status s = vc_kmap_build(ctx, in->coords, d, held);
    if (s != VC_OK) return s;
    *map = *held;
    return VC_OK;
}

/* ---- read-only accessors ------------------------------------------------------------------ */

vc_status vc_kmap_get_info(const vc_kmap *m, vc_kmap_info *out)
{
    if (!m || !out) return VC_ERR_INVALID_ARGUMENT;
    out->type = m->desc.type;
    memcpy(out->kernel, m->desc.kernel, sizeof out->kernel);
    memcpy(out->stride, m->desc.stride, sizeof out->stride);
    memcpy(out->padding, m->desc.padding, sizeof out->padding);
    memcpy(out->dilation, m->desc.dilation, sizeof out->dilation);
    out->volume = m->data.volume;
    out->in_count = m->data.n_in;
    out->out_count = m->data.n_out;
    out->pair_count = m->data.n_pairs;
    out->mask_words = m->data.mask_words;
    out->memory = m->memory;
    out->in_coords = m->in;
    out->out_coords = m->out;
    return VC_OK;
}

vc_status vc_kmap_out_in(const vc_kmap *m, const int32_t **out_in)
{
    if (!m || !out_in) return VC_ERR_INVALID_ARGUMENT;
    *out_in = m->data.out_in;
    return VC_OK;
}

vc_status vc_kmap_pairs(const vc_kmap *m, const int32_t **in_rows, const int32_t **out_rows,
                        const int64_t **offsets)
{
    if (!m || !in_rows || !out_rows || !offsets) return VC_ERR_INVALID_ARGUMENT;
    *in_rows = m->data.in_rows;
    *out_rows = m->data.out_rows;
    *offsets = m->data.offsets;
    return VC_OK;
}

vc_status vc_kmap_masks(const vc_kmap *m, const uint32_t **masks, const int32_t **perm)
{
    if (!m || !masks || !perm) return VC_ERR_INVALID_ARGUMENT;
    *masks = m->data.masks;
    *perm = m->data.perm;
    return VC_OK;
}
