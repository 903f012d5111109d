/* src/conv_op.c - vc_conv_forward: checks the descriptor against the input, resolves the kernel
 * map (the caller's, or one built and cached), and runs the CPU twin or (CUDA context) the GPU
 * convolution with host weights and bias staged to the device for the call. */
#include <math.h>
#include <string.h>

#include "conv/conv.h"
#include "core/dtype.h"
#include "internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include "conv/conv_gpu.h"
#endif

/* The descriptor's fields against the input tensor; resolves out_dtype -1 to the input's. */
static vc_status check_conv_desc(vc_context *ctx, const char *fn, vc_conv_desc *d,
                                 const vc_tensor *in)
{
    vc_status s;
    if (d->in_channels != 0 && d->in_channels != in->channels)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                           "%s: desc->in_channels is %lld but the input has %lld channels", fn,
                           (long long)d->in_channels, (long long)in->channels);
    if (d->out_channels < 1 || d->out_channels > VC_MAX_CHANNELS)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out_channels %lld outside [1, %lld]",
                           fn, (long long)d->out_channels, (long long)VC_MAX_CHANNELS);
    if (!d->weights) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: weights is NULL", fn);
    if (!vc_is_float_dtype(d->weight_dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: weight_dtype %d is not a float type",
                           fn, (int)d->weight_dtype);
    if (d->weight_memory != VC_MEMORY_HOST && d->weight_memory != VC_MEMORY_DEVICE)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad weight_memory", fn);
    if (d->weight_memory == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: a CPU context needs weights and bias in host memory", fn);
    if ((int)d->out_dtype == -1) d->out_dtype = in->dtype;
    if (!vc_is_float_dtype(d->out_dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out_dtype %d is not a float type",
                           fn, (int)d->out_dtype);
    if (d->activation != VC_ACT_NONE && d->activation != VC_ACT_RELU &&
        d->activation != VC_ACT_LEAKY_RELU)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad activation %d", fn,
                           (int)d->activation);
    if (d->algo != VC_ALGO_AUTO && d->algo != VC_ALGO_GATHER_GEMM_SCATTER &&
        d->algo != VC_ALGO_IMPLICIT_GEMM && d->algo != VC_ALGO_GATHER_GEMM_SCATTER_GROUPED)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad algo %d", fn, (int)d->algo);
    if (d->residual && (s = vc_tensor_check(ctx, fn, "residual", d->residual)) != VC_OK)
        return s;
    return VC_OK;
}

/* Host weights and bias must be finite: a NaN there poisons every output it touches, silently.
 * Device weights are the caller's to check (reading them back would synchronise every call). */
static vc_status check_params_finite(vc_context *ctx, const char *fn, const vc_conv_desc *d,
                                     int64_t volume, int64_t c_in)
{
    if (d->weight_memory != VC_MEMORY_HOST) return VC_OK;
    const int64_t n = d->out_channels * volume * c_in; /* bounded: the channel limits */
    for (int64_t i = 0; i < n; i++) {
        const float v = vc_load_f32(d->weights, d->weight_dtype, i);
        if (isfinite(v)) continue;
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "%s: weights[%lld, %lld, %lld] (out channel, kernel offset, in "
                           "channel) is %s: weights must be finite", fn,
                           (long long)(i / (volume * c_in)), (long long)(i / c_in % volume),
                           (long long)(i % c_in), isnan(v) ? "NaN" : "infinite");
    }
    for (int64_t co = 0; d->bias && co < d->out_channels; co++)
        if (!isfinite(d->bias[co]))
            return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                               "%s: bias[%lld] is %s: the bias must be finite", fn,
                               (long long)co, isnan(d->bias[co]) ? "NaN" : "infinite");
    return VC_OK;
}

/* The engine's arguments: input, output r, weights as the caller gave them. */
static void conv_args(vc_conv_args *a, const vc_context *ctx, const vc_conv_desc *d,
                      const vc_tensor *in, const vc_kmap *map, vc_tensor *r)
{
    memset(a, 0, sizeof *a);
    a->map = &map->data;
    a->in = in->data;
    a->in_dtype = in->dtype;
    a->c_in = in->channels;
    a->out = r->data;
    a->out_dtype = d->out_dtype;
    a->c_out = d->out_channels;
    a->weights = d->weights;
    a->w_dtype = d->weight_dtype;
    a->bias = d->bias;
    a->residual = d->residual ? d->residual->data : NULL;
    a->res_dtype = d->residual ? d->residual->dtype : VC_DTYPE_FP32;
    a->act = d->activation;
    a->slope = d->leaky_slope;
    a->num_threads = ctx->num_threads;
}

vc_status vc_conv_forward(vc_context *ctx, const vc_conv_desc *desc, const vc_tensor *in,
                          vc_tensor **out)
{
    const char *fn = "vc_conv_forward";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_conv_desc d = VC_CONV_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_conv_desc);
    vc_status s = vc_tensor_check(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if ((s = check_conv_desc(ctx, fn, &d, in)) != VC_OK) return s;

    const vc_kmap *map = NULL;
    vc_kmap *held = NULL;
    if ((s = vc_kmap_resolve(ctx, fn, in, d.kmap, &d.map, &map, &held)) != VC_OK) return s;
    if ((s = check_params_finite(ctx, fn, &d, map->data.volume, in->channels)) != VC_OK) {
        vc_kmap_destroy(held);
        return s;
    }
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
        conv_args(&a, ctx, &d, in, map, r);
        vc_err err = {{0}};
        if (ctx->backend == VC_BACKEND_CPU) {
            s = vc_ctx_err(ctx, vc_conv_cpu(&a, &ctx->opts, &err), &err);
        } else {
#ifdef VOXCONV_HAVE_CUDA
            /* Host weights and bias travel to the device for this call (stream ordered). */
            void *tmp_w = NULL, *tmp_b = NULL;
            int64_t wn;
            if (vc_mul_overflow_i64(d.out_channels * map->data.volume, in->channels, &wn))
                s = vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: weights too large", fn);
            else
                s = vc_mem_to_device(ctx, d.weights, d.weight_memory,
                                     (size_t)wn * vc_dtype_size(d.weight_dtype), &a.weights,
                                     &tmp_w);
            if (s == VC_OK)
                s = vc_mem_to_device(ctx, d.bias, d.weight_memory,
                                     (size_t)d.out_channels * sizeof(float),
                                     (const void **)&a.bias, &tmp_b);
            /* The map keeps a tile order the implicit GEMM builds for it (kmap/kmap.h) for the
             * later layers on it: a cache that does not change what the map is, so a const
             * map gets one too (its context's handles are used by one thread at a time, on the
             * context's stream). */
            a.map_cache = (vc_kmap_data *)&map->data;
            if (s == VC_OK)
                s = vc_ctx_err(ctx, vc_conv_gpu(&a, d.algo, d.allow_tf32, &ctx->opts, ctx->stream,
                                                &err),
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
