/* src/net/net.c - the network executor behind vc_net_* (include/voxconv.h, "Networks").
 * At create the description becomes a plan of steps: a conv step takes the BatchNorm, the
 * residual add and the ReLU that follow it when each intermediate result has no other reader
 * (docs/networks.md, "Fusion"); every other layer is one step through the tensor operations.
 * Steps run in the order of their last layer, which respects every dependency: a step reads
 * only results of layers listed before that last layer, and those are the last layers of
 * earlier steps. Every map is built through the coordinate set's cache, so layers on one set
 * with one kernel share one map, and an inverse conv uses the very map of the conv it inverts.
 * Results are freed once their last reader ran; outputs live until the next run. */
#define _POSIX_C_SOURCE 200809L /* core/clock.h */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/clock.h"
#include "src/net/net_internal.h"


/* ---- the plan ------------------------------------------------------------------------------ */

/* The one layer reading layer r's result, when r has exactly one reader and it is a layer (not
 * an output); else -1. */
static int32_t only_reader(const vc_model *m, int32_t r)
{
    if (r < 0 || m->layers[r].readers != 1) return -1;
    for (int32_t i = r + 1; i < m->n_layers; i++)
        for (int32_t k = 0; k < m->layers[i].n_inputs; k++)
            if (m->layers[i].inputs[k] == r) return i;
    return -1;
}

static int is_act(const vc_net_layer *L)
{
    return L->op == VC_NOP_RELU || L->op == VC_NOP_LEAKY_RELU;
}

/* Takes the activation reading `cur`, if it may fuse; returns the new last layer. */
static int32_t take_act(const vc_model *m, int32_t cur, char *taken, net_step *s)
{
    int32_t r = only_reader(m, cur);
    if (r < 0 || taken[r] || !is_act(&m->layers[r])) return cur;
    taken[r] = 1;
    s->members[s->n_members++] = r;
    s->act = m->layers[r].op == VC_NOP_RELU ? VC_ACT_RELU : VC_ACT_LEAKY_RELU;
    s->slope = m->layers[r].slope;
    strncat(s->op, m->layers[r].op == VC_NOP_RELU ? "+relu" : "+leaky", sizeof s->op - strlen(s->op) - 1);
    return r;
}

/* The step that starts at layer i. */
static net_step plan_step(const vc_model *m, int32_t i, char *taken)
{
    net_step s;
    memset(&s, 0, sizeof s);
    s.head = s.last = i;
    s.members[s.n_members++] = i;
    s.bn = -1;
    s.residual = NO_RESIDUAL;
    s.slope = 0.01f;
    const vc_net_layer *L = &m->layers[i];
    snprintf(s.op, sizeof s.op, "%s", vc_nop_name(L->op));
    if (vc_nop_is_conv(L->op)) {
        int32_t cur = i, r = only_reader(m, cur);
        if (r >= 0 && !taken[r] && m->layers[r].op == VC_NOP_BATCHNORM) {
            taken[r] = 1;
            s.members[s.n_members++] = r;
            s.bn = r;
            cur = r;
            strncat(s.op, "+bn", sizeof s.op - strlen(s.op) - 1);
        }
        r = only_reader(m, cur);
        /* An add both of whose inputs are conv results is fused into the first conv planned;
         * the other conv's step then ends at its own result (taken[] keeps it from fusing the
         * add a second time). */
        if (r >= 0 && !taken[r] && m->layers[r].op == VC_NOP_ADD) {
            const int32_t *in = m->layers[r].inputs;
            int32_t other = in[0] == cur ? in[1] : in[0];
            if (other != cur) {
                taken[r] = 1;
                s.members[s.n_members++] = r;
                s.residual = other;
                cur = r;
                strncat(s.op, "+add", sizeof s.op - strlen(s.op) - 1);
            }
        }
        s.last = take_act(m, cur, taken, &s);
    } else if (L->op == VC_NOP_ADD || L->op == VC_NOP_BATCHNORM) {
        s.last = take_act(m, i, taken, &s);
    } else if (is_act(L)) {
        s.act = L->op == VC_NOP_RELU ? VC_ACT_RELU : VC_ACT_LEAKY_RELU;
        s.slope = L->slope;
    }
    return s;
}

static int step_cmp(const void *a, const void *b)
{
    const net_step *x = a, *y = b;
    return (x->last > y->last) - (x->last < y->last);
}

/* bn_of[i]: the BN folded into conv i (for weights.c). */
static vc_status make_plan(vc_net *net, int32_t *bn_of)
{
    const vc_model *m = &net->model;
    char *taken = calloc((size_t)m->n_layers, 1);
    net->steps = calloc((size_t)m->n_layers, sizeof *net->steps);
    if (!taken || !net->steps) {
        free(taken);
        return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_create: out of memory");
    }
    for (int32_t i = 0; i < m->n_layers; i++) bn_of[i] = -1;
    for (int32_t i = 0; i < m->n_layers; i++) {
        if (taken[i]) continue;
        net_step s = plan_step(m, i, taken);
        bn_of[i] = s.bn;
        net->steps[net->n_steps++] = s;
    }
    free(taken);
    qsort(net->steps, (size_t)net->n_steps, sizeof *net->steps, step_cmp);
    for (int32_t k = 0; k < net->n_steps; k++) net->ls[net->steps[k].last].step_of = k;
    return VC_OK;
}

/* ---- create / destroy ---------------------------------------------------------------------- */

static vc_status upload(vc_net *net, const void *src, size_t bytes, void **dst)
{
    *dst = vc_mem_alloc(net->ctx, bytes ? bytes : 1, net->mem);
    if (!*dst)
        return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_create: out of memory for "
                           "%zu bytes of weights", bytes);
    return vc_mem_copy(net->ctx, *dst, net->mem, src, VC_MEMORY_HOST, bytes);
}

static vc_status upload_f(vc_net *net, const float *src, int64_t n, float **dst)
{
    void *d = NULL;
    vc_status s = upload(net, src, (size_t)n * sizeof(float), &d);
    *dst = d;
    return s;
}

/* Converts the folded fp32 weights to the net's dtype and uploads them, once. */
static vc_status upload_params(vc_net *net, const vc_net_params *P)
{
    const vc_model *m = &net->model;
    vc_status s = VC_OK;
    for (int32_t i = 0; i < m->n_layers && s == VC_OK; i++) {
        const vc_net_layer *L = &m->layers[i];
        if (P[i].weights) {
            size_t es = vc_dtype_size(net->dtype), n = (size_t)P[i].weight_count;
            void *h = malloc(n * es + 1);
            if (!h) return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_create: out of memory");
            for (size_t k = 0; k < n; k++) {
                float v = P[i].weights[k];
                if (net->dtype == VC_DTYPE_FP32) ((float *)h)[k] = v;
                else if (net->dtype == VC_DTYPE_FP16) ((uint16_t *)h)[k] = vc_f32_to_f16(v);
                else ((uint16_t *)h)[k] = vc_f32_to_bf16(v);
            }
            s = upload(net, h, n * es, &net->ls[i].weights);
            free(h);
        }
        if (s == VC_OK && P[i].bias)
            s = upload_f(net, P[i].bias, L->channels, &net->ls[i].bias);
        if (s == VC_OK && P[i].scale)
            s = upload_f(net, P[i].scale, L->channels, &net->ls[i].scale);
        if (s == VC_OK && P[i].shift)
            s = upload_f(net, P[i].shift, L->channels, &net->ls[i].shift);
    }
    return s;
}

void vc_net_release_run(vc_net *net)
{
    const vc_model *m = &net->model;
    for (int32_t i = 0; i < m->n_layers; i++) {
        vc_tensor_destroy(net->ls[i].slot);
        net->ls[i].slot = NULL;
        vc_kmap_destroy(net->ls[i].map);
        net->ls[i].map = NULL;
    }
    vc_tensor_destroy(net->input);
    net->input = NULL;
    net->in_used = NULL;
    vc_tensor_destroy(net->vox);
    net->vox = NULL;
}

vc_status vc_net_destroy(vc_net *net)
{
    if (!net) return VC_OK;
    const vc_model *m = &net->model;
    vc_net_graph_free(net);
    if (net->ls) {
        vc_net_release_run(net);
        for (int32_t i = 0; i < m->n_layers; i++) {
            vc_mem_free(net->ctx, net->ls[i].weights, net->mem);
            vc_mem_free(net->ctx, net->ls[i].bias, net->mem);
            vc_mem_free(net->ctx, net->ls[i].scale, net->mem);
            vc_mem_free(net->ctx, net->ls[i].shift, net->mem);
            vc_mem_free(net->ctx, net->ls[i].dense, net->mem);
        }
    }
    free(net->ls);
    free(net->steps);
    free(net->layer_level);
    vc_model_free(&net->model);
    free(net);
    return VC_OK;
}

static vc_status alloc_tables(vc_net *net)
{
    size_t n = (size_t)net->model.n_layers;
    net->ls = calloc(n, sizeof *net->ls);
    if (!net->ls) return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_create: out of memory");
    for (size_t i = 0; i < n; i++) net->ls[i].step_of = -1;
    net->layer_level = calloc(n ? n : 1, sizeof *net->layer_level);
    if (!net->layer_level)
        return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_create: out of memory");
    vc_net_plan_levels(&net->model, net->layer_level, &net->n_levels, NULL);
    return VC_OK;
}

/* The description's text: from the desc or read from its file. */
static vc_status read_model(vc_context *ctx, const vc_net_desc *d, vc_model *m)
{
    vc_err err = {{0}};
    vc_status s;
    if (d->model_path) {
        FILE *f = fopen(d->model_path, "rb");
        if (!f)
            return vc_ctx_fail(ctx, VC_ERR_IO, "vc_net_create: cannot open model '%s'",
                               d->model_path);
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        while (buf) {
            n += fread(buf + n, 1, cap - n, f);
            if (n < cap || cap >= ((size_t)1 << 28)) break;
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
                cap *= 2;
            }
        }
        int bad = ferror(f) || (buf && n == cap);
        fclose(f);
        if (!buf || bad) {
            free(buf);
            return vc_ctx_fail(ctx, VC_ERR_IO, "vc_net_create: cannot read model '%s' (or it is "
                               "over 256 MiB)", d->model_path);
        }
        s = vc_model_parse(buf, n, d->model_path, m, &err);
        free(buf);
    } else {
        s = vc_model_parse(d->model_json, strlen(d->model_json), "<model_json>", m, &err);
    }
    return s == VC_OK ? s : vc_ctx_err(ctx, s, &err);
}

static vc_status check_desc(vc_context *ctx, const vc_net_desc *d, vc_dtype *dtype)
{
    const char *fn = "vc_net_create";
    if (!d->model_path == !d->model_json)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: give one of desc->model_path and "
                           "desc->model_json", fn);
    int sources = (d->weights_path != NULL) + (d->weights_data != NULL) + (d->random_weights != 0);
    if (sources != 1)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: give one of desc->weights_path, "
                           "desc->weights_data and desc->random_weights", fn);
    vc_dtype t = d->dtype;
    if ((int)t == -1) t = ctx->backend == VC_BACKEND_CUDA ? VC_DTYPE_FP16 : VC_DTYPE_FP32;
    if (t != VC_DTYPE_FP32 && t != VC_DTYPE_FP16 && t != VC_DTYPE_BF16)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: desc->dtype %d is not fp32, fp16 or "
                           "bf16 (or -1)", fn, (int)d->dtype);
    if ((int)d->algo < 0 || d->algo > VC_ALGO_GATHER_GEMM_SCATTER_GROUPED)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: desc->algo %d is not a vc_algo", fn,
                           (int)d->algo);
    *dtype = t;
    return VC_OK;
}

vc_status vc_net_create(vc_context *ctx, const vc_net_desc *desc, vc_net **out)
{
    const char *fn = "vc_net_create";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_net_desc d = VC_NET_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_net_desc);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    vc_dtype dtype = VC_DTYPE_FP32;
    vc_status s = check_desc(ctx, &d, &dtype);
    if (s != VC_OK) return s;
    vc_net *net = calloc(1, sizeof *net);
    if (!net) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    net->ctx = ctx;
    net->auto_bounds = 1;
    net->dtype = dtype;
    net->algo = d.algo;
    net->mem = vc_ctx_native(ctx);
    s = read_model(ctx, &d, &net->model);
    int32_t *bn_of = NULL;
    vc_net_params *P = NULL;
    if (s == VC_OK) s = alloc_tables(net);
    if (s == VC_OK) {
        bn_of = calloc((size_t)net->model.n_layers, sizeof *bn_of);
        P = calloc((size_t)net->model.n_layers, sizeof *P);
        if (!bn_of || !P) s = vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (s == VC_OK) s = make_plan(net, bn_of);
    if (s == VC_OK) s = vc_net_load_params(ctx, &net->model, bn_of, &d, P);
    if (s == VC_OK) s = upload_params(net, P);
    if (P) vc_net_free_params(&net->model, P);
    free(P);
    free(bn_of);
    if (s != VC_OK) {
        vc_net_destroy(net);
        return s;
    }
    *out = net;
    return VC_OK;
}

/* ---- run ------------------------------------------------------------------------------------ */

static const vc_tensor *slot_of(const vc_net *net, int32_t r)
{
    return r == VC_NET_INPUT ? net->in_used : net->ls[r].slot;
}

/* The map of a conv or pool layer over `in`, built (or found in the set's cache) apart from the
 * layer so that it can be timed; the reference is kept for the run (an inverse needs it). */
static vc_status step_map(vc_net *net, int32_t i, const vc_tensor *in, net_step *st)
{
    const vc_net_layer *L = &net->model.layers[i];
    vc_map_desc md = L->map;
    md.inverse_of = NULL;
    if (L->op == VC_NOP_INVERSE) {
        md.inverse_of = net->ls[L->key_owner].map;
        if (!md.inverse_of)
            return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_run: layer '%s': the "
                               "map of '%s' (indice_key \"%s\") was not built in this run",
                               L->id, net->model.layers[L->key_owner].id, L->indice_key);
    }
    double t0 = net->profiling ? vc_clock_ms() : 0;
    vc_status s = vc_kmap_build(net->ctx, in->coords, &md, &net->ls[i].map);
    if (s != VC_OK) {
        char msg[sizeof net->ctx->err.msg];
        snprintf(msg, sizeof msg, "%s", vc_context_last_error(net->ctx));
        return vc_ctx_fail(net->ctx, s, "vc_net_run: layer '%s': %s", L->id, msg);
    }
    if (net->profiling) {
        vc_context_synchronize(net->ctx);
        st->map_ms = vc_clock_ms() - t0;
    }
    vc_kmap_info info;
    vc_kmap_get_info(net->ls[i].map, &info);
    st->pairs = info.pair_count;
    return VC_OK;
}

static vc_status run_conv(vc_net *net, net_step *st, const vc_tensor *in, vc_tensor **out)
{
    int32_t i = st->head;
    const vc_net_layer *L = &net->model.layers[i];
    vc_status s = step_map(net, i, in, st);
    if (s != VC_OK) return s;
    vc_conv_desc cd = VC_CONV_DESC_INIT;
    cd.kmap = net->ls[i].map;
    cd.in_channels = L->in_channels;
    cd.out_channels = L->channels;
    cd.weights = net->ls[i].weights;
    cd.weight_dtype = net->dtype;
    cd.weight_memory = net->mem;
    cd.bias = net->ls[i].bias;
    cd.activation = st->act;
    cd.leaky_slope = st->slope;
    cd.residual = st->residual == NO_RESIDUAL ? NULL : slot_of(net, st->residual);
    cd.out_dtype = net->dtype;
    cd.algo = net->algo;
    return vc_conv_forward(net->ctx, &cd, in, out);
}

/* BN applied apart or a lone activation: in place when this step is the input's only reader
 * and the input is the net's own, else on a copy. */
static vc_status run_affine(vc_net *net, net_step *st, int32_t r, vc_tensor **out)
{
    vc_tensor *t = NULL;
    vc_status s = VC_OK;
    if (r != VC_NET_INPUT && net->model.layers[r].readers == 1) {
        t = net->ls[r].slot;
        net->ls[r].slot = NULL;
    } else {
        s = vc_tensor_cast(net->ctx, slot_of(net, r), net->dtype, &t);
    }
    if (s == VC_OK)
        s = vc_tensor_affine(net->ctx, t, net->ls[st->head].scale, net->ls[st->head].shift, net->mem,
                             st->act, st->slope);
    if (s != VC_OK) {
        vc_tensor_destroy(t);
        return s;
    }
    *out = t;
    return VC_OK;
}

/* A dense result of layer i: [B, C] fp32 for global pools, the BEV / BCDHW array otherwise. */
static vc_status run_dense(vc_net *net, int32_t i, const vc_tensor *in)
{
    const vc_net_layer *L = &net->model.layers[i];
    const vc_coords *c = in->coords;
    int64_t *sh = net->ls[i].dense_shape, n = 1;
    int global = L->op != VC_NOP_DENSE;
    vc_dtype dt = global ? VC_DTYPE_FP32 : net->dtype;
    if (global) {
        net->ls[i].dense_ndim = 2;
        sh[0] = c->batch_size;
        sh[1] = in->channels;
    } else if (L->bcdhw) {
        net->ls[i].dense_ndim = 5;
        int64_t v[5] = {c->batch_size, in->channels, c->shape[0], c->shape[1], c->shape[2]};
        memcpy(sh, v, sizeof v);
    } else {
        net->ls[i].dense_ndim = 4;
        int64_t v[4] = {c->batch_size, in->channels * c->shape[0], c->shape[1], c->shape[2]};
        memcpy(sh, v, sizeof v);
    }
    for (int k = 0; k < net->ls[i].dense_ndim; k++)
        if (vc_mul_overflow_i64(n, sh[k], &n))
            return vc_ctx_fail(net->ctx, VC_ERR_LIMIT, "vc_net_run: layer '%s': dense size "
                               "overflows", L->id);
    size_t bytes = (size_t)n * vc_dtype_size(dt);
    if (bytes > net->ls[i].dense_cap || !net->ls[i].dense) {
        vc_mem_free(net->ctx, net->ls[i].dense, net->mem);
        net->ls[i].dense_cap = 0;
        net->ls[i].dense = vc_mem_alloc(net->ctx, bytes ? bytes : 1, net->mem);
        if (!net->ls[i].dense)
            return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_run: layer '%s': out of "
                               "memory for %zu bytes", L->id, bytes);
        net->ls[i].dense_cap = bytes;
    }
    if (global)
        return vc_global_pool(net->ctx, L->op == VC_NOP_GLOBAL_MAXPOOL ? VC_POOL_MAX : VC_POOL_AVG,
                              in, net->ls[i].dense, net->mem);
    return vc_tensor_to_dense(net->ctx, in, net->ls[i].dense, n, dt, net->mem);
}

static vc_status run_pool(vc_net *net, net_step *st, const vc_tensor *in, vc_tensor **out)
{
    const vc_net_layer *L = &net->model.layers[st->head];
    vc_status s = step_map(net, st->head, in, st);
    if (s != VC_OK) return s;
    vc_pool_desc pd = VC_POOL_DESC_INIT;
    pd.kmap = net->ls[st->head].map;
    pd.mode = L->op == VC_NOP_MAXPOOL ? VC_POOL_MAX : VC_POOL_AVG;
    return vc_pool_forward(net->ctx, &pd, in, out);
}

static vc_status run_step(vc_net *net, net_step *st)
{
    const vc_net_layer *L = &net->model.layers[st->head];
    const vc_tensor *in = slot_of(net, L->inputs[0]);
    vc_tensor *out = NULL;
    vc_status s = VC_OK;
    st->voxels_in = in->coords->count;
    if (vc_nop_is_conv(L->op)) {
        s = run_conv(net, st, in, &out);
    } else if (L->op == VC_NOP_BATCHNORM || (is_act(L) && st->last == st->head)) {
        s = run_affine(net, st, L->inputs[0], &out);
    } else if (L->op == VC_NOP_ADD) {
        s = vc_tensor_add(net->ctx, in, slot_of(net, L->inputs[1]), st->act, st->slope, &out);
    } else if (L->op == VC_NOP_CONCAT) {
        const vc_tensor *parts[VC_NET_MAX_INPUTS];
        for (int32_t k = 0; k < L->n_inputs; k++) parts[k] = slot_of(net, L->inputs[k]);
        s = vc_tensor_concat(net->ctx, parts, L->n_inputs, &out);
    } else if (L->op == VC_NOP_MAXPOOL || L->op == VC_NOP_AVGPOOL) {
        s = run_pool(net, st, in, &out);
    } else {
        s = run_dense(net, st->head, in);
    }
    if (s != VC_OK) return s;
    net->ls[st->last].slot = out;
    st->voxels_out = out ? out->coords->count : 0;
    int32_t lv = net->layer_level[st->last];
    if (out && lv >= 0 && lv < VC_NET_MAX_LEVELS) net->level_rows[lv] = st->voxels_out;
    return VC_OK;
}

/* After a step: results whose readers have all run are freed (outputs count as readers that
 * never run). */
static void drop_inputs(vc_net *net, const net_step *st)
{
    const vc_model *m = &net->model;
    for (int32_t j = 0; j < st->n_members; j++) {
        const vc_net_layer *L = &m->layers[st->members[j]];
        for (int32_t k = 0; k < L->n_inputs; k++) {
            int32_t r = L->inputs[k], inside = 0;
            for (int32_t q = 0; q < st->n_members; q++) inside |= st->members[q] == r;
            if (r < 0 || inside) continue;
            if (--net->ls[r].left == 0) {
                vc_tensor_destroy(net->ls[r].slot);
                net->ls[r].slot = NULL;
            }
        }
    }
}

/* Readers of each result still to run, outputs counted as one reader that never runs. */
static void count_readers(vc_net *net)
{
    const vc_model *m = &net->model;
    for (int32_t i = 0; i < m->n_layers; i++) net->ls[i].left = m->layers[i].readers;
}

/* The frame: every step in order. */
static vc_status run_frame(vc_net *net)
{
    count_readers(net);
    for (int32_t k = 0; k < net->n_steps; k++) {
        net_step *st = &net->steps[k];
        double t0 = 0;
        if (net->profiling) {
            vc_context_synchronize(net->ctx);
            t0 = vc_clock_ms();
        }
        st->map_ms = 0;
        st->pairs = 0;
        vc_status s = run_step(net, st);
        if (s != VC_OK) {
            const vc_net_layer *L = &net->model.layers[st->head];
            char msg[sizeof net->ctx->err.msg];
            snprintf(msg, sizeof msg, "%s", vc_context_last_error(net->ctx));
            if (strncmp(msg, "vc_net_run", 10) == 0) return s;
            return vc_ctx_fail(net->ctx, s, "vc_net_run: layer '%s' (%s): %s", L->id, st->op, msg);
        }
        if (net->profiling) {
            vc_context_synchronize(net->ctx);
            st->ms = vc_clock_ms() - t0 - st->map_ms;
        }
        drop_inputs(net, st);
    }
    net->ran = 1;
    return VC_OK;
}

vc_status vc_net_check_input(vc_net *net, const vc_tensor *in)
{
    const vc_model *m = &net->model;
    const vc_coords *c = in->coords;
    if (in->channels != m->in_channels)
        return vc_ctx_fail(net->ctx, VC_ERR_SHAPE_MISMATCH, "vc_net_run: the input has %lld "
                           "channels, '%s' takes %lld", (long long)in->channels, m->name,
                           (long long)m->in_channels);
    for (int k = 0; k < 3; k++)
        if (c->shape[k] > m->shape[k])
            return vc_ctx_fail(net->ctx, VC_ERR_SHAPE_MISMATCH, "vc_net_run: the input's spatial "
                               "shape [%d, %d, %d] exceeds the description's [%d, %d, %d]",
                               c->shape[0], c->shape[1], c->shape[2], m->shape[0], m->shape[1],
                               m->shape[2]);
    return VC_OK;
}

/* The caller's voxels placed in the description's shape and cast to the net's dtype. */
static vc_status place_input(vc_net *net, const vc_tensor *in)
{
    const vc_model *m = &net->model;
    const vc_coords *c = in->coords;
    vc_status s = vc_net_check_input(net, in);
    if (s != VC_OK) return s;
    net->in_used = in;
    if (memcmp(c->shape, m->shape, sizeof m->shape) != 0) {
        /* The rows fit the larger shape as they are: the set is copied without a new check
         * (duplicates, if any, are found by the first map build). */
        vc_coords *pc = NULL;
        vc_tensor *t = NULL;
        s = vc_coords_trusted(net->ctx, c->data, c->memory, c->count, m->shape, c->batch_size,
                              &pc);
        if (s == VC_OK)
            s = vc_tensor_wrap(net->ctx, pc, in->channels, in->dtype, in->data, in->memory, &t);
        vc_coords_destroy(pc);
        if (s != VC_OK) return s;
        net->input = t;
        net->in_used = t;
    }
    if (net->in_used->dtype != net->dtype) {
        vc_tensor *t = NULL;
        s = vc_tensor_cast(net->ctx, net->in_used, net->dtype, &t);
        if (s != VC_OK) return s;
        vc_tensor_destroy(net->input);
        net->input = t;
        net->in_used = t;
    }
    return VC_OK;
}

/* A graph the net made for its own per-call runs, given up before a step-by-step run. */
static void drop_auto_graph(vc_net *net)
{
    if (!net->auto_graph) return;
    vc_net_graph_free(net);
    net->auto_graph = 0;
}

vc_status vc_net_run(vc_net *net, const vc_tensor *in)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    vc_status s = vc_tensor_check(net->ctx, "vc_net_run", "in", in);
    if (s != VC_OK) return s;
    if (net->graph && !net->auto_graph) return vc_net_graph_run(net, in);
    if (vc_net_auto_ready(net)) return vc_net_auto_run(net, in, NULL);
    drop_auto_graph(net);
    vc_net_release_run(net);
    net->ran = 0;
    net->level_rows_set = 0;
    s = place_input(net, in);
    if (s == VC_OK) {
        net->level_rows[0] = net->in_used->coords->count;
        s = run_frame(net);
    }
    if (s != VC_OK) vc_net_release_run(net);
    net->level_rows_set = s == VC_OK;
    return s;
}

vc_status vc_net_run_points(vc_net *net, const vc_points *points)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_context *ctx = net->ctx;
    vc_ctx_clear(ctx);
    const vc_model *m = &net->model;
    if (!m->has_voxelize)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_run_points: '%s' has no "
                           "\"voxelize\" block: voxelize the points and call vc_net_run", m->name);
    if (!points)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_run_points: points is NULL");
    if (net->graph && !net->auto_graph) return vc_net_graph_run_points(net, points);
    if (!points->batch && vc_net_auto_ready(net)) return vc_net_auto_run(net, NULL, points);
    drop_auto_graph(net);
    int32_t use = m->use_dim ? m->use_dim : points->dim;
    if (points->dim < use)
        return vc_ctx_fail(ctx, VC_ERR_SHAPE_MISMATCH, "vc_net_run_points: points have %d "
                           "columns, '%s' uses %d", points->dim, m->name, use);
    vc_points p = *points;
    float *tmp = NULL;
    vc_status s = VC_OK;
    if (use < points->dim && points->count > 0) {
        /* Only the first `use` columns are features: a compact host copy. */
        size_t rows = (size_t)points->count, all = rows * (size_t)points->dim;
        float *src = NULL;
        tmp = malloc(rows * (size_t)use * sizeof(float));
        if (points->memory == VC_MEMORY_DEVICE) src = malloc(all * sizeof(float));
        if (!tmp || (points->memory == VC_MEMORY_DEVICE && !src))
            s = vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_run_points: out of memory");
        if (s == VC_OK && src)
            s = vc_mem_copy(ctx, src, VC_MEMORY_HOST, points->data, VC_MEMORY_DEVICE,
                            all * sizeof(float));
        const float *from = src ? src : points->data;
        for (size_t r = 0; s == VC_OK && r < rows; r++)
            memcpy(tmp + r * (size_t)use, from + r * (size_t)points->dim, (size_t)use * sizeof(float));
        free(src);
        p.data = tmp;
        p.dim = use;
        p.memory = VC_MEMORY_HOST;
        if (points->batch && points->memory == VC_MEMORY_DEVICE && s == VC_OK)
            s = vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "vc_net_run_points: device batch indices "
                            "with use_dim below the points' columns");
    } else if (use < points->dim) {
        p.dim = use;
    }
    vc_voxelize_desc vd = m->voxelize;
    vd.dtype = net->dtype;
    vc_tensor *vox = NULL;
    if (s == VC_OK) s = vc_voxelize(ctx, &vd, &p, &vox, NULL);
    free(tmp);
    if (s != VC_OK) return s;
    s = vc_net_run(net, vox);
    if (s != VC_OK) {
        vc_tensor_destroy(vox);
        return s;
    }
    net->vox = vox; /* the placed input may wrap its features */
    return VC_OK;
}

/* ---- outputs and profiling ------------------------------------------------------------------ */

static vc_status check_net(const vc_net *net, const void *out, const char *fn)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    if (!out) return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    return VC_OK;
}

vc_status vc_net_output_count(const vc_net *net, int32_t *count)
{
    vc_status s = check_net(net, count, "vc_net_output_count");
    if (s == VC_OK) *count = net->model.n_outputs;
    return s;
}

vc_status vc_net_get_output(const vc_net *net, int32_t index, vc_net_output *out)
{
    vc_status s = check_net(net, out, "vc_net_get_output");
    if (s != VC_OK) return s;
    const vc_model *m = &net->model;
    if (index < 0 || index >= m->n_outputs)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_get_output: index %d not "
                           "in [0, %d)", index, m->n_outputs);
    if (net->graph) return vc_net_graph_output((vc_net *)net, index, out);
    int32_t r = m->out_layers[index];
    memset(out, 0, sizeof *out);
    out->name = m->out_names[index];
    if (!m->layers[r].dense) {
        out->kind = VC_NET_SPARSE;
        out->tensor = net->ran ? net->ls[r].slot : NULL;
        out->dtype = net->dtype;
        return VC_OK;
    }
    out->kind = VC_NET_DENSE;
    out->dtype = m->layers[r].op == VC_NOP_DENSE ? net->dtype : VC_DTYPE_FP32;
    if (!net->ran) return VC_OK;
    out->data = net->ls[r].dense;
    out->ndim = net->ls[r].dense_ndim;
    memcpy(out->shape, net->ls[r].dense_shape, sizeof out->shape);
    return VC_OK;
}

vc_status vc_net_copy_output(vc_net *net, int32_t index, void *dst, size_t bytes,
                             vc_memory where)
{
    vc_net_output o;
    vc_status s = vc_net_get_output(net, index, &o);
    if (s != VC_OK) return s;
    const char *fn = "vc_net_copy_output";
    if (o.kind != VC_NET_DENSE || !o.data)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: output '%s' is %s", fn, o.name,
                           o.kind != VC_NET_DENSE ? "sparse (use its tensor)" : "not computed yet");
    size_t need = vc_dtype_size(o.dtype);
    for (int k = 0; k < o.ndim; k++) need *= (size_t)o.shape[k];
    if (!dst || bytes < need)
        return vc_ctx_fail(net->ctx, dst ? VC_ERR_CAPACITY : VC_ERR_INVALID_ARGUMENT, "%s: output "
                           "'%s' needs %zu bytes at dst, got %zu%s", fn, o.name, need, bytes,
                           dst ? "" : " (dst NULL)");
    if (where == VC_MEMORY_DEVICE && net->ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: device dst on a CPU context", fn);
    return vc_mem_copy(net->ctx, dst, where, o.data, net->mem, need);
}

vc_status vc_net_find_output(const vc_net *net, const char *name, int32_t *index)
{
    vc_status s = check_net(net, index, "vc_net_find_output");
    if (s != VC_OK) return s;
    for (int32_t i = 0; name && i < net->model.n_outputs; i++)
        if (strcmp(net->model.out_names[i], name) == 0) {
            *index = i;
            return VC_OK;
        }
    return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_find_output: '%s' has no "
                       "output named '%s'", net->model.name, name ? name : "(null)");
}

vc_status vc_net_set_profiling(vc_net *net, int32_t on)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    net->profiling = on != 0;
    return VC_OK;
}

vc_status vc_net_step_count(const vc_net *net, int32_t *count)
{
    vc_status s = check_net(net, count, "vc_net_step_count");
    if (s == VC_OK) *count = net->n_steps;
    return s;
}

vc_status vc_net_get_step(const vc_net *net, int32_t index, vc_net_step_info *out)
{
    vc_status s = check_net(net, out, "vc_net_get_step");
    if (s != VC_OK) return s;
    if (index < 0 || index >= net->n_steps)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_get_step: index %d not in "
                           "[0, %d)", index, net->n_steps);
    const net_step *st = &net->steps[index];
    out->name = net->model.layers[st->head].id;
    out->op = st->op;
    out->voxels_in = st->voxels_in;
    out->voxels_out = st->voxels_out;
    out->pairs = st->pairs;
    out->ms = st->ms;
    out->map_ms = st->map_ms;
    return VC_OK;
}
