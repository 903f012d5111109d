/* src/ops.c - the operations of the API: voxelization, kernel maps (built once, cached on the
 * input coordinate set), convolution and pooling. Checks handles and arguments, then calls the
 * CPU twins in conv/ (the GPU paths arrive with issues 3 and 4). */
#include <stdlib.h>
#include <string.h>

#include "conv/conv.h"
#include "conv/dtype.h"
#include "internal.h"

/* Copies a caller's descriptor over the defaults; refuses a struct_size it does not know. */
#define VC_TAKE_DESC(ctx, fn, dst, src, init_type)                                             \
    do {                                                                                       \
        init_type vc_init_ = dst;                                                              \
        (void)vc_init_;                                                                        \
        if (!(src)) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: desc is NULL", fn);  \
        if ((src)->struct_size != sizeof(init_type))                                           \
            return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,                                   \
                               "%s: desc->struct_size is %u, expected %zu (initialise the "    \
                               "descriptor with its _INIT macro)",                             \
                               fn, (unsigned)(src)->struct_size, sizeof(init_type));           \
        dst = *(src);                                                                          \
    } while (0)

static vc_status need_cpu(vc_context *ctx, const char *fn)
{
    if (ctx->backend == VC_BACKEND_CPU) return VC_OK;
    return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED,
                       "%s: the CUDA backend cannot run this operation yet (GPU kernel maps and "
                       "convolutions are not implemented in this version); use a CPU context",
                       fn);
}

/* ---- voxelization ------------------------------------------------------------------------- */

vc_status vc_voxelize(vc_context *ctx, const vc_voxelize_desc *desc, const vc_points *points,
                      vc_tensor **out, vc_voxelize_stats *stats)
{
    const char *fn = "vc_voxelize";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_voxelize_desc);
    if (!points || !out)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: points or out is NULL", fn);
    vc_status s = need_cpu(ctx, fn);
    if (s != VC_OK) return s;

    vc_err err = {{0}};
    vc_voxels vox;
    memset(&vox, 0, sizeof vox);
    vc_voxelize_stats st;
    memset(&st, 0, sizeof st);
    s = vc_voxelize_cpu(&d, points, &vox, &st, &err);
    if (s != VC_OK) return vc_ctx_err(ctx, s, &err);

    vc_coords *c = NULL;
    vc_tensor *t = NULL;
    s = vc_coords_create(ctx, vox.coords, vox.n, VC_MEMORY_HOST, vox.shape, vox.batch_size, &c);
    if (s == VC_OK)
        s = vc_tensor_create(ctx, c, vox.channels, d.dtype, vox.features, VC_MEMORY_HOST, &t);
    vc_coords_destroy(c); /* the tensor holds the set */
    vc_voxels_free(&vox);
    if (s != VC_OK) return s;
    *out = t;
    if (stats) *stats = st;
    return VC_OK;
}

/* ---- kernel maps -------------------------------------------------------------------------- */

void vc_kmap_free_internal(vc_kmap *m)
{
    if (!m) return;
    if (m->inverse) vc_kmap_free_internal(m->inverse);
    vc_kmap_data_free(&m->data);
    if (m->owns_out) vc_coords_destroy(m->out);
    free(m);
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
        vc_status s = vc_kmap_inverse_cpu(&fwd->data, fwd->in->shape, fwd->in->batch_size,
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
    vc_status s = need_cpu(ctx, fn);
    if (s != VC_OK) return s;
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
    vc_kmap *m = calloc(1, sizeof *m);
    if (!m) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    vc_err err = {{0}};
    s = vc_kmap_build_cpu(in->data, in->count, in->shape, in->batch_size, &d, ctx->num_threads,
                          &m->data, &err);
    if (s != VC_OK) {
        free(m);
        return vc_ctx_err(ctx, s, &err);
    }
    m->ctx = ctx;
    m->in = in;
    m->root = in;
    m->desc = d;
    if (m->data.out_coords) {
        /* A new output set: copy it into the context's memory (the map's own host arrays are
         * internal; the set may use the caller's allocator). */
        s = vc_coords_create(ctx, m->data.out_coords, m->data.n_out, VC_MEMORY_HOST,
                             m->data.out_shape, m->data.out_batch_size, &m->out);
        free(m->data.out_coords);
        m->data.out_coords = NULL;
        if (s != VC_OK) {
            vc_kmap_data_free(&m->data);
            free(m);
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
    out->memory = VC_MEMORY_HOST;
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

/* The map of a conv or pool: the caller's, or one built (cached) from the descriptor. On success
 * *held is a user reference to release with vc_kmap_destroy (NULL when the caller's map). */
static vc_status resolve_map(vc_context *ctx, const char *fn, const vc_tensor *in,
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

static vc_status check_tensor(vc_context *ctx, const char *fn, const char *what,
                              const vc_tensor *t)
{
    if (!t) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    if (t->ctx != ctx)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: %s belongs to another context", fn,
                           what);
    return VC_OK;
}

/* ---- convolution -------------------------------------------------------------------------- */

vc_status vc_conv_forward(vc_context *ctx, const vc_conv_desc *desc, const vc_tensor *in,
                          vc_tensor **out)
{
    const char *fn = "vc_conv_forward";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_conv_desc d = VC_CONV_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_conv_desc);
    vc_status s = check_tensor(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if ((s = need_cpu(ctx, fn)) != VC_OK) return s;
    if (d.in_channels != 0 && d.in_channels != in->channels)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                           "%s: desc->in_channels is %lld but the input has %lld channels", fn,
                           (long long)d.in_channels, (long long)in->channels);
    if (d.out_channels < 1 || d.out_channels > VC_MAX_CHANNELS)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out_channels %lld outside [1, %lld]",
                           fn, (long long)d.out_channels, (long long)VC_MAX_CHANNELS);
    if (!d.weights) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: weights is NULL", fn);
    if (!vc_is_float_dtype(d.weight_dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: weight_dtype %d is not a float type",
                           fn, (int)d.weight_dtype);
    if (d.weight_memory != VC_MEMORY_HOST)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: a CPU context needs weights and bias in host memory", fn);
    if ((int)d.out_dtype == -1) d.out_dtype = in->dtype;
    if (!vc_is_float_dtype(d.out_dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out_dtype %d is not a float type",
                           fn, (int)d.out_dtype);
    if (d.activation != VC_ACT_NONE && d.activation != VC_ACT_RELU &&
        d.activation != VC_ACT_LEAKY_RELU)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad activation %d", fn,
                           (int)d.activation);
    if (d.algo != VC_ALGO_AUTO && d.algo != VC_ALGO_GATHER_GEMM_SCATTER &&
        d.algo != VC_ALGO_IMPLICIT_GEMM)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad algo %d", fn, (int)d.algo);
    if (d.residual && (s = check_tensor(ctx, fn, "residual", d.residual)) != VC_OK) return s;

    const vc_kmap *map = NULL;
    vc_kmap *held = NULL;
    if ((s = resolve_map(ctx, fn, in, d.kmap, &d.map, &map, &held)) != VC_OK) return s;
    if (d.residual && (d.residual->coords != map->out || d.residual->channels != d.out_channels)) {
        vc_kmap_destroy(held);
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                           "%s: the residual must live on the output coordinate set and have "
                           "out_channels (%lld) channels", fn, (long long)d.out_channels);
    }
    vc_tensor *r = NULL;
    s = vc_tensor_create(ctx, map->out, d.out_channels, d.out_dtype, NULL, VC_MEMORY_HOST, &r);
    if (s == VC_OK) {
        vc_conv_args a;
        memset(&a, 0, sizeof a);
        a.map = &map->data;
        a.in = in->data;
        a.in_dtype = in->dtype;
        a.c_in = in->channels;
        a.out = r->data;
        a.out_dtype = d.out_dtype;
        a.c_out = d.out_channels;
        a.weights = d.weights;
        a.w_dtype = d.weight_dtype;
        a.bias = d.bias;
        a.residual = d.residual ? d.residual->data : NULL;
        a.res_dtype = d.residual ? d.residual->dtype : VC_DTYPE_FP32;
        a.act = d.activation;
        a.slope = d.leaky_slope;
        a.num_threads = ctx->num_threads;
        vc_err err = {{0}};
        s = vc_ctx_err(ctx, vc_conv_cpu(&a, &err), &err);
    }
    vc_kmap_destroy(held);
    if (s != VC_OK) {
        vc_tensor_destroy(r);
        return s;
    }
    *out = r;
    return VC_OK;
}

/* ---- pooling ------------------------------------------------------------------------------ */

vc_status vc_pool_forward(vc_context *ctx, const vc_pool_desc *desc, const vc_tensor *in,
                          vc_tensor **out)
{
    const char *fn = "vc_pool_forward";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_pool_desc d = VC_POOL_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_pool_desc);
    vc_status s = check_tensor(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (d.mode != VC_POOL_MAX && d.mode != VC_POOL_AVG)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad mode %d", fn, (int)d.mode);
    if ((s = need_cpu(ctx, fn)) != VC_OK) return s;
    const vc_kmap *map = NULL;
    vc_kmap *held = NULL;
    if ((s = resolve_map(ctx, fn, in, d.kmap, &d.map, &map, &held)) != VC_OK) return s;
    vc_tensor *r = NULL;
    s = vc_tensor_create(ctx, map->out, in->channels, in->dtype, NULL, VC_MEMORY_HOST, &r);
    if (s == VC_OK) {
        vc_err err = {{0}};
        s = vc_ctx_err(ctx, vc_pool_cpu(&map->data, d.mode, in->data, in->dtype, in->channels,
                                        r->data, ctx->num_threads, &err), &err);
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
    vc_status s = check_tensor(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!dst) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (mode != VC_POOL_MAX && mode != VC_POOL_AVG)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad mode %d", fn, (int)mode);
    if (where != VC_MEMORY_HOST)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: a CPU context writes host memory",
                           fn);
    if ((s = need_cpu(ctx, fn)) != VC_OK) return s;
    vc_err err = {{0}};
    size_t bytes = (size_t)in->coords->batch_size * (size_t)in->channels * sizeof(float);
    float *tmp = malloc(bytes ? bytes : 1);
    if (!tmp) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    s = vc_global_pool_cpu(in->coords->data, in->coords->count, in->coords->batch_size, mode,
                           in->data, in->dtype, in->channels, tmp, &err);
    if (s == VC_OK) memcpy(dst, tmp, bytes); /* the caller's buffer changes only on success */
    free(tmp);
    return vc_ctx_err(ctx, s, &err);
}
