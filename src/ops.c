/* src/ops.c - the operations of the API: voxelization, kernel maps (built once, cached on the
 * input coordinate set), convolution and pooling. Checks handles and arguments, then calls the
 * CPU twins (voxelize/, kmap/, conv/, pool/) or, on a CUDA context, their GPU versions. */
#include <stdlib.h>
#include <string.h>

#include "conv/conv.h"
#include "core/dtype.h"
#include "internal.h"
#include "pool/pool.h"
#include "voxelize/voxelize.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "conv/conv_gpu.h"
#include "kmap/kmap_gpu.h"
#include "voxelize/voxelize_gpu.h"
#endif

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

/* Refuses an operation this build cannot run on the context's backend. */
static vc_status need_backend(vc_context *ctx, const char *fn, int gpu_available)
{
    if (ctx->backend == VC_BACKEND_CPU || gpu_available) return VC_OK;
    return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED,
                       "%s: this build of voxconv has no GPU version of this operation; use a "
                       "CPU context", fn);
}

#if defined(VOXCONV_HAVE_CUDA)
#define VC_HAS_GPU_VOXELIZE 1
#else
#define VC_HAS_GPU_VOXELIZE 0
#endif
#if defined(VOXCONV_HAVE_CUDA)
#define VC_HAS_GPU_CONV 1
#else
#define VC_HAS_GPU_CONV 0
#endif
#ifdef VOXCONV_HAVE_CUDA
#define VC_HAS_GPU_MAPS 1
#else
#define VC_HAS_GPU_MAPS 0
#endif

#if VC_HAS_GPU_VOXELIZE || VC_HAS_GPU_CONV
/* A device copy of a caller array that may live on the host (NULL stays NULL). *tmp receives
 * what to free (NULL when `p` was already on the device). */
static vc_status to_device(vc_context *ctx, const void *p, vc_memory where, size_t bytes,
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
#endif

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
    vc_status s = need_backend(ctx, fn, VC_HAS_GPU_VOXELIZE);
    if (s != VC_OK) return s;
    if (points->memory == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: device points on a CPU context", fn);

    vc_err err = {{0}};
    vc_voxels vox;
    memset(&vox, 0, sizeof vox);
    vc_voxelize_stats st;
    memset(&st, 0, sizeof st);
    vc_memory vox_where = VC_MEMORY_HOST;
    if (ctx->backend == VC_BACKEND_CPU) {
        s = vc_ctx_err(ctx, vc_voxelize_cpu(&d, points, &vox, &st, &err), &err);
    } else {
#if VC_HAS_GPU_VOXELIZE
        vc_points p = *points;
        void *tmp_pts = NULL, *tmp_batch = NULL;
        int64_t total;
        if (p.count < 0 || p.dim < 3 || vc_mul_overflow_i64(p.count, p.dim, &total))
            return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad point count or dim", fn);
        s = to_device(ctx, p.data, p.memory, (size_t)total * sizeof(float),
                      (const void **)&p.data, &tmp_pts);
        if (s == VC_OK)
            s = to_device(ctx, p.batch, p.memory, (size_t)p.count * sizeof(int32_t),
                          (const void **)&p.batch, &tmp_batch);
        p.memory = VC_MEMORY_DEVICE;
        if (s == VC_OK)
            s = vc_ctx_err(ctx, vc_voxelize_gpu(&d, &p, ctx->stream, &vox, &st, &err), &err);
        vc_mem_free(ctx, tmp_pts, VC_MEMORY_DEVICE);
        vc_mem_free(ctx, tmp_batch, VC_MEMORY_DEVICE);
        vox_where = VC_MEMORY_DEVICE;
#endif
    }
    if (s != VC_OK) return s;

    vc_coords *c = NULL;
    vc_tensor *t = NULL;
    s = vc_coords_trusted(ctx, vox.coords, vox_where, vox.n, vox.shape, vox.batch_size, &c);
    if (s == VC_OK)
        s = vc_tensor_create(ctx, c, vox.channels, d.dtype, vox.features, vox_where, &t);
    vc_coords_destroy(c); /* the tensor holds the set */
#if VC_HAS_GPU_VOXELIZE
    if (vox_where == VC_MEMORY_DEVICE)
        vc_voxels_free_gpu(&vox);
    else
#endif
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
#ifdef VOXCONV_HAVE_CUDA
    if (m->memory == VC_MEMORY_DEVICE)
        vc_kmap_data_free_gpu(&m->data);
    else
#endif
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
        vc_status s;
        m->memory = fwd->memory;
#ifdef VOXCONV_HAVE_CUDA
        if (fwd->memory == VC_MEMORY_DEVICE)
            s = vc_kmap_inverse_gpu(&fwd->data, fwd->in->shape, fwd->in->batch_size, ctx->stream,
                                    &m->data, &err);
        else
#endif
            s = vc_kmap_inverse_cpu(&fwd->data, fwd->in->shape, fwd->in->batch_size, &m->data,
                                    &err);
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
    vc_status s = need_backend(ctx, fn, VC_HAS_GPU_MAPS);
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
    m->memory = in->memory;
#ifdef VOXCONV_HAVE_CUDA
    if (in->memory == VC_MEMORY_DEVICE)
        s = vc_kmap_build_gpu(in->data, in->count, in->shape, in->batch_size, &d, ctx->stream,
                              &m->data, &err);
    else
#endif
        s = vc_kmap_build_cpu(in->data, in->count, in->shape, in->batch_size, &d,
                              ctx->num_threads, &m->data, &err);
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
            vc_kmap_free_internal(m);
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

/* ---- bounded kernel maps ------------------------------------------------------------------ */

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
                                             d.max_pairs, &m->b, &err);
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

vc_status vc_kmap_bounded_build(vc_kmap_bounded *m, const int32_t *coords, int64_t count)
{
    if (!m) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(m->ctx);
#ifdef VOXCONV_HAVE_CUDA
    if (count > 0 && !coords)
        return vc_ctx_fail(m->ctx, VC_ERR_INVALID_ARGUMENT, "vc_kmap_bounded_build: coords is "
                           "NULL");
    vc_err err = {{0}};
    vc_status s = vc_kmap_build_gpu_bounded(&m->b, coords, count, m->ctx->stream, &err);
    return s == VC_OK ? VC_OK : vc_ctx_err(m->ctx, s, &err);
#else
    (void)coords;
    (void)count;
    return VC_ERR_UNSUPPORTED;
#endif
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
    if ((s = need_backend(ctx, fn, VC_HAS_GPU_CONV)) != VC_OK) return s;
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
    if (d.weight_memory != VC_MEMORY_HOST && d.weight_memory != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad weight_memory", fn);
    if (d.weight_memory == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
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
        d.algo != VC_ALGO_IMPLICIT_GEMM && d.algo != VC_ALGO_GATHER_GEMM_SCATTER_GROUPED)
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
        if (ctx->backend == VC_BACKEND_CPU) {
            s = vc_ctx_err(ctx, vc_conv_cpu(&a, &err), &err);
        } else {
#if VC_HAS_GPU_CONV
            /* Host weights and bias travel to the device for this call (stream ordered). */
            void *tmp_w = NULL, *tmp_b = NULL;
            int64_t wn;
            if (vc_mul_overflow_i64(d.out_channels * map->data.volume, in->channels, &wn))
                s = vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: weights too large", fn);
            else
                s = to_device(ctx, d.weights, d.weight_memory,
                              (size_t)wn * vc_dtype_size(d.weight_dtype), &a.weights, &tmp_w);
            if (s == VC_OK)
                s = to_device(ctx, d.bias, d.weight_memory,
                              (size_t)d.out_channels * sizeof(float), (const void **)&a.bias,
                              &tmp_b);
            /* The map keeps a tile order the implicit GEMM builds for it (conv/kmap.h) for the
             * later layers on it: a cache that does not change what the map is, so a const
             * map gets one too (its context's handles are used by one thread at a time, on the
             * context's stream). */
            a.map_cache = (vc_kmap_data *)&map->data;
            if (s == VC_OK)
                s = vc_ctx_err(ctx, vc_conv_gpu(&a, d.algo, d.allow_tf32, &ctx->opts,
                                                ctx->stream, &err),
                               &err);
            vc_mem_free(ctx, tmp_w, VC_MEMORY_DEVICE);
            vc_mem_free(ctx, tmp_b, VC_MEMORY_DEVICE);
#endif
        }
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
    if ((s = need_backend(ctx, fn, VC_HAS_GPU_CONV)) != VC_OK) return s;
    const vc_kmap *map = NULL;
    vc_kmap *held = NULL;
    if ((s = resolve_map(ctx, fn, in, d.kmap, &d.map, &map, &held)) != VC_OK) return s;
    vc_tensor *r = NULL;
    s = vc_tensor_create(ctx, map->out, in->channels, in->dtype, NULL, VC_MEMORY_HOST, &r);
    if (s == VC_OK) {
        vc_err err = {{0}};
        if (ctx->backend == VC_BACKEND_CPU)
            s = vc_pool_cpu(&map->data, d.mode, in->data, in->dtype, in->channels, r->data,
                            ctx->num_threads, &err);
#if VC_HAS_GPU_CONV
        else
            s = vc_pool_gpu(&map->data, d.mode, in->data, in->dtype, in->channels, r->data,
                            ctx->stream, &err);
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
    vc_status s = check_tensor(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!dst) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (mode != VC_POOL_MAX && mode != VC_POOL_AVG)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad mode %d", fn, (int)mode);
    if (where != VC_MEMORY_HOST && where != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad memory kind", fn);
    if (where == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: device dst on a CPU context", fn);
    if ((s = need_backend(ctx, fn, VC_HAS_GPU_CONV)) != VC_OK) return s;
    vc_err err = {{0}};
    size_t bytes = (size_t)in->coords->batch_size * (size_t)in->channels * sizeof(float);
    /* The result lands in a scratch buffer first: the caller's changes only on success. */
    vc_memory native = vc_ctx_native(ctx);
    float *tmp = vc_mem_alloc(ctx, bytes, native);
    if (!tmp) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (ctx->backend == VC_BACKEND_CPU)
        s = vc_global_pool_cpu(in->coords->data, in->coords->count, in->coords->batch_size, mode,
                               in->data, in->dtype, in->channels, tmp, &err);
#if VC_HAS_GPU_CONV
    else
        s = vc_global_pool_gpu(in->coords->data, in->coords->count, in->coords->batch_size, mode,
                               in->data, in->dtype, in->channels, tmp, ctx->stream, &err);
#endif
    s = vc_ctx_err(ctx, s, &err);
    if (s == VC_OK) s = vc_mem_copy(ctx, dst, where, tmp, native, bytes);
    vc_mem_free(ctx, tmp, native);
    return s;
}
