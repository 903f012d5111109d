/* src/bench_op.c - what a benchmark needs from the library and cannot do through the rest of
 * the API: timers on the context's stream (vc_timer_*), the planner's choice for a layer
 * (vc_conv_plan) and the floor model (vc_layer_floor_get, core/floor.h). */
#define _POSIX_C_SOURCE 200809L /* core/clock.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/floor.h"
#include "core/clock.h"
#include "internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "conv/conv_gpu.h"
#endif

/* The cache flush: more than any L2 or last-level cache. */
#define FLUSH_BYTES ((size_t)256 << 20)

struct vc_timer {
    vc_context *ctx;
    void *ev[2];        /* CUDA: cudaEvent_t start, stop                                       */
    double t0;          /* CPU: the start, in ms of CLOCK_MONOTONIC                            */
    void *flush;        /* the flush buffer, in the context's memory, on first use            */
    unsigned char fill; /* the flush's byte, new each time                                     */
};

#ifdef VOXCONV_HAVE_CUDA
static vc_status cuda_fail(vc_context *ctx, const char *fn, cudaError_t e)
{
    return vc_ctx_fail(ctx, VC_ERR_CUDA, "%s: %s", fn, cudaGetErrorString(e));
}
#endif

vc_status vc_timer_create(vc_context *ctx, vc_timer **out)
{
    const char *fn = "vc_timer_create";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    vc_timer *t = calloc(1, sizeof *t);
    if (!t) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    t->ctx = ctx;
#ifdef VOXCONV_HAVE_CUDA
    if (ctx->backend == VC_BACKEND_CUDA) {
        for (int i = 0; i < 2; i++) {
            cudaError_t e = cudaEventCreate((cudaEvent_t *)&t->ev[i]);
            if (e != cudaSuccess) {
                if (i) cudaEventDestroy((cudaEvent_t)t->ev[0]);
                free(t);
                return cuda_fail(ctx, fn, e);
            }
        }
    }
#endif
    ctx->live_handles++;
    *out = t;
    return VC_OK;
}

vc_status vc_timer_start(vc_timer *t)
{
    if (!t) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(t->ctx);
#ifdef VOXCONV_HAVE_CUDA
    if (t->ev[0]) {
        cudaError_t e = cudaEventRecord((cudaEvent_t)t->ev[0], (cudaStream_t)t->ctx->stream);
        return e == cudaSuccess ? VC_OK : cuda_fail(t->ctx, "vc_timer_start", e);
    }
#endif
    t->t0 = vc_clock_ms();
    return VC_OK;
}

vc_status vc_timer_stop(vc_timer *t, double *ms)
{
    if (!t) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(t->ctx);
    if (!ms) return vc_ctx_fail(t->ctx, VC_ERR_INVALID_ARGUMENT, "vc_timer_stop: ms is NULL");
#ifdef VOXCONV_HAVE_CUDA
    if (t->ev[0]) {
        float f = 0;
        cudaError_t e = cudaEventRecord((cudaEvent_t)t->ev[1], (cudaStream_t)t->ctx->stream);
        if (e == cudaSuccess) e = cudaEventSynchronize((cudaEvent_t)t->ev[1]);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&f, (cudaEvent_t)t->ev[0], (cudaEvent_t)t->ev[1]);
        if (e != cudaSuccess) return cuda_fail(t->ctx, "vc_timer_stop", e);
        *ms = f;
        return VC_OK;
    }
#endif
    *ms = vc_clock_ms() - t->t0;
    return VC_OK;
}

vc_status vc_timer_flush_cache(vc_timer *t)
{
    if (!t) return VC_ERR_INVALID_ARGUMENT;
    vc_context *ctx = t->ctx;
    vc_ctx_clear(ctx);
    const vc_memory where = vc_ctx_native(ctx);
    if (!t->flush && !(t->flush = vc_mem_alloc(ctx, FLUSH_BYTES, where)))
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_timer_flush_cache: cannot allocate "
                           "the %zu MB buffer", FLUSH_BYTES >> 20);
    t->fill++;
#ifdef VOXCONV_HAVE_CUDA
    if (where == VC_MEMORY_DEVICE) {
        cudaError_t e = cudaMemsetAsync(t->flush, t->fill, FLUSH_BYTES, (cudaStream_t)ctx->stream);
        return e == cudaSuccess ? VC_OK : cuda_fail(ctx, "vc_timer_flush_cache", e);
    }
#endif
    memset(t->flush, t->fill, FLUSH_BYTES);
    return VC_OK;
}

vc_status vc_timer_destroy(vc_timer *t)
{
    if (!t) return VC_OK;
#ifdef VOXCONV_HAVE_CUDA
    for (int i = 0; i < 2; i++)
        if (t->ev[i]) cudaEventDestroy((cudaEvent_t)t->ev[i]);
#endif
    if (t->flush) vc_mem_free(t->ctx, t->flush, vc_ctx_native(t->ctx));
    t->ctx->live_handles--;
    free(t);
    return VC_OK;
}

vc_status vc_context_device_name(const vc_context *ctx, char *buf, size_t len)
{
    if (!ctx || !buf || len == 0) return VC_ERR_INVALID_ARGUMENT;
    snprintf(buf, len, "cpu");
#ifdef VOXCONV_HAVE_CUDA
    struct cudaDeviceProp p;
    if (ctx->backend == VC_BACKEND_CUDA && cudaGetDeviceProperties(&p, ctx->device) == cudaSuccess)
        snprintf(buf, len, "%s", p.name);
#endif
    return VC_OK;
}

/* A conv desc and map of this context, for vc_conv_plan and vc_layer_floor_get. */
static vc_status check_map(vc_context *ctx, const char *fn, const vc_kmap *map)
{
    if (!map) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: map is NULL", fn);
    if (map->ctx != ctx)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: map belongs to another context",
                           fn);
    return VC_OK;
}

static int bad_dtype(vc_dtype d)
{
    return d != VC_DTYPE_FP32 && d != VC_DTYPE_FP16 && d != VC_DTYPE_BF16;
}

/* What vc_conv_plan and vc_conv_bucket take: the descriptor into *d, the map and dtype
 * checked (ctx cleared by the caller). */
static vc_status take_layer(vc_context *ctx, const char *fn, const vc_conv_desc *desc,
                            const vc_kmap *map, vc_dtype in_dtype, vc_conv_desc *d)
{
    vc_conv_desc t = VC_CONV_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, t, desc, vc_conv_desc);
    *d = t;
    vc_status s = check_map(ctx, fn, map);
    if (s == VC_OK && bad_dtype(in_dtype))
        s = vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad dtype %d", fn, (int)in_dtype);
    return s;
}

vc_status vc_conv_plan(vc_context *ctx, const vc_conv_desc *desc, const vc_kmap *map,
                       vc_dtype in_dtype, vc_conv_plan_info *out)
{
    const char *fn = "vc_conv_plan";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_conv_desc d;
    vc_status s = take_layer(ctx, fn, desc, map, in_dtype, &d);
    if (s != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (d.in_channels < 1 || d.in_channels > VC_MAX_CHANNELS || d.out_channels < 1 ||
        d.out_channels > VC_MAX_CHANNELS)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: channels %lld -> %lld outside "
                           "1..%lld", fn, (long long)d.in_channels, (long long)d.out_channels,
                           (long long)VC_MAX_CHANNELS);
    memset(out, 0, sizeof *out);
    if (ctx->backend == VC_BACKEND_CPU) {
        out->algo = VC_ALGO_AUTO;
        snprintf(out->config, sizeof out->config, "cpu");
        return VC_OK;
    }
#ifdef VOXCONV_HAVE_CUDA
    const vc_dtype dt = in_dtype;
    vc_engine_options o = ctx->opts;
    if (d.untuned) o.tune = NULL;
    out->algo = vc_conv_gpu_plan(&map->data, d.in_channels, d.out_channels, dt, &o);
    if (out->algo == VC_ALGO_IMPLICIT_GEMM) {
        const char *name = "";
        vc_conv_gpu_describe(&map->data, d.in_channels, d.out_channels, dt, d.allow_tf32, &o,
                             &name, &out->tap_split, &out->tuned);
        snprintf(out->config, sizeof out->config, "%s", name);
    }
#endif
    return VC_OK;
}

vc_status vc_conv_bucket(vc_context *ctx, const vc_conv_desc *desc, const vc_kmap *map,
                         vc_dtype in_dtype, char *buf, size_t len)
{
    const char *fn = "vc_conv_bucket";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_conv_desc d;
    vc_status s = take_layer(ctx, fn, desc, map, in_dtype, &d);
    if (s != VC_OK) return s;
    if (!buf || len == 0)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: buf is NULL or empty", fn);
    vc_tune_key k;
    buf[0] = '\0';
    if (vc_tune_key_of(&map->data, d.in_channels, d.out_channels, in_dtype, d.allow_tf32,
                       &k) == 0)
        vc_tune_key_text(&k, buf, len);
    return VC_OK;
}

vc_status vc_layer_floor_get(vc_context *ctx, const vc_kmap *map, int64_t c_in, int64_t c_out,
                             vc_dtype dtype, int32_t allow_tf32, int32_t pool,
                             vc_layer_floor *out)
{
    const char *fn = "vc_layer_floor_get";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_status s = check_map(ctx, fn, map);
    if (s != VC_OK) return s;
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (bad_dtype(dtype))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad dtype %d", fn, (int)dtype);
    if (c_in < 1 || c_out < 1)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: channels %lld -> %lld", fn,
                           (long long)c_in, (long long)c_out);
    double pf = 0, pb = 0;
#ifdef VOXCONV_HAVE_CUDA
    if (ctx->backend == VC_BACKEND_CUDA) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, ctx->device) == cudaSuccess)
            vc_floor_rates(p.name, dtype, allow_tf32, &pf, &pb);
    }
#endif
    const vc_kmap_data *m = &map->data;
    *out = vc_floor_layer(m->n_in, m->n_out, m->n_pairs, m->volume, c_in, c_out,
                          (double)vc_dtype_size(dtype), pool != 0, pf, pb);
    return VC_OK;
}

vc_status vc_layer_floor_rates(vc_layer_floor *f, double peak_flops, double peak_bytes)
{
    if (!f || !(peak_flops >= 0) || !(peak_bytes >= 0)) return VC_ERR_INVALID_ARGUMENT;
    f->peak_flops = peak_flops;
    f->peak_bytes = peak_bytes;
    f->ms = vc_floor_ms(f);
    return VC_OK;
}
