/* src/conv_op.c - vc_conv_forward: checks the descriptor against the input, resolves the kernel
 * map (the caller's, or one built and cached), and runs the CPU twin or (CUDA context) the GPU
 * convolution with host weights and bias staged to the device for the call; vc_conv_tune, the
 * same prologue and the tuner's measuring loop (conv/tune_gpu.cu) instead of one run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv.h"
#include "core/dtype.h"
#include "internal.h"

#ifdef VOXCONV_HAVE_CUDA
#include "conv/conv_gpu.h"
#include "core/elementwise.h"
#include "gemm/gemm.h"
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

/* One call of vc_conv_forward or vc_conv_tune: the descriptor as taken, the map, the result
 * tensor and the engine's arguments, and the device copies of host weights and bias. */
typedef struct conv_call {
    vc_conv_desc d;
    const vc_kmap *map;
    vc_kmap *held;
    vc_tensor *r;
    vc_conv_args a;
    void *tmp_w, *tmp_b;
} conv_call;

/* Releases what conv_begin and conv_stage made; the result tensor too unless keep_result. */
static void conv_end(vc_context *ctx, conv_call *c, int keep_result)
{
#ifdef VOXCONV_HAVE_CUDA
    vc_mem_free(ctx, c->tmp_w, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, c->tmp_b, VC_MEMORY_DEVICE);
#endif
    vc_kmap_destroy(c->held);
    if (!keep_result) vc_tensor_destroy(c->r);
}

/* The prologue both share: the descriptor taken and checked against the input, the map
 * resolved (built and cached if need be), the host parameters checked, the result tensor made
 * and the engine's arguments filled. On failure nothing is left held. */
static vc_status conv_begin(vc_context *ctx, const char *fn, const vc_conv_desc *desc,
                            const vc_tensor *in, conv_call *c)
{
    memset(c, 0, sizeof *c);
    vc_conv_desc init = VC_CONV_DESC_INIT;
    c->d = init;
    VC_TAKE_DESC(ctx, fn, c->d, desc, vc_conv_desc);
    vc_status s = vc_tensor_check(ctx, fn, "in", in);
    if (s != VC_OK) return s;
    if ((s = check_conv_desc(ctx, fn, &c->d, in)) != VC_OK) return s;
    if ((s = vc_kmap_resolve(ctx, fn, in, c->d.kmap, &c->d.map, &c->map, &c->held)) != VC_OK)
        return s;
    s = check_params_finite(ctx, fn, &c->d, c->map->data.volume, in->channels);
    if (s == VC_OK && c->d.residual &&
        (c->d.residual->coords != c->map->out || c->d.residual->channels != c->d.out_channels))
        s = vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH,
                        "%s: the residual must live on the output coordinate set and have "
                        "out_channels (%lld) channels", fn, (long long)c->d.out_channels);
    if (s == VC_OK)
        s = vc_tensor_create(ctx, c->map->out, c->d.out_channels, c->d.out_dtype, NULL,
                             VC_MEMORY_HOST, &c->r);
    if (s != VC_OK) {
        conv_end(ctx, c, 0);
        return s;
    }
    conv_args(&c->a, ctx, &c->d, in, c->map, c->r);
    return VC_OK;
}

#ifdef VOXCONV_HAVE_CUDA
/* CUDA: host weights and bias travel to the device for this call (stream ordered), into the
 * engine's arguments. */
static vc_status conv_stage(vc_context *ctx, const char *fn, const vc_tensor *in, conv_call *c)
{
    int64_t wn;
    vc_status s;
    if (vc_mul_overflow_i64(c->d.out_channels * c->map->data.volume, in->channels, &wn))
        return vc_ctx_fail(ctx, VC_ERR_LIMIT, "%s: weights too large", fn);
    s = vc_mem_to_device(ctx, c->d.weights, c->d.weight_memory,
                         (size_t)wn * vc_dtype_size(c->d.weight_dtype), &c->a.weights, &c->tmp_w);
    if (s == VC_OK)
        s = vc_mem_to_device(ctx, c->d.bias, c->d.weight_memory,
                             (size_t)c->d.out_channels * sizeof(float), (const void **)&c->a.bias,
                             &c->tmp_b);
    /* The map keeps a tile order the implicit GEMM builds for it (kmap/kmap.h) for the later
     * layers on it: a cache that does not change what the map is, so a const map gets one too
     * (its context's handles are used by one thread at a time, on the context's stream). */
    c->a.map_cache = (vc_kmap_data *)&c->map->data;
    return s;
}
#endif

vc_status vc_conv_forward(vc_context *ctx, const vc_conv_desc *desc, const vc_tensor *in,
                          vc_tensor **out)
{
    const char *fn = "vc_conv_forward";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    conv_call c;
    vc_status s = conv_begin(ctx, fn, desc, in, &c);
    if (s != VC_OK) return s;
    vc_err err = {{0}};
    if (ctx->backend == VC_BACKEND_CPU) {
        s = vc_ctx_err(ctx, vc_conv_cpu(&c.a, &ctx->opts, &err), &err);
    } else {
#ifdef VOXCONV_HAVE_CUDA
        s = conv_stage(ctx, fn, in, &c);
        vc_engine_options o = ctx->opts;
        if (c.d.untuned) o.tune = NULL;
        if (s == VC_OK)
            s = vc_ctx_err(ctx, vc_conv_gpu(&c.a, c.d.algo, c.d.allow_tf32, &o, ctx->stream,
                                            &err),
                           &err);
#endif
    }
    conv_end(ctx, &c, s == VC_OK);
    if (s == VC_OK) *out = c.r;
    return s;
}

#ifdef VOXCONV_HAVE_CUDA
/* "CONFIG/GROUPS" of a tuned or planned choice, with " no-order" and " two-pass" where its
 * schedule switches are set; "" where no GEMM ran. */
static void choice_name(char *buf, size_t n, int32_t config, int32_t groups, int no_order,
                        int two_pass)
{
    const vc_gemm_config *t = NULL;
    buf[0] = '\0';
    if (config >= 0 && config < vc_gemm_configs(&t))
        snprintf(buf, n, "%s/%d%s%s", t[config].name, (int)groups, no_order ? " no-order" : "",
                 two_pass ? " two-pass" : "");
}
#endif

#ifdef VOXCONV_HAVE_CUDA
/* Member i of a bucket being tuned: its call (as vc_conv_forward's) staged, its weights in the
 * features' dtype (converted once here, not in every timed launch: what is timed is the
 * layer's GEMM, whatever dtype a caller keeps weights in). */
static vc_status tune_stage(vc_context *ctx, const char *fn, const vc_tensor *in, conv_call *c,
                            void **w_cast)
{
    vc_err err = {{0}};
    vc_status s = conv_stage(ctx, fn, in, c);
    if (s != VC_OK || c->a.w_dtype == c->a.in_dtype) return s;
    const int64_t nw = c->d.out_channels * c->map->data.volume * in->channels;
    *w_cast = vc_mem_alloc(ctx, (size_t)nw * vc_dtype_size(in->dtype), VC_MEMORY_DEVICE);
    if (!*w_cast) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of device memory", fn);
    s = vc_ctx_err(ctx, vc_cuda_cast(c->a.weights, c->a.w_dtype, *w_cast, in->dtype, nw,
                                     ctx->stream, &err),
                   &err);
    c->a.weights = *w_cast;
    c->a.w_dtype = in->dtype;
    return s;
}

/* The bucket's verdict into its table and every member's report. */
static vc_status tune_record(vc_context *ctx, const char *fn, const vc_tune_key *key,
                             const vc_conv_tune_result *res, const vc_conv_tune_member *mb,
                             int32_t n, vc_tune_report *rep)
{
    vc_tune_entry e;
    memset(&e, 0, sizeof e);
    e.key = *key;
    e.config = res->kept ? res->finalist_config : -1;
    e.split = res->kept ? res->finalist_groups : 0;
    e.no_order = res->kept ? res->finalist_no_order : 0;
    e.two_pass = res->kept ? res->finalist_two_pass : 0;
    /* the entry's figures, from the member of least gain: the planner's median and, for a kept
     * choice, that median over the gain, so that ms_planner / ms_tuned is the least gain */
    int32_t w = 0;
    for (int32_t i = 1; i < n; i++)
        if (mb[i].gain < mb[w].gain) w = i;
    e.ms_planner = mb[w].planner_ms;
    e.ms_tuned = mb[w].planner_ms;
    if (res->kept && mb[w].gain > 0.0) e.ms_tuned /= mb[w].gain;
    for (int32_t i = 0; i < n; i++) {
        vc_tune_report *r = &rep[i];
        r->candidates = res->candidates;
        r->members = n;
        r->rounds = res->rounds;
        r->planner_ms = mb[i].planner_ms;
        r->tuned_ms = mb[i].tuned_ms;
        r->gain = mb[i].gain;
        r->spread = mb[i].spread;
        choice_name(r->planner, sizeof r->planner, mb[i].planner_config, mb[i].planner_groups,
                    0, 0);
        choice_name(r->finalist, sizeof r->finalist, res->finalist_config,
                    res->finalist_groups, res->finalist_no_order, res->finalist_two_pass);
        r->changed = res->kept;
        if (r->changed) memcpy(r->tuned, r->finalist, sizeof r->tuned);
        else memcpy(r->tuned, r->planner, sizeof r->tuned);
        if (!r->changed) r->tuned_ms = r->planner_ms;
    }
    /* A bucket where nothing was chosen among (exact fp32, no pairs) is not stored. */
    if (res->candidates <= 1) return VC_OK;
    if (vc_tune_put(&ctx->tune, &e) != 0)
        return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (int32_t i = 0; i < n; i++) rep[i].stored = 1;
    return VC_OK;
}
#endif

/* The members' calls begun (their maps resolved) and their buckets checked against the
 * first's: *begun of them are begun, to be ended by the caller. */
static vc_status tune_begin(vc_context *ctx, const char *fn, int32_t n, const vc_conv_desc *descs,
                            const vc_tensor *const *ins, conv_call *c, vc_tune_key *key,
                            int *has_key, vc_tune_report *rep, int32_t *begun)
{
    vc_status s = VC_OK;
    *begun = 0;
    for (int32_t i = 0; i < n && s == VC_OK; i++) {
        if ((s = conv_begin(ctx, fn, &descs[i], ins[i], &c[i])) != VC_OK) break;
        (*begun)++;
        vc_tune_key k;
        const int hk = vc_tune_key_of(&c[i].map->data, ins[i]->channels, c[i].d.out_channels,
                                      ins[i]->dtype, c[i].d.allow_tf32, &k) == 0;
        if (hk) vc_tune_key_text(&k, rep[i].bucket, sizeof rep[i].bucket);
        if (i == 0) {
            *key = k;
            *has_key = hk;
        } else if (hk != *has_key || (hk && !vc_tune_key_equal(&k, key))) {
            s = vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: layer %d falls in bucket '%s', "
                            "not in the first layer's '%s'", fn, (int)i, rep[i].bucket,
                            rep[0].bucket);
        }
    }
    return s;
}

vc_status vc_conv_tune_layers(vc_context *ctx, int32_t n, const vc_conv_desc *descs,
                              const vc_tensor *const *ins, const vc_tune_options *opts,
                              vc_tune_report *reports)
{
    const char *fn = "vc_conv_tune_layers";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_tune_options o = VC_TUNE_OPTIONS_INIT;
    if (opts) VC_TAKE_DESC(ctx, fn, o, opts, vc_tune_options);
    if (n < 1 || n > VC_TUNE_MAX_MEMBERS)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: %d layers (1..%d)", fn, (int)n,
                           VC_TUNE_MAX_MEMBERS);
    if (o.runs < 1 || o.runs > 64 || o.rounds < 1 || o.rounds > 64 ||
        !(o.margin >= 0.0f && o.margin <= 0.5f))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: runs %d (1..64), rounds %d "
                           "(1..64) or margin %g (0..0.5) out of range", fn, (int)o.runs,
                           (int)o.rounds, (double)o.margin);
    if (ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "%s: the CPU backend runs one algorithm and "
                           "one loop order: it has nothing to tune", fn);
    if (!descs || !ins)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: descs or ins is NULL", fn);
    vc_tune_report rep[VC_TUNE_MAX_MEMBERS];
    conv_call c[VC_TUNE_MAX_MEMBERS];
    memset(rep, 0, sizeof rep);
    vc_tune_key key;
    int has_key = 0;
    int32_t begun = 0;
    vc_status s = tune_begin(ctx, fn, n, descs, ins, c, &key, &has_key, rep, &begun);
    const int skip = s == VC_OK && has_key && o.skip_known && vc_tune_find(&ctx->tune, &key);
    for (int32_t i = 0; skip && i < n; i++) rep[i].known = 1;
#ifdef VOXCONV_HAVE_CUDA
    void *w_cast[VC_TUNE_MAX_MEMBERS] = {NULL};
    const vc_conv_args *args[VC_TUNE_MAX_MEMBERS];
    for (int32_t i = 0; s == VC_OK && !skip && i < n; i++) {
        s = tune_stage(ctx, fn, ins[i], &c[i], &w_cast[i]);
        args[i] = &c[i].a;
    }
    if (s == VC_OK && !skip) {
        vc_err err = {{0}};
        vc_conv_tune_result res;
        vc_conv_tune_member mb[VC_TUNE_MAX_MEMBERS];
        s = vc_ctx_err(ctx, vc_conv_gpu_tune(args, n, c[0].d.allow_tf32, &ctx->opts, o.runs,
                                             o.rounds, o.margin, ctx->stream, &res, mb, &err),
                       &err);
        if (s == VC_OK && has_key) s = tune_record(ctx, fn, &key, &res, mb, n, rep);
        for (int32_t i = 0; s == VC_OK && !has_key && i < n; i++) {
            rep[i].candidates = res.candidates; /* no pairs: nothing ran, nothing stored */
            rep[i].members = n;
        }
    }
    for (int32_t i = 0; i < n; i++) vc_mem_free(ctx, w_cast[i], VC_MEMORY_DEVICE);
#endif
    for (int32_t i = 0; i < begun; i++) conv_end(ctx, &c[i], 0);
    if (s == VC_OK && reports) memcpy(reports, rep, (size_t)n * sizeof *rep);
    return s;
}

vc_status vc_conv_tune(vc_context *ctx, const vc_conv_desc *desc, const vc_tensor *in,
                       const vc_tune_options *opts, vc_tune_report *report)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    return vc_conv_tune_layers(ctx, 1, desc, &in, opts, report);
}
